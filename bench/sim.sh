#!/usr/bin/env bash
# tally sim against Cachegrind on the same programs: wall time (hyperfine)
# and peak memory (/usr/bin/time), next to the program's native run.
#
#   bench/sim.sh
#
# Programs: the committed workload (tests/data/dcpi/real/workload 12000 7)
# and Debian's gzip compressing 2.9 MB of text. tally runs the program under
# QEMU with its plugin (built here) and simulates Cachegrind's default
# machine with branch simulation; Cachegrind runs with
# --cache-sim=yes --branch-sim=yes; then both count instructions only
# (--cache-sim=no). The same environment for both (env -i).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile profiling -p tally-cli >&2
cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target >&2
tally=$PWD/target/profiling/tally
# The plugin is built in release; point tally at it.
export TALLY_QEMU_PLUGIN=${TALLY_QEMU_PLUGIN:-$PWD/target/release/libtally_qemu_plugin.so}
runs=${TALLY_BENCH_RUNS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seq 1 400000 > "$tmp/input"

mem() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }
mean() {
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.3f ± %.3f" % (r["mean"], r["stddev"] or 0))' "$1"
}
row() { # label, command...
    local label=$1; shift
    local j; j=$(mktemp)
    hyperfine -N -w 1 -r "$runs" --export-json "$j" -- "$*" >/dev/null 2>&1
    printf '| %s | `%s` | %s | %s MB |\n' "$label" "$(echo "$*" | sed "s|$tally|tally|; s|$tmp|\$tmp|g; s|$PWD/||g")" "$(mean "$j")" "$(( $(mem "$@") / 1024 ))"
    rm -f "$j"
}

clean="env -i PATH=/usr/bin:/bin LC_ALL=C"
w=$PWD/tests/data/dcpi/real/workload
echo "| run | command | time (s) | peak RSS |"
echo "|---|---|---:|---:|"
for prog in "$w 12000 7" "/usr/bin/gzip -6 -c $tmp/input"; do
    name=$(basename "${prog%% *}")
    row "$name native" $clean $prog
    row "$name tally sim" $clean "$tally" sim --branch-sim=yes --out-file "$tmp/t.out" -- $prog
    row "$name cachegrind" $clean valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes --cachegrind-out-file="$tmp/c.out" $prog
done
# Counting only (Cachegrind 3.21's default): Ir, no simulation.
gz="/usr/bin/gzip -6 -c $tmp/input"
row "gzip tally sim, Ir only" $clean "$tally" sim --cache-sim=no --out-file "$tmp/t.out" -- $gz
row "gzip cachegrind, Ir only" $clean valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$tmp/c.out" $gz

# Exactness of the same runs, totals per event.
for prog in "$w 12000 7" "/usr/bin/gzip -6 -c $tmp/input"; do
    $clean "$tally" sim --branch-sim=yes --out-file "$tmp/t.out" -- $prog >/dev/null 2>&1
    $clean valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes --cachegrind-out-file="$tmp/c.out" $prog >/dev/null 2>&1
    echo
    echo "$(basename "${prog%% *}"): event, Cachegrind, tally, difference"
    paste <(grep '^events:' "$tmp/c.out" | cut -d' ' -f2- | tr ' ' '\n') \
          <(grep '^summary:' "$tmp/c.out" | cut -d' ' -f2- | tr ' ' '\n') \
          <(grep '^summary:' "$tmp/t.out" | cut -d' ' -f2- | tr ' ' '\n') |
        awk '{ d = $2 ? 100 * ($3 - $2) / $2 : 0; printf "%-5s %12d %12d %+8.2f %%\n", $1, $2, $3, d }'
done
