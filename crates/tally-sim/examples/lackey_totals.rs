//! Totals of a Lackey trace through Cachegrind's default-style machine:
//! `cargo run --release -p tally-sim --example lackey_totals -- TRACE I1 D1 LL`
//! (each cache as SIZE,ASSOC,LINE). For comparing with
//! `valgrind --tool=cachegrind` on the same program.

use tally_sim::lackey::LackeyReader;
use tally_sim::{CacheConfig, Counts, Hierarchy, HierarchyConfig, Policy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 4 {
        return Err("usage: lackey_totals TRACE I1 D1 LL".into());
    }
    let cfg = HierarchyConfig {
        i1: CacheConfig::parse("I1", &a[1])?,
        d1: CacheConfig::parse("D1", &a[2])?,
        middle: vec![],
        ll: CacheConfig::parse("LL", &a[3])?,
        policy: Policy::Lru,
        iaddr_zero_bits: 0,
    };
    let mut h = Hierarchy::new(&cfg)?;
    let mut c = Counts::default();
    let f = std::io::BufReader::new(std::fs::File::open(&a[0])?);
    let mut r = LackeyReader::new(f);
    while let Some(x) = r.next_access()? {
        h.lackey(x, &mut c);
    }
    for (n, v) in Counts::EVENTS.iter().zip(c.values()).take(9) {
        println!("{n} {v}");
    }
    Ok(())
}
