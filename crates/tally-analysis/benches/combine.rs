//! Speed of `tally merge` and `tally diff` without the command: two
//! line-level Cachegrind files (generated profiles shaped like CPython's
//! with Cachegrind's thirteen events, summed per line as Cachegrind
//! writes) read and summed, either folded as they are read
//! ([`Folding`] and [`Combiner::add_folded_owned`], what `tally merge`
//! does; per function as read for a diff, as `tally diff` does) or loaded
//! whole first and then added ([`Combiner::add`]); and two generated
//! instruction-level Callgrind files (one profile twice: calls, jumps,
//! inlined files) merged and diffed as the commands do, where finding
//! calls and jumps is much of the folding.
//!
//! Run with `cargo bench -p tally-analysis --bench combine`.

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use tally_analysis::Folding;
use tally_analysis::combine::{CombineOptions, Combined, Combiner, Sign};
use tally_formats::Input;
use tally_formats::callgrind;
use tally_gen::{Config, EventSet, Shape};

/// A generated profile of about 24 MB with `events`, as `tally-gen`
/// writes it (Callgrind, instructions and lines, calls and jumps).
fn generated(seed: u64, events: EventSet, shape: Shape) -> Vec<u8> {
    let config = Config {
        seed,
        size: 24 << 20,
        events,
        compress: true,
        blocks: None,
        shape,
    };
    let mut text = Vec::new();
    tally_gen::generate(&config, &mut text).expect("generating into memory");
    text
}

/// A generated profile shaped like CPython's with Cachegrind's thirteen
/// events, summed per line as Cachegrind writes (`bench/merge-diff.sh`'s
/// files).
fn cachegrind_text(seed: u64) -> Vec<u8> {
    let text = generated(seed, EventSet::Branch, Shape::PYTHON);
    let input = Input::from_bytes("gen.out", text).expect("input");
    let (profile, _) = callgrind::read::<u64>(input).expect("reading");
    let mut out = Vec::new();
    tally_formats::cachegrind::write(&profile, &mut out).expect("writing");
    out
}

fn folded(text: &[u8]) -> (callgrind::ReadOutcome<u64>, Folding<u64>) {
    folded_into(text, Folding::default())
}

fn folded_into(text: &[u8], mut sink: Folding<u64>) -> (callgrind::ReadOutcome<u64>, Folding<u64>) {
    let input = Input::from_bytes("a.cg", text.to_vec()).expect("input");
    let o = callgrind::parse::<u64, _>(input, &mut sink, Default::default()).expect("reading");
    (o, sink)
}

/// `tally merge` of two texts: each folded as read, the first taken as
/// the sum, the second folded into it.
fn merge(texts: [&[u8]; 2], options: CombineOptions) -> Combined<u64> {
    let mut c = Combiner::<u64>::new(options);
    for t in texts {
        let (o, f) = folded(t);
        c.add_folded_owned(&o.profile, f, Sign::Plus, "x")
            .expect("adding");
    }
    c.finish().expect("finishing")
}

/// `tally diff` of two texts (B − A), each folded by `folding` as read.
fn diff(
    a: &[u8],
    b: &[u8],
    options: CombineOptions,
    folding: fn() -> Folding<u64>,
) -> Combined<i64> {
    let mut c = Combiner::<i64>::new(options);
    for (t, sign) in [(a, Sign::Minus), (b, Sign::Plus)] {
        let (o, f) = folded_into(t, folding());
        c.add_folded(&o.profile, &f, sign, "x").expect("adding");
    }
    c.finish().expect("finishing")
}

/// A group of ten samples over ten seconds, its throughput the two inputs'
/// bytes.
fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
    bytes: usize,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(criterion::Throughput::Bytes(bytes as u64));
    g
}

fn bench(c: &mut Criterion) {
    let a = cachegrind_text(1);
    let b = cachegrind_text(2);
    let mut g = group(c, "merge-two-cachegrind-files", a.len() + b.len());
    g.bench_function("folded-as-read", |bench| {
        bench.iter(|| black_box(merge([&a, &b], CombineOptions::default())))
    });
    g.bench_function("loaded-then-added", |bench| {
        bench.iter(|| {
            let mut c = Combiner::<u64>::new(CombineOptions::default());
            for t in [&a, &b] {
                let input = Input::from_bytes("a.cg", t.to_vec()).expect("input");
                let (p, _) = callgrind::read::<u64>(input).expect("reading");
                c.add(&p, Sign::Plus, "x").expect("adding");
            }
            black_box(c.finish().expect("finishing"))
        })
    });
    g.bench_function("diff-per-function", |bench| {
        let options = CombineOptions {
            per_function: true,
            ..Default::default()
        };
        bench.iter(|| black_box(diff(&a, &b, options.clone(), Folding::per_function)))
    });
    g.finish();

    // One profile twice, as two runs of one program list the same
    // records in the same order.
    let a = generated(1, EventSet::Ir, Shape::default());
    let b = a.clone();
    let mut g = group(c, "merge-two-callgrind-files", a.len() + b.len());
    g.bench_function("merge", |bench| {
        let options = CombineOptions {
            keep_zero: true,
            ..Default::default()
        };
        bench.iter(|| black_box(merge([&a, &b], options.clone())))
    });
    g.bench_function("diff", |bench| {
        let options = CombineOptions {
            combine_parts: true,
            ..Default::default()
        };
        bench.iter(|| black_box(diff(&a, &b, options.clone(), Folding::default)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
