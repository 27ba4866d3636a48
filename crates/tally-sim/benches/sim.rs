//! Speed of the simulator: the cache hierarchy alone on a decoded access
//! stream, and the whole consumer of `tally sim` (trace stream decoding,
//! per-instruction costs, one or three machines) on a binary trace in the
//! form the QEMU plugin writes (block records, tagged accesses).
//!
//! The stream is made here, deterministic: a loop nest of 4,096 distinct
//! instructions over 64 functions, about a third of them with a load or a
//! store, walking an array with a stride and a table at random, so that
//! the first-level caches miss a few per cent of the time, like real code.
//!
//! Run with `cargo bench -p tally-sim --bench sim`.

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use tally_sim::trace::{Record, TraceReader, TraceWriter};
use tally_sim::{
    CacheConfig, Counts, Engine, EngineOptions, Hierarchy, HierarchyConfig, Policy, Simulation,
};

#[derive(Clone, Copy)]
enum Acc {
    I(u64, u8),
    R(u64, u8),
    W(u64, u8),
}

fn stream(n: usize) -> Vec<Acc> {
    let mut v = Vec::with_capacity(n);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut i = 0u64;
    let mut stride = 0u64;
    while v.len() < n {
        let f = next() % 64;
        for k in 0..64u64 {
            let pc = 0x40_0000 + f * 0x400 + k * 4;
            v.push(Acc::I(pc, 4));
            match k % 6 {
                0 => {
                    stride = (stride + 8) % (1 << 18);
                    v.push(Acc::R(0x1000_0000 + stride, 8));
                }
                3 => v.push(Acc::W(0x7fff_0000 + (k * 8) % 512, 8)),
                5 => v.push(Acc::R(0x2000_0000 + (next() % (1 << 11)) * 8, 4)),
                _ => {}
            }
            i += 1;
        }
    }
    black_box(i);
    v
}

fn machine(d1: u64) -> Hierarchy {
    Hierarchy::new(&HierarchyConfig {
        i1: CacheConfig {
            size: 32768,
            assoc: 8,
            line_size: 64,
        },
        d1: CacheConfig {
            size: d1,
            assoc: 8,
            line_size: 64,
        },
        middle: vec![],
        ll: CacheConfig {
            size: 8 << 20,
            assoc: 16,
            line_size: 64,
        },
        policy: Policy::Lru,
        iaddr_zero_bits: 0,
    })
    .expect("valid machine")
}

/// The stream as the QEMU plugin writes it: one block record per run of a
/// function's 64 instructions, accesses tagged with their instruction.
fn encode(accs: &[Acc]) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new()).expect("in memory");
    let nop = [0x0f, 0x1f, 0x40, 0x00];
    let id = |pc: u64| ((pc - 0x40_0000) / 4) as u32;
    for f in 0..64u64 {
        for k in 0..64u64 {
            let pc = 0x40_0000 + f * 0x400 + k * 4;
            w.write(&Record::Declare {
                id: id(pc),
                addr: pc,
                code: &nop,
            })
            .expect("in memory");
        }
    }
    let mut index = 0u8;
    for a in accs {
        let r = match *a {
            Acc::I(pc, _) => {
                index = ((pc & 0x3ff) / 4) as u8;
                if index != 0 {
                    continue;
                }
                Record::Block {
                    first: id(pc),
                    count: 64,
                }
            }
            Acc::R(addr, size) => Record::LoadAt { index, addr, size },
            Acc::W(addr, size) => Record::StoreAt { index, addr, size },
        };
        w.write(&r).expect("in memory");
    }
    w.finish().expect("in memory")
}

fn consume(bytes: &[u8], machines: usize) -> u64 {
    let ms = (0..machines).map(|k| machine(32768 >> k)).collect();
    let e = Engine::new(
        ms,
        EngineOptions {
            merge_modify: true,
            ..Default::default()
        },
    );
    // As `tally sim` reads a stream.
    let mut r = TraceReader::new(bytes).expect("stream");
    let mut sim = Simulation::new(e, true);
    sim.feed_reader(&mut r, &mut ()).expect("declared");
    sim.finish(&()).expect("declared").totals(0).ir
}

fn bench(c: &mut Criterion) {
    let accs = stream(20_000_000);
    let bytes = encode(&accs);
    let mut g = c.benchmark_group("sim-20M-accesses");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(accs.len() as u64));
    g.bench_function("hierarchy", |b| {
        b.iter(|| {
            let mut m = machine(32768);
            let mut c = Counts::default();
            for a in &accs {
                match *a {
                    Acc::I(pc, s) => m.fetch(pc, u64::from(s), &mut c),
                    Acc::R(ad, s) => m.read(ad, u64::from(s), &mut c),
                    Acc::W(ad, s) => m.write(ad, u64::from(s), &mut c),
                }
            }
            black_box(c)
        })
    });
    g.bench_function("stream+engine, 1 machine", |b| {
        b.iter(|| black_box(consume(&bytes, 1)))
    });
    g.bench_function("stream+engine, 3 machines", |b| {
        b.iter(|| black_box(consume(&bytes, 3)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
