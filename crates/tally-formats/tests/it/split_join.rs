//! The join of a read cut in two regions: a name met in both regions
//! (plain names, which interning alone makes one) is one name of the
//! whole profile, in the order a single parser meets it.

use tally_formats::{Input, callgrind};
use tally_model::NullSink;
use tally_testutil::function_lines;

fn read(path: &std::path::Path, at: Option<u64>) -> callgrind::ReadOutcome<u64> {
    let options = callgrind::ReadOptions {
        split: Some(at.is_some()),
        split_at: at,
        two_threads: Some(false),
        ..Default::default()
    };
    callgrind::parse(Input::open(path).unwrap(), &mut NullSink, options).unwrap()
}

#[test]
fn a_name_met_in_both_regions_is_one_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("callgrind.out.both");
    // `main` and three files in every block, a name of its own in each:
    // the second region meets `main` and the files again, and the names
    // of its own blocks for the first time.
    let mut text = String::from("events: Ir\n");
    for i in 0..400 {
        let file = i % 3;
        let (a, b) = (i + 1, i + 2);
        text.push_str(&format!("fl=f{file}.c\nfn=main\n{a} 3\nfn=g{i}\n{b} 1\n"));
    }
    std::fs::write(&path, &text).unwrap();
    let cuts = function_lines(text.as_bytes());
    let whole = read(&path, None);
    let mut taken = 0;
    for &at in &cuts[cuts.len() / 3..cuts.len() / 3 + 8] {
        let split = read(&path, Some(at));
        taken += usize::from(split.split_at.is_some());
        assert!(split.profile == whole.profile, "cut from {at}");
        assert_eq!(split.stats, whole.stats, "cut from {at}");
        assert_eq!(split.sums, whole.sums, "cut from {at}");
    }
    assert!(taken > 0, "no second region taken");
    let names = &whole.profile.names;
    let distinct: std::collections::HashSet<&[u8]> = names.symbols.iter().collect();
    assert_eq!(distinct.len(), names.symbols.len(), "a name interned twice");
    assert!(distinct.contains(&b"main"[..]) && distinct.contains(&b"g399"[..]));
}
