#!/usr/bin/env bash
# Reading speed of sampled-stack inputs: perf.data (frame-pointer and
# DWARF call graphs), `perf script` text, pprof and folded stacks, each
# against its own tool, in the same run, taking turns. Prints a Markdown
# table: median wall time, input MB/s, peak RSS, the anchor's median and
# the ratio, then the exact commands.
#
#   RUNS=5 SLOW_RUNS=1 bench/inputs.sh [DIR]
#
# The inputs are made in DIR (default /tmp/tally-inputs) when missing:
#
#   lua.perf.data   perf record -g -F 20000 of Lua (built here with frame
#                   pointers, from the lua-src crate's sources) running
#                   bench/workloads/workload.lua LUA_RUNS times (default
#                   40: about 100 MB; 400 makes about 1 GB)
#   dwarf.perf.data perf record --call-graph dwarf -F 2000, 2 runs
#   small.perf.data as lua.perf.data, 5 runs, for perf.txt
#   perf.txt        perf script of small.perf.data
#   lua.pb.gz       tally convert lua.perf.data --to pprof
#   lua.folded      tally convert lua.perf.data --to folded, repeated until
#                   it is over 100 MB (a merge of recordings: one line per
#                   stack of each; tally sums repeated stacks)
#
# tally runs `check -q` (read and total) and `annotate` (read, analyse,
# print); anchors: `perf report --stdio --no-children` for perf.data
# (SLOW_RUNS rounds, default 1: it takes about a minute per 100 MB),
# `go tool pprof -top` for pprof, and `wc -l` (the floor of reading
# lines) for `perf script` text and folded stacks. MB/s counts
# the input file's bytes (for pprof, the gzipped file, and the
# uncompressed size is given too). Each command runs once first, untimed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/tally-inputs}
runs=${RUNS:-5}
slow_runs=${SLOW_RUNS:-1}
lua_runs=${LUA_RUNS:-40}
tally=${TALLY:-$root/target/profiling/tally}
die() { echo "inputs.sh: $*" >&2; exit 1; }
log() { echo "inputs.sh: $*" >&2; }
for t in perf go python3 gcc; do
    command -v "$t" >/dev/null || die "needs $t"
done
if [ -z "${TALLY:-}" ]; then
    (cd "$root" && cargo build --profile profiling -p tally-cli >&2)
fi
[ -x "$tally" ] || die "$tally: not an executable"
mkdir -p "$dir"
cd "$dir"

if [ ! -x luarun ]; then
    src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lua-src-547.*/lua-5.4.* 2>/dev/null | tail -1 || true)
    if [ -z "$src" ]; then
        log "fetching the lua-src crate"
        mkdir -p lua-fetch/src
        printf '[package]\nname = "lua-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nlua-src = "547"\n' >lua-fetch/Cargo.toml
        echo 'fn main() {}' >lua-fetch/src/main.rs
        (cd lua-fetch && cargo fetch >&2)
        src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lua-src-547.*/lua-5.4.* | tail -1)
    fi
    log "building luarun with frame pointers"
    gcc -O2 -g -fno-omit-frame-pointer -I"$src" -o luarun "$root/bench/workloads/luarun.c" \
        $(ls "$src"/*.c | grep -v -e '/lua\.c$' -e '/luac\.c$') -lm
fi
record() { # OUT RUNS PERF-OPTIONS...
    local out=$1 n=$2
    shift 2
    log "recording $out ($n runs of the Lua workload)"
    perf record "$@" -o "$out" -- sh -c \
        "for i in \$(seq $n); do ./luarun '$root/bench/workloads/workload.lua'; done" >/dev/null 2>&1 \
        || die "perf record failed (perf_event_paranoid?)"
}
[ -s lua.perf.data ] || record lua.perf.data "$lua_runs" -g -F 20000
[ -s dwarf.perf.data ] || record dwarf.perf.data 2 --call-graph dwarf -F 2000
[ -s small.perf.data ] || record small.perf.data 5 -g -F 20000
[ -s perf.txt ] || perf script -i small.perf.data >perf.txt 2>/dev/null
[ -s lua.pb.gz ] || "$tally" convert lua.perf.data --to pprof -o lua.pb.gz
if [ ! -s lua.folded ]; then
    "$tally" convert lua.perf.data --to folded -o one.folded
    : >lua.folded
    while [ "$(stat -c %s lua.folded)" -lt 100000000 ]; do cat one.folded >>lua.folded; done
    rm one.folded
fi
pprof_raw=$(gzip -dc lua.pb.gz | wc -c)

# Rows: input|anchor command|anchor rounds.
rows=(
    "lua.perf.data|perf report --stdio --no-children -i lua.perf.data|$slow_runs"
    "dwarf.perf.data|perf report --stdio --no-children -i dwarf.perf.data|$slow_runs"
    "perf.txt|wc -l perf.txt|$runs"
    "lua.pb.gz|go tool pprof -top lua.pb.gz|$runs"
    "lua.folded|wc -l lua.folded|$runs"
)
ROWS=$(printf '%s\n' "${rows[@]}") TALLY="$tally" RUNS="$runs" PPROF_RAW="$pprof_raw" python3 - <<'PY'
import os, statistics, subprocess, sys, time

tally, runs = os.environ["TALLY"], int(os.environ["RUNS"])

def run(cmd):
    """Wall seconds and peak RSS (KiB) of one run of cmd (a shell line)."""
    start = time.perf_counter()
    p = subprocess.Popen(["/bin/sh", "-c", "exec " + cmd], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0,):
        sys.exit(f"inputs.sh: failed: {cmd}")
    return wall, usage.ru_maxrss

def median(xs):
    return statistics.median(xs) if xs else float("nan")

rows = []
for line in os.environ["ROWS"].split("\n"):
    if not line:
        continue
    name, anchor, anchor_runs = line.split("|")
    cmds = {"check": f"{tally} check -q {name}", "annotate": f"{tally} annotate {name}",
            "anchor": anchor}
    rounds = {"check": runs, "annotate": runs, "anchor": int(anchor_runs)}
    walls = {k: [] for k in cmds}
    rss = {k: [] for k in cmds}
    for k, c in cmds.items():
        if rounds[k] > 0:
            run(c)
    for i in range(runs):
        for k, c in cmds.items():
            if i < rounds[k]:
                w, m = run(c)
                walls[k].append(w)
                rss[k].append(m)
    rows.append((name, os.path.getsize(name), cmds,
                 {k: median(v) for k, v in walls.items()},
                 {k: max(v) if v else 0 for k, v in rss.items()}, rounds))

print("| input | MB | tally check | MB/s | peak RSS | tally annotate | MB/s | peak RSS | anchor | anchor / annotate |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, size, cmds, w, m, rounds in rows:
    mb = size / 1e6
    label = name
    if name.endswith(".pb.gz"):
        raw = int(os.environ["PPROF_RAW"]) / 1e6
        label += f" ({raw:.1f} MB gunzipped: {raw / w['check']:.0f} MB/s checked, {raw / w['annotate']:.0f} MB/s annotated)"
    print(f"| {label} | {mb:.1f} | {w['check']:.3f} s | {mb / w['check']:.0f} | {m['check'] / 1024:.0f} MiB "
          f"| {w['annotate']:.3f} s | {mb / w['annotate']:.0f} | {m['annotate'] / 1024:.0f} MiB "
          f"| {w['anchor']:.3f} s ({rounds['anchor']} runs) | {w['anchor'] / w['annotate']:.1f}x |")
print()
print(f"Medians of {runs} alternating rounds (anchors of perf.data: fewer, as given); in {os.getcwd()}:")
print()
for name, size, cmds, w, m, rounds in rows:
    for k in ("check", "annotate", "anchor"):
        print(f"    {cmds[k]}")
PY
