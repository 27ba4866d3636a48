#!/usr/bin/env bash
# tally graph against gprof2dot (DOT output) on the repo's largest real
# Callgrind fixture and on a generated 100 MB profile; Graphviz's own
# time for the SVG is measured apart.
#
#   bench/graph.sh
#
# Work files go to $TALLY_BENCH_DIR (default /tmp/tally-bench/graph).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${TALLY_BENCH_DIR:-/tmp/tally-bench/graph}
mkdir -p "$work"
(cd "$root" && cargo build --profile profiling -q -p tally-cli -p tally-gen)
tally="$root/target/profiling/tally"
gen="$root/target/profiling/tally-gen"
g2d="gprof2dot"
command -v gprof2dot >/dev/null || g2d="python3 -m gprof2dot"
big=$(ls -S "$root"/tests/data/callgrind/*.out | head -1)
[ -f "$work/gen100M.out" ] || "$gen" --size 100M -o "$work/gen100M.out"
# gprof2dot fails on `jfn=` lines (which Valgrind writes with
# --collect-jumps=yes): it gets a copy without them.
[ -f "$work/gen100M.nojfn.out" ] || grep -v '^jfn=' "$work/gen100M.out" > "$work/gen100M.nojfn.out"
for f in "$big" "$work/gen100M.nojfn.out"; do
    ls -l "$f"
    hyperfine -N -w 1 -r "${RUNS:-3}" \
        "$tally graph $f -o $work/tally.dot" \
        "$tally flame $f -o $work/tally.svg" \
        "$g2d -f callgrind -o $work/gprof2dot.dot $f"
done
# Graphviz on tally's DOT (default thresholds).
"$tally" graph "$work/gen100M.out" -o "$work/gen.dot"
hyperfine -N -w 1 -r "${RUNS:-3}" "dot -Tsvg -o $work/gen.svg $work/gen.dot"
