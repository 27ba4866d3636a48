#!/usr/bin/env bash
# generate-other.sh - regenerate tests/data/other/: Callgrind-format files
# written by profilers other than Valgrind (Python, Perl, PHP, Go).
#
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# It installs what it needs unless TALLY_INSTALL=no:
#   Debian: libdevel-nytprof-perl php-cli php-xdebug golang-go (apt-get)
#   PyPI:   pyprof2calltree yappi pprofile (pip, into a venv, pinned)
# Each section is independent: one that fails is reported as SKIPPED and
# the others still run.  The profiled programs are in other/src/.
#
# These profilers measure time (or sample), so the numbers change on every
# run; the structure (functions, calls, files) stays the same.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export LC_ALL=C TZ=UTC
# Perl (nytprofcg) and Python: fixed hash order, so output order is stable.
export PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 PYTHONHASHSEED=0

INSTALL=${TALLY_INSTALL:-yes}
VENV=${TALLY_OTHER_VENV:-/tmp/tally-other-venv}
PIP_PKGS=(pyprof2calltree==1.4.5 yappi==1.7.6 pprofile==2.2.0)
APT_PKGS=(libdevel-nytprof-perl php-cli php-xdebug golang-go)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

OUT=other
mkdir -p "$OUT" bin

log() { printf '%s\n' "$*" >&2; }

# ------------------------------------------------------------- installs
install_apt() {
    local missing=() p
    for p in "${APT_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
}

install_pip() {
    [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "${PIP_PKGS[@]}"
}

if [[ $INSTALL == yes ]]; then
    install_apt || log "apt-get install failed; sections that need it will be skipped"
    install_pip || log "pip install failed; Python sections will be skipped"
fi

# ------------------------------------------------------------- sections
py_pyprof2calltree() {
    "$VENV/bin/python" -m cProfile -o "$WORK/pyprog.pstats" other/src/pyprog.py > /dev/null
    "$VENV/bin/pyprof2calltree" -i "$WORK/pyprog.pstats" -o "$OUT/pyprof2calltree.callgrind" > /dev/null
}

py_yappi() {
    "$VENV/bin/python" other/src/yappi_run.py "$OUT/yappi.callgrind" > /dev/null
}

py_pprofile() {
    "$VENV/bin/pprofile" --format callgrind --out "$OUT/pprofile.callgrind" other/src/pyprog.py > /dev/null
}

perl_nytprof() {
    NYTPROF="file=$WORK/nytprof.out:addpid=0" perl -d:NYTProf other/src/plprog.pl > /dev/null
    nytprofcg --file "$WORK/nytprof.out" --out "$OUT/nytprof.callgrind" > /dev/null
}

php_xdebug() {
    php -d xdebug.mode=profile -d xdebug.start_with_request=yes \
        -d xdebug.output_dir="$WORK" -d xdebug.profiler_output_name=xdebug.callgrind \
        -d xdebug.use_compression=0 other/src/phpprog.php > /dev/null
    cp "$WORK/xdebug.callgrind" "$OUT/xdebug.callgrind"
}

go_pprof() {
    # No module, standard library only: nothing is downloaded.
    (cd other/src/goprog &&
        GO111MODULE=off GOPROXY=off GOFLAGS= GOCACHE="$WORK/gocache" \
            go build -o ../../../bin/goprog main.go)
    bin/goprog "$WORK/cpu.pprof" "$WORK/allocs.pprof" > /dev/null
    go tool pprof -callgrind -output "$OUT/pprof-cpu.callgrind" \
        bin/goprog "$WORK/cpu.pprof" 2> /dev/null
    go tool pprof -callgrind -sample_index=alloc_space -output "$OUT/pprof-alloc.callgrind" \
        bin/goprog "$WORK/allocs.pprof" 2> /dev/null
}

SKIPPED=()
run_section() {
    local name=$1
    log "== $name"
    set +e
    (set -e; "$name")
    local rc=$?
    set -e
    if ((rc != 0)); then
        log "SKIPPED $name (exit $rc)"
        SKIPPED+=("$name")
    fi
}

run_section py_pyprof2calltree
run_section py_yappi
run_section py_pprofile
run_section perl_nytprof
run_section php_xdebug
run_section go_pprof

# ------------------------------------------------------------- versions
pyver() { "$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || echo unavailable; }
debver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not installed"; }
{
    echo "# Tools that produced the files in other/ (generate-other.sh)."
    echo "python: $("$VENV/bin/python" --version 2>&1 || echo unavailable)"
    echo "pyprof2calltree: $(pyver pyprof2calltree) (cProfile of $("$VENV/bin/python" --version 2>&1))"
    echo "yappi: $(pyver yappi)"
    echo "pprofile: $(pyver pprofile)"
    echo "perl: $(perl -e 'print $^V' 2>/dev/null || echo unavailable)"
    echo "libdevel-nytprof-perl (nytprofcg): $(debver libdevel-nytprof-perl)"
    echo "php: $(php -r 'echo PHP_VERSION;' 2>/dev/null || echo unavailable)"
    echo "php-xdebug: $(debver php-xdebug) (xdebug $(php -r 'echo phpversion("xdebug");' 2>/dev/null || echo unavailable))"
    echo "go (go tool pprof): $(go version 2>/dev/null || echo unavailable)"
    echo "skipped: ${SKIPPED[*]:-none}"
} > "$OUT/VERSIONS"

log "sizes:"
ls -l "$OUT"/*.callgrind >&2 || true
if ((${#SKIPPED[@]})); then
    log "skipped sections: ${SKIPPED[*]}"
fi
