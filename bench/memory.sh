#!/usr/bin/env bash
# Peak memory and wall time of `tally convert`, `merge`, `check` and
# `annotate` on a gzip file that expands to 5 GiB of valid cost lines (one
# function, the line `1 1` repeated: a few MB compressed). Prints a
# Markdown table on standard output; progress on standard error.
#
# Environment (all optional):
#   TALLY_BENCH_DIR    scratch directory (default /tmp/tally-bench-mem)
#   TALLY_BENCH_BYTES  expanded size in bytes (default 5 GiB)
#   TALLY_BENCH_BIN    the tally binary to measure (default: build it)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${TALLY_BENCH_DIR:-/tmp/tally-bench-mem}
bytes=${TALLY_BENCH_BYTES:-5368709120}
log() { echo "memory.sh: $*" >&2; }

[ -x /usr/bin/time ] || { log "needs GNU time (/usr/bin/time)"; exit 1; }
if [ -n "${TALLY_BENCH_BIN:-}" ]; then
    tally=$TALLY_BENCH_BIN
else
    log "building (profiling profile)"
    cargo build --profile profiling -p tally-cli >&2
    tally=${CARGO_TARGET_DIR:-$PWD/target}/profiling/tally
fi
mkdir -p "$dir"
input=$dir/exp-$bytes.cg.gz
if [ ! -s "$input" ]; then
    log "making $input ($bytes bytes expanded)"
    (printf "events: Ir\nfl=a.c\nfn=main\n"; yes "1 1" | head -c "$bytes") | gzip -1 > "$input.tmp"
    mv "$input.tmp" "$input"
fi
log "input: $(stat -c %s "$input") bytes compressed"

# Runs a command under GNU time; prints a table row.
measure() { # LABEL COMMAND...
    local label=$1
    shift
    local t=$dir/time.txt
    local status=0
    /usr/bin/time -v -o "$t" "$@" >/dev/null 2>"$dir/stderr.txt" || status=$?
    local wall rss
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$t")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$t")
    log "$label: $wall, $rss KiB, exit $status"
    echo "| \`$label\` | $wall | $((rss / 1024)) MiB | $status |"
}

echo "| command | wall time | peak RSS | exit |"
echo "|---|---:|---:|---:|"
measure "tally convert exp.cg.gz -o x.cg" "$tally" convert "$input" -o "$dir/x.cg"
measure "tally merge exp.cg.gz -o y.cg" "$tally" merge "$input" -o "$dir/y.cg"
measure "tally check exp.cg.gz" "$tally" check "$input"
measure "tally annotate --auto=no exp.cg.gz" "$tally" annotate --auto=no "$input"
measure "tally annotate exp.cg.gz" "$tally" annotate "$input"
