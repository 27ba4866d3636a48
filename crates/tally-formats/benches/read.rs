//! Throughput of the Callgrind reader and writer on a large generated
//! profile (`tally-gen`: what Valgrind writes with `--dump-instr=yes
//! --collect-jumps=yes`), once with `Ir` only and once with the nine cache
//! events of `--cache-sim=yes`.
//!
//! Run with `cargo bench -p tally-formats --bench read`. About 64 MB per
//! profile, generated in memory once (and written to a temporary file for
//! the reads from a file); few samples, so the whole run takes about three
//! minutes.

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use tally_formats::callgrind::{self, ReadOptions, WriteOptions};
use tally_formats::{Input, NullSink};
use tally_gen::{Config, EventSet};

const SIZE: u64 = 64 << 20;

fn profile_text(events: EventSet) -> Vec<u8> {
    let config = Config {
        seed: 1,
        size: SIZE,
        events,
        compress: true,
        blocks: None,
        shape: Default::default(),
    };
    let mut out = Vec::with_capacity(SIZE as usize + (1 << 20));
    tally_gen::generate(&config, &mut out).expect("generating into memory");
    out
}

fn input(bytes: Vec<u8>) -> Input {
    Input::from_bytes("bench.out", bytes).expect("in-memory input")
}

fn bench(c: &mut Criterion) {
    for (name, events) in [("ir", EventSet::Ir), ("cache", EventSet::Cache)] {
        let text = profile_text(events);
        let mut group = c.benchmark_group(format!("callgrind-{name}"));
        // Each iteration takes a good fraction of a second: keep the sample
        // count small and the iteration count per sample fixed.
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_secs(2))
            .measurement_time(Duration::from_secs(8));

        group.throughput(Throughput::BytesDecimal(text.len() as u64));
        // The copy of the input (the reader takes ownership) is made
        // outside the measured time.
        group.bench_function("read", |b| {
            b.iter_batched(
                || text.clone(),
                |bytes| callgrind::read::<u64>(input(bytes)).expect("valid profile"),
                BatchSize::PerIteration,
            )
        });
        // Parsing alone, on one thread and on two (the default for large
        // files, see `ReadOptions::two_threads`).
        for (bench, two) in [("parse", false), ("parse-two-threads", true)] {
            group.bench_function(bench, |b| {
                b.iter_batched(
                    || text.clone(),
                    |bytes| {
                        let options = ReadOptions {
                            two_threads: Some(two),
                            ..Default::default()
                        };
                        callgrind::parse::<u64, _>(input(bytes), &mut NullSink, options)
                            .expect("valid profile")
                    },
                    BatchSize::PerIteration,
                )
            });
        }

        // From a file, as `tally check` reads one: on two threads by role,
        // and in two regions, one per core (`ReadOptions::split`, which
        // needs a regular file).
        let file = tempfile::NamedTempFile::new().expect("temporary file");
        std::fs::write(file.path(), &text).expect("writing the profile");
        for (bench, split) in [
            ("parse-file-two-threads", false),
            ("parse-file-two-regions", true),
        ] {
            group.bench_function(bench, |b| {
                b.iter(|| {
                    let options = ReadOptions {
                        two_threads: Some(true),
                        split: Some(split),
                        ..Default::default()
                    };
                    let input = Input::open(file.path()).expect("opening the profile");
                    callgrind::parse::<u64, _>(input, &mut NullSink, options)
                        .expect("valid profile")
                })
            });
        }

        let (profile, _) = callgrind::read::<u64>(input(text.clone())).expect("valid profile");
        let mut out = Vec::with_capacity(text.len() * 2);
        callgrind::write(&profile, &mut out, WriteOptions::default()).expect("write to memory");
        // Writing is measured by the bytes it produces.
        group.throughput(Throughput::BytesDecimal(out.len() as u64));
        group.bench_function("write", |b| {
            b.iter(|| {
                out.clear();
                callgrind::write(&profile, &mut out, WriteOptions::default())
                    .expect("write to memory");
                black_box(out.len())
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
