#!/usr/bin/env bash
# tally annotate vs callgrind_annotate / cg_annotate on the same files:
# wall time (hyperfine) and peak memory (/usr/bin/time -v).
#
#   bench/annotate.sh CALLGRIND_FILE... [-- CACHEGRIND_FILE...]
#
# Each Callgrind file is annotated with default options and with
# `--inclusive=yes --tree=both --auto=yes`; each Cachegrind file with
# default options. The reference tools are slow on big files, so they run
# once (TALLY_BENCH_REF_RUNS); tally runs 5 times after a warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile profiling -p tally-cli >&2
tally=$PWD/target/profiling/tally
ref_runs=${TALLY_BENCH_REF_RUNS:-1}

mem() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }
mean() { # hyperfine's mean in seconds, from its JSON export
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.3f ± %.3f" % (r["mean"], r["stddev"] or 0))' "$1"
}
row() { # label, runs, command...
    local label=$1 runs=$2; shift 2
    local j; j=$(mktemp)
    hyperfine -N -w $(( runs > 1 ? 1 : 0 )) -r "$runs" --export-json "$j" -- "$*" >/dev/null 2>&1
    printf '| %s | `%s` | %s | %s MB |\n' "$label" "${*/#$tally/tally}" "$(mean "$j")" "$(( $(mem "$@") / 1024 ))"
    rm -f "$j"
}

echo "| file | command | time (s) | peak RSS |"
echo "|---|---|---:|---:|"
kind=callgrind
for f in "$@"; do
    if [ "$f" = "--" ]; then kind=cachegrind; continue; fi
    size=$(du -m "$f" | cut -f1)
    label="$(basename "$f") ($size MB)"
    if [ $kind = callgrind ]; then
        row "$label" 5 "$tally" annotate "$f"
        row "$label" "$ref_runs" callgrind_annotate "$f"
        row "$label" 5 "$tally" annotate --inclusive=yes --tree=both --auto=yes "$f"
        row "$label" "$ref_runs" callgrind_annotate --inclusive=yes --tree=both --auto=yes "$f"
    else
        row "$label" 5 "$tally" annotate "$f"
        row "$label" "$ref_runs" cg_annotate "$f"
    fi
done
