#!/usr/bin/env bash
# How peak memory grows with a profile's lines and with its functions.
# Generates instruction-level Callgrind profiles with tally-gen along two
# axes: the same program (`--size`, which sets the functions) written
# with more and more function blocks (`--blocks`: more cost lines, calls
# and jumps), and programs of more and more functions written with the
# same number of blocks. Prints a Markdown table of peak RSS (GNU time)
# per command on standard output; progress on standard error.
#
# Environment (all optional):
#   TALLY_BENCH_DIR  scratch directory (default /tmp/tally-bench-growth)
#   TALLY_BENCH_BIN  the tally binary to measure (default: build it)
#   TALLY_BENCH_GEN  the tally-gen binary (default: build it)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${TALLY_BENCH_DIR:-/tmp/tally-bench-growth}
log() { echo "memory-growth.sh: $*" >&2; }

[ -x /usr/bin/time ] || { log "needs GNU time (/usr/bin/time)"; exit 1; }
if [ -n "${TALLY_BENCH_BIN:-}" ] && [ -n "${TALLY_BENCH_GEN:-}" ]; then
    tally=$TALLY_BENCH_BIN
    gen=$TALLY_BENCH_GEN
else
    log "building (profiling profile)"
    cargo build --profile profiling -p tally-cli -p tally-gen >&2
    tally=${TALLY_BENCH_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/profiling/tally}
    gen=${TALLY_BENCH_GEN:-${CARGO_TARGET_DIR:-$PWD/target}/profiling/tally-gen}
fi
mkdir -p "$dir"

# Peak RSS in MiB of a command (its output discarded).
peak() {
    local t=$dir/time.txt
    /usr/bin/time -f '%M' -o "$t" "$@" >/dev/null 2>"$dir/stderr.txt" \
        || { log "failed: $* ($(tail -1 "$dir/stderr.txt"))"; exit 1; }
    echo $(($(tail -1 "$t") / 1024))
}

# One row: the profile of program size SIZE written as BLOCKS blocks.
row() { # SIZE BLOCKS
    local f=$dir/gen-$1-$2.out
    [ -s "$f" ] || "$gen" --size "$1" --blocks "$2" -o "$f" 2>/dev/null
    local mb functions lines
    mb=$(($(stat -c %s "$f") / 1000000))
    functions=$("$tally" check "$f" | sed -n 's/.*functions \([0-9,]*\),.*/\1/p')
    lines=$("$tally" check "$f" | sed -n 's/.*cost lines \([0-9,]*\),.*/\1/p')
    log "$f: $mb MB, $functions functions, $lines cost lines"
    local check annotate full convert gprof merge
    check=$(peak "$tally" check -q "$f")
    annotate=$(peak "$tally" annotate --auto=no "$f")
    full=$(peak "$tally" annotate --inclusive=yes --tree=both "$f")
    gprof=$(peak "$tally" gprof -b "$f")
    merge=$(peak "$tally" merge -o "$dir/merged.out" "$f" "$f")
    convert=$(peak "$tally" convert "$f" -o "$dir/converted.out")
    echo "| $mb MB | $functions | $lines | $check | $annotate | $full | $gprof | $merge | $convert |"
}

echo "| file | functions | cost lines | \`check -q\` | \`annotate --auto=no\` | \`annotate --inclusive=yes --tree=both\` | \`gprof -b\` | \`merge F F\` | \`convert\` |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
# More lines, the same functions.
for blocks in 15000 60000 240000; do row 25M "$blocks"; done
# More functions, the same number of blocks.
for size in 100M 400M; do row "$size" 60000; done
