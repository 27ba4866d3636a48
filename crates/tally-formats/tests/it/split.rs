//! A file read in two regions, one per core, reads as one parser reading
//! it whole: the same profile (names in the same order), counts,
//! warnings and running sums, or the same error, wherever the cut falls;
//! and on Valgrind's own files the second region is taken, not read again.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use tally_formats::{Input, callgrind};
use tally_model::NullSink;
use tally_testutil::function_lines;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel)
}

/// The profiles of the test data a split read can take: Valgrind's
/// Callgrind and Cachegrind files, other tools' Callgrind files, the
/// format's examples and the broken files.
fn profiles() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["callgrind", "cachegrind", "other", "spec", "bad"] {
        let mut names: Vec<PathBuf> = std::fs::read_dir(fixture(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let extra = [
                    ".annotate",
                    ".expected",
                    ".cg_annotate",
                    ".gz",
                    ".md",
                    ".txt",
                ];
                p.is_file() && !extra.iter().any(|x| name.contains(x))
            })
            .collect();
        names.sort();
        out.extend(names);
    }
    out
}

/// One read of `path`: whole, or in two regions cut at the first place
/// from `at` on.
fn read(path: &Path, at: Option<u64>) -> Result<callgrind::ReadOutcome<u64>, String> {
    let options = callgrind::ReadOptions {
        split: Some(at.is_some()),
        split_at: at,
        two_threads: Some(false),
        ..Default::default()
    };
    let input = Input::open(path).map_err(|e| e.to_string())?;
    callgrind::parse(input, &mut NullSink, options).map_err(|e| e.to_string())
}

/// Asserts that the read cut from `at` equals the whole read; returns
/// whether its second region was taken.
fn agree(path: &Path, at: u64) -> bool {
    let name = path.display();
    match (read(path, None), read(path, Some(at))) {
        (Ok(a), Ok(b)) => {
            assert!(
                a.profile == b.profile,
                "{name}, cut from {at}: profiles differ"
            );
            assert_eq!(a.stats, b.stats, "{name}, cut from {at}");
            assert_eq!(a.warnings, b.warnings, "{name}, cut from {at}");
            assert_eq!(a.sums, b.sums, "{name}, cut from {at}");
            assert_eq!(a.bytes, b.bytes, "{name}, cut from {at}");
            assert_eq!(a.split_at, None);
            b.split_at.is_some()
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "{name}, cut from {at}");
            false
        }
        (a, b) => panic!("{name}, cut from {at}: {:?} / {:?}", a.err(), b.err()),
    }
}

#[test]
fn every_cut_of_the_test_profiles_reads_the_same() {
    let (mut taken_valgrind, mut missed) = (0, Vec::new());
    for path in profiles() {
        let bytes = std::fs::read(&path).unwrap();
        let cuts = function_lines(&bytes);
        // At most 48 cuts a file, spread over it, and just before and
        // after each of them.
        let step = cuts.len().div_ceil(48).max(1);
        let mut taken = 0;
        for &c in cuts.iter().step_by(step) {
            for at in [c.saturating_sub(1), c, c + 1] {
                taken += usize::from(agree(&path, at));
            }
        }
        let name = path.file_name().unwrap().to_string_lossy();
        let valgrind = path.parent().unwrap().ends_with("callgrind")
            || path.parent().unwrap().ends_with("cachegrind");
        if valgrind && bytes.len() > 4096 && read(&path, None).is_ok() {
            if taken == 0 {
                missed.push(name.into_owned());
            } else {
                taken_valgrind += 1;
            }
        }
    }
    assert!(missed.is_empty(), "no cut taken in {missed:?}");
    assert!(
        taken_valgrind > 20,
        "only {taken_valgrind} files were split"
    );
}

/// A file of several parts (Callgrind's `--dump-every-bb`) is cut within
/// any part, its parts' counts kept apart.
#[test]
fn a_cut_in_a_later_part_is_taken() {
    let path = fixture("callgrind/mutual.dumpevery.out.1");
    let bytes = std::fs::read(&path).unwrap();
    let parts = memchr::memmem::find_iter(&bytes, b"\npart:").count();
    assert!(parts >= 1, "the fixture has parts");
    let last_part = memchr::memmem::rfind(&bytes, b"\npart:").unwrap() as u64;
    let cuts = function_lines(&bytes);
    let later: Vec<u64> = cuts.into_iter().filter(|&c| c > last_part).collect();
    assert!(
        later.iter().any(|&c| agree(&path, c)),
        "no cut in the last part taken"
    );
}

fn mutated(bytes: &[u8], at: usize, what: u8, kind: u8) -> Vec<u8> {
    let mut b = bytes.to_vec();
    let at = at % b.len();
    match kind % 4 {
        0 => b[at] = what,
        1 => {
            b.drain(at..(at + usize::from(what % 40)).min(b.len()));
        }
        2 => {
            // An id the file defines, defined again with another name.
            let redefined = memchr::memmem::find(bytes, b"\nfn=(").map(|k| {
                let id =
                    &bytes[k + 5..k + 5 + bytes[k + 5..].iter().position(|&b| b == b')').unwrap()];
                [b"fn=(", id, b") redefined\n"].concat()
            });
            let line: &[u8] = match what % 6 {
                0 => b"fn=(999999)\n",
                1 => redefined.as_deref().unwrap_or(b"fn=(1) redefined\n"),
                2 => b"calls=1 0x10\n",
                3 => b"totals: 1\n",
                4 => b"fl=(2)\n",
                _ => b"ob=(77) new\n",
            };
            let start = memchr::memrchr(b'\n', &b[..at]).map_or(0, |k| k + 1);
            b.splice(start..start, line.iter().copied());
        }
        _ => b.truncate(at),
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    /// Mutated real files (a byte changed, bytes deleted, a line put in,
    /// the file cut short) read the same whole and split anywhere.
    #[test]
    fn mutated_files_read_the_same_split(
        file in 0usize..5,
        at in any::<usize>(),
        what in any::<u8>(),
        kind in any::<u8>(),
        cut in any::<usize>(),
    ) {
        let sources = [
            "callgrind/workload.combo.out",
            "callgrind/workload.callers2.out",
            "callgrind/recursion.jumps.out",
            "callgrind/inline.nocompress.out",
            "cachegrind/recursion.out",
        ];
        let bytes = std::fs::read(fixture(sources[file])).unwrap();
        let data = mutated(&bytes, at, what, kind);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile.out");
        std::fs::write(&path, &data).unwrap();
        let cuts = function_lines(&data);
        if !cuts.is_empty() {
            agree(&path, cuts[cut % cuts.len()]);
        }
    }
}

/// The records a sink is given, in order, with their ids and sequence
/// numbers; split and absorbed as the readers' contract says.
#[derive(Default, PartialEq, Debug)]
struct Records(Vec<Record>);

#[derive(PartialEq, Debug)]
enum Record {
    Part,
    Line(u32, u32, Vec<u64>, Vec<u64>),
    Call([u32; 3], u64, u64, Vec<u64>, Vec<u64>, Vec<u64>),
    Jump([u32; 4], bool, u64, u64, u64, Vec<u64>, Vec<u64>),
}

impl tally_model::Sink<u64> for Records {
    fn start_part(&mut self, _: tally_model::Positions, _: usize) {
        self.0.push(Record::Part);
    }
    fn line(
        &mut self,
        f: tally_model::FunctionId,
        file: tally_model::FileId,
        p: &[u64],
        c: &[u64],
    ) {
        self.0
            .push(Record::Line(f.0, file.0, p.to_vec(), c.to_vec()));
    }
    fn call(&mut self, i: tally_model::CallInfo<u64>, site: &[u64], target: &[u64], c: &[u64]) {
        let ids = [i.caller.0, i.site_file.0, i.callee.0];
        let (site, target) = (site.to_vec(), target.to_vec());
        self.0
            .push(Record::Call(ids, i.count, i.seq, site, target, c.to_vec()));
    }
    fn jump(&mut self, i: tally_model::JumpInfo<u64>, source: &[u64], target: &[u64]) {
        let ids = [i.function.0, i.file.0, i.target_function.0, i.target_file.0];
        let (s, t) = (source.to_vec(), target.to_vec());
        self.0.push(Record::Jump(
            ids,
            i.conditional,
            i.executed,
            i.taken,
            i.seq,
            s,
            t,
        ));
    }
    fn split(&self) -> Option<Self> {
        Some(Records::default())
    }
    fn absorb(&mut self, later: Self, ids: &tally_model::Renumbering) {
        let f = |i: u32| ids.functions[i as usize].0;
        let file = |i: u32| ids.files[i as usize].0;
        let mut records = later.0.into_iter();
        assert_eq!(
            records.next(),
            Some(Record::Part),
            "a region begins with its part"
        );
        for r in records {
            self.0.push(match r {
                Record::Part => Record::Part,
                Record::Line(a, b, p, c) => Record::Line(f(a), file(b), p, c),
                Record::Call([a, b, c], n, seq, s, t, x) => {
                    Record::Call([f(a), file(b), f(c)], n, seq + ids.seq, s, t, x)
                }
                Record::Jump([a, b, c, d], k, e, t, seq, s, g) => {
                    Record::Jump([f(a), file(b), f(c), file(d)], k, e, t, seq + ids.seq, s, g)
                }
            });
        }
    }
}

/// A sink that keeps every record gets the same records, ids and
/// sequence numbers from a split read as from a whole one.
#[test]
fn a_split_sink_gets_the_records_of_a_whole_read() {
    let read = |path: &Path, at: Option<u64>| {
        let options = callgrind::ReadOptions {
            split: Some(at.is_some()),
            split_at: at,
            ..Default::default()
        };
        let mut sink = Records::default();
        let out = callgrind::parse(Input::open(path).unwrap(), &mut sink, options).ok()?;
        Some((sink, out.split_at.is_some()))
    };
    let mut taken = 0;
    for rel in tally_testutil::SPLIT_PROFILES {
        let path = tally_testutil::data(rel);
        let bytes = std::fs::read(&path).unwrap();
        let (whole, _) = read(&path, None).unwrap();
        let cuts = function_lines(&bytes);
        for &c in cuts.iter().step_by(cuts.len().div_ceil(24).max(1)) {
            let (split, was) = read(&path, Some(c)).unwrap();
            assert!(split == whole, "{rel}, cut at {c}: records differ");
            taken += usize::from(was);
        }
    }
    assert!(taken > 50, "only {taken} cuts taken");
}
