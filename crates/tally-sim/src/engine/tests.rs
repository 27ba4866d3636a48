use super::*;
use crate::trace::Record;
use crate::{CacheConfig, HierarchyConfig, Policy};

fn engine() -> Engine {
    let c = |size| CacheConfig {
        size,
        assoc: 2,
        line_size: 64,
    };
    let m = Hierarchy::new(&HierarchyConfig {
        i1: c(1024),
        d1: c(1024),
        middle: vec![],
        ll: c(8192),
        policy: Policy::Lru,
        iaddr_zero_bits: 0,
    })
    .unwrap();
    Engine::new(vec![m], EngineOptions::default())
}

fn ir_by_addr(out: &Output) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = out
        .instrs
        .iter()
        .zip(&out.costs)
        .filter(|(_, c)| c.ir > 0)
        .map(|(i, c)| (i.addr, c.ir))
        .collect();
    v.sort();
    v
}

const NOP: &[u8] = &[0x90];
const STORE: &[u8] = &[0x48, 0x89, 0x07]; // mov %rax,(%rdi)

#[test]
fn blocks_run_as_far_as_the_stream_shows() {
    let mut v = declarations(0, 0x1000, &[NOP, STORE, NOP]);
    v.extend([
        Record::Block { first: 0, count: 3 },
        Record::StoreAt {
            index: 1,
            addr: 0x8000,
            size: 8,
        },
        // Two threads: thread 1 runs the block whole; thread 0 is
        // still in its block when thread 1's records come.
        Record::Thread(1),
        Record::Block { first: 0, count: 3 },
        Record::Thread(0),
        // A store into a code page faults; QEMU restarts at the store.
        Record::Block { first: 0, count: 3 },
        Record::Block { first: 1, count: 2 },
    ]);
    let out = both_ways(&v);
    // Thread 0: 0x1000 x2, 0x1001 x2 (one faulted before it ran, then
    // ran in the restarted block), 0x1004 x2; thread 1: one of each.
    assert_eq!(ir_by_addr(&out), [(0x1000, 3), (0x1001, 3), (0x1004, 3)]);
    assert_eq!(out.totals(0).dw, 1);
}

#[test]
fn an_instruction_at_a_page_end_runs_in_the_next_block() {
    // The plugin saw the instruction at 0x1ffe cut to one byte.
    let mut v = declarations(0, 0x1ffc, &[NOP, NOP, &[0x48]]);
    v.extend(declarations(3, 0x1ffe, &[&[0x48, 0x89, 0xc3]]));
    v.extend([
        Record::Block { first: 0, count: 3 },
        Record::Block { first: 3, count: 1 },
    ]);
    let out = both_ways(&v);
    assert_eq!(ir_by_addr(&out), [(0x1ffc, 1), (0x1ffd, 1), (0x1ffe, 1)]);
    assert_eq!(out.totals(0).ir, 3);
}

/// Declarations of `code` (one instruction per slice) from `addr`
/// with stream ids from `id`.
fn declarations<'a>(id: u32, mut addr: u64, code: &[&'a [u8]]) -> Vec<Record<'a>> {
    let mut v = Vec::new();
    for (k, c) in code.iter().enumerate() {
        v.push(Record::Declare {
            id: id + k as u32,
            addr,
            code: c,
        });
        addr += c.len() as u64;
    }
    v
}

/// Feeds `records` as `tally sim` reads a stream: written out, the
/// commonest records decoded by the feeder from the bytes, the rest
/// read as records.
fn feed_as_stream(records: &[Record<'_>], f: &mut Feeder, e: &mut Engine) {
    feed_in_chunks(records, f, e, usize::MAX);
}

/// [`feed_as_stream`] with the feeder shown at most `chunk` bytes at a
/// time, as a stream read in pieces may cut records or an
/// instruction's accesses apart.
fn feed_in_chunks(records: &[Record<'_>], f: &mut Feeder, e: &mut Engine, chunk: usize) {
    feed_bytes_in_chunks(&stream_of(records), f, e, chunk);
}

/// The stream of `records`.
fn stream_of(records: &[Record<'_>]) -> Vec<u8> {
    let mut w = crate::trace::TraceWriter::new(Vec::new()).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap()
}

/// Feeds a stream's bytes as [`feed_in_chunks`] does; the D1 filter's
/// records are checked and taken as `tally sim` takes them.
fn feed_bytes_in_chunks(bytes: &[u8], f: &mut Feeder, e: &mut Engine, chunk: usize) {
    let mut r = crate::trace::TraceReader::new(bytes).unwrap();
    loop {
        let u = r.unread();
        let n = f.feed_bytes(e, &u[..u.len().min(chunk)]).unwrap();
        r.consume(n);
        match r.next_record().unwrap() {
            Some(Record::D1Filter {
                size,
                assoc,
                line_size,
                policy,
                seed,
            }) => {
                let c = CacheConfig {
                    size,
                    assoc,
                    line_size,
                };
                let p = crate::filter::policy_from_code(policy, seed).unwrap();
                assert!(e.takes_d1_filter(c, p));
            }
            Some(Record::D1State(state)) => assert!(e.restore_d1(state)),
            Some(rec) => f.feed(e, &rec, true).unwrap(),
            None => break,
        }
    }
}

/// Feeds `records` one at a time, and as `tally sim` reads a stream
/// (the commonest records decoded by the feeder from the bytes, which
/// on this engine, merging accesses as for QEMU, is the lean loop);
/// the two must cost the same.
/// Counting executions only (without the I1 cache), a stream without
/// accesses goes through `Feeder::feed_counts`: the same again, `Ir`
/// alone.
fn both_ways(records: &[Record<'_>]) -> Output {
    let new = |no_icache: bool| {
        let mut e = engine();
        e.opts.merge_modify = true;
        e.opts.no_icache = no_icache;
        e
    };
    let mut outs = Vec::new();
    for no_icache in [false, true] {
        let (mut f, mut e) = (Feeder::new(), new(no_icache));
        for r in records {
            f.feed(&mut e, r, true).unwrap();
        }
        f.finish(&mut e).unwrap();
        let one = e.finish();
        let (mut f, mut e) = (Feeder::new(), new(no_icache));
        feed_as_stream(records, &mut f, &mut e);
        f.finish(&mut e).unwrap();
        let two = e.finish();
        assert_eq!((&one.instrs, &one.costs), (&two.instrs, &two.costs));
        // With D1 simulated by the plugin's filter (handed over when
        // another thread starts).
        let (mut f, mut e) = (Feeder::new(), new(no_icache));
        let d1 = CacheConfig {
            size: 1024,
            assoc: 2,
            line_size: 64,
        };
        let raw = stream_of(records);
        let bytes = crate::filter::filter_stream(&raw[..], Vec::new(), d1, Policy::Lru).unwrap();
        feed_bytes_in_chunks(&bytes, &mut f, &mut e, usize::MAX);
        f.finish(&mut e).unwrap();
        let three = e.finish();
        assert_eq!((&one.instrs, &one.costs), (&three.instrs, &three.costs));
        // And with the hits counted outside the stream.
        let (mut f, mut e) = (Feeder::new(), new(no_icache));
        let (bytes, hits) =
            crate::filter::filter_stream_counting(&raw[..], Vec::new(), d1, Policy::Lru).unwrap();
        feed_bytes_in_chunks(&bytes, &mut f, &mut e, usize::MAX);
        f.add_hits(&mut e, &hits);
        f.finish(&mut e).unwrap();
        let four = e.finish();
        assert_eq!((&one.instrs, &one.costs), (&four.instrs, &four.costs));
        outs.push(one);
    }
    let counted = outs.pop().unwrap();
    let one = outs.pop().unwrap();
    assert_eq!(ir_by_addr(&one), ir_by_addr(&counted));
    one
}

proptest::proptest! {
    /// Blocks run in bulk cost what the same instructions cost run
    /// one by one, with accesses after each (the per-instruction
    /// records): every event of every instruction on two machines
    /// with different I1 lines, and the call arcs; or, `lean`, on one
    /// machine without call tracking, the case with its own code
    /// ([`Engine::lean`]); with or without the instruction cache.
    #[test]
    fn blocks_cost_what_single_instructions_cost(
        shapes in proptest::collection::vec(
            (proptest::collection::vec(0u8..7, 0..12), 0u8..5),
            1..6,
        ),
        path in proptest::collection::vec((0usize..6, 0u64..4096), 1..200),
        lean in proptest::bool::ANY,
        no_icache in proptest::bool::ANY,
        counting in proptest::bool::ANY,
        counting_calls in proptest::bool::ANY,
        chunk in 1usize..80,
        policy in 0u8..4,
    ) {
        const LOAD: &[u8] = &[0x48, 0x8b, 0x07]; // mov (%rdi),%rax
        const ADD_MEM: &[u8] = &[0x48, 0x01, 0x07]; // add %rax,(%rdi)
        const LOAD_32: &[u8] = &[0xc5, 0xfe, 0x6f, 0x07]; // vmovdqu (%rdi),%ymm0
        const MOVS: &[u8] = &[0x48, 0xa5]; // movsq
        const JNE: &[u8] = &[0x75, 0x10];
        const CALL: &[u8] = &[0xe8, 0, 0, 0, 0];
        const RET: &[u8] = &[0xc3];
        const JMP_IND: &[u8] = &[0xff, 0xe0]; // jmp *%rax
        const LOCK_ADD: &[u8] = &[0xf0, 0x48, 0x01, 0x07]; // lock add %rax,(%rdi)
        let policy = crate::filter::policy_from_code(policy, 7).unwrap();
        let d1 = CacheConfig {
            size: 1024,
            assoc: 2,
            line_size: 64,
        };
        let machine = |i1_line: u64| {
            let c = |size, line_size| CacheConfig {
                size,
                assoc: 2,
                line_size,
            };
            Hierarchy::new(&HierarchyConfig {
                i1: c(512, i1_line),
                d1,
                middle: vec![],
                ll: c(8192, 64),
                policy,
                iaddr_zero_bits: 0,
            })
            .unwrap()
        };
        // `counting`: executions alone, as `tally sim --cache-sim=no`
        // counts them from a stream without accesses (the lean loop's
        // `Feeder::feed_counts`), or with `counting_calls` with the calls
        // tracked, as `tally sim --callgrind --cache-sim=no` does
        // (`Feeder::feed_calls`).
        let lean = if counting { !counting_calls } else { lean };
        let opts = EngineOptions {
            branch_sim: !counting,
            calls: !lean,
            merge_modify: true,
            no_icache: no_icache || counting,
        };
        let new = || {
            let machines = if lean {
                vec![machine(32)]
            } else {
                vec![machine(64), machine(32)]
            };
            let e = Engine::new(machines, opts);
            assert_eq!(e.lean(), lean);
            e
        };
        // Blocks 0x1020 apart (in different I1 sets), instructions
        // packed from an odd address so that some straddle lines.
        let mut blocks = Vec::new();
        let mut id = 0u32;
        let mut decls = Vec::new();
        for (b, (body, end)) in shapes.iter().enumerate() {
            let mut addr = 0x10_0000 + 0x1020 * b as u64 + 29;
            let mut code: Vec<&[u8]> = body
                .iter()
                .map(|&k| [NOP, STORE, LOAD, LOCK_ADD, ADD_MEM, LOAD_32, MOVS][k as usize])
                .collect();
            match end {
                1 => code.push(JNE),
                2 => code.push(CALL),
                3 => code.push(RET),
                4 => code.push(JMP_IND),
                _ => {}
            }
            if code.is_empty() {
                code.push(NOP);
            }
            let first = id;
            let mut kinds = Vec::new();
            for c in &code {
                decls.push((id, addr, c.to_vec()));
                kinds.push(c.to_vec());
                addr += c.len() as u64;
                id += 1;
            }
            blocks.push((first, kinds));
        }
        let records = |bulk: bool| {
            let mut v: Vec<Record> = decls
                .iter()
                .map(|(id, addr, code)| Record::Declare { id: *id, addr: *addr, code })
                .collect();
            for &(b, data) in &path {
                let (first, kinds) = &blocks[b % blocks.len()];
                let count = kinds.len() as u8;
                if bulk {
                    v.push(Record::Block { first: *first, count });
                }
                for (k, c) in kinds.iter().enumerate() {
                    let addr = 0x8000 + data * 8 + k as u64 * 24;
                    if !bulk {
                        v.push(Record::Exec { id: first + k as u32 });
                    }
                    if counting {
                        continue;
                    }
                    let index = k as u8;
                    // Each access as QEMU shows it: (store, address,
                    // size) in order.
                    let pieces: &[(bool, u64, u8)] = match c.as_slice() {
                        STORE => &[(true, addr, 8)],
                        LOAD => &[(false, addr, 8)],
                        // A locked add as QEMU's atomic helpers report
                        // it (one access, read and written), or, run
                        // single-threaded, as a modify.
                        LOCK_ADD if data % 2 == 0 => &[(true, addr, 8)],
                        // A modify: a load, then a store of the same
                        // bytes.
                        LOCK_ADD | ADD_MEM => &[(false, addr, 8), (true, addr, 8)],
                        // QEMU splits a 32-byte access in halves.
                        LOAD_32 => &[(false, addr, 16), (false, addr + 16, 16)],
                        // Two accesses apart.
                        MOVS => &[(false, addr, 8), (true, addr + 4096, 8)],
                        _ => &[],
                    };
                    for &(store, addr, size) in pieces {
                        v.push(match (bulk, store) {
                            (true, true) => Record::StoreAt { index, addr, size },
                            (true, false) => Record::LoadAt { index, addr, size },
                            (false, true) => Record::Store { addr, size },
                            (false, false) => Record::Load { addr, size },
                        });
                    }
                }
            }
            v
        };
        let result = |mut f: Feeder, mut e: Engine| {
            f.finish(&mut e).unwrap();
            let out = e.finish();
            let mut arcs: Vec<_> = out.arcs.into_iter().collect();
            arcs.sort_by_key(|(k, _)| *k);
            (out.instrs, out.costs, arcs)
        };
        let fed = |bulk: bool| {
            let (mut f, mut e) = (Feeder::new(), new());
            for r in records(bulk) {
                f.feed(&mut e, &r, true).unwrap();
            }
            result(f, e)
        };
        // As `tally sim` reads a stream: the commonest records decoded
        // by the feeder from the bytes, the rest as records.
        let read = || {
            let (mut f, mut e) = (Feeder::new(), new());
            feed_in_chunks(&records(true), &mut f, &mut e, chunk);
            result(f, e)
        };
        // With D1 simulated by the plugin's filter (one machine):
        // blocks, or instructions one at a time.
        let filtered = |bulk: bool, counting: bool| {
            let (mut f, mut e) = (Feeder::new(), new());
            let raw = stream_of(&records(bulk));
            let (bytes, hits) = if counting {
                crate::filter::filter_stream_counting(&raw[..], Vec::new(), d1, policy)
                    .unwrap()
            } else {
                let b = crate::filter::filter_stream(&raw[..], Vec::new(), d1, policy);
                (b.unwrap(), Vec::new())
            };
            feed_bytes_in_chunks(&bytes, &mut f, &mut e, chunk);
            f.add_hits(&mut e, &hits);
            result(f, e)
        };
        let one_by_one = fed(false);
        proptest::prop_assert_eq!(&fed(true), &one_by_one);
        proptest::prop_assert_eq!(&read(), &one_by_one);
        // With hits counted outside the stream (`hits=on`) or not.
        if lean && !counting {
            for (bulk, count_hits) in [(true, false), (false, false), (true, true), (false, true)] {
                proptest::prop_assert_eq!(&filtered(bulk, count_hits), &one_by_one);
            }
        }
    }
}

#[test]
fn undeclared_ids_are_errors() {
    let (mut f, mut e) = (Feeder::new(), engine());
    assert_eq!(f.feed(&mut e, &Record::Exec { id: 4 }, true), Err(4));
    f.feed(&mut e, &Record::Block { first: 9, count: 2 }, true)
        .unwrap();
    assert_eq!(f.finish(&mut e), Err(9));
}
