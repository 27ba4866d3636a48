/* recursion.c - direct recursion fixtures for tally.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * fib() and ackermann() call themselves directly; fact() is a simple
 * linear recursion. Output is deterministic.
 */
#include <stdio.h>
#include <stdlib.h>

static unsigned long fib(unsigned n)
{
    if (n < 2)
        return n;
    return fib(n - 1) + fib(n - 2);
}

static unsigned long ackermann(unsigned long m, unsigned long n)
{
    if (m == 0)
        return n + 1;
    if (n == 0)
        return ackermann(m - 1, 1);
    return ackermann(m - 1, ackermann(m, n - 1));
}

static unsigned long fact(unsigned n)
{
    if (n <= 1)
        return 1;
    return n * fact(n - 1);
}

static unsigned long sum_facts(unsigned upto)
{
    unsigned long s = 0;
    for (unsigned i = 1; i <= upto; i++)
        s += fact(i);
    return s;
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 15;
    printf("fib(%u) = %lu\n", n, fib(n));
    printf("ackermann(2, 3) = %lu\n", ackermann(2, 3));
    printf("sum_facts(12) = %lu\n", sum_facts(12));
    return 0;
}
