#!/usr/bin/env bash
# generate.sh - DCPI fixtures with real sample counts: the per-instruction
# counts of Callgrind runs (--dump-instr=yes) of a real program, converted
# to DCPI by `tally convert --to dcpi`.
#
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Needs: gcc, valgrind, a release build of tally (cargo build --release).
# No DCPI files survive from the Alpha era; what DCPI's sampler would have
# recorded per instruction (samples of an event) is what Callgrind counts
# per instruction (executed instructions, cache misses), so the counts are
# real counts of a real program and the reports can be checked against
# Callgrind's own per-function numbers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export LC_ALL=C TZ=UTC
tally=${TALLY:-../../../../target/release/tally}
VG=(env -i PATH=/usr/bin:/bin LC_ALL=C valgrind -q)

# The program is tests/data/src/workload.c, built from tests/data with
# relative source paths in the DWARF info (./src/workload.c, as in
# tests/data/generate.sh), so reports run from tests/data find the source.
# -no-pie keeps the image's addresses the ones Valgrind reports;
# workload.pie is the position-independent build.
CFLAGS=(-g -O1 -fno-omit-frame-pointer -fdebug-prefix-map="$(cd ../.. && pwd)"=.)
(cd ../.. && gcc "${CFLAGS[@]}" -no-pie -o dcpi/real/workload src/workload.c)
(cd ../.. && gcc "${CFLAGS[@]}" -pie -fPIE -o dcpi/real/workload.pie src/workload.c)

ARGS_1=(1500 1)
ARGS_2=(3000 7)
for run in 1 2; do
    declare -n args="ARGS_$run"
    "${VG[@]}" --tool=callgrind --dump-instr=yes --cache-sim=yes \
        --I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64 \
        --callgrind-out-file="workload.run$run.callgrind" ./workload "${args[@]}" > /dev/null
    "$tally" convert "workload.run$run.callgrind" --binary workload --to dcpi \
        -o "workload.run$run.dcpi"
done
# A second event of run 1: D1 read misses.
"$tally" convert workload.run1.callgrind --binary workload --event D1mr -o workload.run1.D1mr.dcpi
# The PIE build: Valgrind loads it at 0x108000; the offsets must come out
# the same as the non-PIE build's relative to its own .text.
"${VG[@]}" --tool=callgrind --dump-instr=yes --callgrind-out-file=workload.pie.callgrind \
    ./workload.pie 1500 1 > /dev/null
"$tally" convert workload.pie.callgrind --binary workload.pie -o workload.pie.dcpi
{
    echo "# generate.sh, $(date -u +%Y-%m-%d)"
    echo "valgrind: $(valgrind --version)"
    echo "gcc: $(gcc --version | head -n1)"
} > VERSIONS
