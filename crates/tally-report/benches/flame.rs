//! Speed of `tally flame` on folded stacks: the lines merged straight into
//! the flame tree ([`read_folded`]) against the same file read as a
//! profile (interned stacks, the derived part) and then merged. The folded
//! file is the stacks estimated from a generated Callgrind profile
//! (`tally-gen`, 32 MB), written sorted as `tally convert --to folded`
//! writes them.
//!
//! Run with `cargo bench -p tally-report --bench flame`.

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;
use tally_formats::{Input, folded};
use tally_gen::{Config, EventSet};
use tally_model::EventColumns;
use tally_report::flame::{Tree, read_folded};

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
    let input = Input::from_bytes("bench.out", text).expect("input");
    let (profile, _) = tally_formats::callgrind::read::<u64>(input).expect("reading");
    let stacks = tally_analysis::estimate_stacks(&profile).expect("estimating");
    let mut lines = Vec::new();
    folded::write(&profile.names, &stacks, 0, &mut lines).expect("writing");
    let mut g = c.benchmark_group(format!("flame-folded-{}MB", lines.len() >> 20));
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    g.bench_function("straight", |b| {
        b.iter(|| {
            let input = Input::from_bytes("bench.folded", lines.clone()).expect("input");
            let mut tree = read_folded(input).expect("reading");
            tree.finish();
            black_box(tree)
        })
    });
    g.bench_function("through-profile", |b| {
        b.iter(|| {
            let p = folded::read(Path::new("bench.folded"), &lines).expect("reading");
            let columns = EventColumns::new(&p.events);
            let event = columns.column(0).expect("one event");
            let mut tree = Tree::new();
            if let Some(s) = &p.stacks {
                tree.add_stacks(&p, s, event, false, false);
            }
            tree.finish();
            black_box(tree)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
