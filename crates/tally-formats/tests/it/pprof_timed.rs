//! A recording's timeline through pprof: the two-thread program of
//! `timeline` recorded by `perf record -g`, written as pprof (each sample
//! with its time and thread as labels) and read back. Those labels go
//! back into the timeline, not into label sets, so every sample comes
//! back with its time, thread and stack, and the stacks are those of the
//! recording.

use std::path::Path;

use tally_formats::perf::data;
use tally_formats::pprof;
use tally_testutil::{require, temp_dir};

/// Each timed sample as (time since the timeline's origin, pid, tid,
/// thread name, the stack's frames as (function name, line, address),
/// root first), sorted.
type Row = (u64, i32, i32, Vec<u8>, Vec<(Vec<u8>, u32, u64)>);

fn rows(p: &tally_model::Profile<u64>) -> Vec<Row> {
    let stacks = p.stacks.as_ref().expect("stacks");
    let t = stacks.timeline.as_ref().expect("a timeline");
    let mut out: Vec<Row> = (0..t.len())
        .map(|i| {
            let th = &t.threads[t.thread[i] as usize];
            let frames = stacks.samples[t.stack[i] as usize]
                .frames
                .iter()
                .map(|f| {
                    let f = stacks.frames[f.index()];
                    (
                        p.names.function_name(f.function).to_vec(),
                        f.line,
                        f.address,
                    )
                })
                .collect();
            (
                t.times[i] - t.origin(),
                th.pid,
                th.tid,
                th.name.clone(),
                frames,
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_timeline_written_as_pprof_reads_back_sample_by_sample() {
    if !require(&["gcc", "perf"]) {
        return;
    }
    let dir = temp_dir();
    let path = crate::timeline::recorded(dir.path());
    let recorded = data::read(&path, &std::fs::read(&path).unwrap()).unwrap();
    let mut bytes = Vec::new();
    pprof::write(&recorded, &mut bytes).unwrap();
    let back = pprof::read_as::<u64>(Path::new("two.pb"), &bytes).unwrap();

    let (ours, theirs) = (rows(&back), rows(&recorded));
    assert!(ours.len() > 100, "{} samples", ours.len());
    assert_eq!(ours, theirs);
    let stacks = back.stacks.as_ref().unwrap();
    assert!(
        !stacks.has_labels(),
        "time and thread labels stay out of the label sets"
    );
    let names: Vec<&[u8]> = stacks
        .timeline
        .as_ref()
        .unwrap()
        .threads
        .iter()
        .map(|t| t.name.as_slice())
        .collect();
    for n in [&b"tl-main"[..], b"tl-worker"] {
        assert!(names.contains(&n), "{names:?}");
    }
    let events = back.events.len();
    assert_eq!(
        stacks.totals(events),
        recorded.stacks.as_ref().unwrap().totals(events)
    );
}
