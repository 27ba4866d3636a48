#!/usr/bin/env bash
# The overhead of `tally record` against the program's native run and
# against `perf record` at the same rate and stack settings, with Valgrind
# Callgrind and `tally sim` (exact counts) for scale. Wall time, hyperfine.
#
#   TALLY_BENCH_RUNS=5 bench/record.sh
#
# The program: the CPU-bound test program of crates/tally-cli/tests/it/record.rs
# (a hot loop `spin`, `leaf`, a recursion `rec`), about a second natively,
# built twice at -O2: with frame pointers (the fp rows) and without (gcc's
# default: the dwarf rows). Both tools sample cpu-clock at 999 Hz; DWARF
# unwinding copies 16 KiB of stack per sample on both sides (perf's
# `dwarf,16384`; its own default is 8 KiB). tally's time includes writing
# the symbolised Callgrind file; perf's only writing perf.data. Callgrind
# and tally sim run a tenth of the work (the row says so), fewer times.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile profiling -p tally-cli >&2
cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target >&2
tally=$PWD/target/profiling/tally
# The plugin is built in release; point tally at it.
export TALLY_QEMU_PLUGIN=${TALLY_QEMU_PLUGIN:-$PWD/target/release/libtally_qemu_plugin.so}
runs=${TALLY_BENCH_RUNS:-5}
slow_runs=${TALLY_BENCH_SLOW_RUNS:-2}
n=${TALLY_BENCH_N:-12000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/work.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
static volatile long sink;
__attribute__((noipa)) long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s; }
__attribute__((noipa)) long leaf(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s + spin(n / 2); }
__attribute__((noipa)) long rec(int d, long n) { long s = spin(n / 8); if (d == 0) return s + leaf(n); return s + rec(d - 1, n); }
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 400;
  long t = 0;
  for (long i = 0; i < n; i++) { t += rec(3, 20000); t += spin(30000); }
  sink = t; printf("%ld\n", t);
  return 0;
}
EOF
gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/fp" "$tmp/work.c"
gcc -O2 -g -o "$tmp/nofp" "$tmp/work.c"

mean() {
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.3f ± %.3f" % (r["mean"], r["stddev"] or 0))' "$1"
}
row() { # label, runs, command...
    local label=$1 r=$2; shift 2
    local j; j=$(mktemp)
    hyperfine -N -w 1 -r "$r" --export-json "$j" -- "$*" >/dev/null 2>&1
    printf '| %s | `%s` | %s |\n' "$label" "$(echo "$*" | sed "s|$tally|tally|; s|$tmp/||g")" "$(mean "$j")"
    rm -f "$j"
}

echo "load: $(uptime)"
echo
echo "| run | command | time (s) |"
echo "|---|---|---:|"
row "native, frame pointers" "$runs" "$tmp/fp" "$n"
row "tally record, fp" "$runs" "$tally" record -F 999 --call-graph fp -o "$tmp/t.out" -- "$tmp/fp" "$n"
row "perf record -g" "$runs" perf record -q -F 999 -g -o "$tmp/p.data" -- "$tmp/fp" "$n"
row "native, no frame pointers" "$runs" "$tmp/nofp" "$n"
row "tally record, dwarf" "$runs" "$tally" record -F 999 --call-graph dwarf -o "$tmp/t.out" -- "$tmp/nofp" "$n"
row "perf record, dwarf" "$runs" perf record -q -F 999 --call-graph dwarf,16384 -o "$tmp/p.data" -- "$tmp/nofp" "$n"
small=$((n / 10))
row "native, fp, n/10" "$runs" "$tmp/fp" "$small"
row "Callgrind, n/10" "$slow_runs" valgrind --tool=callgrind --callgrind-out-file="$tmp/c.out" "$tmp/fp" "$small"
row "tally sim, n/10" "$slow_runs" "$tally" sim --cache-sim=no --callgrind --out-file "$tmp/s.out" -- "$tmp/fp" "$small"
