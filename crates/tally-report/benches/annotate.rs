//! Speed of `tally annotate`'s report on a generated profile (`tally-gen`,
//! 32 MB, instructions and jumps) already read: the sums, the inclusive
//! costs, ranking every row and function against the threshold and the
//! call trees of the rows shown, written as text to nowhere. With
//! `--threshold=all` every row is ranked and printed.
//!
//! Run with `cargo bench -p tally-report --bench annotate`.

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::time::Duration;
use tally_gen::{Config, EventSet};
use tally_report::annotate::{Options, Threshold, Tree, annotate};

fn bench(c: &mut Criterion) {
    let config = Config {
        seed: 1,
        size: 32 << 20,
        events: EventSet::Ir,
        compress: true,
        blocks: None,
    };
    let mut text = Vec::new();
    tally_gen::generate(&config, &mut text).expect("generating into memory");
    let input = tally_formats::Input::from_bytes("bench.out", text).expect("input");
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
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
