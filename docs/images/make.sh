#!/usr/bin/env bash
# Draws the README's pictures from the repository's real Callgrind fixtures:
#   docs/images/flame.svg       tally flame of one run
#   docs/images/flame-diff.svg  tally flame --diff of two runs of the
#                               same program, the second doing more work
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p tally-cli
tally=target/release/tally
$tally flame tests/data/callgrind/workload.combo.out -o docs/images/flame.svg \
    --subtitle "Ir: tests/data/callgrind/workload.combo.out"
$tally flame --diff tests/data/merge/workload.a.callgrind.out \
    tests/data/merge/workload.b.callgrind.out -o docs/images/flame-diff.svg \
    --subtitle "Ir: workload.b against workload.a"
