/* threads.c - three threads doing different work, for
 * callgrind --separate-threads=yes fixtures.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

struct job {
    unsigned arg;
    unsigned long result;
};

/* All workers wait here until every thread exists, so that each gets its
 * own Valgrind thread id (ids of finished threads would be reused). */
static pthread_barrier_t start_line;

static NOINLINE int is_prime(unsigned n)
{
    if (n < 2)
        return 0;
    for (unsigned d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

static void *count_primes(void *p)
{
    struct job *j = p;
    pthread_barrier_wait(&start_line);
    unsigned long c = 0;
    for (unsigned n = 0; n < j->arg; n++)
        c += is_prime(n);
    j->result = c;
    return NULL;
}

static NOINLINE unsigned long collatz_len(unsigned long n)
{
    unsigned long steps = 0;
    while (n != 1) {
        n = (n & 1) ? 3 * n + 1 : n / 2;
        steps++;
    }
    return steps;
}

static void *longest_collatz(void *p)
{
    struct job *j = p;
    pthread_barrier_wait(&start_line);
    unsigned long best = 0;
    for (unsigned n = 1; n < j->arg; n++) {
        unsigned long l = collatz_len(n);
        if (l > best)
            best = l;
    }
    j->result = best;
    return NULL;
}

static NOINLINE void reverse(char *s, size_t len)
{
    for (size_t i = 0; i < len / 2; i++) {
        char t = s[i];
        s[i] = s[len - 1 - i];
        s[len - 1 - i] = t;
    }
}

static void *string_work(void *p)
{
    struct job *j = p;
    pthread_barrier_wait(&start_line);
    char buf[64];
    unsigned long h = 5381;
    strcpy(buf, "the quick brown fox jumps over the lazy dog");
    size_t len = strlen(buf);
    for (unsigned i = 0; i < j->arg; i++) {
        reverse(buf, len);
        h = h * 33 + (unsigned char)buf[i % len];
    }
    j->result = h;
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    struct job jobs[3] = { { 3000, 0 }, { 1000, 0 }, { 500, 0 } };
    void *(*fns[3])(void *) = { count_primes, longest_collatz, string_work };

    pthread_barrier_init(&start_line, NULL, 4);
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, fns[i], &jobs[i]);
    pthread_barrier_wait(&start_line);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start_line);
    printf("primes below %u: %lu\n", jobs[0].arg, jobs[0].result);
    printf("longest collatz below %u: %lu\n", jobs[1].arg, jobs[1].result);
    printf("string hash: %lu\n", jobs[2].result);
    return 0;
}
