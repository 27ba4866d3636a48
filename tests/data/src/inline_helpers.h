/* inline_helpers.h - static inline helpers; with -O2 their code is
 * inlined into inline.c, so callgrind emits fi=/fe= lines for it.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef INLINE_HELPERS_H
#define INLINE_HELPERS_H

#include <stdint.h>

static inline uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static inline int clamp(int v, int lo, int hi)
{
    if (v < lo)
        return lo;
    if (v > hi)
        return hi;
    return v;
}

static inline long dot3(const int *a, const int *b)
{
    long s = 0;
    for (int i = 0; i < 3; i++)
        s += (long)a[i] * b[i];
    return s;
}

#endif
