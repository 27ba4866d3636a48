#!/usr/bin/env bash
# Large profiles in `tally serve`: seconds from the start of the server to
# its answer to the first page of the functions table (the request the
# page makes first: /api/functions, 100 rows), then to the full table
# (/api/ready: gprof's analysis done, then the same page again, as the
# page asks for it), and the server's peak memory
# (VmHWM) at each of those two moments, against the file's size. The
# anchor, in the same run and by turns with tally, is reading the file
# once (`cat FILE > /dev/null`, the I/O floor). FILE is any profile tally
# serves: a Callgrind file (`tally-gen --size 1G --seed 1 > FILE`) or a
# perf.data (e.g. `perf record --call-graph dwarf -F 3000 -o FILE --
# PROGRAM`, about 8 KiB a sample); with PERF_REPORT=1 a perf.data input
# is also given to `perf report --stdio` in every round, by turns with
# the other two, and its median printed under the table.
#
#   bench/serve-big.sh FILE...       RUNS=3 rounds (medians)
#
# Uses target/profiling/tally (cargo build --profile profiling -p
# tally-cli), or $TALLY.
set -euo pipefail
cd "$(dirname "$0")/.."
tally=${TALLY:-target/profiling/tally}
runs=${RUNS:-3}
[ $# -gt 0 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
now() { date +%s.%N; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }

# One run of the server on $1: prints "first full hwm_first_kib hwm_full_kib".
serve_once() {
    local f=$1 t0 t1 t2 h1 h2 url base token
    : >"$dir/out"
    t0=$(now)
    "$tally" serve "$f" >"$dir/out" 2>"$dir/err" &
    pid=$!
    until grep -q http "$dir/out"; do
        kill -0 "$pid" 2>/dev/null || { cat "$dir/err" >&2; exit 1; }
        sleep 0.01
    done
    url=$(grep -o 'http://[^ ]*' "$dir/out")
    base=${url%%/\?t=*}
    token=${url##*t=}
    curl -sf "$base/api/functions?t=$token&offset=0&limit=100&desc=1" >/dev/null
    t1=$(now)
    h1=$(hwm "$pid")
    curl -sf "$base/api/ready?t=$token" >/dev/null
    curl -sf "$base/api/functions?t=$token&offset=0&limit=100&desc=1" >/dev/null
    t2=$(now)
    h2=$(hwm "$pid")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    echo "$(echo "$t1 - $t0" | bc) $(echo "$t2 - $t0" | bc) $h1 $h2"
}

# Seconds of one run of a command.
timed() {
    local t0
    t0=$(now)
    "$@" >/dev/null 2>&1
    echo "$(now) - $t0" | bc
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "| file | size (MiB) | \`cat\` (s) | first table (s) | × \`cat\` | full table (s) | peak RSS at first table (MiB) | peak RSS at full table (MiB) | peak / size |"
echo "|---|---|---|---|---|---|---|---|---|"
for f in "$@"; do
    size=$(stat -L -c %s "$f")
    cat "$f" >/dev/null
    : >"$dir/cat"
    : >"$dir/serve"
    : >"$dir/report"
    report=0
    if [ "${PERF_REPORT:-0}" = 1 ] && [ "$(head -c 8 "$f")" = PERFILE2 ]; then
        report=1
    fi
    for _ in $(seq "$runs"); do
        timed cat "$f" >>"$dir/cat"
        serve_once "$f" >>"$dir/serve"
        if [ "$report" = 1 ]; then
            timed perf report --stdio -i "$f" >>"$dir/report"
        fi
    done
    c=$(median <"$dir/cat")
    first=$(cut -d' ' -f1 "$dir/serve" | median)
    full=$(cut -d' ' -f2 "$dir/serve" | median)
    h1=$(cut -d' ' -f3 "$dir/serve" | median)
    h2=$(cut -d' ' -f4 "$dir/serve" | median)
    awk -v n="$(basename "$f")" -v s="$size" -v c="$c" -v a="$first" -v b="$full" -v h1="$h1" -v h2="$h2" 'BEGIN {
        printf "| %s | %.0f | %.2f | %.2f | %.1f | %.2f | %.0f | %.0f | %.2f |\n",
            n, s / 1048576, c, a, (c > 0 ? a / c : 0), b, h1 / 1024, h2 / 1024, h2 * 1024 / s }'
    if [ "$report" = 1 ]; then
        printf '\n`perf report --stdio -i %s` (median of %s): %.1f s\n\n' "$(basename "$f")" \
            "$runs" "$(median <"$dir/report")"
    fi
done
echo
echo "Medians of $runs rounds, tally and the anchor by turns. Commands: \`$tally serve FILE\`, then"
echo "\`curl /api/functions?offset=0&limit=100&desc=1\` (first table), \`curl /api/ready\` and the same page again (full table);"
echo "peak RSS is the server's VmHWM; anchor \`cat FILE > /dev/null\`."
