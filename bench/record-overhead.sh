#!/usr/bin/env bash
# The wall-time overhead of `tally record` and `perf record` on the program
# of bench/record.sh, with the runs interleaved (native, tally, perf, ...
# ROUNDS times) so that the host's drift hits every row alike; prints the
# minimum and median of each row and their ratio to the native run's.
#
#   bench/record-overhead.sh [ROUNDS]     # default 10
#
# The program runs on one CPU in every row (`taskset -c CPU`, the last
# CPU by default; TALLY_BENCH_CPU= to let it move), and the recorder on
# the others: the overhead measured is what the program loses, not the
# scheduler moving it onto the CPU where the recorder reads its samples.
# The `--off-cpu` rows add the context-switch event (a stack sampled at
# every switch out of the program's thread, and the switch records).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile profiling -p tally-cli >&2
tally=$PWD/target/profiling/tally
rounds=${1:-10}
n=${TALLY_BENCH_N:-12000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The program is bench/record.sh's, taken from there.
sed -n '/^cat > "$tmp\/work.c" <<.EOF.$/,/^EOF$/p' bench/record.sh | sed '1d;$d' > "$tmp/work.c"
gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/fp" "$tmp/work.c"
gcc -O2 -g -o "$tmp/nofp" "$tmp/work.c"
cpus=$(nproc)
cpu=${TALLY_BENCH_CPU-$((cpus - 1))}
pin="" rest=""
if [ -n "$cpu" ] && [ "$cpus" -gt 1 ]; then
    pin="taskset -c $cpu"
    rest="taskset -c 0-$((cpu - 1))"
    [ "$cpu" -eq 0 ] && rest="taskset -c 1-$((cpus - 1))"
fi
echo "program pinned: ${pin:-no}; recorders: ${rest:-anywhere}"
rows=(
    "native, fp|$pin $tmp/fp $n"
    "tally record --call-graph fp|$rest $tally record -F 999 --call-graph fp -o $tmp/t.out -- $pin $tmp/fp $n"
    "perf record -g|$rest perf record -q -F 999 -g -o $tmp/p.data -- $pin $tmp/fp $n"
    "tally record --call-graph fp --off-cpu|$rest $tally record -F 999 --call-graph fp --off-cpu -o $tmp/t.out -- $pin $tmp/fp $n"
    "native, no fp|$pin $tmp/nofp $n"
    "tally record --call-graph dwarf|$rest $tally record -F 999 --call-graph dwarf -o $tmp/t.out -- $pin $tmp/nofp $n"
    "perf record --call-graph dwarf,16384|$rest perf record -q -F 999 --call-graph dwarf,16384 -o $tmp/p.data -- $pin $tmp/nofp $n"
    "tally record --call-graph dwarf --off-cpu|$rest $tally record -F 999 --call-graph dwarf --off-cpu -o $tmp/t.out -- $pin $tmp/nofp $n"
)
for _ in $(seq "$rounds"); do
    for r in "${rows[@]}"; do
        start=$(date +%s.%N)
        ${r#*|} >/dev/null 2>&1
        end=$(date +%s.%N)
        printf '%s\t%s\n' "${r%%|*}" "$(echo "$end - $start" | bc)"
    done
done > "$tmp/times"
echo "load: $(uptime)"
echo
python3 - "$tmp/times" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, v = line.rstrip("\n").split("\t")
    rows.setdefault(k, []).append(float(v))
print("| run | min (s) | median (s) | over native (min, median) |")
print("|---|---:|---:|---:|")
base = None
for k, v in rows.items():
    lo, med = min(v), statistics.median(v)
    if k.startswith("native"):
        base = (lo, med)
        print(f"| {k} | {lo:.3f} | {med:.3f} | |")
    else:
        print(f"| {k} | {lo:.3f} | {med:.3f} | {100*(lo/base[0]-1):+.0f} %, {100*(med/base[1]-1):+.0f} % |")
PY
