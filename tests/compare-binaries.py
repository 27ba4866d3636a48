#!/usr/bin/env python3
"""Runs two tally binaries over every fixture with each command's option
sets and lists where their stdout, stderr, exit status or output files
differ. For refactors that must not change behaviour:

    tests/compare-binaries.py OLD_TALLY NEW_TALLY [--only SUBSTRING] [-v]

Paths of temporary directories are replaced by a placeholder before
comparing; everything else must be byte-identical.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = os.path.join(ROOT, "tests", "data")


def profiles():
    pats = [
        "callgrind/*.out", "cachegrind/*.out", "bad/*.callgrind", "bad/*.gz",
        "merge/*.out", "stacks/*", "other/*.callgrind", "dcpi/real/*.callgrind",
        "spec/*",
    ]
    out = []
    for p in pats:
        for f in sorted(glob.glob(os.path.join(D, p))):
            if os.path.isfile(f) and not f.endswith((".sh", ".md", ".tsv", ".py", "VERSIONS")):
                out.append(f)
    return out


def gmon_runs():
    runs = []
    manifest = os.path.join(D, "gprof", "MANIFEST.tsv")
    seen = set()
    for line in open(manifest):
        if line.startswith("#") or not line.strip():
            continue
        cols = line.rstrip("\n").split("\t")
        binary, gmons = cols[1], cols[2].split()
        key = (binary, tuple(gmons))
        if key in seen:
            continue
        seen.add(key)
        runs.append((os.path.join(D, "gprof", binary), [os.path.join(D, "gprof", g) for g in gmons]))
    return runs


def commands():
    """(name, argv with {O} for an output path in the temp dir)."""
    cmds = []
    for p in profiles():
        cmds += [
            ["check", p],
            ["check", "--strict", p],
            ["annotate", p],
            ["annotate", "--inclusive=yes", "--tree=both", p],
            ["annotate", "--json", p],
            ["annotate", "--auto=no", "--show-percs=no", p],
            ["annotate", "--json", "--inclusive=yes", "--tree=both", "--jumps=5",
             "--threshold=all", p],
            ["annotate", "--inclusive=yes", "--tree=both", "--grouping=both",
             "--threshold=all", "--jumps=5", "--color=always", p],
            ["annotate", "--tree=caller", "--grouping=function", "--json", p],
            ["annotate", "--asm", p],
            ["annotate", "--asm", "--json", "--tree=calling", p],
            ["convert", p, "-o", "{O}/out"],
            ["convert", p, "--to", "json", "-o", "{O}/out.json"],
            ["convert", p, "--to", "pprof", "-o", "{O}/out.pb.gz"],
            ["convert", p, "--to", "folded", "-o", "{O}/out.folded"],
            ["flame", p, "-o", "{O}/f.svg"],
            ["graph", p, "-o", "{O}/g.dot"],
            ["gprof", p],
            ["gprof", "-b", "--json", p],
            ["merge", p, p, "-o", "{O}/m.out"],
            ["diff", p, p, "-o", "{O}/d.out"],
            ["annotate", "--diff", p, p],
            ["export", p, "--to", "parquet", "-o", "{O}/pq"],
            ["gate", p, p],
        ]
    for prog, gm in gmon_runs():
        cmds += [
            ["gprof", prog] + gm,
            ["gprof", "-b", "--json", prog] + gm,
            ["convert", "--binary", prog] + gm + ["-o", "{O}/out"],
            ["convert", "--binary", prog] + gm + ["--to", "json", "-o", "{O}/out.json"],
            ["flame", "--binary", prog] + gm + ["-o", "{O}/f.svg"],
            ["graph", "--binary", prog] + gm + ["-o", "{O}/g.dot"],
            ["export", "--binary", prog] + gm + ["--to", "parquet", "-o", "{O}/pq"],
            ["flame"] + gm + ["-o", "{O}/f.svg"],
            ["convert"] + gm + ["-o", "{O}/out"],
        ]
    real = os.path.join(D, "dcpi", "real")
    for f in sorted(glob.glob(os.path.join(D, "dcpi", "*", "*.dcpi"))):
        cmds += [
            ["check", f],
            ["dcpi", "cat", f],
            ["convert", f, "-o", "{O}/out"],
            ["convert", "--binary", os.path.join(real, "workload"), f, "-o", "{O}/out"],
            ["dcpi", "prof", os.path.join(real, "workload"), f],
            ["export", f, "--to", "parquet", "-o", "{O}/pq"],
        ]
    return cmds


def run(binary, argv, tmp):
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    args = [a.replace("{O}", tmp) for a in argv]
    try:
        r = subprocess.run([binary] + args, capture_output=True, timeout=120, cwd=tmp,
                           stdin=subprocess.DEVNULL, env=dict(os.environ, TALLY_NO_PROGRESS="1"))
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = "timeout", b"", b""
    files = {}
    for dirpath, _, names in os.walk(tmp):
        for n in names:
            full = os.path.join(dirpath, n)
            files[os.path.relpath(full, tmp)] = open(full, "rb").read().replace(tmp.encode(), b"{O}")
    return rc, out.replace(tmp.encode(), b"{O}"), err.replace(tmp.encode(), b"{O}"), files


def main():
    old, new = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
    verbose = "-v" in sys.argv
    base = tempfile.mkdtemp(prefix="tally-cmp-")
    same = differ = 0
    for argv in commands():
        line = " ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in argv)
        if only and only not in line:
            continue
        a = run(old, argv, os.path.join(base, "o"))
        b = run(new, argv, os.path.join(base, "o"))
        if a == b:
            same += 1
            continue
        differ += 1
        what = [n for n, x, y in zip(("exit", "stdout", "stderr", "files"), a, b) if x != y]
        print(f"DIFF [{', '.join(what)}] tally {line}")
        if verbose:
            for n, x, y in zip(("exit", "stdout", "stderr"), a, b):
                if x != y:
                    print(f"  {n} old: {x!r:.600}")
                    print(f"  {n} new: {y!r:.600}")
    shutil.rmtree(base, ignore_errors=True)
    print(f"{same} same, {differ} different")


if __name__ == "__main__":
    main()
