//! Filters a saved trace stream as the QEMU plugin's `d1=` does:
//!
//!     cargo run --release -p tally-sim --example filter_trace -- IN OUT [SIZE,ASSOC,LINE]
//!
//! (D1 defaults to Cachegrind's 32768,8,64; LRU.)
use tally_sim::{CacheConfig, Policy, filter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, rest @ ..] = args.as_slice() else {
        return Err("usage: filter_trace IN OUT [SIZE,ASSOC,LINE]".into());
    };
    let d1 = CacheConfig::parse("D1", rest.first().map_or("32768,8,64", String::as_str))?;
    let r = std::io::BufReader::new(std::fs::File::open(input)?);
    let w = std::io::BufWriter::new(std::fs::File::create(output)?);
    filter::filter_stream(r, w, d1, Policy::Lru)?;
    Ok(())
}
