//! The DCPI reader and writer against byte-level files written from the
//! specification by tests/data/dcpi/spec/make.py (one per rule, with the
//! outcome each must have in EXPECTED.tsv), and round trips.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tally_formats::Error;
use tally_formats::dcpi::{self, DcpiProfile, Header};

fn spec_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dcpi/spec")
}

#[test]
fn every_spec_fixture_reads_as_expected() {
    let dir = spec_dir();
    let table = std::fs::read_to_string(dir.join("EXPECTED.tsv")).unwrap();
    let mut checked = 0;
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let path = dir.join(f[0]);
        let result = dcpi::read_file(&path);
        match f[1] {
            "ok" => {
                let p = result.unwrap_or_else(|e| panic!("{}: {e}", f[0]));
                assert_eq!(p.samples.len().to_string(), f[2], "{}", f[0]);
                assert_eq!(p.total().to_string(), f[3], "{}", f[0]);
                // Written again, it reads back the same; the binary part of
                // our file starts 4-byte aligned.
                let bytes = dcpi::encode(&p).unwrap();
                assert_eq!(dcpi::parse(&bytes, &path).unwrap(), p, "{}", f[0]);
                let body = bytes
                    .windows(8)
                    .rposition(|w| w.starts_with(b"samples"))
                    .unwrap();
                let start = body + bytes[body..].iter().position(|&b| b == b'\n').unwrap() + 1;
                assert_eq!(start % 4, 0, "{}", f[0]);
            }
            "error" => {
                let e = match result {
                    Err(e) => e,
                    Ok(_) => panic!("{}: read without error", f[0]),
                };
                let text = e.to_string();
                match &e {
                    Error::Binary {
                        offset, message, ..
                    } => {
                        assert_eq!(offset.to_string(), f[2], "{}: {text}", f[0]);
                        assert!(message.contains(f[3]), "{}: {text}", f[0]);
                    }
                    other => panic!("{}: not a binary error: {other}", f[0]),
                }
                assert!(
                    text.contains(f[0]) && text.contains(&format!("byte {}", f[2])),
                    "{text}"
                );
            }
            o => panic!("bad outcome {o}"),
        }
        checked += 1;
    }
    assert!(checked >= 25, "{checked}");
}

#[test]
fn header_lines_and_addresses() {
    let p = dcpi::read_file(&spec_dir().join("full.dcpi")).unwrap();
    let h = &p.header;
    assert_eq!(h.lines.len(), 13);
    assert_eq!(h.lines[3], b"cpuamask 3");
    assert_eq!(h.lines[12], b"vendor-note kept\tverbatim  by writers");
    assert_eq!(
        h.get("vendor-note"),
        Some(b"kept\tverbatim  by writers".as_slice())
    );
    assert_eq!(h.path(), Some("/usr/bin/my program"));
    assert_eq!(h.tstart(), Some(0x401000));
    assert_eq!(
        (h.cpucount(), h.cpuimplv(), h.cpuamask()),
        (Some(2), Some(2), Some(3))
    );
    assert_eq!(h.event(), Some("cycles"));
    assert_eq!(h.image(), Some(0x3f2a9c01));
    assert_eq!(h.address_step(), 1);
    let want: BTreeMap<u64, u32> = [(0, 1), (2, 2), (0x20, 7), (0x23, 9)].into();
    assert_eq!(p.samples, want);
    let a = dcpi::read_file(&spec_dir().join("alpha.dcpi")).unwrap();
    assert_eq!(a.header.address_step(), 4);
    let want: BTreeMap<u64, u32> = [(0x100, 1), (0x104, 2), (0x108, 3), (0x10c, 4)].into();
    assert_eq!(a.samples, want);
    // Rewritten, the unknown line stays where it was.
    let bytes = dcpi::encode(&p).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("tstart 401000\nvendor-note kept\tverbatim  by writers\nsamples"));
}

#[test]
fn sniffing() {
    let dir = spec_dir();
    assert!(dcpi::is_dcpi(
        &std::fs::read(dir.join("minimal.dcpi")).unwrap()
    ));
    assert!(!dcpi::is_dcpi(
        &std::fs::read(dir.join("no-samples-line.dcpi")).unwrap()
    ));
    assert!(!dcpi::is_dcpi(b"events: Ir\nsamples\n"));
    assert!(!dcpi::is_dcpi(b"# callgrind format\n"));
}

#[test]
fn writer_limits_are_errors() {
    let mut p = DcpiProfile {
        header: Header {
            lines: vec![b"image 1".to_vec(), b"platform x86".to_vec()],
        },
        samples: BTreeMap::new(),
    };
    p.samples.insert(1 << 33, 1);
    assert!(dcpi::encode(&p).unwrap_err().to_string().contains("32-bit"));
    p.samples.clear();
    p.samples.insert(0, u32::MAX);
    p.samples.insert(8, 1);
    assert!(
        dcpi::encode(&p)
            .unwrap_err()
            .to_string()
            .contains("32 bits")
    );
    // A file that is not there.
    let e = dcpi::read_file(Path::new("/nonexistent/x.dcpi")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/x.dcpi"));
}

fn profile(alpha: bool, samples: Vec<(u32, u32)>, extra: Vec<String>) -> DcpiProfile {
    let mut lines: Vec<Vec<u8>> = [
        "image 1a2b",
        "epoch 2611221040",
        if alpha {
            "platform Alpha"
        } else {
            "platform x86_64"
        },
        "event cycles",
        "period 4096",
        "tsize 100000",
        "cpuspeed 600",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    for (i, e) in extra.iter().enumerate() {
        lines.insert(i % lines.len(), format!("x-{e} {e} value").into_bytes());
    }
    let step = if alpha { 4 } else { 1 };
    DcpiProfile {
        header: Header { lines },
        samples: samples
            .into_iter()
            .filter(|s| s.1 != 0)
            .map(|(o, c)| (u64::from(o % 100_000) * step, c % 1_000_000))
            .filter(|s| s.1 != 0)
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn read_write_round_trips(
        alpha in any::<bool>(),
        samples in prop::collection::vec((any::<u32>(), any::<u32>()), 0..60),
        dense in prop::collection::vec(1u32..5, 0..40),
        extra in prop::collection::vec("[a-z]{1,8}", 0..3),
    ) {
        let mut p = profile(alpha, samples, extra);
        // A dense run too, so that chunks with zero gaps are made.
        let step = p.header.address_step();
        for (i, c) in dense.into_iter().enumerate() {
            p.samples.insert(500_000 + (i as u64) * step * (1 + (i as u64 % 3)), c);
        }
        let bytes = dcpi::encode(&p).unwrap();
        let back = dcpi::parse(&bytes, Path::new("p.dcpi")).unwrap();
        prop_assert_eq!(&back, &p);
        prop_assert_eq!(dcpi::encode(&back).unwrap(), bytes);
    }

    #[test]
    fn damaged_files_are_errors_not_panics(
        samples in prop::collection::vec((any::<u32>(), 1u32..9), 1..20),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let p = profile(false, samples, vec![]);
        let mut bytes = dcpi::encode(&p).unwrap();
        let i = flip.index(bytes.len());
        bytes[i] = byte;
        let _ = dcpi::parse(&bytes, Path::new("p.dcpi"));
        let n = cut.index(bytes.len());
        let _ = dcpi::parse(&bytes[..n], Path::new("p.dcpi"));
    }
}
