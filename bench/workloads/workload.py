"""A CPython workload for the benchmark corpus (bench/corpus.sh).

`python3 workload.py MIX`: MIX `a` leans on dictionaries, strings and
JSON, `b` on numbers, sorting and regular expressions, so that two runs
make a realistic pair for `merge` and `diff` (one program, two inputs).
"""

import json
import re
import sys


def words(n, seed):
    out = []
    x = seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append("w%x" % (x % 5003))
    return out


def mix_a(scale):
    counts = {}
    for w in words(4000 * scale, 7):
        counts[w] = counts.get(w, 0) + 1
    doc = json.dumps({"counts": counts, "top": sorted(counts.items())[:50]})
    back = json.loads(doc)
    text = " ".join("%s=%d" % tuple(kv) for kv in back["top"])
    return len(doc) + len(text.upper().split())


def mix_b(scale):
    nums = [(i * 7919) % 10007 for i in range(6000 * scale)]
    nums.sort()
    total = sum(n * n for n in nums) % 1000003
    pattern = re.compile(r"(\d+)-(\d+)")
    line = "-".join(str(n) for n in nums[:3000])
    found = sum(int(a) + int(b) for a, b in pattern.findall(line))
    return total + found


def main():
    mix = sys.argv[1] if len(sys.argv) > 1 else "a"
    scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    r = mix_a(scale) if mix == "a" else mix_b(scale)
    r += mix_b(1) if mix == "a" else mix_a(1)
    print(r)


main()
