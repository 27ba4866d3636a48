#!/usr/bin/env bash
# generate.sh - regenerate tests/data/stacks/: small real profiles of
# whole stacks, the fuzzer's seeds for the perf.data, `perf script`,
# folded and pprof readers.
#
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Needs gcc, perf (linux-perf), go (golang-go) and a built tally
# (`cargo build --release -p tally-cli`; TALLY= names another binary).
# perf and Go sample time, so the numbers change on every run.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export LC_ALL=C TZ=UTC
TALLY=${TALLY:-../../../target/release/tally}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# perf.data of `perf record -g` (a software event: it samples in virtual
# machines too), about a hundred samples; its `perf script` text.
gcc -O1 -g -fno-omit-frame-pointer -o "$WORK/stacks" src/stacks.c
rm -f stacks.perf.data
perf record -q -g -e cpu-clock -F 400 -o stacks.perf.data "$WORK/stacks" 4000 >/dev/null
perf script -i stacks.perf.data > stacks.perf.script 2>/dev/null
# tally's own exports of it: folded stacks, pprof gzip'd and plain.
"$TALLY" convert stacks.perf.data -o stacks.folded
"$TALLY" convert stacks.perf.data -o stacks.pb.gz
gzip -dc stacks.pb.gz > stacks.pb

# A CPU profile written by Go's runtime/pprof, with sample labels.
mkdir -p "$WORK/go" && cp src/labels.go "$WORK/go/main.go"
(cd "$WORK/go" && GO111MODULE=off go build -o labels main.go)
"$WORK/go/labels" labels.pb.gz
ls -l stacks.* labels.*
