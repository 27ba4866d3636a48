//! speedscope output: the file has the structure of speedscope's file
//! format schema (file-format-schema.json of the `speedscope` npm package,
//! 1.25: the required fields and types checked here), one sampled profile
//! per event whose weights add up to the profile's total, and stacks that
//! name frames of the shared list. A Callgrind profile's stacks are
//! estimated from its arcs and the file's name says so.

use serde_json::Value;
use std::path::Path;
use tally_testutil::{data, path_str};

fn tally(args: &[&str]) -> Vec<u8> {
    tally_testutil::tally!().ok(args).stdout
}

/// The schema's rules for a file of sampled profiles.
fn check_schema(doc: &Value) {
    assert_eq!(
        doc["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = doc["shared"]["frames"].as_array().expect("shared.frames");
    for f in frames {
        assert!(f["name"].is_string(), "frame name: {f}");
        assert!(f.get("file").is_none_or(Value::is_string), "{f}");
        for k in ["line", "col"] {
            assert!(f.get(k).is_none_or(Value::is_number), "{f}");
        }
    }
    for k in ["name", "exporter"] {
        assert!(doc.get(k).is_none_or(Value::is_string));
    }
    assert!(doc["activeProfileIndex"].is_number());
    let units = [
        "bytes",
        "microseconds",
        "milliseconds",
        "nanoseconds",
        "none",
        "seconds",
    ];
    for p in doc["profiles"].as_array().expect("profiles") {
        assert_eq!(p["type"], "sampled");
        assert!(p["name"].is_string());
        assert!(
            units.contains(&p["unit"].as_str().unwrap()),
            "{}",
            p["unit"]
        );
        assert!(p["startValue"].is_number() && p["endValue"].is_number());
        let samples = p["samples"].as_array().expect("samples");
        let weights = p["weights"].as_array().expect("weights");
        assert_eq!(samples.len(), weights.len());
        for s in samples {
            for i in s.as_array().expect("a stack") {
                let i = i.as_u64().expect("a frame index") as usize;
                assert!(i < frames.len(), "frame {i} of {}", frames.len());
            }
        }
    }
}

fn convert(input: &Path, out: &Path) -> Value {
    tally(&["convert", path_str(input), "-o", path_str(out)]);
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

fn totals(input: &Path) -> (Vec<String>, Value) {
    let out = tally(&[
        "annotate",
        "--json",
        "--auto=no",
        "--threshold=all",
        path_str(input),
    ]);
    let v: Value = serde_json::from_slice(&out).unwrap();
    let events: Vec<String> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    // The sum of the self costs (a file's stated summary may differ).
    let mut totals = serde_json::Map::new();
    for e in &events {
        let sum: u64 = v["functions_by_name"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["self"][e].as_u64().unwrap_or(0))
            .sum();
        totals.insert(e.clone(), sum.into());
    }
    (events, Value::Object(totals))
}

#[test]
fn every_event_is_a_profile_whose_weights_add_up_to_its_total() {
    let dir = tally_testutil::temp_dir();
    for fixture in ["callgrind/mutual.cache.out", "callgrind/inline.default.out"] {
        let input = data(fixture);
        let doc = convert(&input, &dir.path().join("x.speedscope.json"));
        check_schema(&doc);
        let (events, totals) = totals(&input);
        let profiles = doc["profiles"].as_array().unwrap();
        let recorded: Vec<&str> = profiles
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert!(!recorded.is_empty());
        for (p, name) in profiles.iter().zip(&events) {
            let sum: u64 = p["weights"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_u64().unwrap())
                .sum();
            assert_eq!(sum, totals[name].as_u64().unwrap(), "{fixture} {name}");
            assert_eq!(p["endValue"].as_u64().unwrap(), sum);
        }
        assert!(
            doc["name"]
                .as_str()
                .unwrap()
                .contains("stacks estimated from call arcs"),
            "{}",
            doc["name"]
        );
        // Estimated stacks are whole stacks: some have several frames.
        assert!(
            profiles[0]["samples"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s.as_array().unwrap().len() > 2)
        );
    }
}

#[test]
fn a_difference_is_refused() {
    let dir = tally_testutil::temp_dir();
    // B − A: the functions only A has are negative.
    let a = data("callgrind/recursion.default.out");
    let b = data("callgrind/mutual.default.out");
    let d = dir.path().join("d.callgrind");
    tally(&["diff", path_str(&a), path_str(&b), "-o", path_str(&d)]);
    let out = dir.path().join("d.speedscope.json");
    let e = tally_testutil::tally!().fails(&["convert", path_str(&d), "-o", path_str(&out)]);
    assert!(e.contains("negative"), "{e}");
}
