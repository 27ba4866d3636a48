/* workload.c - a mixed workload (sorting, hashing, strings, a small
 * matrix product) with enough functions, loops and branches to make
 * jump and cache events interesting.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * usage: workload [N [SEED]]   (defaults: N=1500, SEED=1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#define NOINLINE __attribute__((noinline))

static uint32_t rng_state;

static NOINLINE uint32_t rng_next(void)
{
    /* xorshift32 */
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    rng_state = x;
    return x;
}

/* ---- sorting ---------------------------------------------------- */

static NOINLINE void insertion_sort(int *a, int lo, int hi)
{
    for (int i = lo + 1; i <= hi; i++) {
        int v = a[i], j = i - 1;
        while (j >= lo && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

static NOINLINE int partition(int *a, int lo, int hi)
{
    int pivot = a[lo + (hi - lo) / 2];
    int i = lo - 1, j = hi + 1;
    for (;;) {
        do i++; while (a[i] < pivot);
        do j--; while (a[j] > pivot);
        if (i >= j)
            return j;
        int t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

static NOINLINE void quicksort(int *a, int lo, int hi)
{
    if (hi - lo < 12) {
        insertion_sort(a, lo, hi);
        return;
    }
    int p = partition(a, lo, hi);
    quicksort(a, lo, p);
    quicksort(a, p + 1, hi);
}

static NOINLINE int binary_search(const int *a, int n, int key)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] == key)
            return mid;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* ---- hashing ---------------------------------------------------- */

#define TABLE_SIZE 4096

struct entry {
    char key[16];
    int value;
    int used;
};

static struct entry table[TABLE_SIZE];

static NOINLINE uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s) {
        h ^= (unsigned char)*s++;
        h *= 16777619u;
    }
    return h;
}

static NOINLINE void table_put(const char *key, int value)
{
    uint32_t i = fnv1a(key) & (TABLE_SIZE - 1);
    while (table[i].used && strcmp(table[i].key, key) != 0)
        i = (i + 1) & (TABLE_SIZE - 1);
    if (!table[i].used) {
        strncpy(table[i].key, key, sizeof table[i].key - 1);
        table[i].used = 1;
    }
    table[i].value += value;
}

static NOINLINE int table_get(const char *key)
{
    uint32_t i = fnv1a(key) & (TABLE_SIZE - 1);
    while (table[i].used) {
        if (strcmp(table[i].key, key) == 0)
            return table[i].value;
        i = (i + 1) & (TABLE_SIZE - 1);
    }
    return 0;
}

/* ---- strings ---------------------------------------------------- */

static NOINLINE void make_word(char *buf, uint32_t r)
{
    static const char letters[] = "etaoinshrdlu";
    int len = 3 + r % 6;
    for (int i = 0; i < len; i++) {
        buf[i] = letters[r % 12];
        r /= 3;
    }
    buf[len] = '\0';
}

static NOINLINE int count_vowels(const char *s)
{
    int n = 0;
    for (; *s; s++)
        if (strchr("aeiou", *s))
            n++;
    return n;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- matrix ----------------------------------------------------- */

#define M 24

static NOINLINE long matmul_trace(void)
{
    static int a[M][M], b[M][M], c[M][M];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++) {
            a[i][j] = (int)(rng_next() % 10);
            b[i][j] = (int)(rng_next() % 10);
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++) {
            int s = 0;
            for (int k = 0; k < M; k++)
                s += a[i][k] * b[k][j];
            c[i][j] = s;
        }
    long t = 0;
    for (int i = 0; i < M; i++)
        t += c[i][i];
    return t;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1500;
    rng_state = argc > 2 ? (uint32_t)atoi(argv[2]) : 1;
    if (n < 16 || n > 100000 || rng_state == 0)
        return 2;

    int *nums = malloc(sizeof *nums * (size_t)n);
    char (*words)[16] = malloc(sizeof *words * (size_t)n);
    char **ptrs = malloc(sizeof *ptrs * (size_t)n);
    if (!nums || !words || !ptrs)
        return 1;

    for (int i = 0; i < n; i++)
        nums[i] = (int)(rng_next() % 100000);
    quicksort(nums, 0, n - 1);
    int found = 0;
    for (int i = 0; i < n; i += 3)
        found += binary_search(nums, n, (int)(rng_next() % 100000)) >= 0;

    int vowels = 0;
    for (int i = 0; i < n; i++) {
        make_word(words[i], rng_next());
        ptrs[i] = words[i];
        table_put(words[i], 1);
        vowels += count_vowels(words[i]);
    }
    qsort(ptrs, (size_t)n, sizeof *ptrs, cmp_str);

    printf("min=%d max=%d found=%d\n", nums[0], nums[n - 1], found);
    printf("first=%s last=%s vowels=%d\n", ptrs[0], ptrs[n - 1], vowels);
    printf("count(%s)=%d\n", ptrs[n / 2], table_get(ptrs[n / 2]));
    printf("trace=%ld\n", matmul_trace());

    free(ptrs);
    free(words);
    free(nums);
    return 0;
}
