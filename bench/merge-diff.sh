#!/usr/bin/env bash
# Times `tally merge` against cg_merge and `tally diff` against cg_diff on
# Cachegrind files (a typical one, ~2.5 MB, and one of
# ~80 MB), and `tally merge` of 100 Callgrind profiles of a test program.
# Prints a Markdown report on standard output; progress on standard error.
#
# The Cachegrind files are made by tally-gen (a Callgrind profile shaped
# like CPython's, with Cachegrind's thirteen cache and branch events)
# converted with `tally convert --to cachegrind`: line level, as
# Cachegrind writes. The second input of each pair is the first
# merged with itself (same functions and lines, other counts), as two runs
# of one program are. The Callgrind profiles are real: Valgrind runs of
# tests/data/dcpi/real/workload (committed; tests/data/bin is built by
# tests/data/generate.sh) with 100 different seeds.
#
# Environment (all optional):
#   TALLY_BENCH_DIR    scratch directory (default /tmp/tally-bench-md)
#   TALLY_BENCH_RUNS   hyperfine runs for the large files (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${TALLY_BENCH_DIR:-/tmp/tally-bench-md}
runs=${TALLY_BENCH_RUNS:-3}
log() { echo "merge-diff.sh: $*" >&2; }

command -v hyperfine >/dev/null || { log "needs hyperfine"; exit 1; }
for t in cg_merge cg_diff valgrind; do
    command -v "$t" >/dev/null || { log "needs $t (valgrind)"; exit 1; }
done

log "building (profiling profile)"
cargo build --profile profiling -p tally-cli -p tally-gen >&2
target=${CARGO_TARGET_DIR:-$PWD/target}
tally=$target/profiling/tally
gen=$target/profiling/tally-gen
mkdir -p "$dir"

make_pair() { # NAME SIZE
    local name=$1 size=$2
    if [ ! -s "$dir/$name.b.cachegrind" ]; then
        log "making $name ($size of Callgrind text → Cachegrind)"
        "$gen" --like python --events branch --size "$size" -o "$dir/$name.callgrind" > /dev/null
        "$tally" convert "$dir/$name.callgrind" --to cachegrind -o "$dir/$name.a.cachegrind"
        "$tally" merge "$dir/$name.a.cachegrind" "$dir/$name.a.cachegrind" \
            -o "$dir/$name.b.cachegrind"
        rm -f "$dir/$name.callgrind"
    fi
}
make_pair python-small 4M
make_pair python-large 200M

if [ ! -s "$dir/cg/workload.100.out" ]; then
    log "100 Callgrind runs of tests/data/dcpi/real/workload"
    mkdir -p "$dir/cg"
    for i in $(seq 1 100); do
        env -i PATH=/usr/bin:/bin valgrind -q --tool=callgrind --dump-instr=yes \
            --collect-jumps=yes --callgrind-out-file="$dir/cg/workload.$i.out" \
            tests/data/dcpi/real/workload 1500 "$i" > /dev/null 2>&1
    done
fi

size() { stat -c %s "$1"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

echo "### Cachegrind files"
echo
for name in python-small python-large; do
    a=$dir/$name.a.cachegrind b=$dir/$name.b.cachegrind
    r=$runs
    [ "$name" = python-small ] && r=10
    echo "**$name**: A $(mb "$(size "$a")") MB, B $(mb "$(size "$b")") MB, $(grep -c '^fn=' "$a") functions, $(grep -c '^[0-9]' "$a") lines"
    echo
    hyperfine -N -w 1 -r "$r" --export-markdown "$dir/$name.merge.md" \
        -n "tally merge" "$tally merge $a $b -o $dir/out.tally" \
        -n "cg_merge" "cg_merge -o $dir/out.cg $a $b" >&2
    cat "$dir/$name.merge.md"
    echo
    hyperfine -N -w 1 -r "$r" --export-markdown "$dir/$name.diff.md" \
        -n "tally diff" "$tally diff $a $b -o $dir/out.tally" \
        -n "cg_diff" "cg_diff $a $b" >&2
    cat "$dir/$name.diff.md"
    echo
done

echo "### 100 Callgrind profiles (--dump-instr=yes --collect-jumps=yes)"
echo
total=0
for f in "$dir"/cg/workload.*.out; do total=$((total + $(size "$f"))); done
echo "$(ls "$dir"/cg/workload.*.out | wc -l) files, $(mb "$total") MB in all"
echo
hyperfine -N -w 1 -r 5 --export-markdown "$dir/cg.md" \
    -n "tally merge (100 files)" "$tally merge $(ls "$dir"/cg/workload.*.out | tr '\n' ' ') -o $dir/out.callgrind" \
    -n "tally merge --combine-parts" "$tally merge --combine-parts $(ls "$dir"/cg/workload.*.out | tr '\n' ' ') -o $dir/out.callgrind" >&2
cat "$dir/cg.md"
