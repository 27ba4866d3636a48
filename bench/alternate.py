#!/usr/bin/env python3
"""Times shell commands by turns: run 1 of each, then run 2 of each, and so
on, and prints each command's median and quartiles of wall-clock time.

hyperfine runs all runs of one command before the next, so a host whose
speed drifts within minutes (as shared machines do) favours whichever ran
in the faster minutes; taking turns spreads the drift over all commands.

    bench/alternate.py RUNS 'COMMAND' 'COMMAND'...

Each command runs once first, untimed (page cache, lazy loading). Output
goes to /dev/null.
"""
import statistics
import subprocess
import sys
import time


def main() -> int:
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs, commands = int(sys.argv[1]), sys.argv[2:]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    times = {c: [] for c in commands}
    for c in commands:
        subprocess.run(c, shell=True, **quiet)
    for _ in range(runs):
        for c in commands:
            start = time.perf_counter()
            subprocess.run(c, shell=True, **quiet)
            times[c].append(time.perf_counter() - start)
    for c in commands:
        t = sorted(times[c])
        q1, q3 = t[len(t) // 4], t[(3 * len(t)) // 4]
        print(f"{statistics.median(t) * 1000:9.1f} ms  (q1 {q1 * 1000:.1f}, q3 {q3 * 1000:.1f})  {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
