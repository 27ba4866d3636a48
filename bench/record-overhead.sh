#!/usr/bin/env bash
# The wall-time overhead of `tally record` and `perf record` on the program
# of bench/record.sh, with the runs interleaved (native, tally, perf, ...
# ROUNDS times) so that the host's drift hits every row alike; prints the
# minimum and median of each row and their ratio to the native run's.
#
#   bench/record-overhead.sh [ROUNDS]     # default 10
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p tally-cli >&2
tally=$PWD/target/release/tally
rounds=${1:-10}
n=${TALLY_BENCH_N:-12000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The program is bench/record.sh's, taken from there.
sed -n '/^cat > "$tmp\/work.c" <<.EOF.$/,/^EOF$/p' bench/record.sh | sed '1d;$d' > "$tmp/work.c"
gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/fp" "$tmp/work.c"
gcc -O2 -g -o "$tmp/nofp" "$tmp/work.c"
rows=(
    "native, fp|$tmp/fp $n"
    "tally record --call-graph fp|$tally record -F 999 --call-graph fp -o $tmp/t.out -- $tmp/fp $n"
    "perf record -g|perf record -q -F 999 -g -o $tmp/p.data -- $tmp/fp $n"
    "native, no fp|$tmp/nofp $n"
    "tally record --call-graph dwarf|$tally record -F 999 --call-graph dwarf -o $tmp/t.out -- $tmp/nofp $n"
    "perf record --call-graph dwarf,16384|perf record -q -F 999 --call-graph dwarf,16384 -o $tmp/p.data -- $tmp/nofp $n"
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
