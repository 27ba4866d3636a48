#!/usr/bin/env bash
# generate.sh - the profiles and reference outputs of the merge and diff
# tests: Cachegrind and Callgrind runs of tests/data/bin/workload with
# different arguments, and what cg_merge and cg_diff (Valgrind 3.19) make
# of the Cachegrind ones.
#
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Needs: bash, valgrind (cachegrind, callgrind, cg_merge, cg_diff).  Uses the
# binary tests/data/bin/workload (built by ../generate.sh, not committed), so the
# function and file names match the other fixtures.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export LC_ALL=C TZ=UTC PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0

CACHE_GEOMETRY=(--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64)
VG=(env -i PATH=/usr/bin:/bin LC_ALL=C valgrind -q)
PROG=../bin/workload

rm -f ./*.out ./*.cg_merge ./*.cg_diff

# Three runs (sizes and seeds differ), plain and with branch simulation.
ARGS_a=(1500 1)
ARGS_b=(3000 7)
ARGS_c=(700 3)
for r in a b c; do
    declare -n args="ARGS_$r"
    "${VG[@]}" --tool=cachegrind --cachegrind-out-file="workload.$r.cachegrind.out" \
        "${CACHE_GEOMETRY[@]}" "$PROG" "${args[@]}" > /dev/null
    "${VG[@]}" --tool=callgrind --callgrind-out-file="workload.$r.callgrind.out" \
        --dump-instr=yes --collect-jumps=yes "$PROG" "${args[@]}" > /dev/null
done
"${VG[@]}" --tool=cachegrind --cachegrind-out-file=workload.a.branch.cachegrind.out \
    "${CACHE_GEOMETRY[@]}" --branch-sim=yes "$PROG" "${ARGS_a[@]}" > /dev/null
# A Callgrind run with line positions only, and one with two threads' parts
# kept apart is not needed: workload is single-threaded.
"${VG[@]}" --tool=callgrind --callgrind-out-file=workload.a.lines.callgrind.out \
    "$PROG" "${ARGS_a[@]}" > /dev/null

cg_merge -o abc.cg_merge workload.a.cachegrind.out workload.b.cachegrind.out \
    workload.c.cachegrind.out 2>/dev/null
cg_diff workload.a.cachegrind.out workload.b.cachegrind.out > ab.cg_diff
# cg_diff with name rewriting: strip the directory of every file, and fold
# GCC's clone suffixes (.part.0, .constprop.0, ...) into the base name.
cg_diff --mod-filename='s/.*\///' --mod-funcname='s/\.(part|constprop|isra)\.\d+$//g' \
    workload.a.cachegrind.out workload.b.cachegrind.out > ab.mod.cg_diff
cg_diff --mod-funcname='s/STR/x/i' \
    workload.a.cachegrind.out workload.c.cachegrind.out > ac.modi.cg_diff
{
    echo "# generate.sh, $(date -u +%Y-%m-%d)"
    echo "valgrind: $(valgrind --version)"
} > VERSIONS
