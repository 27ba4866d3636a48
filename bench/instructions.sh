#!/usr/bin/env bash
# Instructions executed by two tally binaries on the same commands, counted
# by Valgrind (`--tool=cachegrind --cache-sim=no`): a measure that does not
# move with the host's load, for judging a change to a hot loop where
# wall-clock runs differ by more than the change. It says nothing of cache
# misses, page faults or branch mispredictions: confirm a gain with
# interleaved wall-clock runs (hyperfine) before believing it. Prints a
# Markdown table on standard output.
#
#   bench/instructions.sh OLD-TALLY NEW-TALLY [CORPUS-DIR]   # default bench/corpus
#
# Each command runs once under Valgrind. Valgrind runs one thread at a
# time, so a two-thread read divides its work by timing and the count
# moves a little from run to run; the reads of the large cc1 profile are
# therefore pinned to one CPU (`taskset -c 0`), which makes tally read on
# one thread.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
old=$1
new=$2
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${3:-$root/bench/corpus}
die() { echo "instructions.sh: $*" >&2; exit 1; }
for t in valgrind taskset; do
    command -v "$t" >/dev/null || die "needs $t"
done
for b in "$old" "$new"; do
    [ -x "$b" ] || die "$b: not an executable"
done

# Instructions of one run: PIN BINARY ARGS..., PIN `1` to run on one CPU;
# nothing if the run failed (the caller says which).
count() {
    local pin=$1
    shift
    local vg=(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null)
    [ "$pin" = 1 ] && vg=(taskset -c 0 "${vg[@]}")
    local log
    log=$("${vg[@]}" "$@" 2>&1 >/dev/null) || return 0
    sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' <<<"$log" | tr -d ,
}

a=$dir/python.a.cachegrind.out
b=$dir/python.b.cachegrind.out
py=$dir/python.callgrind.out
cc1=$dir/cc1.callgrind.out
rows=(
    "check -q A|check -q $a"
    "annotate A|annotate $a"
    "merge A B|merge $a $b"
    "diff A B|diff $a $b"
    "check -q python.callgrind.out|check -q $py"
    "annotate --auto=no --inclusive=yes python.callgrind.out|annotate --auto=no --inclusive=yes $py"
)
[ -s "$cc1" ] && rows+=("check -q cc1 (one thread)|@check -q $cc1")

echo "| command | old | new | change |"
echo "|---|---:|---:|---:|"
for row in "${rows[@]}"; do
    label=${row%%|*}
    args=${row#*|}
    pin=0
    if [ "${args:0:1}" = @ ]; then
        pin=1
        args=${args:1}
    fi
    # shellcheck disable=SC2086 # the arguments are words
    o=$(count $pin "$old" $args)
    # shellcheck disable=SC2086
    n=$(count $pin "$new" $args)
    [ -n "$o" ] && [ -n "$n" ] || die "$label: a run failed (is $dir the corpus?)"
    awk -v l="$label" -v o="$o" -v n="$n" 'BEGIN {
        printf "| `%s` | %.1f M | %.1f M | %+.1f %% |\n", l, o / 1e6, n / 1e6, 100 * (n - o) / o
    }'
done
