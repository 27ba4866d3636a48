#!/usr/bin/env bash
# The QEMU plugin built with its `inprocess` feature simulates inside QEMU
# (a measurement of that design, see BENCHMARKS.md); its totals must be
# those of `tally sim` on the same program, up to the few events that move
# with where the guest's memory lands (the plugin's own allocations in
# QEMU's process shift it): each within 20 or 0.1 %.
#
#   tests/inprocess.sh    (after `cargo build --release -p tally-cli` and
#                          the plugin's default build, as .ci/run does)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml \
    --features inprocess --target-dir "$target/inprocess"
cargo clippy --release --manifest-path crates/tally-qemu-plugin/Cargo.toml \
    --features inprocess --target-dir "$target/inprocess" -- -D warnings
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog=("$PWD/tests/data/dcpi/real/workload" 3000 5)
"$target/release/tally" sim --branch-sim=yes --out-file "$tmp/t.out" -- "${prog[@]}" >/dev/null 2>&1
qemu-x86_64 -plugin "$target/inprocess/release/libtally_qemu_plugin.so,inprocess=on" -d plugin \
    "${prog[@]}" 2>"$tmp/log" >/dev/null
want=$(sed -n 's/^summary: //p' "$tmp/t.out")
got=$(sed -n 's/^tally-qemu-plugin: in-process summary: //p' "$tmp/log")
echo "tally sim:  $want"
echo "in process: $got"
python3 - "$want" "$got" <<'PY'
import sys
want, got = ([int(x) for x in a.split()] for a in sys.argv[1:])
assert len(want) == 13 and len(got) == 13, "no summary"
bad = [i for i, (w, g) in enumerate(zip(want, got)) if abs(w - g) > max(20, w // 1000)]
sys.exit(f"in-process totals differ in events {bad}" if bad else 0)
PY
