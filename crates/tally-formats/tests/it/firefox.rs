//! Firefox Profiler output: the processed format's required structure
//! (meta with its version, interval and categories; per thread the
//! samples, stack, frame, func and string tables, every index in range),
//! and the stacks read back from those tables with their weights equal to
//! the profile's stacks and costs: recorded (perf.data), folded, split
//! past 32-bit weights, per labelled thread, per part, one event, and
//! timed samples at their times on their threads.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use tally_formats::{FileFormat, OutputFormat, OutputOptions, Source};
use tally_model::{AnyCost, Label, LabelValue, Profile, Stacks};

fn write(p: &Profile<u64>, event: Option<usize>) -> (Value, Vec<u8>) {
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("p.firefox.json");
    let options = OutputOptions {
        format: Some(OutputFormat::Firefox),
        event,
        ..Default::default()
    };
    tally_formats::write_profile(p, &out, &options).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    (serde_json::from_slice(&bytes).unwrap(), bytes)
}

fn read(path: &Path) -> Profile<u64> {
    let (p, _) = tally_formats::read(&Source::open(path).unwrap(), None).unwrap();
    match p {
        AnyCost::Unsigned(p) => p,
        AnyCost::Signed(_) => panic!("a measured profile"),
    }
}

fn index(v: &Value, len: usize, what: &str) -> usize {
    let i = v.as_u64().unwrap_or_else(|| panic!("{what}: {v}")) as usize;
    assert!(i < len, "{what} {i} of {len}");
    i
}

fn column<'a>(table: &'a Value, name: &str, len: usize) -> &'a [Value] {
    let c = table[name]
        .as_array()
        .unwrap_or_else(|| panic!("column {name}"));
    assert_eq!(c.len(), len, "column {name}");
    c
}

/// Checks the structure and returns, per thread (name), the weight of
/// each stack (frames joined by `;`, root first).
fn threads(doc: &Value) -> BTreeMap<String, BTreeMap<String, i64>> {
    let meta = &doc["meta"];
    assert!(meta["preprocessedProfileVersion"].as_u64().unwrap() >= 40);
    assert!(meta["version"].is_number());
    assert!(meta["interval"].as_f64().unwrap() > 0.0);
    assert!(meta["startTime"].is_number());
    assert!(meta["product"].is_string());
    let categories = meta["categories"].as_array().unwrap();
    assert!(!categories.is_empty());
    for c in categories {
        assert!(c["name"].is_string() && c["color"].is_string());
        assert!(c["subcategories"].is_array());
    }
    assert!(doc["libs"].is_array());
    let mut out = BTreeMap::new();
    for t in doc["threads"].as_array().unwrap() {
        for k in ["name", "processName", "tid", "pid"] {
            assert!(!t[k].is_null(), "thread {k}");
        }
        let strings = t["stringArray"].as_array().unwrap();
        let funcs = &t["funcTable"];
        let nfunc = funcs["length"].as_u64().unwrap() as usize;
        let names = column(funcs, "name", nfunc);
        for k in ["resource", "isJS", "relevantForJS"] {
            column(funcs, k, nfunc);
        }
        let frames = &t["frameTable"];
        let nframe = frames["length"].as_u64().unwrap() as usize;
        let frame_func = column(frames, "func", nframe);
        for k in ["address", "category", "subcategory", "line"] {
            column(frames, k, nframe);
        }
        for c in column(frames, "category", nframe) {
            index(c, categories.len(), "category");
        }
        let stacks = &t["stackTable"];
        let nstack = stacks["length"].as_u64().unwrap() as usize;
        let stack_frame = column(stacks, "frame", nstack);
        let prefix = column(stacks, "prefix", nstack);
        let samples = &t["samples"];
        let n = samples["length"].as_u64().unwrap() as usize;
        assert_eq!(samples["weightType"], "samples");
        let weights = column(samples, "weight", n);
        let times = column(samples, "timeDeltas", n);
        let mut by_stack: BTreeMap<String, i64> = BTreeMap::new();
        for (s, w) in column(samples, "stack", n).iter().zip(weights) {
            let mut names_of = Vec::new();
            let mut at = Some(index(s, nstack, "stack"));
            while let Some(i) = at {
                let frame = index(&stack_frame[i], nframe, "frame");
                let func = index(&frame_func[frame], nfunc, "func");
                let name = index(&names[func], strings.len(), "string");
                names_of.push(strings[name].as_str().unwrap().to_string());
                at = prefix[i]
                    .as_u64()
                    .map(|p| index(&Value::from(p), i, "prefix"));
            }
            names_of.reverse();
            let w = w.as_i64().unwrap();
            assert!(w != 0 && w.abs() <= i64::from(i32::MAX), "weight {w}");
            *by_stack.entry(names_of.join(";")).or_default() += w;
        }
        // Times in order (the parts of a split weight share one).
        assert!(times.iter().all(|d| d.as_f64().unwrap() >= 0.0));
        let name = t["name"].as_str().unwrap().to_string();
        assert!(out.insert(name, by_stack).is_none(), "threads share a name");
    }
    out
}

/// The stacks of a profile as [`threads`] reads them back, all in one.
fn expected(p: &Profile<u64>, event: usize) -> BTreeMap<String, i64> {
    let stacks = p.stacks.as_ref().unwrap();
    let mut out = BTreeMap::new();
    for s in &stacks.samples {
        let name: Vec<String> = s
            .frames
            .iter()
            .map(|f| {
                let n = p.names.function_name(stacks.frames[f.index()].function);
                String::from_utf8_lossy(n).into_owned()
            })
            .collect();
        if s.costs[event] != 0 {
            *out.entry(name.join(";")).or_default() += s.costs[event] as i64;
        }
    }
    out
}

#[test]
fn recorded_stacks_come_back_from_the_tables() {
    let p = read(&tally_testutil::data("stacks/stacks.perf.data"));
    let (doc, bytes) = write(&p, None);
    let threads = threads(&doc);
    assert_eq!(threads.len(), 1);
    let got = threads.into_values().next().unwrap();
    // Functions that share a name ("[unknown]" in several objects) are
    // labelled with their object or file.
    let mut plain: BTreeMap<String, i64> = BTreeMap::new();
    for (k, w) in &got {
        let k: Vec<&str> = k
            .split(';')
            .map(|f| f.split(" [").next().unwrap())
            .collect();
        *plain.entry(k.join(";")).or_default() += w;
    }
    assert_eq!(plain, expected(&p, 0));
    assert!(got.keys().any(|k| k.matches(';').count() >= 3), "{got:?}");
    // tally refuses to read it back, saying what it is.
    assert_eq!(
        tally_formats::detect(&bytes).format,
        FileFormat::FirefoxProfile
    );
    let dir = tally_testutil::temp_dir();
    let path = dir.path().join("p.json");
    std::fs::write(&path, &bytes).unwrap();
    let Err(e) = tally_formats::read(&Source::open(&path).unwrap(), None) else {
        panic!("read back")
    };
    let e = e.to_string();
    assert!(
        e.contains("Firefox Profiler") && e.contains("p.json"),
        "{e}"
    );
}

#[test]
fn weights_past_32_bits_are_split_and_labels_make_threads() {
    let dir = tally_testutil::temp_dir();
    let path = dir.path().join("x.folded");
    let big = 5 * u64::from(u32::MAX) + 7;
    let text = format!("main;run;work {big}\nmain;run 12\nmain;idle 3\n");
    std::fs::write(&path, text).unwrap();
    let mut p = read(&path);
    let (doc, _) = write(&p, None);
    let one = threads(&doc).into_values().next().unwrap();
    assert_eq!(one["main;run;work"], big as i64);
    assert_eq!(one, expected(&p, 0));
    let samples = doc["threads"][0]["samples"]["length"].as_u64().unwrap();
    assert_eq!(samples, 3 + big.div_ceil(i32::MAX as u64) - 1);

    // The same stacks under two thread ids of one process.
    let old = p.stacks.take().unwrap();
    let mut s = Stacks::default();
    for (i, sample) in old.samples.iter().enumerate() {
        let frames: Vec<_> = sample
            .frames
            .iter()
            .map(|f| s.frame(old.frames[f.index()]))
            .collect();
        let label = |key: &[u8], n: i64| Label {
            key: key.to_vec(),
            value: LabelValue::Number(n, Vec::new()),
        };
        let set = s.label_set(vec![label(b"pid", 40), label(b"tid", 41 + (i % 2) as i64)]);
        s.add_labelled(&frames, set, &sample.costs).unwrap();
    }
    p.stacks = Some(s);
    let (doc, _) = write(&p, None);
    let threads = threads(&doc);
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert_eq!(threads["thread 41"].len(), 2, "{threads:?}");
    assert_eq!(threads["thread 42"]["main;run"], 12);
    let tids: Vec<&Value> = doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["tid"])
        .collect();
    assert!(tids.contains(&&Value::from("41")) || tids.contains(&&Value::from(41)));
    assert!(
        doc["threads"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["pid"] == "40" || t["pid"] == 40)
    );
}

#[test]
fn self_costs_of_each_part_in_the_chosen_event() {
    for fixture in [
        "callgrind/mutual.dumpevery.out.1",
        "callgrind/mutual.cache.out",
    ] {
        let p = read(&tally_testutil::data(fixture));
        let last = p.events.len() - 1;
        let (doc, _) = write(&p, Some(last));
        let threads = threads(&doc);
        assert_eq!(threads.len(), 1, "{fixture}");
        let mut total = 0i64;
        for part in &p.parts {
            part.lines.for_each(|l| total += l.costs[last] as i64);
        }
        let got: i64 = threads.values().flat_map(|t| t.values()).sum();
        assert_eq!(got, total, "{fixture}");
        // One-frame stacks, and the product says why.
        assert!(threads.values().all(|t| t.keys().all(|k| !k.contains(';'))));
        let product = doc["meta"]["product"].as_str().unwrap();
        assert!(product.contains("no call stacks"), "{product}");
        let name = &p.events.recorded()[last];
        assert!(
            product.contains(name.long_name.as_deref().unwrap_or(&name.name)),
            "{product}"
        );
    }
    // Two files are two parts: two threads, each with its own costs.
    let paths = [
        tally_testutil::data("callgrind/mutual.default.out"),
        tally_testutil::data("callgrind/recursion.default.out"),
    ];
    let paths: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let (p, _) = tally_formats::read_files::<u64>(&paths, None).unwrap();
    assert_eq!(p.parts.len(), 2);
    let (doc, _) = write(&p, None);
    let threads = threads(&doc);
    assert_eq!(threads.len(), 2, "{:?}", threads.keys());
    let mut want: Vec<i64> = p
        .parts
        .iter()
        .map(|part| {
            let mut total = 0i64;
            part.lines.for_each(|l| total += l.costs[0] as i64);
            total
        })
        .collect();
    let mut got: Vec<i64> = threads.values().map(|t| t.values().sum()).collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "{:?}", threads.keys());
}

#[test]
fn timed_samples_keep_their_times_and_threads() {
    let dir = tally_testutil::temp_dir();
    let path = dir.path().join("x.folded");
    std::fs::write(&path, "main;run;work 5\nmain;idle 2\n").unwrap();
    let mut p = read(&path);
    let old = p.stacks.take().unwrap();
    let frames = |s: &mut Stacks, i: usize| -> Vec<_> {
        let sample = &old.samples[i];
        sample
            .frames
            .iter()
            .map(|f| s.frame(old.frames[f.index()]))
            .collect()
    };
    // (stack, thread, time in ns, weight): out of order, as recorders
    // deliver them from several CPUs.
    let timed = [
        (0, 0, 1_000_000, 2),
        (1, 1, 1_500_000, 2),
        (0, 1, 4_000_000, 1),
        (0, 0, 3_000_000, 2),
    ];
    let mut s = Stacks::default();
    for &(i, thread, time, w) in &timed {
        let f = frames(&mut s, i);
        s.add_timed(&f, &[w], time, thread).unwrap();
    }
    let t = s.timeline.as_mut().unwrap();
    t.sort();
    t.threads = vec![
        tally_model::Thread {
            pid: 7,
            tid: 8,
            name: b"worker-a".to_vec(),
        },
        tally_model::Thread {
            pid: 7,
            tid: 9,
            name: b"worker-b".to_vec(),
        },
    ];
    p.stacks = Some(s.clone());
    let (doc, _) = write(&p, None);
    let by_thread = threads(&doc);
    assert_eq!(by_thread["worker-a"]["main;run;work"], 4);
    assert_eq!(by_thread["worker-b"]["main;run;work"], 1);
    assert_eq!(by_thread["worker-b"]["main;idle"], 2);
    // Times in ms from the first sample, in order, per thread.
    for (t, want) in doc["threads"]
        .as_array()
        .unwrap()
        .iter()
        .zip([[0.0, 2.0].as_slice(), [0.5, 3.0].as_slice()])
    {
        let mut at = 0.0;
        let times: Vec<f64> = t["samples"]["timeDeltas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                at += d.as_f64().unwrap();
                at
            })
            .collect();
        assert_eq!(times, want, "{}", t["name"]);
    }

    // A timeline short of the stacks' costs is not used: the stacks are.
    let mut partial = s;
    partial.add(&[], &[3]).unwrap();
    p.stacks = Some(partial);
    let (doc, _) = write(&p, None);
    let threads = threads(&doc);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let one = threads.into_values().next().unwrap();
    assert_eq!(one["main;run;work"], 5);
    assert_eq!(one["[no frames]"], 3);
}
