#!/usr/bin/env bash
# tally against Valgrind's and GNU's tools on the real-profile corpus
# (bench/corpus.sh, built first or reused), with `wc -l` on the same file as
# the floor. Every pair is timed with hyperfine in this one run, and the
# ratios printed are of these timings. Prints a Markdown report on standard
# output; progress goes to standard error.
#
#   bench/compare.sh [CORPUS-DIR]     # default bench/corpus
#
# Environment (all optional):
#   TALLY_BENCH_RUNS       hyperfine runs of the fast commands (default 10)
#   TALLY_BENCH_SLOW_RUNS  runs of callgrind_annotate on the cc1 profile
#                          (default 1: it takes about a minute)
#   TALLY_CORPUS_SKIP=cc1  passed to corpus.sh: leave the cc1 profile out
#   TALLY_BIN              a tally binary to time (default: build this tree's)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/bench/corpus}
runs=${TALLY_BENCH_RUNS:-10}
slow_runs=${TALLY_BENCH_SLOW_RUNS:-1}
log() { echo "compare.sh: $*" >&2; }

for t in hyperfine callgrind_annotate cg_annotate cg_merge cg_diff gprof python3; do
    command -v "$t" >/dev/null || { log "needs $t"; exit 1; }
done

log "corpus in $dir"
corpus_table=$("$root/bench/corpus.sh" "$dir")
tally=${TALLY_BIN:-}
if [ -z "$tally" ]; then
    log "building tally (profiling profile)"
    (cd "$root" && cargo build --profile profiling -p tally-cli >&2)
    tally=${CARGO_TARGET_DIR:-$root/target}/profiling/tally
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# Mean and σ (seconds) of each command of a hyperfine JSON export, one
# line per command: NAME<TAB>MEAN<TAB>STDDEV.
means() {
    python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print("%s\t%.6f\t%.6f" % (r["command"], r["mean"], r["stddev"] or 0))' "$1"
}

rows=()
# Times a reference command, tally's command and `wc -l` on the file;
# adds a row with both ratios.
#   compare WHAT FILE REF-NAME REF-RUNS REF-CMD TALLY-CMD
compare() {
    local what=$1 file=$2 ref_name=$3 ref_runs=$4 ref_cmd=$5 tally_cmd=$6
    if [ ! -s "$file" ]; then
        rows+=("| $what | | | | | not in the corpus |")
        return
    fi
    log "$what"
    hyperfine -N --style basic --warmup 1 --runs "$runs" --export-json "$scratch/t.json" \
        -n wc "wc -l $file" -n tally "$tally_cmd" >&2
    local w t ws ts r rs
    IFS=$'\t' read -r _ w ws < <(means "$scratch/t.json" | grep '^wc')
    IFS=$'\t' read -r _ t ts < <(means "$scratch/t.json" | grep '^tally')
    local warm=1
    [ "$ref_runs" -gt 1 ] || warm=0
    hyperfine -N --style basic --warmup "$warm" --runs "$ref_runs" --export-json "$scratch/r.json" \
        -n ref "$ref_cmd" >&2
    IFS=$'\t' read -r _ r rs < <(means "$scratch/r.json")
    rows+=("$(awk -v what="$what" -v ref="$ref_name" -v w="$w" -v t="$t" -v ts="$ts" -v r="$r" -v rs="$rs" -v n="$ref_runs" 'BEGIN {
        fmt = (r >= 10) ? "%.1f" : "%.3f"
        printf "| %s | %.4f | %.4f ± %.4f | %s: " fmt " ± " fmt " (%d runs) | **%.0f×** | %.1f× |", what, w, t, ts, ref, r, rs, n, r / t, t / w }')")
}

cc1=$dir/cc1.callgrind.out
py=$dir/python.callgrind.out
a=$dir/python.a.cachegrind.out
b=$dir/python.b.cachegrind.out
gmon=$dir/lua.gmon.out
prog=$dir/luarun-pg

compare "cc1: annotate --inclusive=yes --tree=both" "$cc1" callgrind_annotate "$slow_runs" \
    "callgrind_annotate --inclusive=yes --tree=both $cc1" \
    "$tally annotate --inclusive=yes --tree=both $cc1"
compare "cc1: check (reading only)" "$cc1" "callgrind_annotate --auto=no" "$slow_runs" \
    "callgrind_annotate --auto=no $cc1" "$tally check -q $cc1"
compare "python: annotate --inclusive=yes --tree=both" "$py" callgrind_annotate 3 \
    "callgrind_annotate --inclusive=yes --tree=both $py" \
    "$tally annotate --inclusive=yes --tree=both $py"
compare "python Cachegrind: annotate" "$a" cg_annotate "$runs" \
    "cg_annotate $a" "$tally annotate $a"
compare "python Cachegrind: merge A B" "$a" cg_merge "$runs" \
    "cg_merge -o $scratch/cg.merged $a $b" "$tally merge -o $scratch/tally.merged $a $b"
compare "python Cachegrind: diff A B" "$a" cg_diff "$runs" \
    "cg_diff $a $b" "$tally diff $a $b"
if [ -s "$gmon" ]; then
    compare "Lua gmon.out: gprof -b" "$gmon" "gprof -b" "$runs" \
        "gprof -b $prog $gmon" "$tally gprof -b $prog $gmon"
    compare "Lua gmon.out: gprof -b -l" "$gmon" "gprof -b -l" "$runs" \
        "gprof -b -l $prog $gmon" "$tally gprof -b -l $prog $gmon"
fi

size_of() { [ -s "$1" ] && awk -v b="$(stat -L -c %s "$1")" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
echo "## Real corpus: tally against Valgrind's and GNU's tools"
echo
echo "The corpus (\`bench/corpus.sh\`):"
echo
echo "$corpus_table"
echo
echo "| command | \`wc -l\` (s) | tally (s) | reference (s) | speed-up | tally / \`wc -l\` |"
echo "|---|---:|---:|---|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "\`wc -l\` reads the first file named (the floor of any reader). Merge and"
echo "diff read both Cachegrind files ($(size_of "$a") and $(size_of "$b")). tally"
echo "and \`wc -l\`: hyperfine -N, $runs runs after a warm-up; the reference"
echo "tools as stated."
echo
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "Machine: $(nproc) CPUs ($cpu), $(uname -sr); $(rustc --version);"
echo "$(hyperfine --version); $(valgrind --version); $(gprof --version | head -1);"
echo "$("$tally" --version); $(date -u '+%Y-%m-%d %H:%M UTC');"
echo "load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)."
