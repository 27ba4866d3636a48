#!/usr/bin/env bash
# Default `tally annotate FILE` (`--auto=yes`: source annotation on)
# against `callgrind_annotate FILE` in the same run, taking turns: round i
# runs tally, then callgrind_annotate while i < REF_RUNS (it takes about a
# minute on cc1's profile, so it may run fewer rounds). Each command runs
# once untimed first (page cache). Prints a Markdown table on standard
# output: medians, the ratio, tally's median CPU time (user + system: above
# its wall time when the read uses both cores), peak RSS (/usr/bin/time -f %M), whether
# any source file was found on disk (the annotation summary's first line),
# and the exact commands.
#
#   bench/annotate-speed.sh [FILE...]   # default: cc1.callgrind.out from /tmp/corpus or bench/corpus
#
# Environment (all optional):
#   RUNS       rounds of tally (default 3)
#   REF_RUNS   rounds of callgrind_annotate (default RUNS)
#   TALLY      the tally binary (default: target/profiling/tally, built here)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
ref_runs=${REF_RUNS:-$runs}
die() { echo "annotate-speed.sh: $*" >&2; exit 1; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number"
[[ $ref_runs =~ ^[1-9][0-9]*$ ]] || die "REF_RUNS must be a positive number"
for t in python3 callgrind_annotate /usr/bin/time; do
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

# Prints the medians in seconds of the two commands' wall-clock times, then
# the median CPU time of the first, one a line: TALLY_RUNS REF_RUNS
# TALLY_COMMAND REF_COMMAND.
alternate() {
    python3 - "$@" <<'EOF'
import resource, statistics, subprocess, sys, time
runs, ref_runs, cmds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:5]
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
times, cpu = [[], []], []
def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
for c in cmds:
    subprocess.run(c, shell=True, check=True, **quiet)
for i in range(max(runs, ref_runs)):
    for k, (c, n) in enumerate(zip(cmds, (runs, ref_runs))):
        if i < n:
            start, start_cpu = time.perf_counter(), children_cpu()
            subprocess.run(c, shell=True, check=True, **quiet)
            times[k].append(time.perf_counter() - start)
            if k == 0:
                cpu.append(children_cpu() - start_cpu)
for t in times + [cpu]:
    print(f"{statistics.median(t):.4f}")
EOF
}

echo "Host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; tally $runs rounds, callgrind_annotate $ref_runs, taking turns."
echo
echo '| file | MB | `tally annotate` | `callgrind_annotate` | ratio | tally CPU | tally peak RSS | reference peak RSS | sources found |'
echo '|---|---:|---:|---:|---:|---:|---:|---:|---|'
commands=()
for f in "$@"; do
    bytes=$(stat -c %s "$f")
    tally_cmd="$TALLY annotate $f"
    ref_cmd="callgrind_annotate $f"
    # The annotation summary's first line: the cost of the files found
    # and annotated (0 when no source is on disk).
    found=$($tally_cmd 2>/dev/null | sed -n 's/^ *\([0-9,]*\( ([^)]*)\)\{0,1\}\) *annotated: files known, found and annotated$/\1/p' | head -1)
    [ -n "$found" ] || found="no summary"
    mapfile -t medians < <(alternate "$runs" "$ref_runs" "$tally_cmd" "$ref_cmd")
    [ "${#medians[@]}" = 3 ] || die "timing failed"
    rss_t=$(/usr/bin/time -f %M $tally_cmd 2>&1 >/dev/null | tail -1)
    rss_r=$(/usr/bin/time -f %M $ref_cmd 2>&1 >/dev/null | tail -1)
    awk -v f="$(basename "$f")" -v b="$bytes" -v t="${medians[0]}" -v r="${medians[1]}" \
        -v c="${medians[2]}" -v rt="$rss_t" -v rr="$rss_r" -v found="$found" 'BEGIN {
        printf "| %s | %.1f | %.3f s | %.2f s | %.0f× | %.3f s | %.1f MiB | %.1f MiB | %s |\n",
            f, b / 1e6, t, r, r / t, c, rt / 1024, rr / 1024, found
    }'
    commands+=("$tally_cmd" "$ref_cmd")
done
echo
echo "\"sources found\": the cost in files whose source was found and annotated (\`Annotation summary\`); 0 means --auto=yes looked for every file and found none."
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "Commands (tally is $TALLY):"
echo
for c in "${commands[@]}"; do
    echo "    $c"
done
