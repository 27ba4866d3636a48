#!/usr/bin/env bash
# Builds the real-profile corpus the benchmarks run on, reusing every file
# that already exists in the output directory (delete a file to make it
# again). Prints a Markdown table of the files (size, Valgrind's time) on
# standard output; progress and the tools' logs go to standard error and
# to DIR/*.log.
#
#   bench/corpus.sh [DIR]          # DIR defaults to bench/corpus (ignored by git)
#
# The files:
#   cc1.callgrind.out     Callgrind of GCC's cc1 compiling Lua 5.4 as one
#                         translation unit (onelua.c), -O2, with
#                         --dump-instr=yes --collect-jumps=yes
#                         --separate-callers=3 (about 100 MB, 15-30 min)
#   python.callgrind.out  Callgrind of CPython running bench/workloads/workload.py
#                         (same options without --separate-callers)
#   python.a.cachegrind.out, python.b.cachegrind.out
#                         Cachegrind (--cache-sim=yes --branch-sim=yes) of
#                         CPython on the workload's two mixes: a pair for
#                         merge and diff, with source lines (about 2 MB each)
#   lua.gmon.out, luarun-pg
#                         gmon.out of the Lua 5.4 library built with
#                         `gcc -pg -g -O2`, running bench/workloads/workload.lua
#
# Lua's sources come from the crates.io crate lua-src (547.x), fetched by
# `cargo fetch` of a throwaway manifest. CPython is the first python3 on
# PATH (its symbols and line tables make the source lines; a build without
# debug information gives `???` lines). Set TALLY_CORPUS_PYTHON to choose
# another. TALLY_CORPUS_SKIP=cc1 leaves the long cc1 run out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/bench/corpus}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
log() { echo "corpus.sh: $*" >&2; }

for t in valgrind gcc gprof python3 cargo; do
    command -v "$t" >/dev/null || { log "needs $t"; exit 1; }
done

# Seconds of wall-clock time of a command, its output to a log file.
timed() { # LOG COMMAND...
    local logf=$1 start end
    shift
    start=$(date +%s.%N)
    "$@" >"$logf" 2>&1
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", e - s }' >"$logf.seconds"
}

# Lua 5.4 sources, from the lua-src crate.
lua=$dir/lua
if [ ! -s "$lua/lua.h" ]; then
    src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lua-src-547.*/lua-5.4.* 2>/dev/null | tail -1 || true)
    if [ -z "$src" ]; then
        log "fetching the lua-src crate"
        fetch=$dir/lua-fetch
        mkdir -p "$fetch/src"
        printf '[package]\nname = "lua-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nlua-src = "547"\n' >"$fetch/Cargo.toml"
        : >"$fetch/src/lib.rs"
        (cd "$fetch" && cargo fetch >&2)
        src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lua-src-547.*/lua-5.4.* | tail -1)
    fi
    rm -rf "$lua" && mkdir -p "$lua"
    cp "$src"/*.c "$src"/*.h "$lua"/
fi
if [ ! -s "$dir/onelua.c" ]; then
    (cd "$lua" && ls *.c | sed 's/.*/#include "&"/') >"$dir/onelua.c"
fi

# cc1 under Callgrind.
if [ ! -s "$dir/cc1.callgrind.out" ] && [ "${TALLY_CORPUS_SKIP:-}" != cc1 ]; then
    cc1=$(gcc -print-prog-name=cc1)
    log "Callgrind of cc1 on onelua.c (15-30 minutes)"
    (cd "$dir" && timed cc1.log valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes \
        --separate-callers=3 --callgrind-out-file=cc1.callgrind.out \
        "$cc1" -quiet -I lua -imultiarch x86_64-linux-gnu onelua.c -quiet -dumpbase onelua.c \
        -dumpbase-ext .c -mtune=generic -march=x86-64 -O2 -fasynchronous-unwind-tables \
        -o "$dir/onelua.s")
fi

# CPython under Callgrind and Cachegrind. The interpreter itself, not a
# wrapper script (pyenv's shims are shell scripts).
python=${TALLY_CORPUS_PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
workload=$root/bench/workloads/workload.py
if [ ! -s "$dir/python.callgrind.out" ]; then
    log "Callgrind of $python"
    (cd "$dir" && timed python.callgrind.log valgrind --tool=callgrind --dump-instr=yes \
        --collect-jumps=yes --callgrind-out-file=python.callgrind.out \
        "$python" "$workload" a 2)
fi
for mix in a b; do
    if [ ! -s "$dir/python.$mix.cachegrind.out" ]; then
        log "Cachegrind of $python, mix $mix"
        (cd "$dir" && timed "python.$mix.cachegrind.log" valgrind --tool=cachegrind \
            --cache-sim=yes --branch-sim=yes --cachegrind-out-file="python.$mix.cachegrind.out" \
            "$python" "$workload" "$mix" 2)
    fi
done

# gmon.out of Lua built with -pg.
if [ ! -s "$dir/lua.gmon.out" ]; then
    log "gcc -pg build of Lua and a gmon.out"
    gcc -pg -g -O2 -DLUA_USE_POSIX -I "$lua" -o "$dir/luarun-pg" \
        "$root/bench/workloads/luarun.c" $(ls "$lua"/*.c | grep -v '/luac\?\.c$') -lm
    (cd "$dir" && rm -f gmon.out && timed lua.gmon.log ./luarun-pg "$root/bench/workloads/workload.lua" \
        && mv gmon.out lua.gmon.out)
fi

row() { # FILE WHAT LOG
    local f=$dir/$1 secs=""
    [ -s "$f" ] || { printf '| `%s` | | not made | |\n' "$1"; return; }
    [ -f "$dir/$3.seconds" ] && secs="$(cat "$dir/$3.seconds") s"
    printf '| `%s` | %s | %s | %s |\n' "$1" \
        "$(awk -v b="$(stat -L -c %s "$f")" 'BEGIN { printf "%.1f MB", b / 1e6 }')" "$2" "$secs"
}
echo "| file | size | what | Valgrind's (or the run's) time |"
echo "|---|---:|---|---:|"
row cc1.callgrind.out "cc1 -O2 of onelua.c, Callgrind, instr + jumps + --separate-callers=3" cc1.log
row python.callgrind.out "CPython, workload mix a, Callgrind, instr + jumps" python.callgrind.log
row python.a.cachegrind.out "CPython, mix a, Cachegrind with cache and branch simulation" python.a.cachegrind.log
row python.b.cachegrind.out "CPython, mix b, the same" python.b.cachegrind.log
row lua.gmon.out "Lua 5.4 built with -pg running workload.lua" lua.gmon.log
