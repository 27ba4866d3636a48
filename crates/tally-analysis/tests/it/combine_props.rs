//! Properties of merge and diff (`tally_analysis::combine`) on random
//! profiles with lines, calls and jumps in several parts: merge is
//! commutative and associative, diff(A, A) is empty, merge(A, diff(A, B))
//! is B, and renames apply to every name.

use proptest::prelude::*;
use tally_analysis::Folding;
use tally_analysis::Subst;
use tally_analysis::combine::{CombineOptions, Combiner, EventChoice, RecordKey, Sign, records};
use tally_model::{
    CallInfo, Cost, Events, FunctionKey, JumpInfo, ObjectId, Positions, Profile, SymbolId,
};

type Line = (u8, u8, u8, u8, u16, u16);
type Call = (u8, u8, u8, u8, u8, u16, u16);
type Jump = (u8, u8, u8, u8, bool, u16, u16);

/// A profile from small numbers: function, file, positions and costs drawn
/// from small ranges so that records collide across profiles.
fn build(parts: &[(Vec<Line>, Vec<Call>, Vec<Jump>)], instr: bool) -> Profile<u64> {
    build_rotated(parts, instr, 0)
}

/// [`build`] with the names interned in another order (starting at
/// function `rot`), so that two inputs share only some of their name ids.
fn build_rotated(
    parts: &[(Vec<Line>, Vec<Call>, Vec<Jump>)],
    instr: bool,
    rot: u8,
) -> Profile<u64> {
    let positions = if instr {
        Positions::INSTR_LINE
    } else {
        Positions::LINE
    };
    let mut p = Profile::new(
        tally_model::Format::Callgrind,
        Events::new(["Ir", "Dr"]).unwrap(),
        positions,
    );
    let mut funcs = [tally_model::FunctionId(0); 5];
    for i in (0..5u8).map(|i| (i + rot) % 5) {
        let object = ObjectId(
            p.names
                .objects
                .intern(format!("/lib/o{}", i % 2).as_bytes()),
        );
        let file = p.names.file(format!("src/f{}.c", i % 3).as_bytes());
        let name = SymbolId(p.names.symbols.intern(format!("fn{i}").as_bytes()));
        funcs[usize::from(i)] = p.names.function(FunctionKey { object, file, name });
    }
    let mut files = [tally_model::FileId(0); 3];
    for i in (0..3u8).map(|i| (i + rot) % 3) {
        files[usize::from(i)] = p.names.file(format!("src/f{i}.c").as_bytes());
    }
    let pos = |a: u8, l: u8| -> Vec<u64> {
        if instr {
            vec![0x1000 + u64::from(a), u64::from(l)]
        } else {
            vec![u64::from(l)]
        }
    };
    // A quarter of the counts zero, so that records zero in an input
    // (dropped by a diff) are common.
    let z = |c: u16| if c.is_multiple_of(4) { 0 } else { c };
    for (lines, calls, jumps) in parts {
        let part = p.add_part();
        let mut seq = 0;
        for &(f, fl, a, l, c0, c1) in lines {
            part.lines.push(
                funcs[f as usize % 5],
                files[fl as usize % 3],
                &pos(a % 8, l % 6),
                &[u64::from(z(c0)), u64::from(z(c1))],
            );
            seq += 1;
        }
        for &(f, fl, g, a, l, n, c) in calls {
            part.calls.push(
                CallInfo {
                    caller: funcs[f as usize % 5],
                    site_file: files[fl as usize % 3],
                    callee: funcs[g as usize % 5],
                    count: u64::from(z(n)),
                    seq,
                },
                &pos(a % 8, l % 6),
                &pos(0, 1),
                &[u64::from(z(c)), u64::from(z(c) / 2)],
            );
            seq += 1;
        }
        for &(f, fl, a, l, cond, e, t) in jumps {
            let (e, t) = (z(e), z(t));
            let (e, t) = (u64::from(e.max(t)), u64::from(e.min(t)));
            part.jumps.push(
                JumpInfo {
                    function: funcs[f as usize % 5],
                    file: files[fl as usize % 3],
                    target_function: funcs[f as usize % 5],
                    target_file: files[fl as usize % 3],
                    conditional: cond,
                    executed: e,
                    taken: if cond { t } else { e },
                    seq,
                },
                &pos(a % 8, l % 6),
                &pos(a % 8 + 1, l % 6),
            );
            seq += 1;
        }
        let totals = part.lines.totals().unwrap();
        part.info.totals = Some(totals);
    }
    p
}

fn parts() -> impl Strategy<Value = Vec<(Vec<Line>, Vec<Call>, Vec<Jump>)>> {
    prop::collection::vec(
        (
            prop::collection::vec(any::<Line>(), 0..12),
            prop::collection::vec(any::<Call>(), 0..5),
            prop::collection::vec(any::<Jump>(), 0..4),
        ),
        1..3,
    )
}

fn opts(combine_parts: bool) -> CombineOptions {
    CombineOptions {
        combine_parts,
        keep_zero: true,
        ..Default::default()
    }
}

fn merge<C: Cost>(ps: &[&Profile<impl Cost>], o: &CombineOptions) -> Profile<C> {
    let mut c = Combiner::<C>::new(o.clone());
    for (i, p) in ps.iter().enumerate() {
        c.add(*p, Sign::Plus, &format!("p{i}")).unwrap();
    }
    c.finish().unwrap().profile
}

fn diff(a: &Profile<u64>, b: &Profile<u64>) -> Profile<i64> {
    let mut c = Combiner::<i64>::new(CombineOptions {
        combine_parts: true,
        ..Default::default()
    });
    c.add(a, Sign::Minus, "a").unwrap();
    c.add(b, Sign::Plus, "b").unwrap();
    c.finish().unwrap().profile
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn merge_is_commutative_and_associative(
        a in parts(), b in parts(), c in parts(), instr in any::<bool>(), combine in any::<bool>(),
        rot in 0u8..5
    ) {
        // `b` names things in another order: a sum takes the names it
        // shares at the same index without a lookup, and the rest by one.
        let (a, b, c) = (build(&a, instr), build_rotated(&b, instr, rot), build(&c, instr));
        let o = opts(combine);
        let ab: Profile<u64> = merge(&[&a, &b], &o);
        let ba: Profile<u64> = merge(&[&b, &a], &o);
        prop_assert_eq!(records(&ab), records(&ba));
        let ab_c: Profile<u64> = merge(&[&ab, &c], &o);
        let bc: Profile<u64> = merge(&[&b, &c], &o);
        let a_bc: Profile<u64> = merge(&[&a, &bc], &o);
        let abc: Profile<u64> = merge(&[&a, &b, &c], &o);
        prop_assert_eq!(records(&ab_c), records(&a_bc));
        prop_assert_eq!(records(&ab_c), records(&abc));
        // The output's totals are the sum of the inputs' totals.
        let t = |p: &Profile<u64>| p.totals().unwrap();
        let sum: Vec<u64> = t(&a).iter().zip(t(&b)).zip(t(&c)).map(|((x, y), z)| x + y + z).collect();
        prop_assert_eq!(t(&abc), sum.clone());
        if combine {
            prop_assert_eq!(abc.parts.len(), 1);
            prop_assert_eq!(abc.parts[0].info.totals.clone(), Some(sum));
        } else {
            let n = a.parts.len().max(b.parts.len()).max(c.parts.len());
            prop_assert_eq!(abc.parts.len(), n);
        }
    }

    #[test]
    fn diff_of_itself_is_empty_and_merge_undoes_diff(
        a in parts(), b in parts(), instr in any::<bool>()
    ) {
        let (a, b) = (build(&a, instr), build(&b, instr));
        let aa = diff(&a, &a);
        prop_assert!(records(&aa).is_empty());
        prop_assert!(aa.totals().unwrap().iter().all(|&x| x == 0));
        let d = diff(&a, &b);
        let back: Profile<i64> = merge(&[&a], &opts(true));
        let mut c = Combiner::<i64>::new(opts(true));
        c.add(&back, Sign::Plus, "a").unwrap();
        c.add(&d, Sign::Plus, "d").unwrap();
        let b2 = c.finish().unwrap().profile;
        prop_assert_eq!(records(&b2), records(&b));
        // Every delta of the diff is B's value minus A's.
        let (ra, rb) = (records(&a), records(&b));
        for (k, v) in records(&d) {
            let x = ra.get(&k).cloned().unwrap_or_else(|| vec![0; v.len()]);
            let y = rb.get(&k).cloned().unwrap_or_else(|| vec![0; v.len()]);
            let want: Vec<i128> = y.iter().zip(&x).map(|(y, x)| y - x).collect();
            prop_assert_eq!(v, want);
        }
    }

    #[test]
    fn renames_reach_every_name(a in parts()) {
        let a = build(&a, true);
        let o = CombineOptions {
            rename_file: Some(Subst::parse(r"s/src\/f(\d)/lib$1/").unwrap()),
            rename_function: Some(Subst::parse("s/^fn/g/").unwrap()),
            keep_zero: true,
            ..Default::default()
        };
        let r: Profile<u64> = merge(&[&a], &o);
        for k in records(&r).keys() {
            let names: Vec<&[u8]> = match k {
                RecordKey::Line(f, file, _) => vec![&f[1], &f[2], file],
                RecordKey::Call(f, file, g, _, _) => vec![&f[1], &f[2], file, &g[1], &g[2]],
                RecordKey::Jump(f, file, g, gfile, _, _, _) => {
                    vec![&f[1], &f[2], file, &g[1], &g[2], gfile]
                }
            };
            for n in names {
                prop_assert!(!n.starts_with(b"src/") && !n.starts_with(b"fn"), "{:?}", String::from_utf8_lossy(n));
            }
        }
    }
}

#[test]
fn events_must_match_unless_chosen() {
    let a = build(&[(vec![(0, 0, 0, 0, 1, 2)], vec![], vec![])], false);
    let mut b = a.clone();
    b.events = Events::new(["Ir", "Dw"]).unwrap();
    let mut c = Combiner::<u64>::new(CombineOptions::default());
    c.add(&a, Sign::Plus, "a.out").unwrap();
    let e = c.add(&b, Sign::Plus, "b.out").unwrap_err().to_string();
    assert!(
        e.contains("b.out") && e.contains("Ir Dw") && e.contains("Ir Dr"),
        "{e}"
    );
    let mut c = Combiner::<u64>::new(CombineOptions {
        events: EventChoice::Only(vec!["Ir".into()]),
        ..Default::default()
    });
    c.add(&a, Sign::Plus, "a.out").unwrap();
    c.add(&b, Sign::Plus, "b.out").unwrap();
    let p = c.finish().unwrap().profile;
    assert_eq!(p.events.len(), 1);
    assert_eq!(p.totals(), Some(vec![2]));
}

#[test]
fn overflow_is_an_error_not_a_wrap() {
    let mut a = Profile::<u64>::new(
        tally_model::Format::Callgrind,
        Events::new(["Ir"]).unwrap(),
        Positions::LINE,
    );
    let f = {
        let object = ObjectId(0);
        let file = a.names.file(b"x.c");
        let name = SymbolId(a.names.symbols.intern(b"f"));
        a.names.function(FunctionKey { object, file, name })
    };
    let file = a.names.file(b"x.c");
    a.add_part().lines.push(f, file, &[1], &[u64::MAX]);
    let mut c = Combiner::<u64>::new(CombineOptions::default());
    c.add(&a, Sign::Plus, "a.out").unwrap();
    let e = c.add(&a, Sign::Plus, "again.out").unwrap_err().to_string();
    assert!(e.contains("again.out") && e.contains("64 bits"), "{e}");
}

#[test]
fn an_unsigned_sum_cannot_go_negative() {
    let a = build(&[(vec![(0, 0, 0, 0, 5, 2)], vec![], vec![])], false);
    let b = build(&[(vec![(0, 0, 0, 0, 9, 2)], vec![], vec![])], false);
    let d = diff(&b, &a); // a − b: -4 Ir
    let mut c = Combiner::<u64>::new(CombineOptions::default());
    let e = c.add(&d, Sign::Plus, "d.out").unwrap_err().to_string();
    assert!(e.contains("d.out") && e.contains("negative"), "{e}");
}

/// Replays a profile's records into a folding sink as a reader would push
/// them (lines, then calls, then jumps of each part), and returns the
/// profile without its records: what a read gives besides the sink.
fn fold<C: Cost>(p: &Profile<C>) -> (Profile<C>, Folding<C>) {
    fold_into(p, Folding::default())
}

/// [`fold`] into a given folding.
fn fold_into<C: Cost>(p: &Profile<C>, mut sink: Folding<C>) -> (Profile<C>, Folding<C>) {
    use tally_model::Sink;
    let ne = p.events.len();
    let mut header = p.clone();
    for (part, h) in p.parts.iter().zip(&mut header.parts) {
        sink.start_part(p.positions, ne);
        part.lines
            .for_each(|l| sink.line(l.function, l.file, l.positions, l.costs));
        for c in part.calls.iter() {
            sink.call(c.info, c.site, c.target, c.inclusive);
        }
        for j in part.jumps.iter() {
            sink.jump(j.info, j.source, j.target);
        }
        let info = h.info.clone();
        *h = tally_model::Part::new(p.positions, ne);
        h.info = info;
    }
    (header, sink)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Folding inputs as they are read gives exactly what adding the
    /// loaded profiles gives: the same records in the same order, for
    /// merge (per position, parts kept or combined) and diff (per
    /// function too).
    #[test]
    fn folded_inputs_combine_as_loaded_ones(
        a in parts(), b in parts(), instr in any::<bool>(), combine in any::<bool>(),
        per_function in any::<bool>()
    ) {
        let (a, b) = (build(&a, instr), build(&b, instr));
        let o = CombineOptions { per_function, ..opts(combine) };
        let mut loaded = Combiner::<i64>::new(o.clone());
        let mut folded = Combiner::<i64>::new(o);
        for (p, sign) in [(&a, Sign::Minus), (&b, Sign::Plus), (&a, Sign::Plus)] {
            loaded.add(p, sign, "p").unwrap();
            let (header, sink) = fold(p);
            folded.add_folded(&header, &sink, sign, "p").unwrap();
        }
        let (l, f) = (loaded.finish().unwrap(), folded.finish().unwrap());
        prop_assert_eq!(l.profile, f.profile);
        prop_assert_eq!(l.stated, f.stated);
    }

    /// The same with each folding handed over (the first input, added to
    /// an empty sum, becomes it as it is) and, for a per-function
    /// combination, folded per function as it is read.
    #[test]
    fn owned_and_per_function_foldings_combine_as_loaded_ones(
        a in parts(), b in parts(), instr in any::<bool>(), combine in any::<bool>(),
        per_function in any::<bool>()
    ) {
        let (a, b) = (build(&a, instr), build(&b, instr));
        let o = CombineOptions { per_function, ..opts(combine) };
        // Unsigned, as a merge sums: the inputs' cost type, so that the
        // first input can become the sum.
        let mut loaded = Combiner::<u64>::new(o.clone());
        let mut folded = Combiner::<u64>::new(o);
        for (p, sign) in [(&a, Sign::Plus), (&b, Sign::Plus), (&a, Sign::Plus)] {
            loaded.add(p, sign, "p").unwrap();
            let sink = if per_function { Folding::per_function() } else { Folding::default() };
            let (header, sink) = fold_into(p, sink);
            folded.add_folded_owned(&header, sink, sign, "p").unwrap();
        }
        let (l, f) = (loaded.finish().unwrap(), folded.finish().unwrap());
        prop_assert_eq!(l.profile, f.profile);
        prop_assert_eq!(l.stated, f.stated);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// `tally diff` folds both inputs straight into one sum, leaving out
    /// each input's records that sum to zero in it: the same records and
    /// values as the difference of each input's own sum (zeros dropped).
    /// (The order can differ where a block has calls or jumps but no
    /// line that changed: each way places it where its first record is.)
    #[test]
    fn a_diff_of_foldings_is_the_diff_of_the_inputs_sums(
        a in parts(), b in parts(), instr in any::<bool>(), per_function in any::<bool>()
    ) {
        let (a, b) = (build(&a, instr), build_rotated(&b, instr, 2));
        let o = CombineOptions {
            per_function,
            keep_zero: false,
            combine_parts: true,
            ..Default::default()
        };
        let folding = || if per_function { Folding::per_function() } else { Folding::default() };
        let own_sum = |p: &Profile<u64>| {
            let mut c = Combiner::<i64>::new(o.clone());
            let (header, sink) = fold_into(p, folding());
            c.add_folded(&header, &sink, Sign::Plus, "p").unwrap();
            c.finish().unwrap().profile
        };
        let mut of_sums = Combiner::<i64>::new(o.clone());
        of_sums.add(&own_sum(&a), Sign::Minus, "a").unwrap();
        of_sums.add(&own_sum(&b), Sign::Plus, "b").unwrap();
        let mut direct = Combiner::<i64>::new(o.clone());
        for (p, sign) in [(&a, Sign::Minus), (&b, Sign::Plus)] {
            let (header, sink) = fold_into(p, folding());
            direct.add_folded(&header, &sink, sign, "p").unwrap();
        }
        let (want, got) = (of_sums.finish().unwrap().profile, direct.finish().unwrap().profile);
        prop_assert_eq!(records(&want), records(&got));
    }
}
