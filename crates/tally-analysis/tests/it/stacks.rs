//! Inclusive costs of a profile with whole stacks: a mutual recursion that
//! the call graph can only show as a cycle gets each member's exact
//! cumulative cost, the sum of the stacks containing it.

use tally_analysis::{Aggregate, CallKind, Inclusive};
use tally_model::{Events, Format, Frame, FunctionKey, Positions, Profile, Stacks};

#[test]
fn stacks_give_cycle_members_their_cumulative_cost() {
    let mut p = Profile::<u64>::new(
        Format::Callgrind,
        Events::new(["samples"]).unwrap(),
        Positions::LINE,
    );
    let object = p.names.object(b"a.out");
    let file = p.names.file(b"a.c");
    let mut func = |n: &[u8]| {
        let name = p.names.symbol(n);
        p.names.function(FunctionKey { object, file, name })
    };
    let (main, f, g) = (func(b"main"), func(b"f"), func(b"g"));
    let mut s = Stacks::<u64>::default();
    let mut fr = |function| {
        s.frame(Frame {
            function,
            line: 1,
            address: 0,
        })
    };
    let (m, ff, gg) = (fr(main), fr(f), fr(g));
    s.add(&[m, ff, gg, ff, gg], &[4]).unwrap();
    s.add(&[m, ff], &[1]).unwrap();
    s.add(&[m, ff, gg], &[2]).unwrap();
    s.add(&[m], &[3]).unwrap();
    let mut part = p.add_part().clone();
    s.derive_part(&p.names, p.positions, &mut part).unwrap();
    p.parts[0] = part;
    let agg = Aggregate::new(&p, |_| true);

    // The arcs alone make f and g a cycle, with no cost of their own.
    let arcs = Inclusive::new(&agg);
    assert_eq!(arcs.of(f), None);
    assert_eq!(arcs.of(g), None);

    let exact = Inclusive::from_stacks(&agg, &s).unwrap();
    assert_eq!(exact.of(main), Some(&[10][..]));
    assert_eq!(exact.of(f), Some(&[7][..]));
    assert_eq!(exact.of(g), Some(&[6][..]));
    assert_eq!(exact.call_kind(f, g), CallKind::Exact);
    assert_eq!(exact.call_kind(f, f), CallKind::Recursive);
    // Each arc counts a stack once: g → f is in one stack only.
    let gf = agg
        .arcs
        .iter()
        .find(|a| a.caller == g && a.callee == f)
        .unwrap();
    assert_eq!((gf.count, gf.inclusive[0]), (1, 4));

    // Stacks that do not hold the parts' costs are not used.
    let mut other = Stacks::<u64>::default();
    let o = other.frame(Frame {
        function: main,
        line: 1,
        address: 0,
    });
    other.add(&[o], &[1]).unwrap();
    assert!(Inclusive::from_stacks(&agg, &other).is_none());
}
