/* multi_a.c - gprof fixture: a small benchmark in two files (with
 * multi_b.c): a string hash table here, sorting and matrices there.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * Both files have a static checksum() and a static fill(): gprof lists
 * two functions of each name.  Only the two checksum()s and the two
 * fill()s are kept out of line by force; the rest is left to the
 * compiler, as in real code (at -O2 some helpers are inlined or cloned).
 *
 * Usage: multi [ROUNDS]  (default 10).  Deterministic: a fixed-seed LCG.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multi.h"

#define NOINLINE __attribute__((noinline))

#define TABLE_BITS 17
#define TABLE_SIZE (1u << TABLE_BITS)
#define KEY_LEN 12

struct entry {
    char key[KEY_LEN + 1];
    unsigned long count;
    struct entry *next;
};

struct table {
    struct entry *buckets[TABLE_SIZE];
    struct entry *pool;
    size_t used, cap;
};

uint32_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*state >> 33);
}

/* FNV-1a */
static uint32_t hash_key(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static void make_key(uint64_t *state, char *key)
{
    /* a small alphabet and short keys, so keys repeat */
    static const char alphabet[] = "abcdefgh";
    uint64_t bits = (uint64_t)next_random(state) << 31;   /* two statements: */
    bits ^= next_random(state);                            /* a fixed order */
    for (int i = 0; i < KEY_LEN; i++)
        key[i] = alphabet[(bits >> (2 * i) & 3) + (i & 1) * 4];
    key[KEY_LEN] = '\0';
    key[4 + (bits >> 40) % 8] = '\0';
}

static struct entry *table_find(struct table *t, const char *key, uint32_t h)
{
    for (struct entry *e = t->buckets[h & (TABLE_SIZE - 1)]; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

static void table_add(struct table *t, const char *key)
{
    uint32_t h = hash_key(key);
    struct entry *e = table_find(t, key, h);
    if (e) {
        e->count++;
        return;
    }
    if (t->used == t->cap) {
        fprintf(stderr, "multi: table full\n");
        exit(1);
    }
    e = &t->pool[t->used++];
    strcpy(e->key, key);
    e->count = 1;
    e->next = t->buckets[h & (TABLE_SIZE - 1)];
    t->buckets[h & (TABLE_SIZE - 1)] = e;
}

/* static fill() of multi_a.c: puts N random keys into the table */
static NOINLINE void fill(struct table *t, uint64_t *state, size_t n)
{
    char key[KEY_LEN + 1];
    for (size_t i = 0; i < n; i++) {
        make_key(state, key);
        table_add(t, key);
    }
}

/* static checksum() of multi_a.c: over the table's entries */
static NOINLINE uint64_t checksum(const struct table *t)
{
    uint64_t sum = 0;
    for (size_t b = 0; b < TABLE_SIZE; b++)
        for (const struct entry *e = t->buckets[b]; e; e = e->next)
            sum = sum * 31 + hash_key(e->key) + e->count;
    return sum;
}

static uint64_t hash_bench(uint64_t *state, size_t n)
{
    struct table *t = calloc(1, sizeof *t);
    if (!t) {
        perror("multi");
        exit(1);
    }
    t->cap = n;
    t->pool = calloc(n, sizeof *t->pool);
    if (!t->pool) {
        perror("multi");
        exit(1);
    }
    fill(t, state, n);
    uint64_t sum = checksum(t);
    free(t->pool);
    free(t);
    return sum;
}

int main(int argc, char **argv)
{
    unsigned rounds = 10;
    if (argc > 1)
        rounds = (unsigned)strtoul(argv[1], NULL, 10);
    if (rounds == 0 || rounds > 1000) {
        fprintf(stderr, "usage: multi [ROUNDS 1..1000]\n");
        return 2;
    }

    uint64_t state = 42, sum = 0;
    for (unsigned r = 0; r < rounds; r++)
        sum ^= hash_bench(&state, 400000);
    sort_bench(&state, 200000, rounds, &sum);
    matrix_bench(240, rounds, &sum);

    printf("multi: %llu\n", (unsigned long long)sum);
    return 0;
}
