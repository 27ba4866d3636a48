#!/usr/bin/env bash
# tally sim against Cachegrind on gzip, one run of each in turn: on a host
# whose speed drifts within minutes, pairs compare better than two series
# run one after the other (bench/sim.sh).
#
#   bench/sim-pairs.sh [PAIRS]      (default 8)
#
# Prints each pair's wall and user times, then the means, medians and how
# many pairs tally won.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile profiling -p tally-cli >&2
cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target >&2
tally=$PWD/target/profiling/tally
# The plugin is built in release; point tally at it.
export TALLY_QEMU_PLUGIN=${TALLY_QEMU_PLUGIN:-$PWD/target/release/libtally_qemu_plugin.so}
pairs=${1:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seq 1 400000 > "$tmp/input"
clean="env -i PATH=/usr/bin:/bin LC_ALL=C"
gz="/usr/bin/gzip -6 -c $tmp/input"
for _ in $(seq 1 "$pairs"); do
    /usr/bin/time -o "$tmp/a" -f "%e %U" $clean "$tally" sim --branch-sim=yes --out-file "$tmp/t.out" -- $gz >/dev/null 2>&1
    /usr/bin/time -o "$tmp/b" -f "%e %U" $clean valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes --cachegrind-out-file="$tmp/c.out" $gz >/dev/null 2>&1
    echo "tally $(cat "$tmp/a")  cachegrind $(cat "$tmp/b")" | tee -a "$tmp/pairs"
done
python3 - "$tmp/pairs" <<'PY'
import statistics as s, sys
t, c = [], []
for line in open(sys.argv[1]):
    f = line.split()
    t.append(float(f[1])); c.append(float(f[4]))
sd = lambda v: s.stdev(v) if len(v) > 1 else 0.0
print("tally %.2f ± %.2f s (median %.2f), cachegrind %.2f ± %.2f s (median %.2f): "
      "tally / cachegrind %.3f, tally faster in %d of %d"
      % (s.mean(t), sd(t), s.median(t), s.mean(c), sd(c), s.median(c),
         s.mean(t) / s.mean(c), sum(a < b for a, b in zip(t, c)), len(t)))
PY
