#!/usr/bin/env bash
# Makes the README's pictures: the call graph of tests/data/gprof's
# `multi.O0` run (gmon.out and its program), drawn by `tally graph`.
#
#   docs/images/make.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
(cd "$root" && cargo build --release -q -p tally-cli)
cd "$root/tests/data/gprof"
"$root/target/release/tally" graph multi.O0.gmon --binary multi.O0 \
    -o "$root/docs/images/graph.svg"
