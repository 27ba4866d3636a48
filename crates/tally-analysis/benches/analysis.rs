//! Speed of the analyses behind `tally annotate` on a large generated
//! profile (`tally-gen`, 64 MB, what Valgrind writes with `--dump-instr=yes
//! --collect-jumps=yes`): summing self costs and arcs, the call graph's
//! strongly connected components with inclusive costs, costs per
//! instruction for every function (what `--asm` needs), the stacks
//! estimated from the arcs as `tally flame` estimates them (to 0.1 pixel of
//! 1200) and as `tally convert --to folded` does (everything split); and the
//! streaming path of `tally annotate` and `tally gprof` (the reader feeding an
//! [`AggregateBuilder`], no line stored), on the generated profile (from
//! memory, and from a file read in two regions as `tally gprof` reads one) and, when
//! `TALLY_BENCH_PROFILE` names one, on a real profile (such as the cc1
//! profile of BENCHMARKS.md).
//!
//! Run with `cargo bench -p tally-analysis --bench analysis`.

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use tally_analysis::{
    Aggregate, AggregateBuilder, EstimateOptions, Inclusive, estimate_from, estimate_tree,
};
use tally_gen::{Config, EventSet};

fn bench(c: &mut Criterion) {
    let config = Config {
        seed: 1,
        size: 64 << 20,
        events: EventSet::Ir,
        compress: true,
        blocks: None,
        shape: Default::default(),
    };
    let mut text = Vec::new();
    tally_gen::generate(&config, &mut text).expect("generating into memory");
    let input = tally_formats::Input::from_bytes("bench.out", text.clone()).expect("input");
    let (profile, _) = tally_formats::callgrind::read::<u64>(input).expect("reading");
    let mut g = c.benchmark_group("annotate-analysis-64MB");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    g.bench_function("aggregate", |b| {
        b.iter(|| black_box(Aggregate::new(&profile, |_| true)))
    });
    let agg = Aggregate::new(&profile, |_| true);
    g.bench_function("inclusive", |b| b.iter(|| black_box(Inclusive::new(&agg))));
    let flame = EstimateOptions {
        min_share: 0.1 / 1200.0,
    };
    g.bench_function("estimate_tree_flame", |b| {
        b.iter(|| black_box(estimate_tree(&agg, flame).expect("estimate")))
    });
    g.bench_function("estimate_stacks_all", |b| {
        b.iter(|| black_box(estimate_from(&agg, EstimateOptions::default()).expect("estimate")))
    });
    g.bench_function("by_instr_all", |b| {
        b.iter(|| black_box(tally_analysis::by_instr(&profile, |_| true, |_| true)))
    });
    g.finish();
    stream(c, &text);
}

/// The reader feeding an [`AggregateBuilder`]: what `tally annotate` and
/// `tally gprof` do with one Callgrind input.
fn stream(c: &mut Criterion, text: &[u8]) {
    let mut s = c.benchmark_group("annotate-stream");
    s.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    let real = std::env::var_os("TALLY_BENCH_PROFILE")
        .map(|p| std::fs::read(&p).expect("reading TALLY_BENCH_PROFILE"));
    for (name, bytes) in [
        ("stream_aggregate", Some(&text.to_vec())),
        ("stream_aggregate_real", real.as_ref()),
    ] {
        let Some(bytes) = bytes else { continue };
        s.throughput(criterion::Throughput::BytesDecimal(bytes.len() as u64));
        s.bench_function(name, |b| {
            b.iter_batched(
                || bytes.clone(),
                |bytes| {
                    let input =
                        tally_formats::Input::from_bytes("bench.out", bytes).expect("input");
                    let mut sums = AggregateBuilder::keeping_jumps(false);
                    let read = tally_formats::callgrind::parse::<u64, _>(
                        input,
                        &mut sums,
                        Default::default(),
                    )
                    .expect("reading");
                    black_box(sums.finish(read.profile.names.function_count(), |_| true))
                },
                criterion::BatchSize::PerIteration,
            )
        });
    }
    // From a file: on two threads by role, and in two regions, one per
    // core, the second's sums taken back at the end (what `tally gprof`
    // does with a file of 16 MiB or more).
    let file = tempfile::NamedTempFile::new().expect("temporary file");
    std::fs::write(file.path(), text).expect("writing the profile");
    s.throughput(criterion::Throughput::BytesDecimal(text.len() as u64));
    for (name, split) in [
        ("stream_aggregate_file_two_threads", false),
        ("stream_aggregate_file_two_regions", true),
    ] {
        s.bench_function(name, |b| {
            b.iter(|| {
                let input = tally_formats::Input::open(file.path()).expect("opening");
                let mut sums = AggregateBuilder::keeping_jumps(false);
                let options = tally_formats::callgrind::ReadOptions {
                    two_threads: Some(true),
                    split: Some(split),
                    ..Default::default()
                };
                let read = tally_formats::callgrind::parse::<u64, _>(input, &mut sums, options)
                    .expect("reading");
                black_box(sums.finish(read.profile.names.function_count(), |_| true))
            })
        });
    }
    s.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
