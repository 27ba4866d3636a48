//! Speed of `tally annotate`'s report on a generated profile (`tally-gen`,
//! 32 MB, instructions and jumps) already read: the sums, the inclusive
//! costs, ranking every row and function against the threshold and the
//! call trees of the rows shown, written as text to nowhere. With
//! `--threshold=all` every row is ranked and printed. `read_and_annotate`
//! is what `tally annotate FILE` does by default: the read sums the rows
//! and keeps the records in one pass, then the report with source
//! annotation (the generated sources are not on disk).
//! `calls_on_one_line_20k` annotates a found source whose calls are all on
//! one line.
//!
//! Run with `cargo bench -p tally-report --bench annotate`.

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::time::Duration;
use tally_gen::{Config, EventSet};
use tally_report::annotate::{
    AggregateAndRecords, Options, Threshold, Tree, annotate, annotate_sums,
};

fn bench(c: &mut Criterion) {
    let config = Config {
        seed: 1,
        size: 32 << 20,
        events: EventSet::Ir,
        compress: true,
        blocks: None,
        shape: Default::default(),
    };
    let mut text = Vec::new();
    tally_gen::generate(&config, &mut text).expect("generating into memory");
    let input = tally_formats::Input::from_bytes("bench.out", text.clone()).expect("input");
    let (profile, _) = tally_formats::callgrind::read::<u64>(input).expect("reading");
    let mut g = c.benchmark_group("annotate-report-32MB");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, threshold) in [
        ("inclusive_tree_both", Threshold::Default),
        ("inclusive_tree_both_all", Threshold::All),
    ] {
        let opts = Options {
            inclusive: true,
            tree: Tree::Both,
            auto: false,
            threshold,
            ..Options::default()
        };
        g.bench_function(name, |b| {
            b.iter(|| annotate(&profile, &opts, &mut std::io::sink()).expect("annotating"))
        });
    }
    let opts = Options::default();
    g.bench_function("read_and_annotate", |b| {
        b.iter(|| {
            let input = tally_formats::Input::from_bytes("bench.out", text.clone()).expect("input");
            let mut both = AggregateAndRecords::new(&opts);
            let read =
                tally_formats::callgrind::parse::<u64, _>(input, &mut both, Default::default())
                    .expect("reading");
            let (mut sums, records) = both.into_parts();
            sums.set_events(read.profile.events.len());
            let (profile, _) = records.into_profile(read);
            annotate_sums(&profile, sums, &opts, &mut std::io::sink()).expect("annotating")
        })
    });
    g.finish();
    calls_on_one_line(c);
}

/// Source annotation of a file whose 20,000 calls are all on line 0 (a
/// file without line numbers): each call site is merged by a lookup, so
/// this grows with the calls, not with their square.
fn calls_on_one_line(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary folder");
    let source = dir.path().join("line0.c");
    std::fs::write(&source, "int f(void);\n").expect("writing the source");
    let mut text = format!("events: Ir\nfl={}\nfn=main\n0 1\n", source.display());
    for i in 0..20_000 {
        text.push_str(&format!("cfn=f{i}\ncalls=1 0\n0 5\n"));
    }
    for i in 0..20_000 {
        text.push_str(&format!("fn=f{i}\n0 5\n"));
    }
    let input = tally_formats::Input::from_bytes("calls.out", text.into_bytes()).expect("input");
    let (profile, _) = tally_formats::callgrind::read::<u64>(input).expect("reading");
    let opts = Options {
        threshold: Threshold::All,
        ..Options::default()
    };
    let mut g = c.benchmark_group("annotate-source");
    g.sample_size(10);
    g.bench_function("calls_on_one_line_20k", |b| {
        b.iter(|| annotate(&profile, &opts, &mut std::io::sink()).expect("annotating"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
