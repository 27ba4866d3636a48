#!/usr/bin/env python3
"""make.py - write the byte-level DCPI 0.07 fixtures, one per rule of
dcpiformat(4), and EXPECTED.tsv: what reading each must give.

SPDX-License-Identifier: MIT OR Apache-2.0

Each file is built here from the specification's grammar with struct.pack
(little-endian u32), not by tally, so the reader is checked against an
independent writer. EXPECTED.tsv columns: file, then `ok ADDRESSES SAMPLES`
(sampled addresses and their sum) or `error OFFSET PHRASE` (the byte offset
the error must name and a phrase its message must contain).
"""
import struct

REQ = [
    ("image", "3f2a9c01"),
    ("epoch", "2611221040"),
    ("platform", "x86_64 Linux"),
    ("event", "cycles"),
    ("period", "62976"),
    ("tsize", "4096"),
    ("cpuspeed", "2400"),
]


def header(lines, pad=True, terminator="samples"):
    text = "".join(f"{k} {v}\n" for k, v in lines)
    t = text + terminator
    if pad:
        while (len(t) + 1) % 4:
            t += " "
    return (t + "\n").encode()


def u32(*v):
    return b"".join(struct.pack("<I", x) for x in v)


def chunk(offset, counts):
    return u32(offset, len(counts), *counts)


def footer(addresses, samples):
    return u32(addresses, samples)


files = []


def ok(name, data, addresses, samples):
    files.append((name, data, f"ok\t{addresses}\t{samples}"))


def bad(name, data, offset, phrase):
    files.append((name, data, f"error\t{offset}\t{phrase}"))


# --- valid files
h = header(REQ)
ok("minimal.dcpi", h + chunk(0x10, [5]) + footer(1, 5), 1, 5)
ok("no-samples.dcpi", h + footer(0, 0), 0, 0)
full = REQ[:3] + [("cpuamask", "3"), ("cpuimplv", "2"), ("cpucount", "2")] + REQ[3:] + [
    ("path", "/usr/bin/my program"),
    ("tstart", "401000"),
    ("vendor-note", "kept\tverbatim  by writers"),
]
h = header(full)
ok(
    "full.dcpi",
    h + chunk(0x0, [1, 0, 2]) + chunk(0x20, [7]) + chunk(0x21, [0, 0, 9]) + footer(4, 19),
    4,
    19,
)
# Tabs between key and value; no padding (the spec only asks for it).
h = "".join(f"{k}\t{v}\n" for k, v in REQ).encode() + b"samples\n"
ok("tabs-unpadded.dcpi", h + chunk(3, [1, 1]) + footer(2, 2), 2, 2)
# Alpha: counts are 4 bytes apart, so [0x100, 0x10c) is taken and 0x10c
# may start the next chunk.
alpha = [(k, "alpha OSF1 V5.1" if k == "platform" else v) for k, v in REQ]
h = header(alpha)
ok("alpha.dcpi", h + chunk(0x100, [1, 2, 3]) + chunk(0x10C, [4]) + footer(4, 10), 4, 10)
# The long epoch form.
h = header([(k, "20261122104000" if k == "epoch" else v) for k, v in REQ])
ok("epoch-long.dcpi", h + chunk(0, [1]) + footer(1, 1), 1, 1)

# --- header errors
def without(key):
    return [(k, v) for k, v in REQ if k != key]


for key in ["image", "event", "period", "tsize"]:
    h = header(without(key))
    bad(f"missing-{key}.dcpi", h + footer(0, 0), len(h), f"no `{key}` line")
h = header(REQ[:1] + REQ)  # image twice: the second is line 2
bad("duplicate-image.dcpi", h + footer(0, 0), len("image 3f2a9c01\n"), "`image` appears twice")
opt = REQ + [("cpucount", "2"), ("cpucount", "4")]
h = header(opt)
off = len("".join(f"{k} {v}\n" for k, v in opt[:-1]))
bad("duplicate-cpucount.dcpi", h + footer(0, 0), off, "`cpucount` appears twice")
h = header([(k, "3f2g" if k == "image" else v) for k, v in REQ])
bad("bad-image.dcpi", h + footer(0, 0), 0, "hexadecimal")
h = header([(k, "26112210" if k == "epoch" else v) for k, v in REQ])
bad("bad-epoch.dcpi", h + footer(0, 0), len("image 3f2a9c01\n"), "YYMMDDHHMM")
h = header([(k, "62,976" if k == "period" else v) for k, v in REQ])
off = len("".join(f"{k} {v}\n" for k, v in REQ[:4]))
bad("bad-period.dcpi", h + footer(0, 0), off, "decimal")
text = "".join(f"{k} {v}\n" for k, v in REQ) + "path\n"
h = (text + "samples\n").encode()
bad("no-value.dcpi", h + footer(0, 0), len(text) - len("path\n"), "has no value")
text = "".join(f"{k} {v}\n" for k, v in REQ)
bad("no-samples-line.dcpi", text.encode(), len(text), "no `samples` line")
# The binary part where `samples` should be: the header never ends.
data = text.encode() + chunk(0, [1]) + footer(1, 1)
bad("binary-in-header.dcpi", data, len(text), "no `samples` line")

# --- binary errors
h = header(REQ)
n = len(h)
bad("no-footer.dcpi", h + u32(0), n, "footer")
bad("not-words.dcpi", h + chunk(0, [1]) + footer(1, 1) + b"\x00\x00", n + 20, "32-bit")
bad("empty-chunk.dcpi", h + u32(0x10, 0) + footer(0, 0), n + 4, "no counts")
# number says 5 counts, 2 are there before the footer
bad("truncated-chunk.dcpi", h + u32(0x10, 5, 1, 1) + footer(2, 2), n + 4, "fit before the footer")
bad(
    "overlap.dcpi",
    h + chunk(0x10, [1, 1, 1]) + chunk(0x12, [1]) + footer(4, 4),
    n + 20,
    "overlaps",
)
bad(
    "decreasing.dcpi",
    h + chunk(0x40, [1]) + chunk(0x10, [1]) + footer(2, 2),
    n + 12,
    "must increase",
)
bad(
    "alpha-overlap.dcpi",
    header(alpha) + chunk(0x100, [1, 2, 3]) + chunk(0x108, [4]) + footer(4, 10),
    len(header(alpha)) + 20,
    "overlaps",
)
bad("footer-count.dcpi", h + chunk(0, [1, 0, 2]) + footer(3, 3), n + 20, "sampled addresses")
bad("footer-sum.dcpi", h + chunk(0, [1, 0, 2]) + footer(2, 4), n + 24, "the chunks sum to 3")

with open("EXPECTED.tsv", "w") as f:
    f.write("# file\toutcome\tdetails (see make.py)\n")
    for name, data, expect in files:
        with open(name, "wb") as g:
            g.write(data)
        f.write(f"{name}\t{expect}\n")
