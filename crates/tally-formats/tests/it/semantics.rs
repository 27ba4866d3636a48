//! The reader's rules on small inline profiles: each test pins one rule
//! that the specification leaves open and Valgrind's writer or
//! KCachegrind's reader settles (see docs/formats.md).

use tally_formats::{Error, Input, ParseErrorKind, WarningKind, Warnings, callgrind};
use tally_model::{Cost, Format, Profile};

fn read<C: Cost>(text: &str) -> (Profile<C>, Warnings) {
    callgrind::read::<C>(Input::from_bytes("t", text.as_bytes().to_vec()).unwrap())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn fail(text: &str) -> (u64, ParseErrorKind) {
    match callgrind::read::<u64>(Input::from_bytes("t", text.as_bytes().to_vec()).unwrap()) {
        Err(Error::Parse { line, kind, .. }) => (line, kind),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("accepted: {text}"),
    }
}

fn fname(p: &Profile<u64>, f: tally_model::FunctionId) -> String {
    String::from_utf8_lossy(p.names.function_name(f)).into_owned()
}

#[test]
fn relative_positions_follow_plain_cost_lines_only() {
    // The call target, the call-site line and the jump lines are relative
    // to the last plain cost line (0x1006, 6) and do not move it.
    let (p, w) = read::<u64>(
        "positions: instr line\nevents: Ir\nfn=f\n0x1000 5 1\n+6 +1 1\ncfn=g\ncalls=1 0x2000 -5\n\
         +4 +2 10\njcnd=3/7 -6 -1\n* *\njump=2 +10 *\n+1 *\n+2 +1 1\n",
    );
    assert!(w.is_empty(), "{w:?}");
    let part = &p.parts[0];
    let c = part.calls.get(0);
    assert_eq!(c.target, [0x2000, 1]);
    assert_eq!(c.site, [0x100a, 8]);
    assert_eq!(c.inclusive, [10]);
    let j = part.jumps.get(0);
    assert!(j.info.conditional);
    assert_eq!((j.info.taken, j.info.executed), (3, 7));
    assert_eq!((j.target, j.source), (&[0x1000, 5][..], &[0x1006, 6][..]));
    let j = part.jumps.get(1);
    assert!(!j.info.conditional);
    assert_eq!((j.target, j.source), (&[0x1010, 6][..], &[0x1007, 6][..]));
    let mut lines = Vec::new();
    part.lines.for_each(|l| lines.push(l.positions.to_vec()));
    assert_eq!(lines, [vec![0x1000, 5], vec![0x1006, 6], vec![0x1008, 7]]);
    // Self cost excludes the call's inclusive cost.
    assert_eq!(p.totals(), Some(vec![3]));
}

#[test]
fn spec_form_of_jcnd_is_executed_then_taken() {
    let (p, _) = read::<u64>("events: Ir\nfn=f\n3 1\njcnd=10 9 1\n3\n");
    let j = p.parts[0].jumps.get(0);
    assert_eq!((j.info.executed, j.info.taken), (10, 9));
}

#[test]
fn cob_and_cfi_hold_for_one_call_and_default_to_the_current_context() {
    let (p, _) = read::<u64>(
        "events: Ir\nob=a.so\nfl=a.c\nfn=f\nfi=inl.h\n1 1\ncob=b.so\ncfi=b.c\ncfn=g\ncalls=1 1\n1 5\n\
         cfn=h\ncalls=1 1\n1 7\n",
    );
    let names = &p.names;
    let calls: Vec<_> = p.parts[0].calls.iter().collect();
    let g = names.key(calls[0].info.callee);
    assert_eq!(names.objects.get(g.object.0), b"b.so");
    assert_eq!(names.files.get(g.file.0), b"b.c");
    // cob/cfi were for one call: h is in the current object and in the
    // current (inlined) file, as Valgrind writes and KCachegrind reads.
    let h = names.key(calls[1].info.callee);
    assert_eq!(names.objects.get(h.object.0), b"a.so");
    assert_eq!(names.files.get(h.file.0), b"inl.h");
    assert_eq!(names.files.get(calls[1].info.site_file.0), b"inl.h");
}

#[test]
fn fn_resets_the_inlined_file_and_fi_keeps_the_function() {
    let (p, _) = read::<u64>("events: Ir\nfl=a.c\nfn=f\n1 1\nfi=inl.h\n2 2\nfn=g\n3 3\n");
    let mut seen = Vec::new();
    p.parts[0].lines.for_each(|l| {
        seen.push((
            fname(&p, l.function),
            String::from_utf8_lossy(p.names.file_name(l.file)).into_owned(),
        ))
    });
    assert_eq!(
        seen,
        [
            ("f".into(), "a.c".into()),
            ("f".into(), "inl.h".into()),
            ("g".into(), "a.c".into())
        ]
    );
}

#[test]
fn name_ids_are_shared_within_three_spaces() {
    // An id defined by cfn= is used by fn=; fl/cfi share the file space; the
    // same number in another space is another name.
    let (p, _) = read::<u64>(
        "events: Ir\nob=(1) x\nfl=(1) a.c\nfn=(1) main\n1 1\ncfi=(2) b.c\ncfn=(2) helper\ncalls=1 1\n1 4\n\
         fl=(2)\nfn=(2)\n1 4\n",
    );
    let callee = p.parts[0].calls.get(0).info.callee;
    let mut fns = Vec::new();
    p.parts[0].lines.for_each(|l| fns.push(l.function));
    assert_eq!(fns[1], callee);
    assert_eq!(fname(&p, callee), "helper");
}

#[test]
fn names_may_hold_any_bytes() {
    let (p, _) = read::<u64>(
        "events: Ir\nfl=(1) dir with space/it's #1 (x).c\nfn=(1) (below main)\n1 1\nfn=operator()(int) const\n2 2\nfn=???\n3 3\nfn=caf\u{e9}\n4 4\n",
    );
    let mut names = Vec::new();
    p.parts[0]
        .lines
        .for_each(|l| names.push(fname(&p, l.function)));
    assert_eq!(
        names,
        ["(below main)", "operator()(int) const", "???", "café"]
    );
    assert_eq!(
        p.names.files.get(1),
        b"dir with space/it's #1 (x).c".as_slice()
    );
}

#[test]
fn an_id_defined_twice_with_another_name_warns_and_takes_the_new_name() {
    let (p, w) = read::<u64>("events: Ir\nfn=(1) a\n1 1\nfn=(1) b\n1 1\nfn=(1)\n1 1\n");
    assert!(w.contains(WarningKind::IdRedefined));
    let mut names = Vec::new();
    p.parts[0]
        .lines
        .for_each(|l| names.push(fname(&p, l.function)));
    assert_eq!(names, ["a", "b", "b"]);
}

#[test]
fn subpositions_in_hex_and_relative_forms() {
    let (p, _) = read::<u64>(
        "positions: instr line\nevents: Ir\nfn=f\n0x80001234 90 1\n+3 * 5\n+1 +1 6\n-0x4 -0x1 1\n0X10 0x5 1\n",
    );
    let mut pos = Vec::new();
    p.parts[0]
        .lines
        .for_each(|l| pos.push(l.positions.to_vec()));
    assert_eq!(
        pos,
        [
            vec![0x8000_1234, 90],
            vec![0x8000_1237, 90],
            vec![0x8000_1238, 91],
            vec![0x8000_1234, 90],
            vec![0x10, 5]
        ]
    );
}

#[test]
fn cachegrind_files_are_detected_with_dots_and_short_lines() {
    let (p, w) = read::<u64>(
        "desc: I1 cache: 32768 B\ncmd: ./x\nevents: Ir Dr Dw \nfl=a.c\nfn=f\n1 5 . 2\n2 3\nsummary: 8 0 2\n",
    );
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(p.format, Format::Cachegrind);
    assert_eq!(p.parts[0].info.totals, Some(vec![8, 0, 2]));
    assert_eq!(p.parts[0].info.cmd.as_deref(), Some(&b"./x"[..]));
    assert_eq!(p.parts[0].info.desc[0].0, b"I1 cache");
}

#[test]
fn parts_start_at_part_headers_and_keep_their_totals() {
    let (p, w) = read::<u64>(
        "version: 1\ncreator: t\npositions: line\nevents: Ir\npart: 1\nsummary: 3\nfn=f\n1 3\ntotals: 3\n\
         part: 2\npositions: line\nevents: Ir\nsummary: 4\nfn=f\n1 4\ntotals: 4\n",
    );
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(p.format, Format::Callgrind);
    assert_eq!(p.parts.len(), 2);
    assert_eq!(p.parts[1].info.number, Some(2));
    assert_eq!(p.parts[1].info.summary, Some(vec![4]));
    assert_eq!(p.totals(), Some(vec![7]));
}

#[test]
fn derived_events_and_long_names() {
    let (p, _) = read::<u64>(
        "event: Ir : Instruction Fetches\nevent: S = Ir + 2 * Dr : Sum\nevents: Ir Dr\nfn=f\n1 10 3\n",
    );
    assert_eq!(
        p.events.recorded()[0].long_name.as_deref(),
        Some("Instruction Fetches")
    );
    let s = &p.events.derived()[0];
    assert_eq!(s.long_name.as_deref(), Some("Sum"));
    assert_eq!(s.evaluate(&p.totals().unwrap()), Some(16));
}

#[test]
fn summary_mismatches_are_warnings() {
    let (_, w) = read::<u64>("events: Ir\nsummary: 9\nfn=f\n1 3\ntotals: 4\n");
    assert!(w.contains(WarningKind::SummaryAboveTotal));
    assert!(w.contains(WarningKind::TotalsMismatch));
    let (_, w) = read::<u64>("events: Ir\nsummary: 1\nfn=f\n1 3\n");
    assert!(w.contains(WarningKind::SummaryBelowTotal));
    // The warning names the line as the file writes it: Cachegrind's total
    // is its trailing `summary:`.
    let (_, w) = read::<u64>("events: Ir\nfl=a.c\nfn=f\n1 3\nsummary: 4\n");
    let text: Vec<String> = w.iter().map(|w| w.to_string()).collect();
    assert!(
        text.len() == 1 && text[0].contains("line 5: `summary:` 4 differs"),
        "{text:?}"
    );
}

#[test]
fn other_writers_habits_are_accepted() {
    // Xdebug: extra numbers on calls=, summary: at the end; CRLF endings.
    let (p, w) = read::<u64>(
        "version: 1\r\nevents: Time_(10ns) Memory_(bytes)\r\nfl=(1) a.php\r\nfn=(1) f\r\n1 5 0\r\ncfl=(1)\r\ncfn=(2) g\r\ncalls=1 0 0\r\n1 7 0\r\nsummary: 100 200\r\n",
    );
    assert!(w.contains(WarningKind::ExtraCallNumbers));
    assert!(w.contains(WarningKind::CarriageReturn));
    assert!(w.contains(WarningKind::SummaryAboveTotal));
    assert_eq!(p.events.recorded()[0].name, "Time_(10ns)");
    assert_eq!(p.parts[0].calls.len(), 1);
}

#[test]
fn signed_profiles_read_as_i64_only() {
    let text = "events: Ir\nfl=a\nfn=f\n0 -5\nsummary: -5\n";
    let (line, kind) = fail(text);
    assert_eq!(line, 4);
    assert!(matches!(kind, ParseErrorKind::Negative(_)));
    let (p, w) = read::<i64>(text);
    assert!(w.is_empty());
    assert_eq!(p.totals(), Some(vec![-5]));
}

#[test]
fn errors_name_the_line() {
    let cases: &[(&str, u64)] = &[
        ("events: Ir\nfn=f\n1 18446744073709551616\n", 3),
        ("events: Ir\nfn=f\n1 2 3\n", 3),
        ("events: Ir\nfn=(4)\n", 2),
        ("events: Ir\nfn=f\ncfn=g\ncalls=1 1\nfn=h\n", 5),
        ("events: Ir\nfn=f\ncfn=g\ncalls=1 1\n", 4),
        ("events: Ir\nfn=f\ncalls=1 1\n1 2\n", 3),
        ("events: Ir\n1 2\n", 2),
        ("fn=f\n1 2\n", 2),
        ("", 1),
        ("positions: line instr\nevents: Ir\n", 1),
        ("events: Ir\nfn=f\nx 1\n", 3),
        ("events: Ir\nfn=f\n\u{1}\u{2}\n", 3),
        ("events: Ir\nfn=f\n1 1\nevents: Dr\n", 4),
        ("events: Ir Ir\n", 1),
        ("events:\n", 1),
        ("version: 2\n", 1),
        ("events: Ir\nfn=(1\n", 2),
        ("events: Ir\nfn=f\n-1 1\n", 3),
        ("positions: instr line\nevents: Ir\nfn=f\n0x10\n", 4),
        ("events: Ir\nevent: S = Ir +\n", 2),
        ("events: Ir\nsummary: 1 2\n", 2),
    ];
    for (text, line) in cases {
        let (got, kind) = fail(text);
        assert_eq!(got, *line, "{text:?}: {kind}");
    }
}

#[test]
fn errors_render_as_file_line_message() {
    let e =
        callgrind::read::<u64>(Input::from_bytes("p.out", b"events: Ir\n1 2\n".to_vec()).unwrap())
            .unwrap_err();
    assert_eq!(e.to_string(), "p.out:2: cost line before any `fn=` line");
}

#[test]
fn a_header_line_after_records_makes_a_second_part_and_so_callgrind() {
    // Cachegrind files have one part; a `desc:` after records starts
    // another, as Callgrind's concatenated dumps do, so the file is read
    // as Callgrind (its Callgrind output keeps both parts).
    let (p, _) = read::<u64>("events: Ir\nfl=a.c\nfn=f\n1 5\ndesc: again\nfn=g\n2 7\n");
    assert_eq!(p.parts.len(), 2);
    assert_eq!(p.format, Format::Callgrind);
    let (p, _) = read::<u64>("desc: once\nevents: Ir\nfl=a.c\nfn=f\n1 5\nfn=g\n2 7\n");
    assert_eq!((p.parts.len(), p.format), (1, Format::Cachegrind));
}

#[test]
fn cachegrind_output_keeps_unknown_header_lines() {
    // A header line of no known kind is kept by the reader; the
    // Cachegrind writer puts it after `events:` (where cg_annotate skips
    // it), so the file reads back with it.
    let (p, _) = read::<u64>("cmd: x\nevents: Ir\nmystery: 42\nfl=a.c\nfn=f\n1 5\nsummary: 5\n");
    assert_eq!(p.format, Format::Cachegrind);
    assert_eq!(p.parts[0].info.other, vec![b"mystery: 42".to_vec()]);
    let mut out = Vec::new();
    tally_formats::cachegrind::write(&p, &mut out).unwrap();
    let (q, _) = read::<u64>(std::str::from_utf8(&out).unwrap());
    assert_eq!(q.parts[0].info, p.parts[0].info);
}

#[test]
fn a_cachegrind_sum_that_does_not_fit_is_the_formats_error_inside_io() {
    // Two parts (of two files) whose lines each fit, but whose sum per
    // line does not: the Cachegrind writer sums them, and refuses with
    // `Error::CachegrindSumOverflow` inside its I/O error, which callers
    // find by downcasting to name the inputs.
    let text = format!("events: Ir\nfl=a.c\nfn=f\n1 {}\n", 1u64 << 63);
    let (mut p, _) = read::<u64>(&text);
    p.absorb(read::<u64>(&text).0).unwrap();
    assert_eq!(p.parts.len(), 2);
    let e = tally_formats::cachegrind::write(&p, &mut Vec::new()).unwrap_err();
    let inner = e.get_ref().and_then(|r| r.downcast_ref::<Error>());
    assert!(matches!(inner, Some(Error::CachegrindSumOverflow)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "a count summed per file, function and line does not fit in 64 bits"
    );
}
