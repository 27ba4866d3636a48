/* multi.h - shared declarations of multi_a.c and multi_b.c.
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef MULTI_H
#define MULTI_H

#include <stddef.h>
#include <stdint.h>

/* multi_a.c */
uint32_t next_random(uint64_t *state);

/* multi_b.c */
void sort_bench(uint64_t *state, size_t n, unsigned rounds, uint64_t *out);
void matrix_bench(unsigned n, unsigned rounds, uint64_t *out);

#endif
