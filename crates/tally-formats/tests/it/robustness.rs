//! Bad input never panics: mutated and truncated real profiles give a
//! profile or an error, and errors point at a line of the input.

use crate::common::tabbed;
use proptest::prelude::*;
use std::path::Path;
use tally_formats::{Error, Input, callgrind};

fn fixture(rel: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The fast and the careful path agree: the same profile, or an error at
/// the same line.
fn paths_agree(bytes: &[u8]) {
    let a = callgrind::read::<u64>(Input::from_bytes("a", bytes.to_vec()).unwrap());
    let b = callgrind::read::<u64>(Input::from_bytes("b", tabbed(bytes)).unwrap());
    match (a, b) {
        (Ok((x, _)), Ok((y, _))) => assert!(x == y, "fast and careful paths read differently"),
        (Err(Error::Parse { line: x, .. }), Err(Error::Parse { line: y, .. })) => {
            assert_eq!(x, y, "errors at different lines")
        }
        (Err(Error::Read { line: x, .. }), Err(Error::Read { line: y, .. })) => {
            assert_eq!(x, y, "read errors at different lines")
        }
        (x, y) => panic!("paths disagree: {:?} / {:?}", x.err(), y.err()),
    }
}

/// Reads on two threads, `chunk` bytes at a time.
fn read_two_threads<C: tally_model::Cost>(
    bytes: &[u8],
    chunk: usize,
) -> Result<(tally_model::Profile<C>, tally_formats::Warnings), Error> {
    let options = callgrind::ReadOptions {
        two_threads: Some(true),
        chunk_size: Some(chunk),
        ..Default::default()
    };
    callgrind::read_with(Input::from_bytes("x", bytes.to_vec()).unwrap(), options)
}

/// The read on two threads equals the read on one, whatever the chunk
/// size (so that chunk boundaries fall everywhere): the same profile and
/// warnings, or the same error (line and message).
fn threads_agree<C: tally_model::Cost>(bytes: &[u8], chunk: usize) {
    let one = callgrind::read::<C>(Input::from_bytes("x", bytes.to_vec()).unwrap());
    let two = read_two_threads::<C>(bytes, chunk);
    match (one, two) {
        (Ok(x), Ok(y)) => assert!(x == y, "one and two threads read differently"),
        (Err(x), Err(y)) => assert_eq!(x.to_string(), y.to_string()),
        (x, y) => panic!(
            "one and two threads disagree: {:?} / {:?}",
            x.err(),
            y.err()
        ),
    }
}

/// Reads as unsigned and as signed; any outcome but a panic is fine, and an
/// error names a line that exists (or the line just past the end).
fn exercise(bytes: &[u8]) {
    paths_agree(bytes);
    // A chunk size that varies with the input, from a few bytes up.
    let chunk = 1 + bytes.iter().map(|&b| b as usize).sum::<usize>() % 300;
    threads_agree::<u64>(bytes, chunk);
    threads_agree::<i64>(bytes, chunk);
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    for signed in [false, true] {
        let input = Input::from_bytes("mutated", bytes.to_vec()).unwrap();
        let r = if signed {
            callgrind::read::<i64>(input).map(|(p, _)| {
                let mut out = Vec::new();
                callgrind::write(&p, &mut out, Default::default()).unwrap();
            })
        } else {
            callgrind::read::<u64>(input).map(|(p, _)| {
                let mut out = Vec::new();
                callgrind::write(&p, &mut out, Default::default()).unwrap();
                tally_formats::cachegrind::write(&p, &mut Vec::new()).ok();
                tally_formats::json::write(&p, &mut Vec::new()).unwrap();
            })
        };
        if let Err(Error::Parse { line, .. }) = r {
            assert!(line >= 1 && line <= lines + 1, "line {line} of {lines}");
        }
    }
}

const SOURCES: &[&str] = &[
    "callgrind/recursion.jumps.out",
    "callgrind/workload.combo.out",
    "callgrind/workload.callers2.out",
    "callgrind/inline.nocompress.out",
    "callgrind/mutual.dumpevery.out.1",
    "cachegrind/recursion.out",
    "other/xdebug.callgrind",
    "spec/two-parts.callgrind",
];

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
    Truncate(usize),
    SwapLines(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 1usize..40).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (
            any::<usize>(),
            prop::collection::vec(
                prop_oneof![
                    Just(b'\n'),
                    Just(b' '),
                    Just(b'='),
                    Just(b'('),
                    Just(b')'),
                    Just(b'+'),
                    Just(b'-'),
                    Just(b'*'),
                    Just(b'/'),
                    Just(b'9'),
                    any::<u8>()
                ],
                1..12
            )
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
    ]
}

fn apply(mut data: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        if data.is_empty() {
            break;
        }
        let n = data.len();
        match m {
            Mutation::Flip(i, b) => data[i % n] = *b,
            Mutation::Delete(i, k) => {
                let s = i % n;
                data.drain(s..(s + k).min(n));
            }
            Mutation::Insert(i, v) => {
                let s = i % n;
                data.splice(s..s, v.iter().copied());
            }
            Mutation::Truncate(i) => data.truncate(i % n),
            Mutation::SwapLines(a, b) => {
                let mut lines: Vec<Vec<u8>> =
                    data.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
                let k = lines.len();
                lines.swap(a % k, b % k);
                data = lines.join(&b'\n');
            }
        }
    }
    data
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_files_never_panic(
        src in 0..SOURCES.len(),
        muts in prop::collection::vec(mutation(), 1..6),
    ) {
        // Work on the first 400 lines so that each case is fast.
        let full = fixture(SOURCES[src]);
        let cut = full
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(400)
            .map_or(full.len(), |(i, _)| i + 1);
        exercise(&apply(full[..cut].to_vec(), &muts));
    }
}

#[test]
fn every_truncation_of_a_small_profile_is_handled() {
    for src in [
        "spec/jumps.callgrind",
        "spec/two-parts.callgrind",
        "spec/misc.callgrind",
    ] {
        let data = fixture(src);
        for n in 0..data.len() {
            exercise(&data[..n]);
        }
    }
}

#[test]
fn truncated_gzip_is_a_read_error_at_a_line() {
    let data = fixture("spec/gzipped.callgrind.gz");
    for n in [10, data.len() / 2, data.len() - 4] {
        let r = callgrind::read::<u64>(Input::from_bytes("t.gz", data[..n].to_vec()).unwrap());
        assert!(matches!(r, Err(Error::Read { .. })), "cut at {n}: {r:?}");
    }
}

#[test]
fn two_threads_read_real_files_as_one_at_every_chunk_size() {
    for src in SOURCES {
        let data = fixture(src);
        for chunk in [1, 2, 7, 64, 333, 4096, 1 << 20] {
            threads_agree::<u64>(&data, chunk);
            threads_agree::<i64>(&data, chunk);
        }
    }
}

/// A cost line whose sums overflow is declined by the fast loops and read
/// again by the careful path, after relative positions: one and two
/// threads give the same error, and the signed read the same result.
#[test]
fn an_overflowing_line_fails_alike_on_one_and_two_threads() {
    let one = |d: &[u8]| callgrind::read::<u64>(Input::from_bytes("x", d.to_vec()).unwrap());
    let data = b"positions: line\nevents: a b\nfl=f.c\nfn=f\n\
                 5 18446744073709551615 1\n+2 1 1\n-1 3 4\n";
    assert!(one(data).is_err());
    for chunk in [1, 7, 64, 4096] {
        threads_agree::<u64>(data, chunk);
        threads_agree::<i64>(data, chunk);
    }
    let big = b"positions: line\nevents: a\nfl=f.c\nfn=f\n\
                5 9223372036854775807\n+2 9223372036854775807\n-1 1\n+3 2\n";
    for chunk in [1, 7, 64, 4096] {
        threads_agree::<u64>(big, chunk);
        threads_agree::<i64>(big, chunk);
    }
    // One event, small counts after a large one: the decoded run checks
    // the room left in the sums; the sum may reach the largest value
    // exactly, and one more fails at that line.
    let signed = |d: &[u8]| callgrind::read::<i64>(Input::from_bytes("x", d.to_vec()).unwrap());
    let head = "positions: line\nevents: a\nfl=f.c\nfn=f\n";
    for max in [u64::MAX, i64::MAX as u64] {
        let fits = format!("{head}5 {}\n+1 1\n+1 0\n", max - 1);
        let over = format!("{head}5 {}\n+1 1\n+1 0\n+1 1\n", max - 1);
        for chunk in [1, 7, 64, 4096] {
            for d in [&fits, &over] {
                threads_agree::<u64>(d.as_bytes(), chunk);
                threads_agree::<i64>(d.as_bytes(), chunk);
            }
        }
    }
    let at_max = |max: u64| format!("{head}5 {}\n+1 1\n", max - 1);
    let past_max = |max: u64| format!("{head}5 {}\n+1 1\n+1 1\n", max - 1);
    assert!(one(at_max(u64::MAX).as_bytes()).is_ok());
    assert!(one(past_max(u64::MAX).as_bytes()).is_err());
    assert!(signed(at_max(i64::MAX as u64).as_bytes()).is_ok());
    assert!(signed(past_max(i64::MAX as u64).as_bytes()).is_err());
}

/// Sums carried from files read before that are already past the cost
/// type's room (a signed read after unsigned ones) fail at the first line
/// that adds to them, even counts of zero, on every path: the fast loops
/// take no line unchecked then.
#[test]
fn carried_sums_past_the_room_fail_at_the_first_line() {
    let read = |bytes: Vec<u8>, two: bool, chunk: usize| {
        let options = callgrind::ReadOptions {
            carried: Some(callgrind::Sums {
                costs: vec![u64::MAX, 0],
                calls: 0,
            }),
            two_threads: Some(two),
            chunk_size: Some(chunk),
            ..Default::default()
        };
        callgrind::read_with::<i64>(Input::from_bytes("x", bytes).unwrap(), options)
    };
    // A first line without counts adds nothing and is taken; the zeros
    // after it each add to the sum already past the room.
    let mut text = String::from("positions: line\nevents: a b\nfl=f.c\nfn=f\n4\n");
    for k in 0..200 {
        text.push_str(&format!("{} 0 0\n", 5 + k));
    }
    for bytes in [text.clone().into_bytes(), tabbed(text.as_bytes())] {
        for (two, chunk) in [(false, 1 << 20), (true, 7), (true, 64), (true, 4096)] {
            match read(bytes.clone(), two, chunk) {
                Err(Error::Parse { line, .. }) => assert_eq!(line, 6, "two threads: {two}"),
                other => panic!("two threads: {two}: {:?}", other.map(|_| ())),
            }
        }
    }
}

/// One line of a generated body: the forms the two-thread reader decodes
/// (cost lines, name definitions and references) and their near misses.
fn body_line() -> impl Strategy<Value = String> {
    // Mostly numbers the decoder takes, so that whole lines are decoded.
    let number = prop_oneof![
        8 => 0u64..10,
        8 => 0u64..100_000,
        1 => Just(u64::from(u32::MAX)),
        1 => Just(u64::from(u32::MAX) + 1),
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ];
    let token = (0u8..6, number.clone()).prop_map(|(form, n)| match form {
        0 => format!("+{n}"),
        1 => format!("-{n}"),
        2 => "*".to_string(),
        3 => format!("0x{n:x}"),
        _ => n.to_string(),
    });
    let sep = prop_oneof![20 => Just(" "), 1 => Just("  "), 1 => Just("\t")];
    let cost = (
        prop::collection::vec((sep.clone(), token.clone()), 1..7),
        prop_oneof![12 => Just(""), 1 => Just(" "), 1 => Just("\r")],
    )
        .prop_map(|(tokens, end)| {
            let mut s = String::new();
            for (i, (sep, t)) in tokens.iter().enumerate() {
                if i > 0 {
                    s.push_str(sep);
                }
                s.push_str(t);
            }
            s + end
        });
    let key = prop::sample::select(vec![
        "fn", "fl", "fi", "fe", "ob", "cfn", "cfi", "cob", "jfi", "jfn",
    ]);
    // Few names, so that one is often interned again by another line.
    let name = prop_oneof![
        4 => prop::sample::select(vec!["f", "f.c", "main", "g h"]).prop_map(str::to_string),
        1 => Just(" spaced".to_string()),
        1 => Just("cr\r".to_string()),
        1 => "[a-z'(): ]{1,12}",
    ];
    let def = (key.clone(), 0u64..6, name, 0u8..4).prop_map(|(k, id, n, form)| match form {
        0 => format!("{k}=({id})"),
        1 => format!("{k}=({id}) "),
        2 => format!("{k}={n}"),
        _ => format!("{k}=({id}) {n}"),
    });
    // Calls and jumps with targets of zero to four subpositions, so that
    // some have as many as the positions and some do not.
    let target = (
        prop::collection::vec((sep.clone(), token), 0..5),
        prop_oneof![8 => Just(""), 1 => Just(" "), 1 => Just("  "), 1 => Just("\r")],
    )
        .prop_map(|(tokens, end)| {
            let mut s = String::new();
            for (sep, t) in tokens {
                s.push_str(sep);
                s.push_str(&t);
            }
            s + end
        });
    let call = (0u8..4, number.clone(), number, target).prop_map(|(k, c, t, target)| match k {
        0 => format!("calls={c}{target}"),
        1 => format!("jump={c}{target}"),
        2 => format!("jcnd={t}/{c}{target}"),
        _ => format!("calls={t} +{} 0", c % 50),
    });
    prop_oneof![6 => cost, 3 => def, 2 => call, 1 => Just(String::new())]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Generated bodies read the same on one and two threads at any chunk
    /// size, and on the fast and the careful path.
    #[test]
    fn generated_bodies_read_alike_on_every_path(
        lines in prop::collection::vec(body_line(), 0..40),
        np in 1usize..4,
        events in 1usize..6,
        chunk in 1usize..200,
        newline_at_end in any::<bool>(),
    ) {
        let positions = ["line", "instr line", "instr line x"][np - 1];
        // Up to five events, so that a line's counts are summed as a
        // Cachegrind file's are, several at a time.
        let names = ["a", "a b", "a b c", "a b c d", "a b c d e"][events - 1];
        let mut text = format!("positions: {positions}\nevents: {names}\nfl=(1) f.c\nfn=(1) f\n");
        text.push_str(&lines.join("\n"));
        if newline_at_end {
            text.push('\n');
        }
        let bytes = text.into_bytes();
        paths_agree(&bytes);
        threads_agree::<u64>(&bytes, chunk);
        threads_agree::<i64>(&bytes, chunk);
        run_sums_agree(&bytes, chunk);
    }
}

/// What a summing sink keeps: each (function, file) row's sums, in the
/// order the rows first appear, and the other records in order.
/// `EACH = false` lets the reader give it runs of lines as one line.
#[derive(Default, PartialEq, Debug)]
struct RowSums<const EACH: bool> {
    rows: Vec<((u32, u32), Vec<i128>)>,
    others: Vec<String>,
}

impl<const EACH: bool> tally_model::Sink<u64> for RowSums<EACH> {
    const EACH_LINE: bool = EACH;
    fn start_part(&mut self, _: tally_model::Positions, events: usize) {
        self.others.push(format!("part {events}"));
    }
    fn line(
        &mut self,
        function: tally_model::FunctionId,
        file: tally_model::FileId,
        _: &[u64],
        costs: &[u64],
    ) {
        let key = (function.0, file.0);
        let i = match self.rows.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.rows.push((key, Vec::new()));
                self.rows.len() - 1
            }
        };
        let sums = &mut self.rows[i].1;
        if sums.len() < costs.len() {
            sums.resize(costs.len(), 0);
        }
        for (s, &c) in sums.iter_mut().zip(costs) {
            *s += i128::from(c);
        }
    }
    fn call(&mut self, info: tally_model::CallInfo<u64>, _: &[u64], _: &[u64], incl: &[u64]) {
        let (caller, callee) = (info.caller.0, info.callee.0);
        self.others.push(format!("call {caller} {callee} {incl:?}"));
    }
    fn jump(&mut self, info: tally_model::JumpInfo<u64>, _: &[u64], _: &[u64]) {
        self.others.push(format!("jump {}", info.function.0));
    }
}

/// A sink that takes runs of lines as one line keeps the sums, rows and
/// records that one taking every line keeps, on one thread and on two at
/// any chunk size (where runs of decoded lines, and of one event's lines
/// read from the text, are summed before the sink sees them), or the read
/// fails at the same line.
fn run_sums_agree(bytes: &[u8], chunk: usize) {
    fn read<const EACH: bool>(
        bytes: &[u8],
        two: bool,
        chunk: usize,
    ) -> Result<RowSums<EACH>, String> {
        let mut sink = RowSums::<EACH>::default();
        let options = callgrind::ReadOptions {
            two_threads: Some(two),
            chunk_size: Some(chunk),
            ..Default::default()
        };
        let input = Input::from_bytes("x", bytes.to_vec()).unwrap();
        callgrind::parse(input, &mut sink, options)
            .map(|_| sink)
            .map_err(|e| e.to_string())
    }
    let each = read::<true>(bytes, true, chunk).map(|s| (s.rows, s.others));
    for two in [true, false] {
        let runs = read::<false>(bytes, two, chunk).map(|s| (s.rows, s.others));
        assert_eq!(
            each, runs,
            "a run summed differs from its lines (two threads: {two})"
        );
    }
}

/// Every file name a profile defines reaches the sink's `file_named`, on
/// every path (fast and careful, one thread and two, any chunk size), so a
/// sink that keeps records only for some files sees each file's name
/// before its records.
#[test]
fn every_file_name_reaches_the_sink() {
    use std::collections::BTreeSet;
    use tally_model::{CallInfo, FileId, FunctionId, JumpInfo, Positions, Sink};
    #[derive(Default)]
    struct Named(BTreeSet<u32>);
    impl Sink<u64> for Named {
        fn start_part(&mut self, _: Positions, _: usize) {}
        fn line(&mut self, _: FunctionId, _: FileId, _: &[u64], _: &[u64]) {}
        fn call(&mut self, _: CallInfo<u64>, _: &[u64], _: &[u64], _: &[u64]) {}
        fn jump(&mut self, _: JumpInfo<u64>, _: &[u64], _: &[u64]) {}
        fn file_named(&mut self, file: FileId, _: &[u8]) {
            self.0.insert(file.0);
        }
    }
    for src in SOURCES {
        let data = fixture(src);
        for (two, chunk) in [
            (false, None),
            (true, Some(7)),
            (true, Some(4096)),
            (false, Some(64)),
        ] {
            for text in [data.clone(), tabbed(&data)] {
                let mut sink = Named::default();
                let options = callgrind::ReadOptions {
                    two_threads: Some(two),
                    chunk_size: chunk,
                    ..Default::default()
                };
                let input = Input::from_bytes("x", text).unwrap();
                let Ok(out) = callgrind::parse(input, &mut sink, options) else {
                    continue;
                };
                let files = &out.profile.names.files;
                let want: BTreeSet<u32> = (1..files.len() as u32).collect();
                assert_eq!(sink.0, want, "{src}, two threads {two}, chunk {chunk:?}");
            }
        }
    }
}

/// A body of one event's cost lines in the forms the two-thread reader
/// sums as runs, broken by function and file switches, calls and jumps.
fn run_body_line(np: usize) -> impl Strategy<Value = String> {
    let position = prop_oneof![
        4 => (0u32..20).prop_map(|n| format!("+{n}")),
        1 => (0u32..20).prop_map(|n| format!("-{n}")),
        2 => Just("*".to_string()),
        2 => (1000u32..100_000).prop_map(|n| n.to_string()),
    ];
    let count = prop_oneof![
        6 => (0u64..1000).prop_map(|n| format!(" {n}")),
        1 => Just(String::new()),
        1 => Just(" 4294967295".to_string()),
        1 => Just(" 4294967296".to_string()),
    ];
    // `np` positions mostly; one fewer or more now and then.
    let n = prop_oneof![150 => Just(np), 1 => Just((np - 1).max(1)), 1 => Just(np + 1)];
    let cost = (prop::collection::vec(position, 4), count, n)
        .prop_map(|(p, c, n)| format!("{}{c}", p[..n].join(" ")));
    // Ids keep one name each, as the header's `fl=(1) l1.c`, `fn=(1) f1`.
    let switch = (0u8..4, 1u32..5).prop_map(|(k, id)| match k {
        0 => format!("fn=({id}) f{id}"),
        1 => format!("fi=({id}) l{id}.c"),
        2 => format!("fe=({id}) l{id}.c"),
        _ => format!("fl=({id}) l{id}.c"),
    });
    let at = |p: &str| vec![p; np].join(" ");
    let (target, source) = (at("+3"), at("+1"));
    let call = (1u32..5, 1u64..9, 0u64..500).prop_map(move |(id, n, incl)| {
        format!("cfn=({id}) f{id}\ncalls={n} {target}\n{source} {incl}")
    });
    let (target, source) = (at("+2"), at("+1"));
    let jump = (1u64..9).prop_map(move |n| format!("jump={n} {target}\n{source}"));
    prop_oneof![16 => cost, 3 => switch, 1 => call, 1 => jump]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Runs of decoded lines given to a summing sink as one line keep the
    /// sums that every line given alone keeps.
    #[test]
    fn runs_summed_for_a_summing_sink_keep_the_sums(
        (np, lines) in (1usize..4).prop_flat_map(|np| {
            (Just(np), prop::collection::vec(run_body_line(np), 0..120))
        }),
        chunk in prop_oneof![1usize..400, Just(1 << 20)],
    ) {
        let positions = ["line", "instr line", "instr bb line"][np - 1];
        let first = vec!["5000"; np].join(" ");
        let mut text = format!(
            "positions: {positions}\nevents: a\nfl=(1) l1.c\nfn=(1) f1\n{first} 1\n"
        );
        text.push_str(&lines.join("\n"));
        text.push('\n');
        run_sums_agree(text.as_bytes(), chunk);
    }
}
