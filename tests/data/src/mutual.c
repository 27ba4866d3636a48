/* mutual.c - mutual recursion fixtures for tally.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * is_even()/is_odd() form a 2-cycle, cycle_a() -> cycle_b() -> cycle_c()
 * -> cycle_a() a 3-cycle. square() and checksum() are ordinary helpers
 * that are not part of any cycle.
 */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static NOINLINE int is_odd(unsigned n);

static NOINLINE int is_even(unsigned n)
{
    if (n == 0)
        return 1;
    return is_odd(n - 1);
}

static NOINLINE int is_odd(unsigned n)
{
    if (n == 0)
        return 0;
    return is_even(n - 1);
}

static NOINLINE unsigned square(unsigned x)
{
    return x * x;
}

static NOINLINE unsigned cycle_b(unsigned n, unsigned acc);
static NOINLINE unsigned cycle_c(unsigned n, unsigned acc);

static NOINLINE unsigned cycle_a(unsigned n, unsigned acc)
{
    if (n == 0)
        return acc;
    return cycle_b(n - 1, acc + square(n));
}

static NOINLINE unsigned cycle_b(unsigned n, unsigned acc)
{
    if (n == 0)
        return acc;
    return cycle_c(n - 1, acc ^ (n << 3));
}

static NOINLINE unsigned cycle_c(unsigned n, unsigned acc)
{
    if (n == 0)
        return acc;
    return cycle_a(n - 1, acc + 7 * n);
}

static NOINLINE unsigned checksum(const unsigned *v, unsigned len)
{
    unsigned s = 0;
    for (unsigned i = 0; i < len; i++)
        s = s * 31 + v[i];
    return s;
}

int main(void)
{
    unsigned results[40];
    unsigned evens = 0;
    for (unsigned i = 0; i < 40; i++) {
        evens += is_even(i * 3);
        results[i] = cycle_a(i, 0);
    }
    printf("evens = %u\n", evens);
    printf("checksum = %u\n", checksum(results, 40));
    printf("is_odd(101) = %d\n", is_odd(101));
    return 0;
}
