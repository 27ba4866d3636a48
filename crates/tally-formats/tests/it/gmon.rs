//! gprof's `gmon.out`: real files made by `gcc -pg` and checked against
//! GNU gprof's own reading of them, merging against `gprof -s`, round trips,
//! the BSD layouts, and bad input (errors with offsets, never panics).
//!
//! Tests that need gcc, gprof and nm print a note and pass when those tools
//! are missing (and fail under CI, which installs them); the others build
//! their files by hand.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_formats::Error;
use tally_formats::gmon::{
    Arc, BSD_DEFAULT_RATE, BSD44_VERSION, BlockCount, Endian, Gmon, GmonFormat, Histogram, Layout,
    SAMPLED_MARK,
};

const X86_64: Layout = Layout::X86_64;
const BE32: Layout = Layout {
    word_size: 4,
    endian: Endian::Big,
};

/// A program whose call counts are known: `leaf` is called exactly 1000
/// times, all from `middle`; `helper` 7 times, 3 from `main` and 4 from
/// `other`; `spin` burns CPU time for the histogram.
const PROGRAM: &str = r#"
static volatile unsigned long sink;
__attribute__((noinline)) void leaf(unsigned long i) { for (int k = 0; k < 200; k++) sink += i * k; }
__attribute__((noinline)) void middle(int n) { for (int i = 0; i < n; i++) leaf(i); }
__attribute__((noinline)) void helper(int i) { sink += i; }
__attribute__((noinline)) void other(void) { for (int i = 0; i < 4; i++) helper(i); }
__attribute__((noinline)) unsigned long spin(void) {
    unsigned long t = 0;
    for (unsigned long i = 0; i < 60000000UL; i++) t += i ^ sink;
    return t;
}
int main(void) {
    for (int r = 0; r < 10; r++) middle(100);
    for (int i = 0; i < 3; i++) helper(i);
    other();
    sink = spin();
    return 0;
}
"#;

/// A compiled and run profiled program.
struct Fixture {
    dir: tempfile::TempDir,
    gmon: PathBuf,
}

impl Fixture {
    /// Builds and runs [`PROGRAM`]; `None` (with a note) when gcc, gprof or
    /// nm is missing (a failure under CI) or this is not x86-64 Linux.
    fn new(test: &str) -> Option<Fixture> {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            eprintln!("note: {test} skipped: needs x86-64 Linux");
            return None;
        }
        if !tally_testutil::require(&["gcc", "gprof", "nm"]) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prog.c"), PROGRAM).unwrap();
        run(
            dir.path(),
            "gcc",
            &["-pg", "-g", "-O0", "prog.c", "-o", "prog"],
        );
        run(dir.path(), "./prog", &[]);
        let gmon = dir.path().join("gmon.out");
        assert!(gmon.exists(), "the profiled program wrote no gmon.out");
        Some(Fixture { dir, gmon })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn gprof(&self, args: &[&str]) -> String {
        run(self.dir.path(), "gprof", args)
    }

    /// Text symbols of the program: (start, end, name), sorted.
    fn functions(&self) -> Vec<(u64, u64, String)> {
        let out = run(self.dir.path(), "nm", &["-S", "--defined-only", "prog"]);
        let mut v: Vec<_> = out
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                match f.as_slice() {
                    [addr, size, "T" | "t", name] => {
                        let a = u64::from_str_radix(addr, 16).ok()?;
                        let s = u64::from_str_radix(size, 16).ok()?;
                        Some((a, a + s, name.to_string()))
                    }
                    _ => None,
                }
            })
            .collect();
        v.sort();
        v
    }
}

/// Runs a command in `dir`, panicking on failure; returns its stdout.
fn run(dir: &Path, cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Arc counts per (caller, callee) function name.
fn arcs_by_function(
    arcs: &[Arc],
    functions: &[(u64, u64, String)],
) -> BTreeMap<(String, String), u64> {
    let name = |pc: u64| {
        functions
            .iter()
            .find(|(a, e, _)| *a <= pc && pc < *e)
            .map(|f| f.2.clone())
            .unwrap_or_else(|| format!("{pc:#x}"))
    };
    let mut m = BTreeMap::new();
    for a in arcs {
        *m.entry((name(a.from_pc), name(a.self_pc))).or_insert(0) += a.count;
    }
    m
}

/// The arcs of gprof's call graph (`-b -q`), from the parent lines of each
/// entry: (caller, callee) → count.
fn gprof_arcs(call_graph: &str) -> BTreeMap<(String, String), u64> {
    let mut m = BTreeMap::new();
    let body = call_graph.split("Index by function name").next().unwrap();
    for block in body.split("-----------------------------------------------") {
        let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
        let Some(primary) = lines.iter().position(|l| l.starts_with('[')) else {
            continue;
        };
        let name_of = |l: &str| {
            let t: Vec<&str> = l.split_whitespace().collect();
            t[t.len() - 2].to_string()
        };
        let callee = name_of(lines[primary]);
        for l in &lines[..primary] {
            let Some(count) = l.split_whitespace().find(|t| t.contains('/')) else {
                continue;
            };
            let n: u64 = count.split('/').next().unwrap().parse().unwrap();
            m.insert((name_of(l), callee.clone()), n);
        }
    }
    m
}

fn to_bytes(g: &Gmon, layout: Layout) -> Vec<u8> {
    let mut out = Vec::new();
    g.write(&mut out, layout).unwrap();
    out
}

fn parse(bytes: &[u8], layout: Layout) -> Result<Gmon, Error> {
    Gmon::parse(bytes, Path::new("test.gmon"), layout)
}

fn put(out: &mut Vec<u8>, v: u64, len: usize, endian: Endian) {
    let b = v.to_le_bytes();
    match endian {
        Endian::Little => out.extend_from_slice(&b[..len]),
        Endian::Big => out.extend(b[..len].iter().rev()),
    }
}

/// The BSD encoding of a profile with one histogram: old header when
/// `rate` is `None`, 4.4BSD otherwise.
fn bsd_bytes(g: &Gmon, layout: Layout, rate: Option<u32>) -> Vec<u8> {
    let w = usize::from(layout.word_size);
    let e = layout.endian;
    let h = &g.histograms[0];
    let header = if rate.is_some() {
        2 * w + 24
    } else {
        2 * w + 4
    };
    let mut out = Vec::new();
    put(&mut out, h.low_pc, w, e);
    put(&mut out, h.high_pc, w, e);
    put(&mut out, (header + 2 * h.bins.len()) as u64, 4, e);
    if let Some(rate) = rate {
        put(&mut out, u64::from(BSD44_VERSION), 4, e);
        put(&mut out, u64::from(rate), 4, e);
        out.extend_from_slice(&[0; 12]);
    }
    for &b in &h.bins {
        put(&mut out, b, 2, e);
    }
    for a in &g.arcs {
        put(&mut out, a.from_pc, w, e);
        put(&mut out, a.self_pc, w, e);
        put(&mut out, a.count, w, e);
    }
    out
}

fn histogram(low_pc: u64, high_pc: u64, bins: Vec<u64>) -> Histogram {
    Histogram {
        low_pc,
        high_pc,
        prof_rate: 100,
        dimension: "seconds".into(),
        dimension_abbrev: 's',
        bins,
    }
}

/// A profile with every kind of record, built by hand.
fn sample() -> Gmon {
    Gmon {
        format: GmonFormat::Gnu { version: 1 },
        histograms: vec![
            histogram(0x1000, 0x1040, (0..16).map(|i| i * 3).collect()),
            histogram(0x2000, 0x2040, (0..16).map(|i| 100 - i).collect()),
        ],
        arcs: vec![
            Arc {
                from_pc: 0x1010,
                self_pc: 0x1030,
                count: 1000,
            },
            Arc {
                from_pc: 0x1034,
                self_pc: 0x2004,
                count: 7,
            },
        ],
        blocks: vec![
            BlockCount {
                address: 0x1002,
                count: 5,
            },
            BlockCount {
                address: 0x2010,
                count: 1 << 20,
            },
        ],
        sampled: false,
    }
}

/// Parses every truncation and many corruptions of `bytes`: each gives a
/// profile or an error at an offset inside the input, never a panic.
fn exercise(bytes: &[u8], layout: Layout) {
    let check = |b: &[u8]| match parse(b, layout) {
        Ok(g) => {
            let mut out = Vec::new();
            match g.write(&mut out, layout) {
                Ok(()) => {
                    let again = parse(&out, layout).unwrap();
                    assert_eq!(again.histograms, g.histograms);
                    assert_eq!(again.blocks, g.blocks);
                    assert_eq!(again.arcs, g.arcs);
                }
                // BSD arc counts are words, GNU ones 4 bytes: a count the
                // GNU layout cannot hold is refused, naming it.
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
                    assert!(g.arcs.iter().any(|a| a.count > u64::from(u32::MAX)), "{e}");
                }
            }
        }
        Err(Error::Binary { offset, .. }) => assert!(offset <= b.len() as u64),
        Err(e) => panic!("unexpected error kind: {e}"),
    };
    for end in 0..=bytes.len() {
        check(&bytes[..end]);
    }
    let mut b = bytes.to_vec();
    for i in 0..b.len() {
        let old = b[i];
        for v in [0x00, 0xff, old ^ 0x80, 0x01, 0x02] {
            b[i] = v;
            check(&b);
        }
        b[i] = old;
    }
}

#[test]
fn real_profile_agrees_with_gprof() {
    let Some(fx) = Fixture::new("real_profile_agrees_with_gprof") else {
        return;
    };
    let g = Gmon::read_file(&fx.gmon, X86_64).unwrap();
    assert_eq!(g.format, GmonFormat::Gnu { version: 1 });
    assert_eq!(g.histograms.len(), 1, "glibc writes one histogram");
    let h = &g.histograms[0];
    assert_eq!(h.prof_rate, 100);
    assert_eq!(h.dimension, "seconds");
    assert_eq!(h.dimension_abbrev, 's');
    assert!(g.blocks.is_empty());

    let functions = fx.functions();
    let spin = functions.iter().find(|f| f.2 == "spin").unwrap();
    assert!(h.low_pc <= spin.0 && spin.1 <= h.high_pc);
    assert!(h.bins.iter().sum::<u64>() > 0, "spin() was sampled");

    let ours = arcs_by_function(&g.arcs, &functions);
    let key = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(ours[&key("middle", "leaf")], 1000);
    assert_eq!(ours[&key("main", "middle")], 10);
    assert_eq!(ours[&key("main", "helper")], 3);
    assert_eq!(ours[&key("other", "helper")], 4);
    assert_eq!(ours.len(), 6, "{ours:?}");

    let theirs = gprof_arcs(&fx.gprof(&["-b", "-q", "prog", "gmon.out"]));
    assert_eq!(ours, theirs);

    let flat = fx.gprof(&["-b", "-p", "prog", "gmon.out"]);
    let expected = format!(
        "Each sample counts as {} {}.",
        1.0 / f64::from(h.prof_rate),
        h.dimension
    );
    assert!(flat.contains(&expected), "{flat}");
}

#[test]
fn writing_a_glibc_profile_reproduces_it_byte_for_byte() {
    let Some(fx) = Fixture::new("writing_a_glibc_profile_reproduces_it_byte_for_byte") else {
        return;
    };
    let bytes = std::fs::read(&fx.gmon).unwrap();
    let g = parse(&bytes, X86_64).unwrap();
    assert_eq!(to_bytes(&g, X86_64), bytes);

    let out = fx.path("copy.out");
    g.write_file(&out, X86_64).unwrap();
    assert_eq!(Gmon::read_file(&out, X86_64).unwrap(), g);
}

/// Ours against `gprof -s prog gmon.out gmon.out`. The header and the
/// histogram are byte-identical. The arcs cannot be: gprof rewrites each arc
/// as (caller's entry address, callee's entry address) and orders them by
/// symbol, which needs the program's symbols; so the arcs are compared per
/// function, and gprof must print the same report from both files.
#[test]
fn merge_and_write_match_gprof_sum() {
    let Some(fx) = Fixture::new("merge_and_write_match_gprof_sum") else {
        return;
    };
    let one = Gmon::read_file(&fx.gmon, X86_64).unwrap();
    let mut ours = one.clone();
    ours.merge(one.clone()).unwrap();
    assert_eq!(ours.arcs.len(), one.arcs.len());
    for (a, b) in ours.arcs.iter().zip(&one.arcs) {
        assert_eq!(a.count, 2 * b.count);
    }
    ours.write_file(&fx.path("ours.sum"), X86_64).unwrap();
    fx.gprof(&["-s", "prog", "gmon.out", "gmon.out"]);

    let gprof_sum = std::fs::read(fx.path("gmon.sum")).unwrap();
    let ours_sum = std::fs::read(fx.path("ours.sum")).unwrap();
    // gprof leaves the 12 spare bytes of the header uninitialised (they
    // hold whatever was on its stack); ours are zero, as glibc's.
    assert_eq!(ours_sum[..8], gprof_sum[..8]);
    assert_eq!(ours_sum[8..20], [0; 12]);
    let prefix = 20 + 1 + 8 + 8 + 4 + 4 + 16 + 2 * one.histograms[0].bins.len();
    assert!(
        ours_sum[20..prefix] == gprof_sum[20..prefix],
        "histogram records differ"
    );

    let theirs = Gmon::read_file(&fx.path("gmon.sum"), X86_64).unwrap();
    assert_eq!(theirs.histograms, ours.histograms);
    let functions = fx.functions();
    assert_eq!(
        arcs_by_function(&theirs.arcs, &functions),
        arcs_by_function(&ours.arcs, &functions)
    );

    assert_eq!(
        fx.gprof(&["-b", "prog", "ours.sum"]),
        fx.gprof(&["-b", "prog", "gmon.sum"])
    );
}

/// gprof sums bins in an `int` and writes the low 16 bits: 40000 + 40000
/// is written as 14464, a wrong number. [`Gmon::write`] refuses the bin,
/// naming it and its value.
#[test]
fn bins_beyond_16_bits_are_refused_where_gprof_wraps() {
    let mut g = sample();
    g.histograms[0].bins[3] = 40_000;
    let mut sum = g.clone();
    sum.merge(g.clone()).unwrap();
    assert_eq!(sum.histograms[0].bins[3], 80_000);
    let e = sum.write(&mut Vec::new(), X86_64).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("bin 3") && e.to_string().contains("80000"),
        "{e}"
    );

    let Some(fx) = Fixture::new("bins_beyond_16_bits_are_refused_where_gprof_wraps (gprof part)")
    else {
        return;
    };
    let mut g = Gmon::read_file(&fx.gmon, X86_64).unwrap();
    let bin = g.histograms[0].bins.iter().position(|&b| b > 0).unwrap();
    g.histograms[0].bins[bin] = 40_000;
    g.write_file(&fx.path("big.out"), X86_64).unwrap();
    // What GNU gprof -s itself does: the low 16 bits of the sum.
    fx.gprof(&["-s", "prog", "big.out", "big.out"]);
    let theirs = Gmon::read_file(&fx.path("gmon.sum"), X86_64).unwrap();
    assert_eq!(theirs.histograms[0].bins[bin], 14_464);

    let mut ours = g.clone();
    ours.merge(g).unwrap();
    assert_eq!(ours.histograms[0].bins[bin], 80_000);
    let e = ours.write_file(&fx.path("ours.sum"), X86_64).unwrap_err();
    assert!(e.to_string().contains("80000"), "{e}");
    assert!(!fx.path("ours.sum").exists(), "nothing written");
}

#[test]
fn bsd_files_read_like_gprof_reads_them() {
    let g = sample();
    let one = Gmon {
        histograms: vec![g.histograms[0].clone()],
        blocks: vec![],
        ..g.clone()
    };
    for layout in [X86_64, BE32] {
        let old = parse(&bsd_bytes(&one, layout, None), layout).unwrap();
        assert_eq!(old.format, GmonFormat::Bsd { bsd44: false });
        assert_eq!(old.histograms[0].prof_rate, BSD_DEFAULT_RATE);
        assert_eq!(old.histograms, one.histograms);
        assert_eq!(old.arcs, one.arcs);

        let new = parse(&bsd_bytes(&one, layout, Some(1000)), layout).unwrap();
        assert_eq!(new.format, GmonFormat::Bsd { bsd44: true });
        assert_eq!(new.histograms[0].prof_rate, 1000);
        assert_eq!(new.histograms[0].bins, one.histograms[0].bins);
        assert_eq!(new.arcs, one.arcs);
    }

    // Trailing bytes too few for an arc are ignored, as gprof does.
    let mut b = bsd_bytes(&one, BE32, None);
    b.extend_from_slice(&[1, 2, 3, 4, 5]);
    assert_eq!(parse(&b, BE32).unwrap().arcs, one.arcs);

    let Some(fx) = Fixture::new("bsd_files_read_like_gprof_reads_them (gprof part)") else {
        return;
    };
    let real = Gmon::read_file(&fx.gmon, X86_64).unwrap();
    let reference = fx.gprof(&["-b", "prog", "gmon.out"]);
    for (name, rate) in [("old.out", None), ("bsd44.out", Some(100))] {
        let bytes = bsd_bytes(&real, X86_64, rate);
        std::fs::write(fx.path(name), &bytes).unwrap();
        let bsd = parse(&bytes, X86_64).unwrap();
        assert_eq!(bsd.histograms, real.histograms);
        assert_eq!(bsd.arcs, real.arcs);
        assert_eq!(fx.gprof(&["-b", "prog", name]), reference, "{name}");
    }
}

#[test]
fn bsd_header_errors() {
    let one = Gmon {
        histograms: vec![sample().histograms[0].clone()],
        ..sample()
    };
    let mut swapped = one.clone();
    swapped.histograms[0].low_pc = 0x2000;
    let e = parse(&bsd_bytes(&swapped, BE32, None), BE32).unwrap_err();
    assert!(
        e.to_string().contains("byte 0: ") && e.to_string().contains("below low_pc"),
        "{e}"
    );

    // ncnt smaller than the header.
    let mut b = bsd_bytes(&one, BE32, None);
    b[8..12].copy_from_slice(&4u32.to_be_bytes());
    let e = parse(&b, BE32).unwrap_err();
    assert!(e.to_string().contains("byte 8: "), "{e}");

    // ncnt larger than the file.
    let mut b = bsd_bytes(&one, BE32, None);
    b[8..12].copy_from_slice(&0x7fff_0000u32.to_be_bytes());
    let e = parse(&b, BE32).unwrap_err();
    assert!(e.to_string().contains("byte 8: "), "{e}");

    // Shorter than the GNU header: gprof refuses whatever the layout.
    let e = parse(&bsd_bytes(&one, BE32, None)[..19], BE32).unwrap_err();
    assert!(e.to_string().contains("too short"), "{e}");
}

#[test]
fn round_trips_in_every_layout() {
    let g = sample();
    for layout in [
        X86_64,
        BE32,
        Layout::from_elf_class(false, true),
        Layout::from_elf_class(true, false),
        Layout::host(),
    ] {
        let bytes = to_bytes(&g, layout);
        assert_eq!(parse(&bytes, layout).unwrap(), g, "{layout:?}");
    }
    let mut odd = g.clone();
    odd.histograms[0].dimension = "µ-cycles".into();
    odd.histograms[0].dimension_abbrev = 'µ';
    odd.histograms[1].dimension = "fifteen chars!!".into();
    assert_eq!(parse(&to_bytes(&odd, BE32), BE32).unwrap(), odd);
}

/// The sampling mark survives writing, reading and merging; a glibc file
/// (zeros in the spare bytes) is not marked, and neither is anything but
/// the exact mark.
#[test]
fn the_sampling_mark_is_kept() {
    let g = Gmon {
        sampled: true,
        ..sample()
    };
    let bytes = to_bytes(&g, X86_64);
    assert_eq!(&bytes[8..20], SAMPLED_MARK);
    assert_eq!(parse(&bytes, X86_64).unwrap(), g);
    assert!(!parse(&to_bytes(&sample(), X86_64), X86_64).unwrap().sampled);
    let mut other = bytes.clone();
    other[19] = b'X';
    assert!(!parse(&other, X86_64).unwrap().sampled);
    let mut sum = sample();
    sum.merge(g).unwrap();
    assert!(sum.sampled, "a sum with a sampled part is sampled");
    if let Some(fx) = Fixture::new("the_sampling_mark_is_kept") {
        let real = parse(&std::fs::read(&fx.gmon).unwrap(), X86_64).unwrap();
        assert!(!real.sampled);
    }
}

#[test]
fn blocks_are_one_record_gprof_accepts() {
    let g = sample();
    let bytes = to_bytes(&g, X86_64);
    let tail = 1 + 4 + 2 * 16;
    assert_eq!(
        bytes[bytes.len() - tail],
        2,
        "one basic-block record at the end"
    );
    assert_eq!(bytes[bytes.len() - tail + 1..][..4], 2u32.to_le_bytes());

    // Several records (glibc writes one per compilation unit) are
    // concatenated.
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes[bytes.len() - tail..]);
    let back = parse(&two, X86_64).unwrap();
    assert_eq!(back.blocks.len(), 4);

    let Some(fx) = Fixture::new("blocks_are_one_record_gprof_accepts (gprof part)") else {
        return;
    };
    let mut real = Gmon::read_file(&fx.gmon, X86_64).unwrap();
    real.blocks = g.blocks.clone();
    real.write_file(&fx.path("bb.out"), X86_64).unwrap();
    let info = fx.gprof(&["-i", "prog", "bb.out"]);
    assert!(info.contains("\t1 histogram record\n"), "{info}");
    assert!(
        info.contains(&format!("\t{} call-graph records\n", real.arcs.len())),
        "{info}"
    );
    assert!(info.contains("\t1 basic-block count record\n"), "{info}");
}

#[test]
fn version_0_block_records() {
    let mut b = to_bytes(&Gmon::default(), BE32);
    b[4..8].copy_from_slice(&0u32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&2u32.to_be_bytes());
    b.extend_from_slice(b"prog.c\0");
    for (count, addr) in [(9u32, 0x400u32), (11, 0x480)] {
        b.extend_from_slice(&count.to_be_bytes());
        b.extend_from_slice(&addr.to_be_bytes());
        b.extend_from_slice(b"main\0prog.c\0");
        b.extend_from_slice(&12u32.to_be_bytes());
    }
    let g = parse(&b, BE32).unwrap();
    assert_eq!(g.format, GmonFormat::Gnu { version: 0 });
    assert_eq!(
        g.blocks,
        [
            BlockCount {
                address: 0x400,
                count: 9
            },
            BlockCount {
                address: 0x480,
                count: 11
            }
        ]
    );
    exercise(&b, BE32);
}

#[test]
fn merge_follows_gprof() {
    let g = sample();
    let mut m = g.clone();
    let mut other = g.clone();
    other.arcs.push(Arc {
        from_pc: 0x1,
        self_pc: 0x2,
        count: 3,
    });
    other.blocks.insert(
        0,
        BlockCount {
            address: 0x99,
            count: 1,
        },
    );
    other.histograms.push(Histogram {
        prof_rate: 1234,
        ..histogram(0x3000, 0x3040, vec![1; 16])
    });
    m.merge(other).unwrap();
    for (a, b) in m.histograms.iter().zip(&g.histograms) {
        let doubled: Vec<u64> = b.bins.iter().map(|x| 2 * x).collect();
        assert_eq!(a.bins, doubled);
    }
    assert_eq!(m.histograms.len(), 3);
    assert_eq!(m.histograms[2].prof_rate, 100, "gprof keeps the first rate");
    assert_eq!(m.arcs.len(), 3);
    assert_eq!(m.arcs[0].count, 2000);
    assert_eq!(m.arcs[2].count, 3);
    assert_eq!(m.blocks.len(), 3);
    assert_eq!(m.blocks[1].count, 2 << 20);
    assert_eq!(m.blocks[2].address, 0x99);

    // Into an empty profile: taken as is.
    let mut empty = Gmon::default();
    empty.merge(g.clone()).unwrap();
    assert_eq!(empty, g);

    let fails = |other: Gmon, what: &str| {
        let mut m = g.clone();
        let e = m.merge(other).unwrap_err();
        assert!(matches!(e, Error::Incompatible(_)), "{e}");
        assert!(e.to_string().contains(what), "{e}");
        assert_eq!(m, g, "unchanged on error");
    };
    let with = |h: Histogram| Gmon {
        histograms: vec![h],
        ..Gmon::default()
    };
    fails(with(histogram(0x1020, 0x1060, vec![0; 16])), "overlapping");
    fails(with(histogram(0x1000, 0x1080, vec![0; 16])), "bin sizes");
    fails(with(histogram(0x1000, 0x1040, vec![0; 32])), "bin sizes");
    fails(
        with(Histogram {
            dimension: "cycles".into(),
            ..histogram(0x1000, 0x1040, vec![0; 16])
        }),
        "dimension",
    );
    fails(
        with(Histogram {
            dimension_abbrev: 'c',
            ..histogram(0x1000, 0x1040, vec![0; 16])
        }),
        "abbreviation",
    );

    // BSD profiles must match the first histogram; 4.4BSD ones its rate.
    let bsd = |h: Histogram, bsd44: bool| Gmon {
        format: GmonFormat::Bsd { bsd44 },
        ..with(h)
    };
    fails(
        bsd(histogram(0x2000, 0x2040, vec![0; 16]), false),
        "incompatible",
    );
    fails(
        bsd(
            Histogram {
                prof_rate: 1000,
                ..histogram(0x1000, 0x1040, vec![0; 16])
            },
            true,
        ),
        "rate",
    );
    let mut m = g.clone();
    m.merge(bsd(histogram(0x1000, 0x1040, vec![1; 16]), true))
        .unwrap();
    assert_eq!(m.histograms[0].bins[0], 1);
}

#[test]
fn truncated_file_error_names_path_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truncated.gmon");
    let bytes = to_bytes(
        &Gmon {
            blocks: vec![],
            ..sample()
        },
        X86_64,
    );
    // Cut inside the last arc record, which starts 21 bytes before the end.
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    let e = Gmon::read_file(&path, X86_64).unwrap_err();
    let start = bytes.len() - 21;
    match &e {
        Error::Binary {
            path: p, offset, ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*offset, start as u64);
        }
        other => panic!("{other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{}: byte {start}: ", path.display())),
        "{msg}"
    );
    assert!(msg.contains("truncated call-graph arc record"), "{msg}");

    let missing = Gmon::read_file(&dir.path().join("missing"), X86_64).unwrap_err();
    assert!(matches!(missing, Error::Io { .. }));
}

#[test]
fn bad_headers_and_tags() {
    let good = to_bytes(&sample(), X86_64);

    let mut b = good.clone();
    b[20] = 7;
    let e = parse(&b, X86_64).unwrap_err();
    assert!(e.to_string().contains("byte 20: bad record tag 7"), "{e}");

    let mut b = good.clone();
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    let e = parse(&b, X86_64).unwrap_err();
    assert!(
        e.to_string().contains("byte 4: unsupported gmon version 2"),
        "{e}"
    );

    // Read with the wrong byte order: the version says so.
    let e = parse(&good, Layout::from_elf_class(true, false)).unwrap_err();
    assert!(e.to_string().contains("other byte order"), "{e}");

    let e = parse(
        &good,
        Layout {
            word_size: 2,
            endian: Endian::Little,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("word size 2"), "{e}");
}

/// A histogram or block count far beyond the file is refused before any
/// allocation.
#[test]
fn absurd_counts_are_refused_before_allocating() {
    let mut b = to_bytes(&Gmon::default(), X86_64);
    b.push(0);
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&0x1000u64.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend_from_slice(&100u32.to_le_bytes());
    b.extend_from_slice(b"seconds\0\0\0\0\0\0\0\0s");
    b.extend_from_slice(&[0; 64]);
    let e = parse(&b, X86_64).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("byte 37: histogram of 4294967295 bins"),
        "{msg}"
    );

    let mut b = to_bytes(&Gmon::default(), X86_64);
    b.push(2);
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    let e = parse(&b, X86_64).unwrap_err();
    assert!(
        e.to_string().contains("byte 21: 4294967295 basic blocks"),
        "{e}"
    );
}

#[test]
fn unwritable_values_are_refused() {
    let mut g = sample();
    g.arcs[0].from_pc = 1 << 40;
    let e = g.write(&mut Vec::new(), BE32).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(to_bytes(&g, X86_64).len() > 20, "fine in 64 bits");

    let mut g = sample();
    g.histograms[0].dimension = "sixteen chars!!!".into();
    let e = g.write(&mut Vec::new(), X86_64).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);

    let mut g = sample();
    g.histograms[0].dimension = "λ".into();
    assert!(g.write(&mut Vec::new(), X86_64).is_err());

    // Counts the format cannot hold are refused, naming what holds them,
    // never cut to their low bits.
    let mut g = sample();
    g.arcs[0].count = (1 << 32) + 5;
    let e = g.write(&mut Vec::new(), X86_64).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let (from, to) = (g.arcs[0].from_pc, g.arcs[0].self_pc);
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("from {from:#x} to {to:#x}")) && msg.contains("4294967301"),
        "{msg}"
    );
    g.arcs[0].count = u64::from(u32::MAX);
    let back = parse(&to_bytes(&g, X86_64), X86_64).unwrap();
    assert_eq!(back.arcs[0].count, u64::from(u32::MAX), "32 bits fit");

    let mut g = sample();
    g.blocks[0].count = (1 << 32) + 6;
    let e = g.write(&mut Vec::new(), BE32).unwrap_err();
    assert!(e.to_string().contains("4294967302"), "{e}");
    let back = parse(&to_bytes(&g, X86_64), X86_64).unwrap();
    assert_eq!(
        back.blocks[0].count,
        (1 << 32) + 6,
        "block counts are words"
    );
}

#[test]
fn corrupted_and_truncated_files_never_panic() {
    let g = sample();
    for layout in [X86_64, BE32] {
        exercise(&to_bytes(&g, layout), layout);
        let one = Gmon {
            histograms: vec![g.histograms[0].clone()],
            ..g.clone()
        };
        exercise(&bsd_bytes(&one, layout, None), layout);
        exercise(&bsd_bytes(&one, layout, Some(100)), layout);
    }
    let Some(fx) = Fixture::new("corrupted_and_truncated_files_never_panic (real file)") else {
        return;
    };
    exercise(&std::fs::read(&fx.gmon).unwrap(), X86_64);
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        gnu in any::<bool>(),
        wide in any::<bool>(),
        little in any::<bool>(),
    ) {
        let layout = Layout::from_elf_class(wide, little);
        let mut bytes = if gnu { b"gmon\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0".to_vec() } else { Vec::new() };
        if gnu && !little {
            bytes[4..8].copy_from_slice(&1u32.to_be_bytes());
        }
        bytes.extend_from_slice(&body);
        match parse(&bytes, layout) {
            Ok(g) => {
                let back = parse(&to_bytes(&g, layout), layout).unwrap();
                prop_assert_eq!(back.histograms, g.histograms);
            }
            Err(Error::Binary { offset, .. }) => prop_assert!(offset <= bytes.len() as u64),
            Err(e) => prop_assert!(false, "unexpected error kind: {}", e),
        }
    }
}
