/* inline.c - code from inline_helpers.h gets inlined here (-O2).
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#include <stdio.h>
#include "inline_helpers.h"

#define NOINLINE __attribute__((noinline))

static NOINLINE uint32_t hash_range(uint32_t n)
{
    uint32_t h = 0;
    for (uint32_t i = 0; i < n; i++)
        h += mix32(i ^ h);
    return h;
}

static NOINLINE long clamp_sum(const int *v, int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += clamp(v[i], -50, 50);
    return s;
}

static NOINLINE long dots(int n)
{
    int a[3], b[3];
    long s = 0;
    for (int i = 0; i < n; i++) {
        a[0] = i; a[1] = i + 1; a[2] = i - 2;
        b[0] = 3; b[1] = -i; b[2] = i % 7;
        s += dot3(a, b);
    }
    return s;
}

int main(void)
{
    int v[256];
    for (int i = 0; i < 256; i++)
        v[i] = (int)(mix32((uint32_t)i) % 201) - 100;
    printf("hash_range = %u\n", hash_range(2000));
    printf("clamp_sum = %ld\n", clamp_sum(v, 256));
    printf("dots = %ld\n", dots(1000));
    return 0;
}
