#!/usr/bin/env bash
# Compares tally's Callgrind reader with `wc -l` (the floor: read the bytes,
# find the newlines) and with Valgrind's callgrind_annotate, on large
# profiles written by tally-gen (what Valgrind 3.19 writes with
# --dump-instr=yes --collect-jumps=yes). Measures time (hyperfine),
# throughput, and peak memory (/usr/bin/time -v), and prints a Markdown
# report on standard output; progress goes to standard error.
#
# Environment (all optional):
#   TALLY_BENCH_DIR      scratch directory            (default /tmp/tally-bench)
#   TALLY_BENCH_SIZES    sizes to generate, tally-gen syntax, 1M = 2^20 bytes
#                                                      (default "100M 500M")
#   TALLY_BENCH_EVENTS   ir | cache | branch          (default ir: Callgrind's
#                        default events; cache = the nine --cache-sim events;
#                        branch = those and the four --branch-sim events)
#   TALLY_BENCH_SEED     generator seed               (default 1)
#   TALLY_BENCH_LIKE     cc1: the shape of GCC's cc1 under
#                        --separate-callers=3 (long context names, no debug
#                        information; tally-gen --like cc1); python: CPython's
#                        (a C program, dense calls); default: a C++ program
#                        with debug information
#   TALLY_BENCH_RUNS     hyperfine runs per command   (default 5)
#   TALLY_BENCH_SKIP_ANNOTATE=1   do not run callgrind_annotate (it takes
#                        minutes; it runs once, on the first size only)
#   TALLY_BENCH_KEEP=1   keep the generated profiles (removed by default)
#
# Installs hyperfine and GNU time with apt-get if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${TALLY_BENCH_DIR:-/tmp/tally-bench}
sizes=${TALLY_BENCH_SIZES:-100M 500M}
events=${TALLY_BENCH_EVENTS:-ir}
seed=${TALLY_BENCH_SEED:-1}
like=${TALLY_BENCH_LIKE:-}
like_args=()
like_tag=""
if [ -n "$like" ]; then like_args=(--like "$like"); like_tag=".$like"; fi
runs=${TALLY_BENCH_RUNS:-5}
skip_annotate=${TALLY_BENCH_SKIP_ANNOTATE:-0}
keep=${TALLY_BENCH_KEEP:-0}

log() { echo "generated.sh: $*" >&2; }

install_packages() {
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update >&2
    "${sudo[@]}" apt-get install -y --no-install-recommends "$@" >&2
}

missing=()
command -v hyperfine >/dev/null || missing+=(hyperfine)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    install_packages "${missing[@]}"
fi

log "building tally and tally-gen (profiling profile)"
cargo build --profile profiling -p tally-cli -p tally-gen >&2
target=${CARGO_TARGET_DIR:-$PWD/target}
tally=$target/profiling/tally
gen=$target/profiling/tally-gen

mkdir -p "$dir"
annotate=""
if [ "$skip_annotate" != 1 ]; then
    if command -v callgrind_annotate >/dev/null; then
        annotate=$(command -v callgrind_annotate)
    else
        log "callgrind_annotate not installed (apt-get install valgrind): skipped"
    fi
fi

# Peak RSS in MB from a GNU time report.
rss_of() { awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$1"; }

# Runs a command once under GNU time; prints its peak RSS in MB.
peak_rss() {
    /usr/bin/time -v -o "$dir/time.txt" "$@" >"$dir/stdout.txt" 2>"$dir/stderr.txt" || true
    rss_of "$dir/time.txt"
}

# Mean and standard deviation (seconds) of the command named $2 in a
# hyperfine CSV file $1.
stats_of() {
    awk -F, -v name="$2" 'NR > 1 && $1 == name { printf "%s %s", $2, $3 }' "$1"
}

rows=()
notes=()
first=""
for size in $sizes; do
    file="$dir/callgrind.$size.$events.seed$seed$like_tag.out"
    log "generating $file"
    rm -f "$file"
    "$gen" --size "$size" --events "$events" --seed "$seed" "${like_args[@]}" -o "$file" 2>"$dir/gen.txt"
    bytes=$(stat -c %s "$file")
    mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }')
    counts=$(awk '/cost lines|calls|jumps|functions/ { printf "%s%s %s", sep, $NF, $1 == "cost" ? "cost lines" : $1; sep = ", " }' "$dir/gen.txt")
    speed=$(sed -n 's/.* bytes in \(.*\)$/\1/p' "$dir/gen.txt")
    notes+=("- \`$(basename "$file")\`: $mb MB, $counts; generated in $speed.")
    if [ -z "$first" ]; then first=$file; fi

    # tally's own verdict first: any error or warning is a finding.
    if ! "$tally" check "$file" >"$dir/check.txt" 2>&1 || grep -qi warning "$dir/check.txt"; then
        notes+=("- **\`tally check\` reported a problem on \`$(basename "$file")\`:**")
        notes+=("\`\`\`" "$(cat "$dir/check.txt")" "\`\`\`")
    fi

    converted="$dir/converted.out"
    csv="$dir/hyperfine.csv"
    q=$(printf %q "$file")
    log "timing on $mb MB ($runs runs each)"
    # --ignore-failure: a failing `tally check` is reported above, and the
    # timings are still worth having.
    hyperfine --style basic --ignore-failure --warmup 1 --runs "$runs" --export-csv "$csv" \
        --command-name "wc -l" "wc -l $q" \
        --command-name "tally check" "$(printf %q "$tally") check $q" \
        --command-name "tally convert (load + write)" \
        "$(printf %q "$tally") convert $q -o $(printf %q "$converted") --to callgrind" >&2
    for name in "wc -l" "tally check" "tally convert (load + write)"; do
        read -r mean sd <<<"$(stats_of "$csv" "$name")"
        case $name in
            "wc -l") rss=$(peak_rss wc -l "$file") ;;
            "tally check") rss=$(peak_rss "$tally" check "$file") ;;
            *) rss=$(peak_rss "$tally" convert "$file" -o "$converted" --to callgrind) ;;
        esac
        rows+=("| $mb | $name | $(printf '%.3f ± %.3f' "$mean" "$sd") | $(awk -v b="$bytes" -v t="$mean" 'BEGIN { printf "%.0f", b / 1e6 / t }') | $rss |")
    done
    rm -f "$converted"

    if [ -n "$annotate" ] && [ "$file" = "$first" ]; then
        log "timing callgrind_annotate on $mb MB (one run; this takes minutes)"
        hyperfine --style basic --ignore-failure --warmup 0 --runs 1 --export-csv "$csv" \
            --command-name "callgrind_annotate" \
            "/usr/bin/time -v -o $(printf %q "$dir/annotate-time.txt") $(printf %q "$annotate") $q" >&2
        read -r mean sd <<<"$(stats_of "$csv" "callgrind_annotate")"
        rss=$(rss_of "$dir/annotate-time.txt")
        rows+=("| $mb | callgrind_annotate | $(printf '%.1f' "$mean") (1 run) | $(awk -v b="$bytes" -v t="$mean" 'BEGIN { printf "%.1f", b / 1e6 / t }') | $rss |")
    fi
done

if [ "$keep" != 1 ]; then
    for size in $sizes; do rm -f "$dir/callgrind.$size.$events.seed$seed$like_tag.out"; done
fi

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD 2>/dev/null; then commit="$commit (with local changes)"; fi
valgrind_version=$( (valgrind --version 2>/dev/null) || echo "not installed")

echo "## Callgrind reading: tally vs wc -l vs callgrind_annotate"
echo
echo "Generated profiles (\`tally-gen --events $events --seed $seed${like:+ --like $like}\`, instruction-level"
echo "positions, jumps, compressed names and positions, as Valgrind 3.19 writes with"
echo "\`--dump-instr=yes --collect-jumps=yes\`):"
echo
printf '%s\n' "${notes[@]}"
echo
echo "| file (MB) | command | time (s), mean ± σ | MB/s | peak RSS (MB) |"
echo "|---:|---|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "\`tally check\` streams (validates, sums, counts; keeps names only);"
echo "\`tally convert --to callgrind\` loads the whole profile into memory and"
echo "writes it back (to a file in the scratch directory). Times: hyperfine,"
echo "$runs runs after 1 warm-up (files in the page cache); callgrind_annotate:"
echo "one run. Peak RSS: one run under \`/usr/bin/time -v\`."
echo
echo "Machine: $(nproc) CPUs ($cpu), $mem RAM, $(uname -sr);"
echo "$(rustc --version); $(hyperfine --version); $valgrind_version; tally $commit;"
echo "$(date -u +%Y-%m-%d)."
