/* cycles.c - gprof fixture: cycles, recursion, pointers, hot code.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * What gprof should see:
 *   - is_even() <-> is_odd(): a cycle of 2 functions;
 *   - tri_a() -> tri_b() -> tri_c() -> tri_a(): a cycle of 3 functions;
 *   - fib(): a self-recursive function (a non-tail, modulo result, so -O2
 *     keeps both calls);
 *   - via_pointer(): only ever called through a function pointer that the
 *     compiler cannot see through (a volatile variable);
 *   - scramble(): a static function;
 *   - hot_loop(): called once, runs long (most of the self time);
 *   - mix(): small, called thousands of times from several callers;
 *   - cold_path(), cold_after(): called from main() in the code, never at
 *     run time (the condition is never true): gprof -c adds the arcs it
 *     finds in the code.  cold_path() is defined before main(),
 *     cold_after() after it, so at -O0 the first call goes backwards and
 *     the second forwards;
 *   - never_called(): never called nor referenced (gprof -z lists it).
 *
 * Usage: cycles [SCALE]   SCALE (default 1) multiplies the work of the
 * cycles and of fib, not of hot_loop, so two runs with different SCALEs
 * give two different gmon files of one binary (for gprof -s).
 * Deterministic: no clock, no rand().
 */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile unsigned long sink;

/* Small helper called from is_even, is_odd, tri_a, tri_b, fib, main. */
NOINLINE unsigned long mix(unsigned long x)
{
    unsigned long h = x ^ 0x9e3779b97f4a7c15UL;
    for (int i = 0; i < 150; i++)
        h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9UL + (unsigned long)i;
    return h;
}

/* ---- cycle of 2: is_even <-> is_odd ---------------------------------- */
NOINLINE unsigned long is_odd(unsigned n);

NOINLINE unsigned long is_even(unsigned n)
{
    if (n == 0)
        return 1;
    unsigned long r = is_odd(n - 1);   /* the result is used: not a tail call */
    return r + (mix(n) & 1);
}

NOINLINE unsigned long is_odd(unsigned n)
{
    if (n == 0)
        return 0;
    unsigned long r = is_even(n - 1);
    return r + (mix(n + 1) & 1);
}

/* ---- cycle of 3: tri_a -> tri_b -> tri_c -> tri_a --------------------- */
NOINLINE unsigned long tri_b(unsigned n);
NOINLINE unsigned long tri_c(unsigned n);

NOINLINE unsigned long tri_a(unsigned n)
{
    if (n == 0)
        return 7;
    return (tri_b(n - 1) * 3 + mix(n)) % 1000003UL;
}

NOINLINE unsigned long tri_b(unsigned n)
{
    if (n == 0)
        return 11;
    return (tri_c(n - 1) * 5 + mix(n)) % 1000033UL;
}

NOINLINE unsigned long tri_c(unsigned n)
{
    unsigned long h = n;
    for (int i = 0; i < 1000; i++)     /* tri_c's own work, no helper */
        h = h * 6364136223846793005UL + 1442695040888963407UL;
    if (n == 0)
        return h;
    return (tri_a(n - 1) ^ h) % 1000037UL;
}

/* ---- self recursion ---------------------------------------------------- */
NOINLINE unsigned long fib(unsigned n)
{
    if (n < 2)
        return mix(n) & 0xff;
    /* % keeps gcc -O2 from turning one of the calls into a loop */
    return (fib(n - 1) + fib(n - 2)) % 999983UL;
}

/* ---- called only through a pointer ------------------------------------ */
NOINLINE unsigned long via_pointer(unsigned long x)
{
    for (int i = 0; i < 20000; i++)
        x = (x << 7 | x >> 57) ^ (unsigned long)i;
    return x;
}

/* ---- a static function --------------------------------------------------*/
static NOINLINE unsigned long scramble(unsigned long x, unsigned rounds)
{
    for (unsigned i = 0; i < rounds; i++)
        x = (x ^ (x >> 31)) * 0x94d049bb133111ebUL;
    return x;
}

/* ---- the hot loop: one call, a lot of self time ----------------------- */
NOINLINE unsigned long hot_loop(unsigned long iterations)
{
    unsigned long a = 1, b = 2;
    for (unsigned long i = 0; i < iterations; i++) {
        a = a * 2862933555777941757UL + 3037000493UL;
        b ^= a >> 17;
    }
    return a ^ b;
}

/* ---- a call in the code that never runs: gprof -c finds the arc ------- */
NOINLINE unsigned long cold_path(unsigned long x)
{
    return x ^ 0x5555;
}

NOINLINE unsigned long cold_after(unsigned long x);   /* after main() */

/* ---- never called: gprof -z lists it with zero time and calls ---------- */
NOINLINE unsigned long never_called(unsigned long x)
{
    return x * 3 + 1;
}

int main(int argc, char **argv)
{
    unsigned scale = 1;
    if (argc > 1)
        scale = (unsigned)strtoul(argv[1], NULL, 10);
    if (scale == 0 || scale > 100) {
        fprintf(stderr, "usage: cycles [SCALE 1..100]\n");
        return 2;
    }

    unsigned long acc = 0;
    unsigned long (*volatile fp)(unsigned long) = via_pointer;

    for (unsigned r = 0; r < 4500 * scale; r++) {
        acc += is_even(200 + r % 7);
        acc += tri_a(150 + r % 5);
        acc += fp(acc + r);
        acc = scramble(acc, 20000);
        acc += mix(r);
    }
    for (unsigned r = 0; r < scale; r++)
        acc += fib(25);
    acc += hot_loop(400000000UL);
    if (acc == 42) {                   /* never true: see RUNS.tsv */
        acc = cold_path(acc);
        acc = cold_after(acc);
    }

    sink = acc;
    printf("cycles: %lu\n", acc);
    return 0;
}

NOINLINE unsigned long cold_after(unsigned long x)
{
    return x ^ 0xaaaa;
}
