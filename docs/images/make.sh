#!/usr/bin/env bash
# Draws the README's pictures from the repository's real fixtures:
#   docs/images/flame.svg       tally flame of one Callgrind run
#   docs/images/flame-diff.svg  tally flame --diff of two runs of the
#                               same program, the second doing more work
#   docs/images/graph.svg       tally graph of tests/data/gprof's `multi.O0`
#                               run (gmon.out and its program)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cargo build --release -q -p tally-cli
tally=$root/target/release/tally
$tally flame tests/data/callgrind/workload.combo.out -o docs/images/flame.svg \
    --subtitle "Ir: tests/data/callgrind/workload.combo.out"
$tally flame --diff tests/data/merge/workload.a.callgrind.out \
    tests/data/merge/workload.b.callgrind.out -o docs/images/flame-diff.svg \
    --subtitle "Ir: workload.b against workload.a"
cd tests/data/gprof
$tally graph multi.O0.gmon --binary multi.O0 -o "$root/docs/images/graph.svg"
