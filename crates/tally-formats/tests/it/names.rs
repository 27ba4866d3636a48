//! Every writer against hostile names: profiles of whole stacks whose
//! function, file and object names are empty, spaces, control bytes,
//! separators, header lines, 70,000 bytes long or not UTF-8, with costs
//! from 0 to near 2^64, are written in every format `tally convert --to`
//! writes through the one output path, and read back through detection
//! as a file is: with the same self cost per function and the same call
//! arcs, as far as the format keeps them (Callgrind: every record;
//! pprof: the stacks; Cachegrind: self costs per file and function;
//! folded stacks: the stacks by function name). A writer that cannot hold
//! a name refuses it with an error naming it, and leaves the output as it
//! was. DCPI output holds no names (counts per address of one image) and
//! is made by tally-analysis from an image; it is not written here.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use tally_formats::{Error, FileFormat, OutputFormat, OutputOptions, Source, write_profile};
use tally_model::{
    AnyCost, CallRef, Events, Format, Frame, FunctionId, FunctionKey, JumpRef, LineRef, Part,
    PartVisitor, Positions, Profile, Stacks,
};

/// Names that break a format unless its writer escapes or refuses them.
const HOSTILE: &[&[u8]] = &[
    b"",
    b"   ",
    b" lead",
    b"trail ",
    b"\t",
    b"nul\0byte",
    b"line\nbreak",
    b"cr\r",
    b"\rcr",
    b"a;b",
    b";",
    b"f(int)",
    b"(",
    b")",
    b"[unknown]",
    b"]",
    b"\"quoted\" 'name'",
    b"(12)",
    b"(3) x",
    b"events: x",
    b"fn=main",
    b"cmd: ./prog",
    b"# callgrind format",
    b"{json",
    b"PERFILE2",
    b"\\x3b",
    b"\\(empty)",
    b"C:\\x64\\lib",
    b"caf\xc3\xa9 \xff\xfe",
    b"12 34",
    b"???",
];

fn name() -> impl Strategy<Value = Vec<u8>> {
    let hostile = proptest::sample::select(HOSTILE).prop_map(<[u8]>::to_vec);
    let long = (proptest::sample::select(HOSTILE), any::<u8>()).prop_map(|(start, fill)| {
        let mut v = start.to_vec();
        v.resize(70_000, fill);
        v
    });
    prop_oneof![
        6 => hostile,
        3 => proptest::collection::vec(any::<u8>(), 0..10),
        1 => long,
    ]
}

fn cost() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => Just(0u64),
        10 => 1..1000u64,
        1 => (u64::MAX - 1000)..=u64::MAX,
    ]
}

/// A profile to build: names, functions (name, file and object indexes)
/// and stacks (function indexes, root first, and one cost per event).
#[derive(Debug, Clone)]
struct Spec {
    names: Vec<Vec<u8>>,
    functions: Vec<(usize, usize, usize)>,
    events: usize,
    stacks: Vec<(Vec<usize>, Vec<u64>)>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        proptest::collection::vec(name(), 2..8),
        proptest::collection::vec((any::<usize>(), any::<usize>(), any::<usize>()), 1..6),
        1..3usize,
    )
        .prop_flat_map(|(names, functions, events)| {
            let n = functions.len();
            let stacks = proptest::collection::vec(
                (
                    proptest::collection::vec(0..n, 1..5),
                    proptest::collection::vec(cost(), events),
                ),
                1..6,
            );
            (Just(names), Just(functions), Just(events), stacks)
        })
        .prop_map(|(names, functions, events, stacks)| {
            let k = names.len();
            let functions = functions
                .into_iter()
                .map(|(n, f, o)| (n % k, f % k, o % k))
                .collect();
            Spec {
                names,
                functions,
                events,
                stacks,
            }
        })
}

/// The profile of `spec`, as a stack reader makes it: the stacks and the
/// part derived from them. `None` where its sums pass 64 bits, which no
/// reader gives.
fn build(spec: &Spec) -> Option<Profile<u64>> {
    let events = Events::new((0..spec.events).map(|e| format!("e{e}"))).unwrap();
    let mut p = Profile::new(Format::Callgrind, events, Positions::LINE);
    let ids: Vec<FunctionId> = spec
        .functions
        .iter()
        .map(|&(n, f, o)| {
            let key = FunctionKey {
                object: p.names.object(&spec.names[o]),
                file: p.names.file(&spec.names[f]),
                name: p.names.symbol(&spec.names[n]),
            };
            p.names.function(key)
        })
        .collect();
    let mut stacks = Stacks::default();
    for (frames, costs) in &spec.stacks {
        let frames: Vec<_> = frames
            .iter()
            .map(|&i| {
                stacks.frame(Frame {
                    function: ids[i],
                    line: 0,
                    address: 0,
                })
            })
            .collect();
        stacks.add(&frames, costs)?;
    }
    stacks.totals(spec.events)?;
    let mut part = Part::new(Positions::LINE, spec.events);
    stacks.derive_part(&p.names, Positions::LINE, &mut part)?;
    p.parts.push(part);
    p.stacks = Some(stacks);
    Some(p)
}

/// How a format names a function: the bytes it keeps of its object, file
/// and name.
type Key = Vec<Vec<u8>>;

/// Self costs per function and calls per (caller, callee) with their
/// counts and inclusive costs, summed over the parts.
#[derive(Debug, Default, PartialEq)]
struct Records {
    own: BTreeMap<Key, Vec<u128>>,
    calls: BTreeMap<(Key, Key), (u128, Vec<u128>)>,
}

struct Collect<'a> {
    p: &'a Profile<u64>,
    key: &'a dyn Fn(&Profile<u64>, FunctionId) -> Key,
    records: Records,
}

fn add(sum: &mut Vec<u128>, costs: &[u64]) {
    sum.resize(sum.len().max(costs.len()), 0);
    for (a, &b) in sum.iter_mut().zip(costs) {
        *a += u128::from(b);
    }
}

impl PartVisitor<u64> for Collect<'_> {
    fn line(&mut self, l: LineRef<'_, u64>) {
        let k = (self.key)(self.p, l.function);
        add(self.records.own.entry(k).or_default(), l.costs);
    }
    fn call(&mut self, c: CallRef<'_, u64>) {
        let k = (
            (self.key)(self.p, c.info.caller),
            (self.key)(self.p, c.info.callee),
        );
        let e = self.records.calls.entry(k).or_default();
        e.0 += u128::from(c.info.count);
        add(&mut e.1, c.inclusive);
    }
    fn jump(&mut self, _: JumpRef<'_, u64>) {}
}

/// The records of `p` under the format's `key`, zero self costs left out
/// (a format may leave a line of zeros out).
fn records(p: &Profile<u64>, key: &dyn Fn(&Profile<u64>, FunctionId) -> Key) -> Records {
    let mut c = Collect {
        p,
        key,
        records: Records::default(),
    };
    for part in &p.parts {
        part.visit(&mut c);
    }
    c.records.own.retain(|_, v| v.iter().any(|&x| x != 0));
    c.records
}

fn full_key(p: &Profile<u64>, f: FunctionId) -> Key {
    let n = &p.names;
    vec![
        n.function_object(f).to_vec(),
        n.function_file(f).to_vec(),
        n.function_name(f).to_vec(),
    ]
}

/// Cachegrind keeps files and names, and writes an empty one as `???`.
fn cachegrind_key(p: &Profile<u64>, f: FunctionId) -> Key {
    let unknown = |b: &[u8]| {
        if b.is_empty() {
            b"???".to_vec()
        } else {
            b.to_vec()
        }
    };
    let n = &p.names;
    vec![unknown(n.function_file(f)), unknown(n.function_name(f))]
}

/// Stacks by function name, root first, with the cost of `event`; stacks
/// of no cost left out.
fn named_stacks(p: &Profile<u64>, event: usize) -> BTreeMap<Vec<Vec<u8>>, u128> {
    let s = p.stacks.as_ref().expect("stacks");
    let mut out: BTreeMap<Vec<Vec<u8>>, u128> = BTreeMap::new();
    for sample in &s.samples {
        let names = sample
            .frames
            .iter()
            .map(|f| p.names.function_name(s.frames[f.index()].function).to_vec())
            .collect();
        *out.entry(names).or_default() += u128::from(sample.costs[event]);
    }
    out.retain(|_, c| *c != 0);
    out
}

/// The functions of a part's lines, and of its calls.
#[derive(Default)]
struct Functions {
    own: Vec<FunctionId>,
    called: Vec<FunctionId>,
}

impl PartVisitor<u64> for Functions {
    fn line(&mut self, l: LineRef<'_, u64>) {
        self.own.push(l.function);
    }
    fn call(&mut self, c: CallRef<'_, u64>) {
        self.called.extend([c.info.caller, c.info.callee]);
    }
    fn jump(&mut self, _: JumpRef<'_, u64>) {}
}

/// The names of the functions, files and objects a Callgrind writer
/// writes (`calls`), or a Cachegrind one: those of the functions of the
/// records (of the lines only, for Cachegrind, which keeps no objects).
fn written_names(p: &Profile<u64>, calls: bool) -> Vec<(&'static str, Vec<u8>)> {
    let mut f = Functions::default();
    for part in &p.parts {
        part.visit(&mut f);
    }
    if calls {
        f.own.append(&mut f.called);
    }
    let n = &p.names;
    let mut out = Vec::new();
    for f in f.own {
        out.push(("function", n.function_name(f).to_vec()));
        out.push(("file", n.function_file(f).to_vec()));
        if calls {
            out.push(("object", n.function_object(f).to_vec()));
        }
    }
    out
}

/// What no Callgrind or Cachegrind reader reads back after `key=`.
fn unwritable(name: &[u8]) -> bool {
    name.contains(&b'\n')
        || name.starts_with(b" ")
        || name.starts_with(b"\t")
        || name.ends_with(b"\r")
}

/// The one read every command does: detection, then the reader. For
/// Callgrind and Cachegrind, detection only sends the file to their one
/// reader, which tells them apart by the whole content.
fn read_back(path: &Path, format: FileFormat) -> Profile<u64> {
    let source = Source::open(path).unwrap();
    if matches!(format, FileFormat::Callgrind | FileFormat::Cachegrind) {
        assert!(
            source.detected().is_callgrind_reader_input(),
            "{:?}",
            source.format()
        );
    } else {
        assert_eq!(source.format(), format, "detected as");
    }
    match tally_formats::read(&source, None) {
        Ok((AnyCost::Unsigned(p), _)) => p,
        Ok(_) => panic!("read back as a difference"),
        Err(e) => panic!("does not read back: {e}"),
    }
}

const OLD: &[u8] = b"the output before\n";

/// Writes `p` as `format` to a file that holds [`OLD`]: `Ok` with the
/// path written, or the writer's error, the file then left as it was.
fn write(
    dir: &Path,
    p: &Profile<u64>,
    format: OutputFormat,
    event: usize,
) -> Result<std::path::PathBuf, Error> {
    let path = dir.join(format!("out.{}.{event}", format.name()));
    std::fs::write(&path, OLD).unwrap();
    let options = OutputOptions {
        format: Some(format),
        event: Some(event),
        ..Default::default()
    };
    match write_profile(p, &path, &options) {
        Ok(()) => Ok(path),
        Err(e) => {
            assert_eq!(std::fs::read(&path).unwrap(), OLD, "{e}");
            let files = std::fs::read_dir(dir).unwrap().count();
            assert_eq!(files, 1, "a temporary file is left after {e}");
            std::fs::remove_file(&path).unwrap();
            Err(e)
        }
    }
}

/// The name a refusal names, and of what.
fn refused_name(e: &Error) -> (&'static str, String) {
    let Error::Io { source, .. } = e else {
        panic!("not a write error: {e}");
    };
    match source.get_ref().and_then(|e| e.downcast_ref::<Error>()) {
        Some(Error::NameNotWritable { what, name, .. }) => (*what, name.clone()),
        _ => panic!("not a refused name: {e}"),
    }
}

/// A refusal names one of the names that cannot be written; and a write
/// is refused only if there is one.
fn check_refusal(r: &Result<std::path::PathBuf, Error>, written: &[(&'static str, Vec<u8>)]) {
    let bad: Vec<(&str, String)> = written
        .iter()
        .filter(|(_, n)| unwritable(n))
        .map(|(w, n)| (*w, tally_formats::escape::shown(n)))
        .collect();
    match r {
        Ok(_) => assert!(bad.is_empty(), "written although it cannot hold {bad:?}"),
        Err(e) => {
            let named = refused_name(e);
            assert!(
                bad.iter()
                    .any(|(w, n)| (*w, n.as_str()) == (named.0, named.1.as_str())),
                "refused {named:?}, not one of {bad:?}: {e}"
            );
        }
    }
}

fn check(p: &Profile<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();

    // Callgrind keeps every record and every name it can hold.
    for compress in [true, false] {
        let path = dir.join("out.callgrind");
        std::fs::write(&path, OLD).unwrap();
        let options = OutputOptions {
            format: Some(OutputFormat::Callgrind),
            compress_names: compress,
            ..Default::default()
        };
        let r = match write_profile(p, &path, &options) {
            Ok(()) => Ok(path.clone()),
            Err(e) => {
                assert_eq!(std::fs::read(&path).unwrap(), OLD, "{e}");
                Err(e)
            }
        };
        check_refusal(&r, &written_names(p, true));
        if r.is_ok() {
            let q = read_back(&path, FileFormat::Callgrind);
            assert_eq!(records(&q, &full_key), records(p, &full_key), "Callgrind");
        }
        std::fs::remove_file(&path).unwrap();
    }

    // Cachegrind keeps self costs per file and function name.
    let r = write(dir, p, OutputFormat::Cachegrind, 0);
    check_refusal(&r, &written_names(p, false));
    if let Ok(path) = r {
        let q = read_back(&path, FileFormat::Cachegrind);
        assert_eq!(q.format, Format::Cachegrind);
        let own = |p| records(p, &cachegrind_key).own;
        assert_eq!(own(&q), own(p), "Cachegrind");
        std::fs::remove_file(&path).unwrap();
    }

    // pprof keeps the stacks, in signed 64-bit values.
    let stacks = p.stacks.as_ref().unwrap();
    let too_big = stacks
        .samples
        .iter()
        .any(|s| s.costs.iter().any(|&c| c > i64::MAX as u64));
    match write(dir, p, OutputFormat::Pprof, 0) {
        Ok(path) => {
            assert!(!too_big, "a cost past 2^63 written as pprof");
            let q = read_back(&path, FileFormat::Pprof);
            assert_eq!(records(&q, &full_key), records(p, &full_key), "pprof");
            std::fs::remove_file(&path).unwrap();
        }
        Err(e) => assert!(too_big && e.to_string().contains("does not fit"), "{e}"),
    }

    // Folded stacks keep the stacks by name, one event a file, and hold
    // every name.
    for event in 0..p.events.len() {
        let path = write(dir, p, OutputFormat::Folded, event).unwrap();
        let want = named_stacks(p, event);
        if want.is_empty() {
            assert!(std::fs::read(&path).unwrap().is_empty());
        } else {
            let q = read_back(&path, FileFormat::Folded);
            assert_eq!(named_stacks(&q, 0), want, "folded, event {event}");
        }
        std::fs::remove_file(&path).unwrap();
    }

    // The same, gzip'd: detection looks through it.
    let want = named_stacks(p, 0);
    if !want.is_empty() {
        let path = dir.join("out.folded.gz");
        let options = OutputOptions {
            format: Some(OutputFormat::Folded),
            gzip: Some(true),
            ..Default::default()
        };
        write_profile(p, &path, &options).unwrap();
        let q = read_back(&path, FileFormat::Folded);
        assert_eq!(named_stacks(&q, 0), want, "folded, gzip'd");
        std::fs::remove_file(&path).unwrap();
    }

    // speedscope's JSON holds every name, bytes that are not UTF-8
    // escaped; tally does not read it, other programs do.
    let path = write(dir, p, OutputFormat::Speedscope, 0).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let frames: Vec<Vec<u8>> = doc["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let name = f["name"].as_str().unwrap().as_bytes();
            tally_formats::escape::unescape(name).into_owned()
        })
        .collect();
    for event in 0..p.events.len() {
        let mut got: BTreeMap<Vec<Vec<u8>>, u128> = BTreeMap::new();
        let profile = &doc["profiles"][event];
        let weights = profile["weights"].as_array().unwrap();
        for (sample, w) in profile["samples"].as_array().unwrap().iter().zip(weights) {
            let names = sample
                .as_array()
                .unwrap()
                .iter()
                .map(|i| frames[i.as_u64().unwrap() as usize].clone())
                .collect();
            *got.entry(names).or_default() += u128::from(w.as_u64().unwrap());
        }
        assert_eq!(got, named_stacks(p, event), "speedscope, event {event}");
    }
    std::fs::remove_file(&path).unwrap();

    // tally's JSON is for other programs: it must parse.
    let path = write(dir, p, OutputFormat::Json, 0).unwrap();
    serde_json::from_slice::<serde_json::Value>(&std::fs::read(&path).unwrap()).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_writer_holds_or_refuses_hostile_names(spec in spec()) {
        let p = build(&spec);
        prop_assume!(p.is_some());
        check(&p.unwrap());
    }
}

/// The names of issue 52: a name of spaces only, one of 65,536 bytes, one
/// with a NUL byte, and one that reads as a header line, each the root of
/// the first stack, alone and together.
#[test]
fn names_that_broke_folded_output_read_back() {
    let names: Vec<Vec<u8>> = vec![
        b"   ".to_vec(),
        vec![b'x'; 65_536],
        b"a\0b".to_vec(),
        b"events: x".to_vec(),
        [&b"events: "[..], &[b'y'; 65_536]].concat(),
        b"main".to_vec(),
    ];
    let main = names.len() - 1;
    for i in 0..names.len() {
        let spec = Spec {
            names: names.clone(),
            functions: vec![(i, main, main), (main, main, main)],
            events: 1,
            stacks: vec![(vec![0], vec![3]), (vec![0, 1], vec![5])],
        };
        check(&build(&spec).unwrap());
    }
    let all = Spec {
        names: names.clone(),
        functions: (0..names.len()).map(|i| (i, main, main)).collect(),
        events: 1,
        stacks: (0..names.len())
            .map(|i| (vec![i, main], vec![i as u64 + 1]))
            .collect(),
    };
    check(&build(&all).unwrap());
}
