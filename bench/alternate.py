#!/usr/bin/env python3
"""Times shell commands by turns: run 1 of each, then run 2 of each, and so
on, and prints each command's median and quartiles of wall-clock time.

hyperfine runs all runs of one command before the next, so a host whose
speed drifts within minutes (as shared machines do) favours whichever ran
in the faster minutes; taking turns spreads the drift over all commands.

    bench/alternate.py [--cpu] [--json FILE] RUNS 'COMMAND' 'COMMAND'...

Each command runs once first, untimed (page cache, lazy loading). Output
goes to /dev/null. With --cpu each line also gives the median CPU time
(user + system) of the command and all its descendants, from the
rusage of the waited children; --json FILE writes each command's
medians (seconds: "wall", "cpu") and its samples, for scripts.
"""
import json
import resource
import statistics
import subprocess
import sys
import time


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    args = sys.argv[1:]
    cpu, out = False, None
    while args and args[0].startswith("--"):
        if args[0] == "--cpu":
            cpu, args = True, args[1:]
        elif args[0] == "--json" and len(args) > 1:
            out, args = args[1], args[2:]
        else:
            break
    if len(args) < 2 or not args[0].isdigit():
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs, commands = int(args[0]), args[1:]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    times = {c: [] for c in commands}
    cpus = {c: [] for c in commands}
    for c in commands:
        subprocess.run(c, shell=True, **quiet)
    for _ in range(runs):
        for c in commands:
            used = children_cpu()
            start = time.perf_counter()
            subprocess.run(c, shell=True, **quiet)
            times[c].append(time.perf_counter() - start)
            cpus[c].append(children_cpu() - used)
    for c in commands:
        t = sorted(times[c])
        q1, q3 = t[len(t) // 4], t[(3 * len(t)) // 4]
        line = f"{statistics.median(t) * 1000:9.1f} ms  (q1 {q1 * 1000:.1f}, q3 {q3 * 1000:.1f})"
        if cpu:
            line += f"  cpu {statistics.median(cpus[c]) * 1000:.1f} ms"
        print(f"{line}  {c}")
    if out:
        with open(out, "w") as f:
            json.dump(
                [
                    {
                        "command": c,
                        "wall": statistics.median(times[c]),
                        "cpu": statistics.median(cpus[c]),
                        "walls": times[c],
                        "cpus": cpus[c],
                    }
                    for c in commands
                ],
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
