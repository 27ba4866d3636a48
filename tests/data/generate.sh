#!/usr/bin/env bash
# generate.sh - rebuild the test programs and regenerate every Valgrind
# profile (callgrind/, cachegrind/) and every reference report of the real
# tools (callgrind_annotate, cg_annotate, cg_merge, cg_diff) in tests/data.
#
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Needs: bash, gcc, valgrind (3.19 was used; see VERSIONS).
# Re-runnable: every output is removed and written anew.  Everything runs
# from tests/data with relative paths, so the paths printed inside the
# reports are stable.  What still varies between runs: the `pid:` lines
# of callgrind profiles (and the PID in callgrind_annotate's reports), and a
# few instructions in the threads program's profiles (barrier/futex code).
# What varies between checkouts: the absolute path of the binaries in
# `ob=`/`cob=` lines and in the reports' [object] suffixes.
#
# The hand-written files under spec/ and bad/ and the files from other
# profilers under other/ are NOT touched here (see generate-other.sh).

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export LC_ALL=C TZ=UTC
# callgrind_annotate, cg_annotate and cg_diff are Perl scripts: fix Perl's
# hash order so that ties come out in the same order every time.
export PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0

for tool in gcc valgrind callgrind_annotate cg_annotate cg_merge cg_diff; do
    command -v "$tool" >/dev/null || { echo "generate.sh: $tool not found" >&2; exit 1; }
done

# Cache geometry is given explicitly: otherwise Valgrind takes it from the
# host CPU (cpuid), and cache miss counts would differ between machines.
CACHE_GEOMETRY=(--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64)

# gcc flags.  -fdebug-prefix-map makes the source paths in the debug info
# (and so fl=/fi=/fe= in the profiles) relative: ./src/<name>.c
CFLAGS_COMMON=(-g -fno-omit-frame-pointer -Wall -Wextra -fdebug-prefix-map="$PWD"=.)

PROGRAMS=(recursion mutual threads inline workload)
declare -A OPT=([recursion]=-O1 [mutual]=-O1 [threads]=-O1 [inline]=-O2 [workload]=-O2)

MANIFEST=MANIFEST.tsv

# Valgrind runs get a fixed, minimal environment: the environment strings
# sit on the client's stack, so any difference (OLDPWD, a longer PATH, ...)
# moves the stack and changes instruction and cache-miss counts in ld.so and
# libc. env -i also keeps VALGRIND_OPTS and ~/.valgrindrc out.
VG=(env -i PATH=/usr/bin:/bin LC_ALL=C valgrind -q)

log() { printf '%s\n' "$*" >&2; }

# manifest FILE WORD... : one line "FILE<TAB>command" in MANIFEST.tsv
manifest() {
    local file=$1
    shift
    local cmd="$*"
    cmd=$(printf '%s' "$cmd" | tr -s ' ')
    printf '%s\t%s\n' "$file" "${cmd% }" >> "$MANIFEST"
}

# ---------------------------------------------------------------- build
build() {
    mkdir -p bin
    for p in "${PROGRAMS[@]}"; do
        log "build bin/$p"
        gcc "${CFLAGS_COMMON[@]}" "${OPT[$p]}" -o "bin/$p" "src/$p.c" -pthread
    done
}

# ------------------------------------------------------------- versions
versions() {
    {
        echo "# Tools that produced the files in callgrind/ and cachegrind/ (generate.sh)."
        echo "valgrind: $(valgrind --version)"
        echo "gcc: $(gcc --version | head -n1)"
        echo "arch: $(uname -m)"
        if command -v dpkg-query >/dev/null; then
            for pkg in libc6 libc6-dbg valgrind; do
                v=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
                echo "dpkg $pkg: ${v:-not installed}"
            done
        fi
        echo "cache geometry (callgrind --cache-sim=yes and cachegrind): ${CACHE_GEOMETRY[*]}"
    } > VERSIONS
}

# ------------------------------------------------------------ callgrind
# run_callgrind PROGRAM VARIANT [VALGRIND OPTIONS...] [-- PROGRAM ARGS...]
run_callgrind() {
    local prog=$1 variant=$2
    shift 2
    local vopts=() pargs=()
    while (($#)); do
        if [[ $1 == -- ]]; then shift; pargs=("$@"); break; fi
        vopts+=("$1"); shift
    done
    local out="callgrind/$prog.$variant.out"
    rm -f "$out" "$out".[0-9]* "$out"-[0-9]*
    log "callgrind $out ${vopts[*]}"
    "${VG[@]}" --tool=callgrind --callgrind-out-file="$out" "${vopts[@]}" \
        "bin/$prog" "${pargs[@]}" > /dev/null
    # --separate-threads=yes leaves an empty file under the base name
    # beside the per-thread files -01, -02, ...: drop it.
    if [[ -f $out && ! -s $out ]]; then rm -f "$out"; fi
    local f
    for f in "$out" "$out".[0-9]* "$out"-[0-9]*; do
        [[ -f $f ]] || continue
        manifest "$f" "${VG[@]}" --tool=callgrind --callgrind-out-file="$out" \
            "${vopts[@]}" "bin/$prog" "${pargs[@]}"
    done
}

# The last basic block number of a run, from the default profile's
# "desc: Timerange: Basic block 0 - N" line.
total_bbs() {
    sed -n 's/^desc: Timerange: Basic block 0 - \([0-9]*\)$/\1/p' "callgrind/$1.default.out"
}

# --dump-every-bb=N with N chosen so that the run makes 3-5 dump files
# (dumps only happen at Valgrind's periodic checks, so try a few divisors).
run_dumpevery() {
    local prog=$1 total n count div
    total=$(total_bbs "$prog")
    for div in 4 5 3 6; do
        n=$((total / div))
        # run into a scratch name first, count the files
        local tmp="callgrind/.probe.$prog"
        rm -f "$tmp" "$tmp".[0-9]*
        "${VG[@]}" --tool=callgrind --callgrind-out-file="$tmp" --dump-every-bb="$n" \
            "bin/$prog" > /dev/null
        count=$(find callgrind -maxdepth 1 -name ".probe.$prog*" | wc -l)
        rm -f "$tmp" "$tmp".[0-9]*
        if ((count >= 3 && count <= 5)); then
            run_callgrind "$prog" dumpevery --dump-every-bb="$n"
            # The same dumps as the parts of one file.
            run_callgrind "$prog" combined --dump-every-bb="$n" --combine-dumps=yes
            return
        fi
    done
    echo "generate.sh: no --dump-every-bb value gives 3-5 dumps for $prog" >&2
    exit 1
}

# The variant matrix.  Every option combination appears for the small
# programs; the bigger ones (threads, workload, inline) get fewer variants to
# keep tests/data small (most of each profile is ld.so/libc start-up anyway).
declare -A VARIANTS=(
    [recursion]="default instr jumps cache callers2 recs dumpevery nocompress"
    [mutual]="default instr jumps cache callers2 recs dumpevery nocompress"
    [threads]="default jumps cache threads"
    [inline]="default instr jumps cache nocompress"
    [workload]="default jumps callers2 dumpevery combo"
)

callgrind_variant() {
    local p=$1 v=$2
    case $v in
        default)    run_callgrind "$p" default ;;
        instr)      run_callgrind "$p" instr --dump-instr=yes ;;
        jumps)      run_callgrind "$p" jumps --dump-instr=yes --collect-jumps=yes ;;
        cache)      run_callgrind "$p" cache --cache-sim=yes --branch-sim=yes "${CACHE_GEOMETRY[@]}" ;;
        callers2)   run_callgrind "$p" callers2 --separate-callers=2 ;;
        recs)       run_callgrind "$p" recs --separate-recs=3 ;;
        threads)    run_callgrind "$p" threads --separate-threads=yes ;;
        nocompress) run_callgrind "$p" nocompress --compress-strings=no --compress-pos=no ;;
        dumpevery)  run_dumpevery "$p" ;;
        combo)      run_callgrind "$p" combo --dump-instr=yes --collect-jumps=yes \
                        --cache-sim=yes --branch-sim=yes "${CACHE_GEOMETRY[@]}" ;;
        *) echo "generate.sh: unknown variant $v" >&2; exit 1 ;;
    esac
}

callgrind_profiles() {
    mkdir -p callgrind
    rm -f callgrind/*
    local p v
    for p in "${PROGRAMS[@]}"; do
        for v in ${VARIANTS[$p]}; do
            callgrind_variant "$p" "$v"
        done
    done
}

callgrind_reports() {
    local f
    for f in $(cut -f1 "$MANIFEST" | grep '^callgrind/'); do
        log "callgrind_annotate $f"
        callgrind_annotate --auto=no --threshold=100 "$f" > "$f.annotate"
        callgrind_annotate --auto=no --threshold=100 --inclusive=yes "$f" > "$f.annotate-inclusive"
        callgrind_annotate --auto=no --threshold=100 --tree=both "$f" > "$f.annotate-tree"
    done
}

# ----------------------------------------------------------- cachegrind
# run_cachegrind NAME PROGRAM [VALGRIND OPTIONS...] [-- PROGRAM ARGS...]
run_cachegrind() {
    local name=$1 prog=$2
    shift 2
    local vopts=() pargs=()
    while (($#)); do
        if [[ $1 == -- ]]; then shift; pargs=("$@"); break; fi
        vopts+=("$1"); shift
    done
    local out="cachegrind/$name.out"
    log "cachegrind $out ${vopts[*]}"
    "${VG[@]}" --tool=cachegrind --cachegrind-out-file="$out" "${CACHE_GEOMETRY[@]}" \
        "${vopts[@]}" "bin/$prog" "${pargs[@]}" > /dev/null
    manifest "$out" "${VG[@]}" --tool=cachegrind --cachegrind-out-file="$out" \
        "${CACHE_GEOMETRY[@]}" "${vopts[@]}" "bin/$prog" "${pargs[@]}"
}

cachegrind_profiles() {
    mkdir -p cachegrind
    rm -f cachegrind/*
    local p
    for p in "${PROGRAMS[@]}"; do
        run_cachegrind "$p" "$p"
        run_cachegrind "$p.branch" "$p" --branch-sim=yes
    done
    # a second input for workload, for merge and diff
    run_cachegrind workload.alt workload -- 3000 7

    log "cg_merge cachegrind/workload.merged.out"
    cg_merge -o cachegrind/workload.merged.out cachegrind/workload.out cachegrind/workload.alt.out
    manifest cachegrind/workload.merged.out \
        cg_merge -o cachegrind/workload.merged.out cachegrind/workload.out cachegrind/workload.alt.out

    log "cg_diff cachegrind/workload.diff.out"
    cg_diff cachegrind/workload.out cachegrind/workload.alt.out > cachegrind/workload.diff.out
    manifest cachegrind/workload.diff.out \
        cg_diff cachegrind/workload.out cachegrind/workload.alt.out '>' cachegrind/workload.diff.out
}

cachegrind_reports() {
    local f
    for f in $(cut -f1 "$MANIFEST" | grep '^cachegrind/'); do
        log "cg_annotate $f"
        # --threshold=0: every function with a non-zero count of the first
        # event is listed (cg_annotate accepts 0-20, not 100)
        cg_annotate --auto=no --threshold=0 "$f" > "$f.cg_annotate"
    done
}

# ------------------------------------------------------------------ main
main() {
    build
    versions
    printf '# profile\tcommand (run from tests/data)\n' > "$MANIFEST"
    callgrind_profiles
    cachegrind_profiles
    callgrind_reports
    cachegrind_reports
    log "sizes:"
    du -sh callgrind cachegrind >&2
}

main "$@"
