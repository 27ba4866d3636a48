#!/usr/bin/env bash
# generate.sh - rebuild the gprof test programs, run them to get gmon
# files, and record GNU gprof's reports on them, in tests/data/gprof.
#
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Usage: generate.sh            rebuild and regenerate everything (~30-40 s)
#        generate.sh --check    re-run every MANIFEST.tsv command on the
#                               committed files and compare (writes nothing)
#
# Needs: bash, gcc, g++, gprof, strip (GNU binutils), od, cmp; glibc (its
# -pg support writes gmon.out).  See README.md and VERSIONS.
#
# Re-runnable: every output (binaries, gmon files, reports, bad/ outputs,
# MANIFEST.tsv, RUNS.tsv, VERSIONS) is removed and written anew; src/ and
# the READMEs are not touched.  Everything runs from tests/data/gprof with
# relative paths, so the paths printed inside the reports are stable.
#
# The gmon files are samples (100 Hz, ITIMER_PROF): every run of the
# programs gives slightly different histograms, so every run of this script
# rewrites the gmon files and the reports.  Running gprof again on the
# committed binary + gmon files gives the committed reports exactly (that
# is what MANIFEST.tsv is for).  Binaries are rebuilt byte for byte the
# same with the same compiler (source paths are made relative with
# -fdebug-prefix-map).

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
HERE=$PWD
export LC_ALL=C TZ=UTC
unset GMON_OUT_PREFIX

for tool in gcc g++ gprof strip od cmp; do
    command -v "$tool" >/dev/null || { echo "generate.sh: $tool not found" >&2; exit 1; }
done

log() { printf '%s\n' "$*" >&2; }

# -fdebug-prefix-map: the DWARF compilation directory becomes ".", the file
# names stay "src/x.c": gprof -l/-A/-C print ./src/x.c, and gprof -A finds
# the sources when run from this directory.
CFLAGS=(-pg -g -Wall -Wextra -fdebug-prefix-map="$HERE"=.)

MANIFEST=MANIFEST.tsv
RUNS=RUNS.tsv

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------- clean
clean() {
    rm -f ./*.O0 ./*.O1 ./*.O2 ./*.gmon ./*.txt gmon.out gmon.sum \
        "$MANIFEST" "$RUNS" VERSIONS
    mkdir -p bad
    rm -f bad/*.stdout bad/*.stderr bad/*.exit bad/*.gmon bad/*.stripped bad/*.bin
}

# ---------------------------------------------------------------- build
build() {
    local o
    for o in O0 O2; do
        log "build cycles.$o deep.$o multi.$o"
        gcc "${CFLAGS[@]}" -"$o" -o "cycles.$o" src/cycles.c
        gcc "${CFLAGS[@]}" -"$o" -o "deep.$o" src/deep.c
        gcc "${CFLAGS[@]}" -"$o" -o "multi.$o" src/multi_a.c src/multi_b.c
    done
    log "build demangle.O1"
    g++ "${CFLAGS[@]}" -O1 -o demangle.O1 src/demangle.cpp
}

# ------------------------------------------------------------- versions
versions() {
    {
        echo "# Tools that produced the files in tests/data/gprof (generate.sh)."
        echo "gcc: $(gcc --version | head -n1)"
        echo "g++: $(g++ --version | head -n1)"
        echo "gprof: $(gprof --version | head -n1)"
        echo "arch: $(uname -m)"
        echo "glibc: $(ldd --version 2>&1 | head -n1)"
        if command -v dpkg-query >/dev/null; then
            local pkg v
            for pkg in binutils gcc-12 g++-12 libc6; do
                v=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
                echo "dpkg $pkg: ${v:-not installed}"
            done
        fi
    } > VERSIONS
}

# ------------------------------------------------------------------ runs
# run BIN GMON [ARGS...]: run ./BIN in a scratch directory (glibc writes
# gmon.out into the current directory at exit) and keep its gmon.out as
# GMON.  RUNS.tsv gets: gmon file, binary, program arguments, the program's
# stdout (deterministic: a checksum of its work).
run() {
    local bin=$1 gmon=$2
    shift 2
    local dir="$TMP/run"
    rm -rf "$dir"
    mkdir -p "$dir"
    log "run ./$bin $* -> $gmon"
    local out
    out=$(cd "$dir" && "$HERE/$bin" "$@")
    [[ -s $dir/gmon.out ]] || { echo "generate.sh: $bin wrote no gmon.out" >&2; exit 1; }
    mv "$dir/gmon.out" "$gmon"
    printf '%s\t%s\t%s\t%s\n' "$gmon" "$bin" "$*" "$out" >> "$RUNS"
}

runs() {
    printf '# gmon\tbinary\tprogram arguments\tprogram stdout\n' > "$RUNS"
    local b
    for b in cycles.O0 cycles.O2 deep.O0 deep.O2 multi.O0 multi.O2 demangle.O1; do
        run "$b" "$b.gmon"
    done
    # a second run of cycles.O0 with twice the work in the cycles and fib
    # (not in hot_loop), for gprof -s
    run cycles.O0 cycles.O0.run2.gmon 2
}

# -------------------------------------------------------------- reports
# manifest OUT BIN GMONS ARGS...: one line of MANIFEST.tsv.  GMONS is a
# space-separated list; ARGS are gprof's options, joined by single spaces
# (no argument contains a space).  The command was
#     LC_ALL=C gprof ARGS BIN GMONS > OUT
# run from tests/data/gprof.
manifest() {
    local out=$1 bin=$2 gmons=$3
    shift 3
    printf '%s\t%s\t%s\t%s\n' "$out" "$bin" "$gmons" "$*" >> "$MANIFEST"
}

# report OUT BIN GMONS ARGS...: gprof ARGS BIN GMONS > OUT.  A normal
# report must succeed without a word on stderr.
report() {
    local out=$1 bin=$2 gmons=$3
    shift 3
    local g
    read -r -a g <<< "$gmons"
    if ! gprof "$@" "$bin" "${g[@]}" > "$out" 2> "$TMP/stderr" || [[ -s $TMP/stderr ]]; then
        echo "generate.sh: gprof $* $bin $gmons failed or complained:" >&2
        cat "$TMP/stderr" >&2
        exit 1
    fi
    manifest "$out" "$bin" "$gmons" "$@"
}

# The standard set of reports of one binary + gmon file.
standard_reports() {
    local bin=$1 gmon=$2
    log "gprof reports of $bin"
    report "$bin.b.txt"    "$bin" "$gmon" -b
    report "$bin.full.txt" "$bin" "$gmon"
    report "$bin.p.txt"    "$bin" "$gmon" -b -p
    report "$bin.q.txt"    "$bin" "$gmon" -b -q
    report "$bin.l.txt"    "$bin" "$gmon" -b -l
    report "$bin.c.txt"    "$bin" "$gmon" -b -c
    report "$bin.z.txt"    "$bin" "$gmon" -b -z
    report "$bin.a.txt"    "$bin" "$gmon" -b -a
    report "$bin.A.txt"    "$bin" "$gmon" -b -A
}

reports() {
    printf '# output\tbinary\tgmon files\tgprof arguments\n' > "$MANIFEST"
    local b
    for b in cycles.O0 cycles.O2 deep.O0 deep.O2 multi.O0 multi.O2; do
        standard_reports "$b" "$b.gmon"
    done

    log "gprof reports of demangle.O1"
    report demangle.O1.b.txt            demangle.O1 demangle.O1.gmon -b
    report demangle.O1.no-demangle.txt  demangle.O1 demangle.O1.gmon -b --no-demangle

    log "gprof option cases on cycles.O0"
    local g=cycles.O0.gmon
    report cycles.O0.pq.txt     cycles.O0 $g -b -p -q
    report cycles.O0.m2.txt     cycles.O0 $g -b -m 2
    report cycles.O0.A-m2.txt   cycles.O0 $g -b -A -m 2
    report cycles.O0.k.txt      cycles.O0 $g -b -k is_odd/is_even
    report cycles.O0.k-main.txt cycles.O0 $g -b -k main/mix
    report cycles.O0.e.txt      cycles.O0 $g -b -e mix
    report cycles.O0.E.txt      cycles.O0 $g -b -E mix
    report cycles.O0.f.txt      cycles.O0 $g -b -f is_even
    report cycles.O0.F.txt      cycles.O0 $g -b -F is_even
    report cycles.O0.T.txt      cycles.O0 $g -b -T
    report cycles.O0.C.txt      cycles.O0 $g -b -C
    report cycles.O0.i.txt      cycles.O0 $g -i
    report cycles.O0.xA.txt     cycles.O0 $g -b -x -A
    report cycles.O0.run2.b.txt cycles.O0 cycles.O0.run2.gmon -b

    # gprof -s writes ./gmon.sum (and prints nothing)
    log "gprof -s cycles.O0"
    rm -f gmon.sum
    gprof -s cycles.O0 cycles.O0.gmon cycles.O0.run2.gmon > "$TMP/sum.out" 2>&1
    [[ -s gmon.sum && ! -s $TMP/sum.out ]] ||
        { echo "generate.sh: gprof -s: no gmon.sum, or output:" >&2; cat "$TMP/sum.out" >&2; exit 1; }
    mv gmon.sum cycles.O0.sum.gmon
    manifest cycles.O0.sum.gmon cycles.O0 "cycles.O0.gmon cycles.O0.run2.gmon" -s
    report cycles.O0.sum.b.txt cycles.O0 cycles.O0.sum.gmon -b
}

# ------------------------------------------------------------ bad inputs
# bad NAME BIN GMONS ARGS...: gprof ARGS BIN GMONS, expected to fail or
# complain: stdout, stderr and exit status go to bad/NAME.stdout,
# bad/NAME.stderr, bad/NAME.exit.
bad() {
    local name=$1 bin=$2 gmons=$3
    shift 3
    local g rc=0
    read -r -a g <<< "$gmons"
    log "gprof (bad) $name"
    gprof "$@" "$bin" "${g[@]}" > "bad/$name.stdout" 2> "bad/$name.stderr" || rc=$?
    echo "$rc" > "bad/$name.exit"
    manifest "bad/$name.stdout" "$bin" "$gmons" "$@"
}

# u32 FILE OFFSET: the little-endian 32-bit number at OFFSET
u32() { od -An -tu4 -j"$2" -N4 "$1" | tr -d ' '; }

bad_inputs() {
    # truncated.gmon: cycles.O0.gmon cut in the middle of its 4th arc
    # record.  Layout (glibc, gmon version 1): a 20-byte header; the
    # histogram record: tag byte 0, low_pc (8), high_pc (8), hist_size (4),
    # prof_rate (4), dimen (15), dimen_abbrev (1), hist_size 16-bit counts;
    # then arc records of 21 bytes: tag byte 1, from_pc (8), self_pc (8),
    # count (4).
    local src=cycles.O0.gmon
    local tag0 hist_size arcs cut
    tag0=$(od -An -tu1 -j20 -N1 "$src" | tr -d ' ')
    hist_size=$(u32 "$src" 37)
    arcs=$((20 + 1 + 40 + 2 * hist_size))
    [[ $tag0 == 0 && $(od -An -tu1 -j"$arcs" -N1 "$src" | tr -d ' ') == 1 ]] ||
        { echo "generate.sh: unexpected layout of $src" >&2; exit 1; }
    cut=$((arcs + 3 * 21 + 10))
    head -c "$cut" "$src" > bad/truncated.gmon

    # empty.gmon: 0 bytes
    : > bad/empty.gmon

    # not-gmon.gmon: a text file where a gmon file is expected
    printf 'this is not a gmon file\n' > bad/not-gmon.gmon

    # cycles.O0.stripped: no symbols (and no DWARF)
    strip -o bad/cycles.O0.stripped cycles.O0

    # not-elf.bin: a text file where the binary is expected
    printf 'this is not an ELF file\n' > bad/not-elf.bin

    bad truncated       cycles.O0             bad/truncated.gmon -b
    bad empty           cycles.O0             bad/empty.gmon -b
    bad not-gmon        cycles.O0             bad/not-gmon.gmon -b
    bad missing-gmon    cycles.O0             bad/no-such-file.gmon -b
    bad stripped        bad/cycles.O0.stripped cycles.O0.gmon -b
    bad not-elf         bad/not-elf.bin       cycles.O0.gmon -b
    bad wrong-binary    multi.O0              cycles.O0.gmon -b
    bad wrong-binary-O2 cycles.O2             cycles.O0.gmon -b
    # two gmon files of different binaries summed
    bad sum-mismatch    cycles.O0             "cycles.O0.gmon deep.O0.gmon" -b
}

# ----------------------------------------------------------------- check
# generate.sh --check: run every command of MANIFEST.tsv again on the
# committed binaries and gmon files and compare with the committed outputs
# (changes nothing).
check() {
    local out bin gmons args g a rc fails=0 n=0
    while IFS=$'\t' read -r out bin gmons args; do
        [[ $out == \#* ]] && continue
        read -r -a g <<< "$gmons"
        read -r -a a <<< "$args"
        n=$((n + 1))
        if [[ $out == bad/*.stdout ]]; then
            local base=${out%.stdout}
            rc=0
            gprof "${a[@]}" "$bin" "${g[@]}" > "$TMP/stdout" 2> "$TMP/stderr" || rc=$?
            if ! cmp -s "$TMP/stdout" "$out" || ! cmp -s "$TMP/stderr" "$base.stderr" ||
                [[ $rc != "$(cat "$base.exit")" ]]; then
                log "DIFFERS: $out"; fails=$((fails + 1))
            fi
        elif [[ $out == *.gmon ]]; then
            # gprof -s: writes gmon.sum in the current directory
            (cd "$TMP" && rm -f gmon.sum &&
                gprof "${a[@]}" "$HERE/$bin" "${g[@]/#/$HERE/}" > /dev/null 2>&1)
            cmp -s "$TMP/gmon.sum" "$out" || { log "DIFFERS: $out"; fails=$((fails + 1)); }
        else
            gprof "${a[@]}" "$bin" "${g[@]}" > "$TMP/stdout" 2>&1 || true
            cmp -s "$TMP/stdout" "$out" || { log "DIFFERS: $out"; fails=$((fails + 1)); }
        fi
    done < "$MANIFEST"
    log "checked $n outputs, $fails differ"
    ((fails == 0))
}

# ------------------------------------------------------------------ main
main() {
    if [[ ${1-} == --check ]]; then
        check
        return
    fi
    local t0=$SECONDS
    clean
    build
    versions
    runs
    reports
    bad_inputs
    log "done in $((SECONDS - t0)) s; sizes:"
    du -sh . >&2
}

main "$@"
