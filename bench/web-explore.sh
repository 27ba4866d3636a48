#!/usr/bin/env bash
# What a person exploring a large profile in `tally serve` waits for, in
# Chromium (tests/web/bench-explore.mjs, playwright-core): the first table
# after the URL is printed, a selection's callers and callees, a transform
# applied to the table and the open view, one level of the call tree
# opened; each cold (first round) and warm (median of the rest).
#
#   bench/web-explore.sh PROFILE [ROUNDS]
#
# Uses target/release/tally (or $TALLY); needs chromium, node and
# `npm ci` in tests/web.
set -euo pipefail
cd "$(dirname "$0")/.."
tally=${TALLY:-target/release/tally}
profile=$1
rounds=${2:-4}
out=$(mktemp)
t0=$(date +%s.%N)
"$tally" serve "$profile" >"$out" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$out"' EXIT
until grep -q http "$out" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { echo "tally serve ended" >&2; exit 1; }
    sleep 0.02
done
t1=$(date +%s.%N)
url=$(grep -o 'http://[^ ]*' "$out")
result=$(cd tests/web && node bench-explore.mjs "$url" "$rounds")
rss=$(awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status)
printf '{"profile": "%s", "size_mib": %d, "to_url_s": %.2f, "server_peak_rss_mib": %s, "page_ms": %s}\n' \
    "$(basename "$profile")" $(( $(stat -c %s "$profile") / 1048576 )) \
    "$(echo "$t1 - $t0" | bc)" "$rss" "$result"
