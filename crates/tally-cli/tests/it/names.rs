//! Names that folded, Callgrind and Cachegrind output cannot hold as they
//! are: a function named by spaces only, one of 65,536 bytes, one with a
//! NUL byte, and one named like a header line (`events: x`). From a pprof
//! profile that holds them, `tally convert` writes each format so that
//! tally detects it as what it is and reads it back with the same names
//! and costs, or refuses it with exit status 1 and an error naming the
//! function, and leaves the output as it was.

use std::collections::BTreeMap;
use std::path::Path;
use tally_formats::{FileFormat, OutputFormat, OutputOptions, Source};
use tally_model::{AnyCost, Events, Format, Frame, FunctionKey, Part, Positions, Profile, Stacks};
use tally_testutil::path_str;

/// Self costs by function name.
type Own = BTreeMap<Vec<u8>, u64>;

/// A pprof file at `path` of two stacks, `name` (3 samples) and
/// `name;main` (5).
fn pprof_input(path: &Path, name: &[u8]) {
    let mut p = Profile::new(
        Format::Callgrind,
        Events::new(["samples"]).unwrap(),
        Positions::LINE,
    );
    let mut function = |n: &[u8]| {
        let key = FunctionKey {
            object: p.names.object(b""),
            file: p.names.file(b"prog.c"),
            name: p.names.symbol(n),
        };
        p.names.function(key)
    };
    let (f, main) = (function(name), function(b"main"));
    let mut stacks = Stacks::default();
    let frame = |s: &mut Stacks<u64>, function| {
        s.frame(Frame {
            function,
            line: 0,
            address: 0,
        })
    };
    let (ff, fm) = (frame(&mut stacks, f), frame(&mut stacks, main));
    stacks.add(&[ff], &[3]).unwrap();
    stacks.add(&[ff, fm], &[5]).unwrap();
    let mut part = Part::new(Positions::LINE, 1);
    stacks
        .derive_part(&p.names, Positions::LINE, &mut part)
        .unwrap();
    p.parts.push(part);
    p.stacks = Some(stacks);
    let options = OutputOptions {
        format: Some(OutputFormat::Pprof),
        ..Default::default()
    };
    tally_formats::write_profile(&p, path, &options).unwrap();
}

/// `path` read as every command reads it: its detected format, and the
/// profile.
fn read(path: &Path) -> (FileFormat, Profile<u64>) {
    let source = Source::open(path).unwrap();
    match tally_formats::read(&source, None).unwrap().0 {
        AnyCost::Unsigned(p) => (source.format(), p),
        AnyCost::Signed(_) => panic!("{}: read as a difference", path.display()),
    }
}

fn own(p: &Profile<u64>) -> Own {
    let mut own = Own::new();
    for part in &p.parts {
        part.lines.for_each(|l| {
            *own.entry(p.names.function_name(l.function).to_vec())
                .or_default() += l.costs[0];
        });
    }
    own.retain(|_, c| *c != 0);
    own
}

/// The stacks by name, root first, with their counts.
fn stacks(p: &Profile<u64>) -> BTreeMap<Vec<Vec<u8>>, u64> {
    let s = p.stacks.as_ref().expect("stacks");
    s.samples
        .iter()
        .map(|sample| {
            let names = sample
                .frames
                .iter()
                .map(|f| p.names.function_name(s.frames[f.index()].function).to_vec())
                .collect();
            (names, sample.costs[0])
        })
        .collect()
}

/// A name as tally's messages show it: control bytes escaped, a long
/// name cut.
fn shown(name: &[u8]) -> String {
    tally_formats::escape::shown(name)
}

fn converts(name: &[u8]) {
    let dir = tally_testutil::temp_dir();
    let tally = tally_testutil::tally!().in_dir(dir.path());
    let input = dir.path().join("in.pb.gz");
    pprof_input(&input, name);
    let main = b"main".to_vec();

    // Folded stacks hold every name: detected as folded, read back whole,
    // and converted back to pprof with the same stacks.
    tally.ok(&["convert", "in.pb.gz", "-o", "out.folded"]);
    let folded = dir.path().join("out.folded");
    let (format, p) = read(&folded);
    assert_eq!(format, FileFormat::Folded);
    let want = BTreeMap::from([
        (vec![name.to_vec()], 3),
        (vec![name.to_vec(), main.clone()], 5),
    ]);
    assert_eq!(stacks(&p), want);
    let out = tally.ok(&["check", "out.folded"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("valid folded stacks profile"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    tally.ok(&["convert", "out.folded", "-o", "back.pb.gz"]);
    let (_, back) = read(&dir.path().join("back.pb.gz"));
    assert_eq!(stacks(&back), want);

    // Callgrind and Cachegrind hold every name but one that starts with a
    // space, which their readers skip: that one is refused.
    for (to, file) in [
        ("callgrind", "out.callgrind"),
        ("cachegrind", "out.cachegrind"),
    ] {
        let path = dir.path().join(file);
        std::fs::write(&path, b"old\n").unwrap();
        let args = ["convert", "in.pb.gz", "--to", to, "-o", file];
        if name.starts_with(b" ") {
            let e = tally.fails(&args);
            assert!(
                e.contains(&format!("function name `{}`", shown(name))),
                "{e}"
            );
            assert_eq!(std::fs::read(&path).unwrap(), b"old\n");
            let names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
            continue;
        }
        tally.ok(&args);
        tally.ok(&["check", path_str(&path)]);
        let (format, p) = read(&path);
        assert!(
            matches!(format, FileFormat::Callgrind | FileFormat::Cachegrind),
            "{to}: {format:?}"
        );
        assert_eq!(
            own(&p),
            Own::from([(name.to_vec(), 3), (main.clone(), 5)]),
            "{to}"
        );
        if to == "callgrind" {
            let mut calls = Vec::new();
            for c in p.parts[0].calls.iter() {
                let n = |f| p.names.function_name(f).to_vec();
                calls.push((n(c.info.caller), n(c.info.callee), c.inclusive[0]));
            }
            assert_eq!(calls, [(name.to_vec(), main.clone(), 5)]);
        }
    }
}

#[test]
fn a_name_of_spaces_only() {
    converts(b"   ");
}

#[test]
fn a_name_of_65536_bytes() {
    converts(&[b'x'; 65_536]);
}

#[test]
fn a_name_with_a_nul_byte() {
    converts(b"a\0b");
}

#[test]
fn a_name_like_a_header_line() {
    converts(b"events: x");
}
