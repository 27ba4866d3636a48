#!/usr/bin/env bash
# What QEMU itself costs `tally sim`, against what tally's plugin adds:
# QEMU 7.2 user mode running a program alone, with a plugin whose block
# and access callbacks do nothing (built here from the C below: the floor
# of any plugin that sees every access), and with tally's plugin writing
# its stream to /dev/null in each of its modes (blocks only, every access,
# accesses through the D1 filter `tally sim` asks for, here without the
# shared buffers tally reads from), next to the program's native run,
# the whole `tally sim --branch-sim=yes` run, Cachegrind's and
# Callgrind's. Taking turns (bench/alternate.py --cpu), medians of wall
# and CPU time (user + system, all threads). Prints a Markdown table.
#
#   bench/qemu-floor.sh                 # gzip -9 of 1 MB of text
#   bench/qemu-floor.sh -- PROG ARGS    # another program
#
# Environment: RUNS (default 5); TALLY_QEMU_PLUGIN (default: the release
# build of crates/tally-qemu-plugin, built here); TALLY (default
# target/profiling/tally, built here).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${RUNS:-5}
if [ $# -gt 0 ] && [ "$1" != "--" ] || [ "$*" = "--" ]; then
    echo "usage: bench/qemu-floor.sh [-- PROG ARGS]" >&2
    exit 2
fi
for t in gcc qemu-x86_64 valgrind python3 gzip; do
    command -v "$t" >/dev/null || { echo "qemu-floor.sh: needs $t" >&2; exit 1; }
done
plugin=${TALLY_QEMU_PLUGIN:-}
if [ -z "$plugin" ]; then
    cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target >&2
    plugin=$root/target/release/libtally_qemu_plugin.so
fi
tally=${TALLY:-}
if [ -z "$tally" ]; then
    cargo build --profile profiling -p tally-cli >&2
    tally=$root/target/profiling/tally
fi
export TALLY_QEMU_PLUGIN=$plugin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "${1:-}" = "--" ]; then
    shift
    prog=("$@")
else
    seq 1 200000 >"$tmp/seq.txt"
    head -c 1000000 "$tmp/seq.txt" >"$tmp/in.txt"
    prog=(gzip -9 -c "$tmp/in.txt")
fi
found=$(command -v "${prog[0]}") || { echo "qemu-floor.sh: no program ${prog[0]}" >&2; exit 1; }
prog[0]=$found

# The declarations of QEMU's plugin API (version 1) this plugin uses;
# callbacks without registers, accesses of both directions.
cat >"$tmp/empty.c" <<'C'
#include <stddef.h>
#include <stdint.h>
typedef uint64_t plugin_id;
struct tb;
struct insn;
__attribute__((visibility("default"))) int qemu_plugin_version = 1;
extern void qemu_plugin_register_vcpu_tb_trans_cb(plugin_id, void (*)(plugin_id, struct tb *));
extern size_t qemu_plugin_tb_n_insns(const struct tb *);
extern struct insn *qemu_plugin_tb_get_insn(const struct tb *, size_t);
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct tb *, void (*)(unsigned, void *), int, void *);
extern void qemu_plugin_register_vcpu_mem_cb(struct insn *, void (*)(unsigned, uint32_t, uint64_t, void *), int, int, void *);
static int accesses = 1;
static void on_block(unsigned vcpu, void *udata) { (void)vcpu; (void)udata; }
static void on_access(unsigned vcpu, uint32_t info, uint64_t vaddr, void *udata) {
    (void)vcpu; (void)info; (void)vaddr; (void)udata;
}
static void on_translate(plugin_id id, struct tb *tb) {
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, 0, NULL);
    for (size_t i = 0; accesses && i < qemu_plugin_tb_n_insns(tb); i++)
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_access, 0, 3, NULL);
}
__attribute__((visibility("default"))) int qemu_plugin_install(plugin_id id, const void *info, int argc, char **argv) {
    (void)info; (void)argv;
    accesses = argc == 0;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    return 0;
}
C
gcc -shared -fPIC -O2 -o "$tmp/empty.so" "$tmp/empty.c"

p=$(printf '%q ' "${prog[@]}")
q="qemu-x86_64 -plugin"
cmds=(
    "$p"
    "qemu-x86_64 $p"
    "$q $tmp/empty.so,blocks=on $p"
    "$q $tmp/empty.so $p"
    "$q $plugin,out=/dev/null,mem=off $p"
    "$q $plugin,out=/dev/null $p"
    "$q $plugin,out=/dev/null,d1=32768:8:64,hits=on $p"
    "$tally sim --branch-sim=yes --out-file $tmp/t.out -- $p"
    "valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes --cachegrind-out-file=/dev/null $p"
    "valgrind --tool=callgrind --callgrind-out-file=/dev/null $p"
)
names=(
    "native"
    "QEMU alone"
    "QEMU, empty block callbacks"
    "QEMU, empty block and access callbacks"
    "tally's plugin, blocks only (\`mem=off\`)"
    "tally's plugin, every access"
    "tally's plugin, D1 filter"
    "\`tally sim --branch-sim=yes\` (QEMU and tally)"
    "Cachegrind, cache and branch"
    "Callgrind"
)
python3 bench/alternate.py --cpu --json "$tmp/t.json" "$runs" "${cmds[@]}" >&2
echo "| run of \`${prog[*]##*/}\` | wall | CPU |"
echo "|---|---:|---:|"
python3 - "$tmp/t.json" "${names[@]}" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
rows = data if isinstance(data, list) else list(data.values())
for name, r in zip(sys.argv[2:], rows):
    print(f"| {name} | {r['wall']:.3f} s | {r['cpu']:.3f} s |")
PY
echo
echo "Commands (\`$tmp\` removed at exit):"
echo
printf '    %s\n' "${cmds[@]}"
