#!/usr/bin/env bash
# Exports a fleet of real Callgrind profiles to Parquet and times the
# queries of examples/fleet over it, in DataFusion and in Spark.
# Prints a Markdown report on standard output; progress on standard error.
#
# The profiles are Valgrind runs of tests/data/dcpi/real/workload (a
# committed test program), each with its own seed: half labelled
# version=a (size 1500), half version=b (size 1600, a slower "new
# version"). The fleet is these runs seen on several machines: each
# machine's batch is one `tally export` run with its own `machine=` label,
# so every profile of the fleet has its own id (ids hash the input and its
# labels) and the tables hold (runs x machines) profiles.
#
# Environment (all optional):
#   TALLY_FLEET_DIR       scratch directory (default /tmp/tally-fleet)
#   TALLY_FLEET_RUNS      distinct Valgrind runs (default 1000)
#   TALLY_FLEET_MACHINES  machines, i.e. export batches per version (default 10)
#   TALLY_FLEET_JOBS      parallel Valgrind runs (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${TALLY_FLEET_DIR:-/tmp/tally-fleet}
n=${TALLY_FLEET_RUNS:-1000}
machines=${TALLY_FLEET_MACHINES:-10}
jobs=${TALLY_FLEET_JOBS:-$(nproc)}
log() { echo "fleet.sh: $*" >&2; }

for t in valgrind python3; do
    command -v "$t" >/dev/null || { log "needs $t"; exit 1; }
done
python3 -c 'import datafusion, pyspark' 2>/dev/null ||
    { log "needs python3 -m pip install datafusion pyspark (examples/fleet/README.md)"; exit 1; }

log "building (profiling profile)"
cargo build --profile profiling -q -p tally-cli
tally=$PWD/target/profiling/tally
prog=$PWD/tests/data/dcpi/real/workload
half=$((n / 2))

run_one() { # version size seed
    local out=$dir/in/$1/p$3.out
    [ -s "$out" ] && return 0
    env -i PATH=/usr/bin:/bin valgrind -q --tool=callgrind \
        --callgrind-out-file="$out.tmp" "$prog" "$2" "$3" > /dev/null 2>&1
    mv "$out.tmp" "$out"
}
export -f run_one
export dir prog
mkdir -p "$dir/in/a" "$dir/in/b"
log "$n Valgrind runs ($jobs at a time; skipped when already there)"
{
    seq 1 "$half" | sed 's/^/a 1500 /'
    seq $((half + 1)) "$n" | sed 's/^/b 1600 /'
} | xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _

bytes=$(cat "$dir"/in/a/*.out "$dir"/in/b/*.out | wc -c)
echo "## Fleet: $((n * machines)) profiles ($n real Callgrind runs on $machines machines)"
echo
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
    "inputs: $n files, $((bytes / 1000000)) MB, exported once per machine."
echo
echo "| step | wall | CPU (user+sys) | peak RSS | notes |"
echo "|---|---:|---:|---:|---|"
timed() { # name notes command...
    local name=$1 notes=$2
    shift 2
    /usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$@" > "$dir/last.out"
    read -r wall user sys rss < "$dir/time"
    echo "| $name | $wall s | $(awk "BEGIN { printf \"%.2f\", $user + $sys }") s | $((rss / 1024)) MiB | $notes |"
}
rm -rf "$dir/out"
outs=()
for m in $(seq 1 "$machines"); do
    for v in a b; do
        line=$(timed "export version=$v machine=m$m" "$(ls "$dir/in/$v" | wc -l) files in one run" \
            "$tally" export "$dir/in/$v"/*.out --to parquet -o "$dir/out/$v$m" \
            --label version=$v --label machine=m$m)
        # Show the first machine's two runs; the others are alike.
        [ "$m" = 1 ] && echo "$line"
        outs+=("$dir/out/$v$m")
    done
done
stats=$(python3 - "$dir/out" <<'PY'
import sys, os, pyarrow.parquet as pq
out = sys.argv[1]
for t in ("costs", "functions", "arcs", "profiles"):
    files = [os.path.join(out, d, f"{t}.parquet") for d in sorted(os.listdir(out))]
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    size = sum(os.path.getsize(f) for f in files)
    print(f"| {t} | {rows:,} | {size:,} | {size / max(rows, 1):.2f} |")
PY
)
timed "DataFusion: all queries" "top self/inclusive by version, change a→b, merged, totals" \
    python3 examples/fleet/datafusion_fleet.py --compare a b "${outs[@]}"
timed "Spark local[2]: all queries" "the same SQL; wall includes the JVM start; CPU and RSS are of the Python driver only" \
    python3 examples/fleet/spark_fleet.py --compare a b "${outs[@]}"
echo
echo "| table | rows | bytes | bytes per row |"
echo "|---|---:|---:|---:|"
echo "$stats"
