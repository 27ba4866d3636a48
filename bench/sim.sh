#!/usr/bin/env bash
# tally sim against Cachegrind and Callgrind on three real programs, each
# comparison in the same run: the commands of one program take turns
# (bench/alternate.py: one run of each, then the next round), medians of
# wall-clock time and of CPU time (user + system of the command and all
# its processes), next to the program's native run.
#
#   bench/sim.sh                 # RUNS rounds (default 3) after a warm-up
#   PROGRAMS="gzip lua" bench/sim.sh   # some of gzip, sqlite3, lua
#
# Programs: Debian's gzip -9 of 1 MB of text; sqlite3 running a query
# workload in memory (100,000 rows inserted in a transaction, an index,
# GROUP BY, ORDER BY, joins); Lua 5.4 (built here from the lua-src crate's
# sources, gcc -g -O2) running bench/workloads/workload.lua. For each:
# native; `tally sim --branch-sim=yes` against
# `valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes`;
# `tally sim --callgrind --cache-sim=no` against `valgrind --tool=callgrind`.
# Every command runs under `env -i PATH=/usr/bin:/bin LC_ALL=C`, with the
# host's caches on both sides. tally is the profiling build, its plugin
# the release build (both built here). Then the exactness of the same
# runs: totals per event, Cachegrind against tally.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${RUNS:-3}
only=${PROGRAMS:-gzip sqlite3 lua}
cargo build --profile profiling -p tally-cli >&2
cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target >&2
tally=$root/target/profiling/tally
plugin=${TALLY_QEMU_PLUGIN:-$root/target/release/libtally_qemu_plugin.so}
for t in valgrind gzip sqlite3 gcc qemu-x86_64 python3; do
    command -v "$t" >/dev/null || { echo "sim.sh: needs $t" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Lua 5.4 from the lua-src crate's sources (fetched by a throwaway
# manifest if Cargo's registry lacks them), built once into target/.
luarun=$root/target/bench-sim/luarun
if [ ! -x "$luarun" ]; then
    src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lua-src-547.*/lua-5.4.* 2>/dev/null | tail -1 || true)
    if [ -z "$src" ]; then
        mkdir -p "$tmp/fetch/src" && touch "$tmp/fetch/src/lib.rs"
        printf '[package]\nname = "lua-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nlua-src = "547"\n' >"$tmp/fetch/Cargo.toml"
        cargo fetch --manifest-path "$tmp/fetch/Cargo.toml" >&2
        src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lua-src-547.*/lua-5.4.* | tail -1)
    fi
    mkdir -p "$(dirname "$luarun")"
    gcc -g -O2 -DLUA_USE_LINUX -I "$src" -o "$luarun" bench/workloads/luarun.c \
        $(ls "$src"/*.c | grep -v '/luac\?\.c$') -lm
fi

# gzip's input: 1 MB of words from a fixed generator (as sim_exact.rs).
python3 - "$tmp/in.txt" <<'EOF'
import sys
x, text, size = 7, [], 0
while size < 1_000_000:
    x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
    w = "".join(chr(97 + (x >> (8 * k)) % 13) for k in range(2 + (x >> 60) % 8))
    w += "\n" if (x >> 59) & 7 == 0 else " "
    text.append(w)
    size += len(w)
open(sys.argv[1], "w").write("".join(text))
EOF
cat >"$tmp/q.sql" <<'EOF'
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c INTEGER);
CREATE TABLE g(c INTEGER PRIMARY KEY, name TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<100000)
INSERT INTO t SELECT i, printf('name%06d', (i*7919)%100000), (i*31)%1000 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i<999)
INSERT INTO g SELECT i, printf('group%03d', i) FROM n;
COMMIT;
CREATE INDEX tb ON t(b);
SELECT c, count(*), sum(a) FROM t GROUP BY c ORDER BY 2 DESC, 1 LIMIT 5;
SELECT g.name, count(*) FROM t JOIN g ON t.c = g.c WHERE t.b LIKE 'name01%' GROUP BY g.name ORDER BY 2 DESC LIMIT 3;
SELECT count(*) FROM t x JOIN t y ON x.c = y.a WHERE y.b LIKE 'name02%';
SELECT b FROM t ORDER BY b DESC LIMIT 3;
SELECT avg(length(b)), max(c) FROM t WHERE a % 3 = 0;
EOF

clean="env -i PATH=/usr/bin:/bin LC_ALL=C TALLY_QEMU_PLUGIN=$plugin"
# name|program and arguments (run in $tmp)
programs=(
    "gzip|/usr/bin/gzip -9 -c in.txt"
    "sqlite3|/usr/bin/sqlite3 :memory: -init q.sql .quit"
    "lua|$luarun $root/bench/workloads/workload.lua"
)
chosen=()
for p in "${programs[@]}"; do
    case " $only " in *" ${p%%|*} "*) chosen+=("$p") ;; esac
done
programs=("${chosen[@]}")
# What each printed command shows for the long paths.
show() { sed "s|$tally|tally|g; s|$tmp/||g; s|$tmp|\$tmp|g; s|$luarun|luarun|g; s|$root/||g; s| TALLY_QEMU_PLUGIN=[^ ]*||g"; }

cd "$tmp"
table=$tmp/table.md
{
    echo "| program, run | native | tally | reference | speed-up (wall, reference / tally) | CPU, tally / reference |"
    echo "|---|---:|---:|---:|---:|---:|"
} >"$table"
commands=$tmp/commands.md
: >"$commands"
for p in "${programs[@]}"; do
    name=${p%%|*}
    prog=${p#*|}
    native="$clean $prog"
    sim="$clean $tally sim --branch-sim=yes --out-file $tmp/$name.t.out -- $prog"
    cg="$clean valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes --cachegrind-out-file=$tmp/$name.c.out $prog"
    simc="$clean $tally sim --callgrind --cache-sim=no --out-file $tmp/tc.out -- $prog"
    clg="$clean valgrind --tool=callgrind --callgrind-out-file=$tmp/clg.out $prog"
    echo "sim.sh: $name, $runs rounds" >&2
    python3 "$root/bench/alternate.py" --cpu --json "$tmp/$name.json" "$runs" \
        "$native" "$sim" "$cg" "$simc" "$clg" >&2
    python3 - "$tmp/$name.json" "$name" >>"$table" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
native, sim, cg, simc, clg = r
def s(x):
    return f"{x:.3f} s"
for label, a, b in (("cache + branch sim, against Cachegrind", sim, cg),
                    ("calls, no cache sim, against Callgrind", simc, clg)):
    print(f"| {sys.argv[2]}, {label} | {s(native['wall'])} | {s(a['wall'])} "
          f"({a['wall'] / native['wall']:.0f}× native) | {s(b['wall'])} "
          f"({b['wall'] / native['wall']:.0f}× native) | {b['wall'] / a['wall']:.2f}× faster "
          f"| {s(a['cpu'])} / {s(b['cpu'])} = {a['cpu'] / b['cpu']:.2f} |")
EOF
    {
        echo "- $name:"
        for c in "$native" "$sim" "$cg" "$simc" "$clg"; do
            echo "  \`$(echo "$c" | show)\`"
        done
    } >>"$commands"
done
echo "## tally sim against Valgrind ($runs rounds, medians; $(nproc) cores)"
echo
cat "$table"
echo
echo "Commands (in \$tmp, which holds in.txt and q.sql):"
echo
cat "$commands"

# Exactness of the same runs (each program's last round), totals per event.
for p in "${programs[@]}"; do
    name=${p%%|*}
    echo
    echo "$name: event, Cachegrind, tally, difference"
    echo
    paste <(grep '^events:' "$name.c.out" | cut -d' ' -f2- | tr ' ' '\n') \
          <(grep '^summary:' "$name.c.out" | cut -d' ' -f2- | tr ' ' '\n') \
          <(grep '^summary:' "$name.t.out" | cut -d' ' -f2- | tr ' ' '\n') |
        awk '{ d = $2 ? 100 * ($3 - $2) / $2 : 0; printf "    %-5s %14.0f %14.0f %+8.2f %%\n", $1, $2, $3, d }'
done
