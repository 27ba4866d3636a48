#!/usr/bin/env bash
# tally gprof against GNU gprof on a -pg build of the Lua 5.4 interpreter.
#
#   LUA_TARBALL=path/to/lua5.4_5.4.4.orig.tar.gz bench/gprof.sh
#
# Without LUA_TARBALL the Debian source package is fetched with
# `apt-get source --download-only lua5.4` (needs a deb-src line).
# Work files go to $TALLY_BENCH_DIR (default /tmp/tally-bench/lua).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${TALLY_BENCH_DIR:-/tmp/tally-bench/lua}
mkdir -p "$work"
cd "$work"
if [ -z "${LUA_TARBALL:-}" ]; then
    apt-get source --download-only lua5.4 >/dev/null
    LUA_TARBALL=$(ls "$work"/lua5.4_*.orig.tar.gz | head -1)
fi
rm -rf src && mkdir src && tar xzf "$LUA_TARBALL" -C src --strip-components=1
(cd src/src && gcc -pg -g -O2 -DLUA_USE_POSIX -o lua-pg $(ls *.c | grep -v luac.c) -lm)
cat > bench.lua <<'LUA'
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = {}
for i = 1, 200000 do t[i] = tostring(i) .. "x" end
table.sort(t)
local s = 0
for i = 1, 30 do s = s + fib(24) end
local parts = {}
for i = 1, 100000 do parts[#parts+1] = string.format("%d:%s", i, t[(i % #t) + 1]) end
local str = table.concat(parts, ",")
local count = 0
for w in string.gmatch(str, "%d+") do count = count + 1 end
print(s, count, #str)
LUA
rm -f gmon.out
./src/src/lua-pg bench.lua >/dev/null
(cd "$root" && cargo build --profile profiling -q -p tally-cli)
tally="$root/target/profiling/tally"
p=src/src/lua-pg
for args in "-b" "" "-b -l" "-b -A"; do
    LC_ALL=C gprof $args $p gmon.out >gnu.txt 2>/dev/null
    "$tally" gprof --gnu-compatible $args $p gmon.out >tally.txt 2>/dev/null
    if [ -n "$args" ] && ! cmp -s gnu.txt tally.txt; then
        echo "reports differ for '$args'" >&2
    fi
done
hyperfine -N -w 3 -r 20 \
    "gprof -b $p gmon.out" "$tally gprof -b $p gmon.out" \
    "gprof $p gmon.out" "$tally gprof $p gmon.out" \
    "gprof -b -l $p gmon.out" "$tally gprof -b -l $p gmon.out" \
    "gprof -b -A $p gmon.out" "$tally gprof -b -A $p gmon.out"
