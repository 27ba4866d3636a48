//! Format detection on real files of every format (tests/data), plain and
//! gzip'd, and the one entry point: unsigned or signed, file or memory,
//! whole, scanned, or several files as one profile; and the one writer.

use std::io::Write;
use std::path::{Path, PathBuf};
use tally_formats::{Detected, FileFormat as Format, detect};
use tally_formats::{OutputFormat, OutputOptions, Source};
use tally_model::AnyCost;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel)
}

fn files(dir: &str, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && keep(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no files in {dir}");
    v
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// The file is detected as `format`, plain and gzip'd, from its head.
fn is(path: &Path, format: Format) {
    let bytes = std::fs::read(path).unwrap();
    let head = &bytes[..bytes.len().min(tally_formats::HEAD_LEN)];
    assert_eq!(
        detect(head),
        Detected {
            format,
            gzip: false
        },
        "{}",
        path.display()
    );
    assert_eq!(
        detect(&gzip(&bytes)),
        Detected { format, gzip: true },
        "{} gzip'd",
        path.display()
    );
    assert_eq!(Source::open(path).unwrap().format(), format);
}

#[test]
fn callgrind_profiles() {
    for p in files("callgrind", |n| {
        n.contains(".out") && !n.contains(".annotate")
    }) {
        is(&p, Format::Callgrind);
    }
    for p in files("merge", |n| n.ends_with("callgrind.out")) {
        is(&p, Format::Callgrind);
    }
    is(&data("other/nytprof.callgrind"), Format::Callgrind);
}

#[test]
fn cachegrind_profiles() {
    for p in files("cachegrind", |n| n.ends_with(".out")) {
        is(&p, Format::Cachegrind);
    }
    for p in files("merge", |n| {
        n.ends_with(".cg_diff") || n.ends_with(".cg_merge")
    }) {
        is(&p, Format::Cachegrind);
    }
}

#[test]
fn gmon_files_and_programs() {
    for p in files("gprof", |n| n.ends_with(".gmon")) {
        is(&p, Format::Gmon);
    }
    for p in files("gprof", |n| n.ends_with(".O0") || n.ends_with(".O2")) {
        is(&p, Format::Elf);
    }
}

#[test]
fn dcpi_profiles() {
    for p in files("dcpi/real", |n| n.ends_with(".dcpi")) {
        is(&p, Format::Dcpi);
    }
    is(&data("dcpi/spec/full.dcpi"), Format::Dcpi);
    is(&data("dcpi/spec/minimal.dcpi"), Format::Dcpi);
}

#[test]
fn tally_json_and_other_json() {
    let (p, _) =
        tally_formats::read_file::<u64>(&data("callgrind/recursion.default.out"), None).unwrap();
    let mut json = Vec::new();
    tally_formats::json::write(&p, &mut json).unwrap();
    assert_eq!(detect(&json).format, Format::TallyJson);
    assert_eq!(detect(&gzip(&json)).format, Format::TallyJson);
    assert_eq!(detect(b"  {\"summary\": []}").format, Format::Json);
}

#[test]
fn source_files_and_bad_profiles_are_unknown() {
    for p in files("src", |n| n.ends_with(".c")) {
        is(&p, Format::Unknown);
    }
    // Files the reader reports with their line are left to it.
    for p in files("bad", |n| n.ends_with(".callgrind")) {
        let d = Source::open(&p).unwrap().detected();
        assert!(d.is_callgrind_reader_input(), "{}: {d:?}", p.display());
    }
}

#[test]
fn misuse_names_the_file_the_format_and_the_command() {
    let p = data("gprof/cycles.O0.gmon");
    let e = tally_formats::read(&Source::open(&p).unwrap(), None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: a gprof gmon.out file: {}",
            p.display(),
            Format::Gmon.misuse()
        )
    );
    let e = tally_formats::scan_file::<u64>(&data("dcpi/real/workload.run1.dcpi"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a DCPI profile: use `tally dcpi prof IMAGE FILE`"),
        "{e}"
    );
}

#[test]
fn one_entry_reads_unsigned_and_signed() {
    let plain = Source::open(&data("merge/workload.a.cachegrind.out")).unwrap();
    let diff = Source::open(&data("merge/ab.cg_diff")).unwrap();
    let (p, _) = tally_formats::read(&plain, None).unwrap();
    assert!(!p.is_signed());
    let (d, _) = tally_formats::read(&diff, None).unwrap();
    assert!(d.is_signed());
    // From memory (as standard input is held), gzip'd: the same profile.
    let bytes = gzip(&std::fs::read(diff.path()).unwrap());
    let mem = Source::from_bytes("<stdin>", bytes);
    let (m, _) = tally_formats::read(&mem, None).unwrap();
    assert_eq!(m, d);
    match tally_formats::scan(&mem, None).unwrap() {
        AnyCost::Signed(o) => assert_eq!(o.profile.events.len(), 9),
        AnyCost::Unsigned(_) => panic!("a difference scans as signed"),
    }
    // Several files as one: signed if any is.
    let (all, warnings) = tally_formats::read_all(&[plain.clone(), mem], None).unwrap();
    assert_eq!(warnings.len(), 2);
    match all {
        AnyCost::Signed(p) => assert_eq!(p.parts.len(), 2),
        AnyCost::Unsigned(_) => panic!("a set with a difference reads as signed"),
    }
    let (all, _) = tally_formats::read_all(&[plain.clone(), plain], None).unwrap();
    assert!(!all.is_signed());
}

#[test]
fn one_writer_chooses_format_and_compression() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = tally_formats::read_file::<i64>(&data("merge/ab.cg_diff"), None).unwrap();
    assert_eq!(
        OutputFormat::from_name(Path::new("x/cachegrind.out.1.gz")),
        Some(OutputFormat::Cachegrind)
    );
    assert_eq!(
        OutputFormat::from_name(Path::new("p.json")),
        Some(OutputFormat::Json)
    );
    assert_eq!(OutputFormat::from_name(Path::new("out")), None);
    for (name, options, format) in [
        ("a.out.gz", OutputOptions::default(), Format::Cachegrind),
        (
            "b.out",
            OutputOptions {
                format: Some(OutputFormat::Callgrind),
                ..Default::default()
            },
            Format::Callgrind,
        ),
        (
            "c.json",
            OutputOptions {
                format: Some(OutputFormat::Json),
                gzip: Some(true),
                ..Default::default()
            },
            Format::TallyJson,
        ),
    ] {
        let out = dir.path().join(name);
        tally_formats::write_profile(&p, &out, &options).unwrap();
        let s = Source::open(&out).unwrap();
        assert_eq!(s.format(), format, "{name}");
        let gz = name.ends_with(".gz") || options.gzip == Some(true);
        assert_eq!(s.detected().gzip, gz, "{name}");
        if format != Format::TallyJson {
            let (back, _) = tally_formats::read(&s, None).unwrap();
            assert!(back.is_signed());
        }
    }
    let e = tally_formats::write_profile(
        &p,
        &dir.path().join("d.dcpi"),
        &OutputOptions {
            format: Some(OutputFormat::Dcpi),
            ..Default::default()
        },
    );
    assert!(e.is_err());
}
