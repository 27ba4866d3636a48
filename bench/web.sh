#!/usr/bin/env bash
# Start-up of `tally serve` and size of `tally report --html` on large
# profiles: the time until the URL is printed, until the first /api answer
# (/api/meta), until the first page of the functions table is answered
# (self costs from the sums while gprof's analysis runs), until that
# analysis is done (/api/ready: inclusive costs, calls, cycles), the
# server's CPU and peak memory (VmHWM) then, and the report's time, CPU,
# peak memory and size.
#
#   bench/web.sh PROFILE...        (default: a 100 MB tally-gen file, seed 1)
#
# Uses target/profiling/tally (build it first: cargo build --profile profiling -p tally-cli).
set -euo pipefail
cd "$(dirname "$0")/.."
tally=${TALLY:-target/profiling/tally}
dir=${TALLY_BENCH_DIR:-/tmp/tally-bench-web}
mkdir -p "$dir"
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    gen="$dir/gen-100M.out"
    [ -f "$gen" ] || target/profiling/tally-gen --size 100M --seed 1 >"$gen"
    files=("$gen")
fi
now() { date +%s.%N; }
echo "| profile | size | to URL (s) | to first /api answer (s) | to first page (s) | CPU to first page (s) | to full table (s) | CPU to full table (s) | server peak RSS (MiB) | report (s wall, s user) | report peak RSS (MiB) | report size (KiB) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in "${files[@]}"; do
    out="$dir/serve.out"
    t0=$(now)
    "$tally" serve "$f" >"$out" 2>"$dir/serve.err" &
    pid=$!
    until grep -q http "$out" 2>/dev/null; do
        kill -0 $pid 2>/dev/null || { cat "$dir/serve.err" >&2; exit 1; }
        sleep 0.05
    done
    t1=$(now)
    url=$(grep -o 'http://[^ ]*' "$out")
    base=${url%%/\?t=*}
    token=${url##*t=}
    curl -sf "$base/api/meta?t=$token" >/dev/null
    tm=$(now)
    curl -sf "$base/api/functions?t=$token&limit=100" >/dev/null
    t2=$(now)
    cpu1=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' /proc/$pid/stat)
    curl -sf "$base/api/ready?t=$token" >/dev/null
    t3=$(now)
    rss=$(awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status)
    cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' /proc/$pid/stat)
    kill $pid; wait $pid 2>/dev/null || true
    /usr/bin/time -f '%e %U %M' -o "$dir/report.time" "$tally" report "$f" --html "$dir/report.html" 2>/dev/null
    read -r rw ru rm <"$dir/report.time"
    size=$(( $(stat -c %s "$dir/report.html") / 1024 ))
    printf '| %s | %s MiB | %.2f | %.2f | %.2f | %s | %.2f | %s | %s | %s, %s | %s | %s |\n' "$(basename "$f")" \
        $(( $(stat -c %s "$f") / 1048576 )) "$(echo "$t1 - $t0" | bc)" "$(echo "$tm - $t0" | bc)" \
        "$(echo "$t2 - $t0" | bc)" "$cpu1" "$(echo "$t3 - $t0" | bc)" \
        "$cpu" "$rss" "$rw" "$ru" $((rm / 1024)) "$size"
done
