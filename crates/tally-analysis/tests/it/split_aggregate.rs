//! The aggregate a reader fills on two cores (the file cut in two
//! regions, the second taken back into the first) is the aggregate of
//! one reader reading the whole file: the same rows, self costs, arcs
//! and functions present, in the same order.

use std::path::Path;
use tally_analysis::{Aggregate, AggregateBuilder};
use tally_formats::{Input, callgrind};
use tally_testutil::{SPLIT_PROFILES, data, function_lines};

/// The aggregate of every part, and whether the read was split.
fn aggregate(path: &Path, at: Option<u64>) -> (Aggregate<u64>, bool) {
    let options = callgrind::ReadOptions {
        split: Some(at.is_some()),
        split_at: at,
        ..Default::default()
    };
    let mut sink = AggregateBuilder::keeping_jumps(false);
    let out = callgrind::parse(Input::open(path).unwrap(), &mut sink, options).unwrap();
    let functions = out.profile.names.function_count();
    (sink.finish(functions, |_| true), out.split_at.is_some())
}

fn same(a: &Aggregate<u64>, b: &Aggregate<u64>) -> bool {
    let rows = |x: &Aggregate<u64>| {
        (0..x.rows.len())
            .map(|r| (x.rows[r], x.row_self.get(r).to_vec()))
            .collect::<Vec<_>>()
    };
    let functions = |x: &Aggregate<u64>| {
        (0..x.function_present.len())
            .map(|f| x.function_self.get(f).to_vec())
            .collect::<Vec<_>>()
    };
    a.totals == b.totals
        && rows(a) == rows(b)
        && functions(a) == functions(b)
        && a.function_present == b.function_present
        && a.arcs == b.arcs
}

#[test]
fn a_split_read_aggregates_as_a_whole_one() {
    let mut taken = 0;
    for rel in SPLIT_PROFILES {
        let path = data(rel);
        let bytes = std::fs::read(&path).unwrap();
        let (whole, _) = aggregate(&path, None);
        let cuts = function_lines(&bytes);
        for &c in cuts.iter().step_by(cuts.len().div_ceil(24).max(1)) {
            let (split, was) = aggregate(&path, Some(c));
            assert!(same(&whole, &split), "{rel}, cut at {c}: aggregates differ");
            taken += usize::from(was);
        }
    }
    assert!(taken > 50, "only {taken} cuts taken");
}
