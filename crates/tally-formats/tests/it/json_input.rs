//! tally's JSON form read back: every fixture format written as JSON
//! reads back to a profile that writes the same JSON again (so nothing the
//! form holds is lost or changed), recorded stacks come back with their
//! labels and timeline, differences come back signed, and malformed files
//! are refused with the file and the line of the value at fault.

use std::path::Path;

use tally_formats::{FileFormat, Source, json};
use tally_model::{AnyCost, AnyProfile};
use tally_testutil::data;

fn json_of(p: &AnyProfile) -> Vec<u8> {
    let mut out = Vec::new();
    match p {
        AnyCost::Unsigned(p) => json::write(p, &mut out).unwrap(),
        AnyCost::Signed(p) => json::write(p, &mut out).unwrap(),
    }
    out
}

/// The profile read from `bytes` through the one input path, as a file.
fn read_back(name: &str, bytes: Vec<u8>) -> AnyProfile {
    let source = Source::from_bytes(name, bytes);
    assert_eq!(source.format(), FileFormat::TallyJson, "{name}");
    tally_formats::read(&source, None).unwrap().0
}

#[test]
fn every_format_reads_back_to_the_same_json() {
    for rel in [
        "callgrind/mutual.default.out",
        "callgrind/inline.jumps.out",
        "callgrind/inline.cache.out",
        "cachegrind/inline.branch.out",
        "merge/ab.cg_diff",
        "stacks/stacks.perf.data",
        "stacks/stacks.pb.gz",
        "stacks/labels.pb.gz",
        "stacks/stacks.folded",
        "stacks/stacks.perf.script",
    ] {
        let path = data(rel);
        let (original, _) = tally_formats::read(&Source::open(&path).unwrap(), None).unwrap();
        let first = json_of(&original);
        let back = read_back(rel, first.clone());
        assert_eq!(back.is_signed(), original.is_signed(), "{rel}");
        let again = json_of(&back);
        assert!(
            first == again,
            "{rel}: the JSON read back writes differently:\n{}\n---\n{}",
            String::from_utf8_lossy(&first[..first.len().min(3000)]),
            String::from_utf8_lossy(&again[..again.len().min(3000)])
        );
        // Recorded stacks come back as they were, labels and all.
        if let (AnyCost::Unsigned(a), AnyCost::Unsigned(b)) = (&original, &back) {
            assert_eq!(a.stacks, b.stacks, "{rel}");
            assert_eq!(
                a.stacks.as_ref().map(|s| s.timeline.clone()),
                b.stacks.as_ref().map(|s| s.timeline.clone()),
                "{rel}"
            );
            assert_eq!(a.totals(), b.totals(), "{rel}");
        }
    }
}

#[test]
fn stacks_give_the_part_the_recording_derived() {
    let path = data("stacks/stacks.perf.data");
    let (p, _) = tally_formats::read_file::<u64>(&path, None).unwrap();
    let mut bytes = Vec::new();
    json::write(&p, &mut bytes).unwrap();
    let q = json::read_as::<u64>(Path::new("p.json"), &bytes).unwrap();
    // Functions keep their ids, so the derived records match one for one.
    assert_eq!(p.parts.len(), q.parts.len());
    let lines = |p: &tally_model::Profile<u64>| {
        let mut v = Vec::new();
        p.parts[0].lines.for_each(|l| {
            v.push((
                p.names.function_name(l.function).to_vec(),
                l.positions.to_vec(),
                l.costs.to_vec(),
            ))
        });
        v
    };
    assert_eq!(lines(&p), lines(&q));
    let calls = |p: &tally_model::Profile<u64>| {
        p.parts[0]
            .calls
            .iter()
            .map(|c| {
                (
                    c.info.caller,
                    c.info.callee,
                    c.info.count,
                    c.inclusive.to_vec(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(calls(&p), calls(&q));
    assert!(!calls(&q).is_empty());
    assert_eq!(p.parts[0].info, q.parts[0].info);
}

/// A small profile written by tally, one record a line.
fn small() -> Vec<u8> {
    let (p, _) =
        tally_formats::read_file::<u64>(&data("callgrind/mutual.default.out"), None).unwrap();
    let mut bytes = Vec::new();
    json::write(&p, &mut bytes).unwrap();
    bytes
}

fn error_of(bytes: &[u8]) -> String {
    let source = Source::from_bytes("bad.json", bytes.to_vec());
    match tally_formats::read(&source, None) {
        Ok(_) => panic!("read: {}", String::from_utf8_lossy(bytes)),
        Err(e) => e.to_string(),
    }
}

/// The 1-based line of the first occurrence of `what` in `bytes`.
fn line_of(bytes: &[u8], what: &str) -> usize {
    let text = String::from_utf8_lossy(bytes);
    let at = text.find(what).unwrap();
    text[..at].matches('\n').count() + 1
}

#[test]
fn bad_ids_are_refused_with_their_line() {
    let good = String::from_utf8(small()).unwrap();
    // The second call's callee, far out of range.
    let second = good.match_indices("\n{\"caller\":").nth(1).unwrap().0;
    let callee = second + good[second..].find("\"callee\":").unwrap() + "\"callee\":".len();
    let end = callee + good[callee..].find(',').unwrap();
    let bad = format!("{}999{}", &good[..callee], &good[end..]);
    let line = line_of(bad.as_bytes(), "\"callee\":999");
    let e = error_of(bad.as_bytes());
    assert!(
        e.starts_with(&format!(
            "bad.json:{line}: malformed `parts[0].calls[1].callee`: function 999 is out of range"
        )),
        "{e}"
    );
    // A line's function in a part.
    let first = good.find("\n{\"function\":").unwrap() + "\n{\"function\":".len();
    let end = first + good[first..].find(',').unwrap();
    let bad = format!("{}99999{}", &good[..first], &good[end..]);
    let line = line_of(bad.as_bytes(), "{\"function\":99999");
    let e = error_of(bad.as_bytes());
    assert!(
        e.starts_with(&format!(
            "bad.json:{line}: malformed `parts[0].functions[0].function`: function 99999 is out of range"
        )),
        "{e}"
    );
    // A line with more positions than the profile has.
    let lines = good.find("\"lines\":[").unwrap();
    let bad = format!(
        "{}{}",
        &good[..lines],
        good[lines..].replacen("\"positions\":[", "\"positions\":[1,", 1)
    );
    let e = error_of(bad.as_bytes());
    assert!(e.contains("positions where the profile has"), "{e}");
}

#[test]
fn malformed_json_names_the_line_and_never_panics() {
    let good = small();
    let e = error_of(&good[..good.len() / 2]);
    let line = good[..good.len() / 2]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    assert!(
        e.starts_with(&format!("bad.json:{line}: not tally's JSON form")),
        "{e}"
    );
    // Cut anywhere, or with a byte changed anywhere: an error or a
    // profile, never a panic.
    for at in (0..good.len()).step_by(97) {
        let _ = tally_formats::read(&Source::from_bytes("cut.json", good[..at].to_vec()), None);
        let mut changed = good.clone();
        changed[at] = match changed[at] {
            b'0'..=b'8' => changed[at] + 1,
            b'9' => b'-',
            b'"' => b'x',
            _ => b'9',
        };
        let _ = tally_formats::read(&Source::from_bytes("changed.json", changed), None);
    }
    let e = error_of(br#"{"tally_json":2,"events":[]}"#);
    assert!(e.contains("schema version 2"), "{e}");
}

#[test]
fn a_negative_count_reads_as_a_difference() {
    let good = String::from_utf8(small()).unwrap();
    let at = good.find("\"self\":[").unwrap() + "\"self\":[".len();
    // The first line's first cost made negative.
    let line = at + good[at..].find("\"costs\":[").unwrap() + "\"costs\":[".len();
    let bad = format!("{}-{}", &good[..line], &good[line..]);
    let source = Source::from_bytes("d.json", bad.into_bytes());
    let (p, _) = tally_formats::read(&source, None).unwrap();
    assert!(p.is_signed());
}
