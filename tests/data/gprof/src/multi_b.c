/* multi_b.c - gprof fixture, second file of multi (see multi_a.c):
 * sorting (a recursive merge sort and libc's qsort with a comparator)
 * and matrix products.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * cmp_u32() is only called by qsort(), from inside libc, which is not
 * compiled with -pg: gprof does not see its caller.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multi.h"

#define NOINLINE __attribute__((noinline))

/* static fill() of multi_b.c: N random numbers */
static NOINLINE void fill(uint32_t *a, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        a[i] = next_random(state);
}

/* static checksum() of multi_b.c: over an array */
static NOINLINE uint64_t checksum(const uint32_t *a, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum = (sum ^ a[i]) * 0x100000001b3ULL;
    return sum;
}

static void merge(uint32_t *a, uint32_t *tmp, size_t lo, size_t mid, size_t hi)
{
    size_t i = lo, j = mid, k = lo;
    while (i < mid && j < hi)
        tmp[k++] = a[i] <= a[j] ? a[i++] : a[j++];
    while (i < mid)
        tmp[k++] = a[i++];
    while (j < hi)
        tmp[k++] = a[j++];
    memcpy(a + lo, tmp + lo, (hi - lo) * sizeof *a);
}

static void insertion_sort(uint32_t *a, size_t lo, size_t hi)
{
    for (size_t i = lo + 1; i < hi; i++) {
        uint32_t v = a[i];
        size_t j = i;
        while (j > lo && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* recursive: a self-recursive function that gcc keeps at -O2 */
void merge_sort(uint32_t *a, uint32_t *tmp, size_t lo, size_t hi)
{
    if (hi - lo <= 16) {
        insertion_sort(a, lo, hi);
        return;
    }
    size_t mid = lo + (hi - lo) / 2;
    merge_sort(a, tmp, lo, mid);
    merge_sort(a, tmp, mid, hi);
    merge(a, tmp, lo, mid, hi);
}

int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return (a > b) - (a < b);
}

void sort_bench(uint64_t *state, size_t n, unsigned rounds, uint64_t *out)
{
    uint32_t *a = malloc(n * sizeof *a), *tmp = malloc(n * sizeof *tmp);
    if (!a || !tmp) {
        perror("multi");
        exit(1);
    }
    for (unsigned r = 0; r < rounds; r++) {
        fill(a, n, state);
        merge_sort(a, tmp, 0, n);
        *out ^= checksum(a, n);
        fill(a, n, state);
        qsort(a, n / 4, sizeof *a, cmp_u32);   /* a quarter: qsort's time is in libc */
        *out ^= checksum(a, n);
    }
    free(a);
    free(tmp);
}

static void matmul(const double *x, const double *y, double *z, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            double s = 0;
            for (unsigned k = 0; k < n; k++)
                s += x[i * n + k] * y[k * n + j];
            z[i * n + j] = s;
        }
}

void matrix_bench(unsigned n, unsigned rounds, uint64_t *out)
{
    double *x = malloc(n * n * sizeof *x), *y = malloc(n * n * sizeof *y),
           *z = malloc(n * n * sizeof *z);
    if (!x || !y || !z) {
        perror("multi");
        exit(1);
    }
    for (unsigned i = 0; i < n * n; i++) {
        x[i] = (double)(i % 17) / 16.0;
        y[i] = (double)(i % 13) / 12.0;
    }
    for (unsigned r = 0; r < rounds; r++) {
        matmul(x, y, z, n);
        matmul(z, x, y, n);
        for (unsigned i = 0; i < n * n; i++)   /* keep the values small */
            y[i] = y[i] / (double)n;
    }
    uint64_t bits = 0;
    for (unsigned i = 0; i < n * n; i++)
        bits += (uint64_t)(z[i] * 1000.0);
    *out ^= bits;
    free(x);
    free(y);
    free(z);
}
