#!/usr/bin/env bash
# `tally merge -o X A B` against `cg_merge -o Y A B` and `tally diff A B`
# against `cg_diff A B`, in the same run, taking turns (bench/alternate.py:
# one untimed run of each, then round i of each command in turn), on:
#
#   - a generated pair of about 100 MB each: `tally-gen --like python
#     --events branch` (a Callgrind profile shaped like CPython's, with
#     Cachegrind's thirteen cache and branch events) at seeds 1 and 2,
#     converted with `tally convert --to cachegrind` (line level, as
#     Cachegrind writes);
#   - the real CPython pair when present: python.a.cachegrind.out and
#     python.b.cachegrind.out from bench/corpus.sh (Cachegrind of CPython
#     running bench/workloads/workload.py a and b), looked for in
#     CORPUS, /tmp/corpus, bench/corpus and /work/corpus.
#
# tally's outputs are durable (temporary file, fsync, rename, folder
# fsync), cg_merge's are not; tally diff writes to a file (-o), cg_diff to
# standard output (to /dev/null here). Prints a Markdown table on standard
# output: medians, the ratio, peak RSS (/usr/bin/time -f %M, one run
# each), the exact commands; then the writer's throughput: `tally convert
# --to cachegrind` of the generated A (parse and write) and `tally merge
# -o X A` of it alone (read, copy, durable write), in MB written per
# second; last the floor any program pays for the merge's output: `cat
# A B` into a temporary file, `sync` of it, `mv` over the target (the
# same bytes as the merged pair when their functions differ), timed by
# turns with tally's merge and with its merge to /dev/null (everything
# but the write). Progress on standard error.
#
#   bench/merge-diff.sh
#
# Environment (all optional):
#   RUNS     rounds (default 3); cg_diff takes about a minute a round on
#            the generated pair, so REF_RUNS may be lower
#   REF_RUNS rounds of cg_merge and cg_diff on the generated pair (default RUNS)
#   SIZE     tally-gen's size of the Callgrind text (default 230M: about
#            100 MB of Cachegrind)
#   DIR      scratch directory (default /tmp/tally-bench-md)
#   CORPUS   where the real pair is
#   TALLY    the tally binary (default: target/profiling/tally, built here)
#   GEN      the tally-gen binary (default: target/profiling/tally-gen, built here)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
ref_runs=${REF_RUNS:-$runs}
size=${SIZE:-230M}
dir=${DIR:-/tmp/tally-bench-md}
die() { echo "merge-diff.sh: $*" >&2; exit 1; }
log() { echo "merge-diff.sh: $*" >&2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number"
[[ $ref_runs =~ ^[1-9][0-9]*$ ]] || die "REF_RUNS must be a positive number"
for t in python3 cg_merge cg_diff /usr/bin/time; do
    command -v "$t" >/dev/null || die "needs $t"
done

target=${CARGO_TARGET_DIR:-$root/target}
if [ -z "${TALLY:-}" ]; then
    (cd "$root" && cargo build --profile profiling -p tally-cli >&2)
    TALLY=$target/profiling/tally
fi
gen=${GEN:-}
if [ -z "$gen" ]; then
    (cd "$root" && cargo build --profile profiling -p tally-gen >&2)
    gen=$target/profiling/tally-gen
fi
[ -x "$TALLY" ] || die "$TALLY: not an executable"
mkdir -p "$dir"

for seed in 1 2; do
    f=$dir/gen$seed.$size.cachegrind
    if [ ! -s "$f" ]; then
        log "making $f (tally-gen --like python --events branch --size $size --seed $seed, then convert)"
        "$gen" --like python --events branch --size "$size" --seed "$seed" -o "$dir/gen.callgrind" >/dev/null
        "$TALLY" convert "$dir/gen.callgrind" --to cachegrind -o "$f"
        rm -f "$dir/gen.callgrind"
    fi
done

real_a= real_b=
for d in ${CORPUS:-} /tmp/corpus "$root/bench/corpus" /work/corpus; do
    if [ -s "$d/python.a.cachegrind.out" ] && [ -s "$d/python.b.cachegrind.out" ]; then
        real_a=$d/python.a.cachegrind.out real_b=$d/python.b.cachegrind.out
        break
    fi
done
[ -n "$real_a" ] || log "no real CPython pair (bench/corpus.sh makes it): the generated pair only"

mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f", b / 1e6 }'; }
rss() { /usr/bin/time -f %M sh -c "$1" 2>&1 >/dev/null | tail -1 | awk '{ printf "%.0f MB", $1 / 1024 }'; }

# Medians in seconds of the two commands, one a line: RUNS REF_RUNS
# TALLY_COMMAND REF_COMMAND (turns as bench/alternate.py takes them).
alternate() {
    python3 - "$@" <<'EOF'
import statistics, subprocess, sys, time
runs, ref_runs, cmds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:5]
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
times = [[], []]
for c in cmds:
    subprocess.run(c, shell=True, check=True, **quiet)
for i in range(max(runs, ref_runs)):
    for k, (c, n) in enumerate(zip(cmds, (runs, ref_runs))):
        if i < n:
            start = time.perf_counter()
            subprocess.run(c, shell=True, check=True, **quiet)
            times[k].append(time.perf_counter() - start)
for t in times:
    print(f"{statistics.median(t):.4f}")
EOF
}

echo "Host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $runs rounds of tally, $ref_runs of the reference on the generated pair, taking turns; tally = $TALLY."
echo
echo '| input | command | reference | tally | reference | ratio | tally peak RSS | reference peak RSS | commands |'
echo '|---|---|---|---:|---:|---:|---:|---:|---|'
row() { # NAME REF_RUNS A B
    local name=$1 rr=$2 a=$3 b=$4 t r m
    local what="$name, $(mb "$a") + $(mb "$b") MB"
    for op in merge diff; do
        if [ $op = merge ]; then
            t="$TALLY merge -o $dir/out.tally $a $b"
            r="cg_merge -o $dir/out.cg $a $b"
        else
            t="$TALLY diff $a $b -o $dir/out.tally"
            r="cg_diff $a $b"
        fi
        log "$what: $op, $runs + $rr rounds"
        m=$(alternate "$runs" "$rr" "$t" "$r")
        local ts rs
        ts=$(sed -n 1p <<<"$m") rs=$(sed -n 2p <<<"$m")
        echo "| $what | \`$op\` | cg_$op | $(awk -v s="$ts" 'BEGIN { printf "%.3f s", s }') | $(awk -v s="$rs" 'BEGIN { printf "%.3f s", s }') | $(awk -v a="$ts" -v b="$rs" 'BEGIN { printf "%.1f", b / a }') | $(rss "$t") | $(rss "$r") | \`$t\`; \`$r\` |"
    done
}
[ -n "$real_a" ] && row "CPython A B" "$runs" "$real_a" "$real_b"
row "generated seeds 1, 2" "$ref_runs" "$dir/gen1.$size.cachegrind" "$dir/gen2.$size.cachegrind"

echo
echo '| writer | written | median | MB/s | command |'
echo '|---|---:|---:|---:|---|'
a=$dir/gen1.$size.cachegrind
writer() { # WHAT COMMAND OUTPUT
    local s
    s=$(python3 "$root/bench/alternate.py" "$runs" "$2" | awk '{ print $1 / 1000 }')
    echo "| $1 | $(mb "$3") MB | $(awk -v s="$s" 'BEGIN { printf "%.3f s", s }') | $(awk -v s="$s" -v b="$(stat -c %s "$3")" 'BEGIN { printf "%.0f", b / 1e6 / s }') | \`$2\` |"
}
writer "convert to Cachegrind (read, model, write, fsync)" "$TALLY convert $a --to cachegrind -o $dir/out.convert" "$dir/out.convert"
writer "merge of one file (read, scan, copy, fsync)" "$TALLY merge -o $dir/out.one $a" "$dir/out.one"

b=$dir/gen2.$size.cachegrind
floor="cat $a $b > $dir/out.floor.tmp && sync $dir/out.floor.tmp && mv $dir/out.floor.tmp $dir/out.floor"
merge="$TALLY merge -o $dir/out.tally $a $b"
unwritten="$TALLY merge -o /dev/null $a $b"
log "floor: cat, sync, mv of the generated pair against tally merge (and to /dev/null), $runs rounds"
m=$(python3 "$root/bench/alternate.py" "$runs" "$merge" "$unwritten" "$floor" | awk '{ printf "%.3f s\n", $1 / 1000 }')
echo
echo '| the generated pair | median | command |'
echo '|---|---:|---|'
echo "| tally merge (durable write) | $(sed -n 1p <<<"$m") | \`$merge\` |"
echo "| tally merge to /dev/null (read, scan, plan, format; nothing written) | $(sed -n 2p <<<"$m") | \`$unwritten\` |"
echo "| floor: read both, write $(mb "$dir/out.floor") MB, sync, rename | $(sed -n 3p <<<"$m") | \`$floor\` |"
rm -f "$dir/out.tally" "$dir/out.cg" "$dir/out.convert" "$dir/out.one" "$dir/out.floor"
