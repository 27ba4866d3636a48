#!/usr/bin/env bash
# How fast tally reads Callgrind text: `tally check -q FILE` against
# `wc -l FILE` (the floor: one pass over the bytes, no parsing) in the
# same run, taking turns (bench/alternate.py), RUNS rounds each after one
# untimed run (page cache). Prints a Markdown table on standard output:
# medians, MB/s (10^6 bytes), the ratio to `wc -l`, tally's median CPU
# time (user + system, both threads: what the second core adds), its peak
# RSS (/usr/bin/time -f %M), and the exact commands.
#
#   bench/read-speed.sh [FILE...]   # default: cc1.callgrind.out from /tmp/corpus or bench/corpus
#
# Environment (all optional):
#   RUNS         rounds of each command (default 5)
#   TALLY        the tally binary (default: target/profiling/tally, built here)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-5}
die() { echo "read-speed.sh: $*" >&2; exit 1; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number"
for t in python3 wc /usr/bin/time; do
    command -v "$t" >/dev/null || die "needs $t"
done

if [ $# -eq 0 ]; then
    for d in /tmp/corpus "$root/bench/corpus"; do
        if [ -s "$d/cc1.callgrind.out" ]; then
            set -- "$d/cc1.callgrind.out"
            break
        fi
    done
    [ $# -gt 0 ] || die "no cc1.callgrind.out in /tmp/corpus or bench/corpus (bench/corpus.sh makes it); or name files"
fi
for f in "$@"; do
    [ -s "$f" ] || die "$f: no such file, or empty"
done

if [ -z "${TALLY:-}" ]; then
    (cd "$root" && cargo build --profile profiling -p tally-cli >&2)
    TALLY=${CARGO_TARGET_DIR:-$root/target}/profiling/tally
fi
[ -x "$TALLY" ] || die "$TALLY: not an executable"

# Median in milliseconds of COMMAND in alternate.py's output OUT.
median() {
    awk -v c="$2" 'index($0, "  " c) && $2 == "ms" { print $1; exit }' <<<"$1"
}

# Median CPU time in milliseconds of COMMAND in alternate.py's output OUT.
cpu_median() {
    awk -v c="$2" 'index($0, "  " c) { for (i = 1; i < NF; i++) if ($i == "cpu") { print $(i + 1); exit } }' <<<"$1"
}

echo "Host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $runs rounds, taking turns."
echo
echo '| file | MB | `tally check -q` | MB/s | `wc -l` | MB/s | ratio to `wc -l` | tally CPU | tally peak RSS |'
echo '|---|---:|---:|---:|---:|---:|---:|---:|---:|'
commands=()
for f in "$@"; do
    bytes=$(stat -c %s "$f")
    tally_cmd="$TALLY check -q $f"
    wc_cmd="wc -l $f"
    # The check must pass: a failing read would time an error path.
    $tally_cmd || die "$tally_cmd failed"
    out=$(python3 "$root/bench/alternate.py" --cpu "$runs" "$tally_cmd" "$wc_cmd")
    t=$(median "$out" "$tally_cmd")
    w=$(median "$out" "$wc_cmd")
    cpu=$(cpu_median "$out" "$tally_cmd")
    [ -n "$t" ] && [ -n "$w" ] && [ -n "$cpu" ] || die "could not read alternate.py's output: $out"
    rss=$(/usr/bin/time -f %M $tally_cmd 2>&1 >/dev/null | tail -1)
    awk -v f="$(basename "$f")" -v b="$bytes" -v t="$t" -v w="$w" -v cpu="$cpu" -v rss="$rss" 'BEGIN {
        printf "| %s | %.1f | %.1f ms | %.0f | %.1f ms | %.0f | %.2f× | %.1f ms | %.1f MiB |\n",
            f, b / 1e6, t, b / 1e3 / t, w, b / 1e3 / w, t / w, cpu, rss / 1024
    }'
    commands+=("$tally_cmd" "$wc_cmd")
done
echo
echo "Commands (tally is $TALLY):"
echo
for c in "${commands[@]}"; do
    echo "    $c"
done
