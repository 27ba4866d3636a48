//! Speed of `tally gprof` on a Callgrind profile already summed: gprof's
//! analysis (routines, arcs, cycles, propagation, the measured inclusive
//! costs beside it) and the text report, flat profile and call graph,
//! written to nowhere. The profile is generated (`tally-gen`, 64 MB, about
//! 31,000 functions and the call arcs Valgrind writes with
//! `--dump-instr=yes --collect-jumps=yes`), and one of the shape of the cc1
//! profile of BENCHMARKS.md (`tally-gen --like cc1`: long context names);
//! `TALLY_BENCH_PROFILE` adds a real one (such as that cc1 profile).
//!
//! Run with `cargo bench -p tally-report --bench gprof`.

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::time::Duration;
use tally_analysis::AggregateBuilder;
use tally_analysis::gprof::{Options, Report, callgrind};
use tally_gen::{Config, EventSet, Shape};
use tally_report::gprof::text;

fn bench(c: &mut Criterion) {
    let config = Config {
        seed: 1,
        size: 64 << 20,
        events: EventSet::Ir,
        compress: true,
        blocks: None,
        shape: Default::default(),
    };
    let mut generated = Vec::new();
    tally_gen::generate(&config, &mut generated).expect("generating into memory");
    // The shape of cc1's profile: 80,000 context names, long ones.
    let like_cc1 = Config {
        shape: Shape::CC1,
        ..config
    };
    let mut cc1_shaped = Vec::new();
    tally_gen::generate(&like_cc1, &mut cc1_shaped).expect("generating into memory");
    let real = std::env::var_os("TALLY_BENCH_PROFILE")
        .map(|p| std::fs::read(&p).expect("reading TALLY_BENCH_PROFILE"));
    let mut g = c.benchmark_group("gprof-callgrind");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, bytes) in [
        ("generated_64MB", Some(generated)),
        ("generated_like_cc1_64MB", Some(cc1_shaped)),
        ("real", real),
    ] {
        let Some(bytes) = bytes else { continue };
        // Read once, summing as `tally gprof` does.
        let input = tally_formats::Input::from_bytes("bench.out", bytes).expect("input");
        let mut sums = AggregateBuilder::keeping_jumps(false);
        let read = tally_formats::callgrind::parse::<u64, _>(input, &mut sums, Default::default())
            .expect("reading");
        sums.set_events(read.profile.events.len());
        let part_sums = sums.part_totals();
        let agg = sums.finish(read.profile.names.function_count(), |_| true);
        let opts = Options {
            brief: true,
            flat: true,
            graph: true,
            ..Options::default()
        };
        let analyse = || -> Report {
            callgrind::analyse(&read.profile, &agg, &part_sums, None, &opts, name)
                .expect("analysing")
        };
        g.bench_function(format!("{name}/analyse"), |b| b.iter(analyse));
        let report = analyse();
        g.bench_function(format!("{name}/write_flat_and_graph"), |b| {
            b.iter(|| text::write_to(&report, &opts, &mut std::io::sink()).expect("writing"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
