//! The tables as a reader sees them: profiles exported into files of a
//! temporary directory and read back with the `parquet` crate's Arrow
//! reader, every number checked against the profile itself or against a
//! value worked out by hand from a small hand-written file.

use super::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::collections::BTreeMap;
use std::fs::File;
use tally_formats::Source;
use tally_model::{AnyCost, AnyProfile};
use tally_testutil::{data, temp_dir};

/// tests/data/spec/extended.callgrind: the format specification's
/// example; inclusive main 820, func1 400, func2 700 (spec/README.md).
const EXTENDED: &str = "spec/extended.callgrind";
/// tests/data/spec/two-parts.callgrind: two parts, events Ir and Dr.
const TWO_PARTS: &str = "spec/two-parts.callgrind";

fn read(rel: &str) -> AnyProfile {
    let source = Source::open(&data(rel)).expect("fixture opens");
    tally_formats::read(&source, None).expect("fixture reads").0
}

fn read_text(name: &str, text: &str) -> AnyProfile {
    let source = Source::from_bytes(name, text.as_bytes().to_vec());
    tally_formats::read(&source, None).expect("text reads").0
}

fn unsigned(p: AnyProfile) -> Profile<u64> {
    match p {
        AnyCost::Unsigned(p) => p,
        AnyCost::Signed(_) => panic!("a measured profile expected"),
    }
}

fn info(id: &str, source: &str, labels: &[(&str, &str)]) -> ProfileInfo {
    ProfileInfo {
        id: id.into(),
        source: source.into(),
        format: "callgrind".into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn outputs(dir: &Path) -> [(File, PathBuf); 4] {
    Table::ALL.map(|t| {
        let path = dir.join(t.file_name());
        (File::create(&path).expect("output file"), path)
    })
}

/// Exports `profiles` into a new directory; returns it and the counts.
fn export(profiles: &[(&AnyProfile, ProfileInfo)]) -> (tempfile::TempDir, Counts) {
    let dir = temp_dir();
    let mut ex = Exporter::new(outputs(dir.path())).expect("exporter");
    for (p, i) in profiles {
        match p {
            AnyCost::Unsigned(p) => ex.add(p, i),
            AnyCost::Signed(p) => ex.add(p, i),
        }
        .expect("profile exported");
    }
    let counts = ex.finish().expect("export finished");
    (dir, counts)
}

/// One value of a row as read back.
#[derive(Clone, Debug, PartialEq)]
enum Cell {
    Str(Option<String>),
    Int(Option<i64>),
    Bool(bool),
    Labels(Vec<(String, String)>),
}

type Row = BTreeMap<String, Cell>;

fn cells(batch: &RecordBatch, out: &mut Vec<Row>) {
    for i in 0..batch.num_rows() {
        let mut row = Row::new();
        for (f, col) in batch.schema().fields().iter().zip(batch.columns()) {
            let cell = match f.data_type() {
                DataType::Utf8 => {
                    let a = col.as_string::<i32>();
                    Cell::Str(a.is_valid(i).then(|| a.value(i).to_string()))
                }
                DataType::Int64 => {
                    let a = col.as_primitive::<Int64Type>();
                    Cell::Int(a.is_valid(i).then(|| a.value(i)))
                }
                DataType::Int32 => {
                    let a = col.as_primitive::<Int32Type>();
                    Cell::Int(a.is_valid(i).then(|| i64::from(a.value(i))))
                }
                DataType::Boolean => Cell::Bool(col.as_boolean().value(i)),
                DataType::Map(..) => {
                    let e = col.as_map().value(i);
                    let (k, v) = (
                        e.column(0).as_string::<i32>(),
                        e.column(1).as_string::<i32>(),
                    );
                    Cell::Labels(
                        (0..e.len())
                            .map(|j| (k.value(j).to_string(), v.value(j).to_string()))
                            .collect(),
                    )
                }
                t => panic!("{}: unexpected type {t}", f.name()),
            };
            row.insert(f.name().clone(), cell);
        }
        out.push(row);
    }
}

/// A table's schema (metadata included) and rows, read back.
fn table(dir: &Path, t: Table) -> (SchemaRef, Vec<Row>) {
    let file = File::open(dir.join(t.file_name())).expect("table file");
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("a Parquet file");
    let schema = builder.schema().clone();
    let mut rows = Vec::new();
    for batch in builder.build().expect("reader") {
        cells(&batch.expect("batch"), &mut rows);
    }
    (schema, rows)
}

fn rows(dir: &Path, t: Table) -> Vec<Row> {
    table(dir, t).1
}

fn s<'a>(r: &'a Row, k: &str) -> &'a str {
    match &r[k] {
        Cell::Str(Some(s)) => s,
        c => panic!("{k}: not a string: {c:?}"),
    }
}

fn opt_s<'a>(r: &'a Row, k: &str) -> Option<&'a str> {
    match &r[k] {
        Cell::Str(s) => s.as_deref(),
        c => panic!("{k}: not a string column: {c:?}"),
    }
}

fn n(r: &Row, k: &str) -> i64 {
    opt_n(r, k).unwrap_or_else(|| panic!("{k}: null"))
}

fn opt_n(r: &Row, k: &str) -> Option<i64> {
    match &r[k] {
        Cell::Int(v) => *v,
        c => panic!("{k}: not an integer column: {c:?}"),
    }
}

/// The rows whose column `key` is `f`.
fn of<'a>(rows: &'a [Row], key: &str, f: &str) -> Vec<&'a Row> {
    rows.iter().filter(|r| s(r, key) == f).collect()
}

#[test]
fn every_table_has_the_documented_columns_and_metadata() {
    use DataType::{Boolean as B, Int32 as I32, Int64 as I64, Utf8 as S};
    // docs/parquet.md, column by column: (name, type, nullable).
    let own: [&[(&str, DataType, bool)]; 4] = [
        &[
            ("part", I32, false),
            ("object", S, false),
            ("file", S, false),
            ("function", S, false),
            ("line", I64, true),
            ("address", I64, true),
            ("event", S, false),
            ("value", I64, false),
        ],
        &[
            ("object", S, false),
            ("file", S, false),
            ("function", S, false),
            ("event", S, false),
            ("self", I64, false),
            ("inclusive", I64, false),
            ("cycle", I32, true),
            ("inclusive_derived", B, false),
        ],
        &[
            ("part", I32, false),
            ("caller_object", S, false),
            ("caller_file", S, false),
            ("caller_function", S, false),
            ("callee_object", S, false),
            ("callee_file", S, false),
            ("callee_function", S, false),
            ("line", I64, true),
            ("calls", I64, false),
            ("event", S, false),
            ("inclusive", I64, false),
        ],
        &[
            ("source", S, false),
            ("format", S, false),
            ("parts", I32, false),
            ("event", S, false),
            ("event_long_name", S, true),
            ("total", I64, false),
        ],
    ];
    let p = read(EXTENDED);
    let (dir, _) = export(&[(&p, info("1", "x", &[]))]);
    let names = ["costs", "functions", "arcs", "profiles"];
    for ((t, cols), name) in Table::ALL.into_iter().zip(own).zip(names) {
        assert_eq!(t.file_name(), format!("{name}.parquet"));
        let (schema, _) = table(dir.path(), t);
        let mut want = vec![("profile_id", S, false)];
        want.extend(cols.iter().cloned());
        want.extend([("command", S, true), ("creator", S, true)]);
        let got: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone(), f.is_nullable()))
            .collect();
        assert_eq!(got[..got.len() - 1], want[..], "{name}");
        let labels = schema.field(schema.fields().len() - 1);
        assert_eq!(labels.name(), "labels", "{name}");
        let DataType::Map(entries, false) = labels.data_type() else {
            panic!("{name}: labels is {}", labels.data_type());
        };
        let DataType::Struct(kv) = entries.data_type() else {
            panic!("{name}: map entries are {}", entries.data_type());
        };
        assert_eq!(kv[0].data_type(), &S);
        assert_eq!(kv[1].data_type(), &S);
        assert!(!labels.is_nullable(), "{name}");
        let meta = schema.metadata();
        assert_eq!(meta.get("tally.schema").map(String::as_str), Some("1"));
        assert_eq!(meta.get("tally.table").map(String::as_str), Some(name));
    }
}

/// By hand from two-parts.callgrind: costs 3 non-zero (place, event)
/// pairs in each part; functions main and work in both events; the one
/// arc in both events; one profile row per event.
#[test]
fn row_counts_follow_the_documented_rules() {
    let p = read(TWO_PARTS);
    let (dir, counts) = export(&[(&p, info("1", "x", &[]))]);
    assert_eq!(
        counts,
        Counts {
            profiles: 1,
            rows: [6, 4, 2, 2]
        }
    );
    for (t, want) in Table::ALL.into_iter().zip(counts.rows) {
        assert_eq!(rows(dir.path(), t).len() as u64, want, "{}", t.name());
    }
}

/// subpositions.callgrind names (0x401002, 14) twice: Ir 1 Dr 1, then Ir 4.
#[test]
fn costs_sum_lines_of_one_place_and_keep_addresses() {
    let p = read("spec/subpositions.callgrind");
    let (dir, _) = export(&[(&p, info("1", "x", &[]))]);
    let costs = rows(dir.path(), Table::Costs);
    // 13 non-zero (place, event) pairs, worked out from the file's comments.
    assert_eq!(costs.len(), 13);
    assert!(costs.iter().all(|r| n(r, "value") != 0));
    let at: Vec<_> = costs
        .iter()
        .filter(|r| opt_n(r, "address") == Some(0x401002))
        .map(|r| {
            (
                s(r, "function"),
                opt_n(r, "line"),
                s(r, "event"),
                n(r, "value"),
            )
        })
        .collect();
    assert_eq!(
        at,
        [("main", Some(14), "Ir", 5), ("main", Some(14), "Dr", 1)]
    );
    let main = of(&costs, "function", "main");
    assert!(main.iter().all(|r| s(r, "object") == "/usr/bin/demo"));
    let sum = |rs: &[&Row], e: &str| -> i64 {
        rs.iter()
            .filter(|r| s(r, "event") == e)
            .map(|r| n(r, "value"))
            .sum()
    };
    // spec/README.md: main self Ir 18 Dr 3, helper self Ir 20 Dr 6.
    assert_eq!((sum(&main, "Ir"), sum(&main, "Dr")), (18, 3));
    let helper = of(&costs, "function", "helper");
    assert_eq!((sum(&helper, "Ir"), sum(&helper, "Dr")), (20, 6));
}

/// Self cost per (object, function file, function) and event, walked
/// from the profile's cost lines.
fn self_costs(p: &Profile<u64>) -> BTreeMap<(String, String, String, String), i64> {
    let names = &p.names;
    let events = p.events.recorded();
    let mut out = BTreeMap::new();
    let t = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for part in &p.parts {
        part.lines.for_each(|l| {
            let f = l.function;
            for (e, &c) in l.costs.iter().enumerate() {
                let key = (
                    t(names.function_object(f)),
                    t(names.function_file(f)),
                    t(names.function_name(f)),
                    events[e].name.clone(),
                );
                *out.entry(key).or_insert(0) += c as i64;
            }
        });
    }
    out.retain(|_, v| *v != 0);
    out
}

/// The words of the first line of `text` that starts with `key`, after it.
fn fields<'a>(text: &'a str, key: &str) -> impl Iterator<Item = &'a str> {
    let line = text.lines().find_map(|l| l.strip_prefix(key));
    line.unwrap_or_else(|| panic!("no {key}"))
        .split_whitespace()
}

/// A real profile with 13 events: every function's self cost, in the
/// functions table and summed over its costs rows, is the sum of its
/// cost lines; every total is the one Valgrind wrote.
#[test]
fn self_costs_of_every_function_match_the_profiles_cost_lines() {
    let rel = "callgrind/mutual.cache.out";
    let any = read(rel);
    let (dir, _) = export(&[(&any, info("1", rel, &[]))]);
    let p = unsigned(any);
    let want = self_costs(&p);
    let functions = rows(dir.path(), Table::Functions);
    let got: BTreeMap<_, _> = functions
        .iter()
        .filter(|r| n(r, "self") != 0)
        .map(|r| {
            let [o, file, f, e] =
                ["object", "file", "function", "event"].map(|k| s(r, k).to_string());
            ((o, file, f, e), n(r, "self"))
        })
        .collect();
    assert_eq!(got, want);
    // The costs rows of one function (by object and name) add up the same.
    let mut by_name: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    for ((o, _, f, e), v) in &want {
        *by_name
            .entry((o.clone(), f.clone(), e.clone()))
            .or_default() += v;
    }
    let mut from_costs: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    for r in rows(dir.path(), Table::Costs) {
        let [o, f, e] = ["object", "function", "event"].map(|k| s(&r, k).to_string());
        *from_costs.entry((o, f, e)).or_default() += n(&r, "value");
    }
    assert_eq!(from_costs, by_name);
    // Totals: the sums of the body, which Valgrind writes as `totals:`
    // (its `summary:` here is 2 Ir more: callgrind_annotate's total).
    let file = std::fs::read_to_string(data(rel)).unwrap();
    let totals = fields(&file, "totals:").map(|v| v.parse::<i64>().unwrap());
    let expected: BTreeMap<&str, i64> = fields(&file, "events:").zip(totals).collect();
    let profiles = rows(dir.path(), Table::Profiles);
    let exported: BTreeMap<&str, i64> = profiles
        .iter()
        .map(|r| (s(r, "event"), n(r, "total")))
        .collect();
    assert_eq!(expected.len(), 13);
    assert_eq!(exported, expected);
}

/// The specification's example: self and inclusive by hand (spec/README.md).
#[test]
fn functions_have_self_and_inclusive_of_the_spec_example() {
    let p = read(EXTENDED);
    let (dir, _) = export(&[(&p, info("1", "x", &[]))]);
    let got: Vec<_> = rows(dir.path(), Table::Functions)
        .iter()
        .map(|r| {
            (
                s(r, "function").to_string(),
                s(r, "file").to_string(),
                s(r, "event").to_string(),
                n(r, "self"),
                n(r, "inclusive"),
                opt_n(r, "cycle"),
            )
        })
        .collect();
    let row = |f: &str, file: &str, own: i64, incl: i64| {
        (
            f.to_string(),
            file.to_string(),
            "Instructions".to_string(),
            own,
            incl,
            None,
        )
    };
    assert_eq!(
        got,
        [
            row("main", "file1.c", 20, 820),
            row("func1", "file1.c", 100, 400),
            row("func2", "file2.c", 700, 700),
        ]
    );
}

#[test]
fn arcs_carry_calls_and_inclusive_per_call_site() {
    let p = read(EXTENDED);
    let (dir, _) = export(&[(&p, info("1", "x", &[]))]);
    let got: Vec<_> = rows(dir.path(), Table::Arcs)
        .iter()
        .map(|r| {
            (
                s(r, "caller_function").to_string(),
                s(r, "callee_function").to_string(),
                s(r, "callee_file").to_string(),
                opt_n(r, "line"),
                n(r, "calls"),
                n(r, "inclusive"),
            )
        })
        .collect();
    let arc = |a: &str, b: &str, file: &str, line: i64, calls: i64, incl: i64| {
        (
            a.to_string(),
            b.to_string(),
            file.to_string(),
            Some(line),
            calls,
            incl,
        )
    };
    assert_eq!(
        got,
        [
            arc("main", "func1", "file1.c", 16, 1, 400),
            arc("main", "func2", "file2.c", 16, 3, 400),
            arc("func1", "func2", "file2.c", 51, 2, 300),
        ]
    );
}

/// Every event of an arc has its row, each with the same `calls`, even
/// where its inclusive cost is 0 (two-parts: main → work, Ir 10, Dr 0).
#[test]
fn every_event_of_an_arc_has_its_row() {
    let p = read(TWO_PARTS);
    let (dir, _) = export(&[(&p, info("1", "x", &[]))]);
    let got: Vec<_> = rows(dir.path(), Table::Arcs)
        .iter()
        .map(|r| {
            (
                n(r, "part"),
                s(r, "event").to_string(),
                n(r, "calls"),
                n(r, "inclusive"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [(1, "Ir".to_string(), 1, 10), (1, "Dr".to_string(), 1, 0)]
    );
}

/// two-parts.callgrind.expected holds the totals, worked out by hand.
#[test]
fn profile_rows_hold_totals_header_and_labels() {
    let p = read(TWO_PARTS);
    let labels = [("version", "1.4"), ("host", "a")];
    let (dir, _) = export(&[(&p, info("0123456789abcdef", "in/two.out", &labels))]);
    let expected = std::fs::read_to_string(data(&format!("{TWO_PARTS}.expected"))).unwrap();
    let want: Vec<(String, i64)> = expected
        .lines()
        .map(|l| {
            let (e, v) = l.split_once(' ').unwrap();
            (e.to_string(), v.parse().unwrap())
        })
        .collect();
    let profiles = rows(dir.path(), Table::Profiles);
    let got: Vec<(String, i64)> = profiles
        .iter()
        .map(|r| (s(r, "event").to_string(), n(r, "total")))
        .collect();
    assert_eq!(got, want);
    for r in &profiles {
        assert_eq!(s(r, "source"), "in/two.out");
        assert_eq!(s(r, "format"), "callgrind");
        assert_eq!(n(r, "parts"), 2);
        assert_eq!(opt_s(r, "event_long_name"), None);
        assert_eq!(opt_s(r, "command"), Some("./demo --fast"));
        assert_eq!(opt_s(r, "creator"), Some("tally-tests (hand-written)"));
    }
    // The profile's columns end the rows of every table.
    let want_labels = Cell::Labels(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    for t in Table::ALL {
        for r in rows(dir.path(), t) {
            assert_eq!(s(&r, "profile_id"), "0123456789abcdef", "{}", t.name());
            assert_eq!(r["labels"], want_labels, "{}", t.name());
        }
    }
}

#[test]
fn event_long_names_land_in_the_profiles_table() {
    let p = read("spec/event-names.callgrind");
    let (dir, _) = export(&[(&p, info("1", "x", &[]))]);
    let got: Vec<_> = rows(dir.path(), Table::Profiles)
        .iter()
        .map(|r| {
            (
                s(r, "event").to_string(),
                opt_s(r, "event_long_name").map(str::to_string),
            )
        })
        .collect();
    // Recorded events only: the derived `S` is left to the query.
    assert_eq!(
        got,
        [
            ("Ir".to_string(), Some("Instruction Fetches".to_string())),
            ("Dr".to_string(), Some("Data Read Accesses".to_string())),
        ]
    );
}

#[test]
fn profiles_are_appended_in_the_order_given() {
    let (a, b) = (read(TWO_PARTS), read(EXTENDED));
    let (dir, counts) = export(&[
        (&a, info("a", "A", &[])),
        (&b, info("b", "B", &[("k", "v")])),
    ]);
    assert_eq!(counts.profiles, 2);
    let ids = |t: Table| -> Vec<String> {
        rows(dir.path(), t)
            .iter()
            .map(|r| s(r, "profile_id").to_string())
            .collect()
    };
    // two-parts: 6 costs, 2 profile rows; extended: 3 and 1.
    assert_eq!(ids(Table::Costs), [&["a"; 6][..], &["b"; 3]].concat());
    assert_eq!(ids(Table::Profiles), ["a", "a", "b"]);
    let profiles = rows(dir.path(), Table::Profiles);
    assert_eq!(profiles[0]["labels"], Cell::Labels(vec![]));
    assert_eq!(
        profiles[2]["labels"],
        Cell::Labels(vec![("k".into(), "v".into())])
    );
}

/// A difference's counts are negative: they stay so in every table.
#[test]
fn a_difference_keeps_its_negative_counts() {
    let text = "events: Ir\nfl=a.c\nfn=main\n1 -5\n2 3\nfn=f\n3 -7\n";
    let p = read_text("diff.out", text);
    assert!(p.is_signed());
    let (dir, _) = export(&[(&p, info("1", "diff.out", &[]))]);
    let costs: Vec<_> = rows(dir.path(), Table::Costs)
        .iter()
        .map(|r| {
            (
                s(r, "function").to_string(),
                opt_n(r, "line"),
                n(r, "value"),
            )
        })
        .collect();
    assert_eq!(
        costs,
        [
            ("main".to_string(), Some(1), -5),
            ("main".to_string(), Some(2), 3),
            ("f".to_string(), Some(3), -7)
        ]
    );
    let functions: Vec<_> = rows(dir.path(), Table::Functions)
        .iter()
        .map(|r| {
            (
                s(r, "function").to_string(),
                n(r, "self"),
                n(r, "inclusive"),
            )
        })
        .collect();
    assert_eq!(
        functions,
        [("main".to_string(), -2, -2), ("f".to_string(), -7, -7)]
    );
    let total = n(&rows(dir.path(), Table::Profiles)[0], "total");
    assert_eq!(total, -5 + 3 - 7);
}

/// 2^63 fits a measured count but not Parquet's signed 64 bits.
#[test]
fn a_count_beyond_i64_is_an_error_naming_input_function_and_event() {
    let text = "events: Ir\nfl=a.c\nfn=hot\n1 9223372036854775808\n";
    let p = unsigned(read_text("big.out", text));
    let dir = temp_dir();
    let mut ex = Exporter::new(outputs(dir.path())).unwrap();
    let e = ex.add(&p, &info("1", "runs/big.out", &[])).unwrap_err();
    assert!(matches!(e, Error::Range { .. }), "{e:?}");
    let msg = e.to_string();
    for part in ["runs/big.out", "hot", "Ir"] {
        assert!(msg.contains(part), "{msg}");
    }
}

/// Fails every write when `fail`, else keeps the bytes.
struct Output {
    fail: bool,
    bytes: Vec<u8>,
}

impl Write for Output {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.fail {
            return Err(std::io::Error::other("disk full"));
        }
        self.bytes.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_error_names_the_file_of_its_table() {
    let p = unsigned(read(EXTENDED));
    let outputs = Table::ALL.map(|t| {
        let sink = Output {
            fail: t == Table::Functions,
            bytes: Vec::new(),
        };
        (sink, PathBuf::from("out").join(t.file_name()))
    });
    let mut ex = Exporter::new(outputs).unwrap();
    // Rows are buffered: the error comes when the files are written.
    let e = match ex.add(&p, &info("1", "x", &[])) {
        Err(e) => e,
        Ok(()) => ex.finish().unwrap_err(),
    };
    let Error::Parquet { path, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(path, &Path::new("out").join("functions.parquet"));
    assert!(e.to_string().starts_with("out/functions.parquet: "), "{e}");
}

/// FNV-1a 64 as published (offset basis, prime): the test vectors below
/// are the reference's, so the id's hash is checked from outside.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn profile_id_is_fnv1a_of_the_length_prefixed_bytes_and_labels() {
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    assert_eq!(profile_id([], &[]), "cbf29ce484222325");
    let mut input = Vec::new();
    for s in [&b"ab"[..], b"k", b"v"] {
        input.extend_from_slice(&(s.len() as u64).to_le_bytes());
        input.extend_from_slice(s);
    }
    let labels = [("k".to_string(), "v".to_string())];
    assert_eq!(
        profile_id([&b"ab"[..]], &labels),
        format!("{:016x}", fnv1a(&input))
    );
}

#[test]
fn profile_id_is_stable_and_changes_with_bytes_and_labels() {
    let bytes = std::fs::read(data(TWO_PARTS)).unwrap();
    let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let id = profile_id([bytes.as_slice()], &l(&[("v", "1")]));
    assert_eq!(id.len(), 16);
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(id, profile_id([bytes.as_slice()], &l(&[("v", "1")])));
    let others = [
        profile_id([bytes.as_slice()], &l(&[("v", "2")])),
        profile_id([bytes.as_slice()], &l(&[])),
        profile_id([bytes.as_slice()], &l(&[("v", "1"), ("h", "x")])),
        profile_id([&bytes[1..]], &l(&[("v", "1")])),
        // With gmon's program: another input.
        profile_id([bytes.as_slice(), b"prog"], &l(&[("v", "1")])),
    ];
    for o in &others {
        assert_ne!(&id, o);
    }
    // Boundaries count: neither bytes nor labels run into each other.
    assert_ne!(
        profile_id([&b"ab"[..], b"c"], &[]),
        profile_id([&b"a"[..], b"bc"], &[])
    );
    assert_ne!(
        profile_id([], &l(&[("ab", "c")])),
        profile_id([], &l(&[("a", "bc")]))
    );
}

/// More rows than one batch: all of them, in order, none twice.
#[test]
fn a_table_writer_hands_over_every_batch() {
    let dir = temp_dir();
    let path = dir.path().join("profiles.parquet");
    let mut t =
        TableWriter::new(Table::Profiles, File::create(&path).unwrap(), path.clone()).unwrap();
    let cols = ProfileColumns {
        id: "p".into(),
        command: None,
        creator: Some("c".into()),
        labels: vec![],
    };
    let n_rows = BATCH_ROWS + 3;
    for i in 0..n_rows {
        t.push(
            &cols,
            &[
                Value::Str("src"),
                Value::Str("callgrind"),
                Value::I32(1),
                Value::Str("Ir"),
                Value::OptStr(None),
                Value::I64(i as i64),
            ],
        )
        .unwrap();
    }
    assert_eq!(t.finish().unwrap(), n_rows as u64);
    let got = rows(dir.path(), Table::Profiles);
    assert_eq!(got.len(), n_rows);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, r)| n(r, "total") == i as i64)
    );
    assert_eq!(opt_s(&got[BATCH_ROWS], "command"), None);
    assert_eq!(opt_s(&got[BATCH_ROWS], "creator"), Some("c"));
}
