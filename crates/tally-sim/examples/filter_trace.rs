//! Filters a saved trace stream as the QEMU plugin's `d1=` does, and says
//! how many records and bytes are left:
//!
//!     cargo run --release -p tally-sim --example filter_trace -- IN OUT [SIZE,ASSOC,LINE] [--count]
//!
//! D1 defaults to Cachegrind's 32768,8,64; `--count` counts the hits as the
//! plugin's `hits=on` does (the output then needs those counts: it is for
//! measuring, `tally sim --trace` cannot take it).
use tally_sim::{CacheConfig, Policy, filter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count = args.iter().any(|a| a == "--count");
    let args: Vec<&String> = args.iter().filter(|a| *a != "--count").collect();
    let [input, output, rest @ ..] = args.as_slice() else {
        return Err("usage: filter_trace IN OUT [SIZE,ASSOC,LINE] [--count]".into());
    };
    let d1 = CacheConfig::parse("D1", rest.first().map_or("32768,8,64", |s| s.as_str()))?;
    let r = std::io::BufReader::new(std::fs::File::open(input)?);
    let w = std::io::BufWriter::new(std::fs::File::create(output)?);
    if count {
        let (_, hits) = filter::filter_stream_counting(r, w, d1, Policy::Lru)?;
        println!("hits counted: {}", hits.iter().sum::<u64>());
    } else {
        filter::filter_stream(r, w, d1, Policy::Lru)?;
    }
    println!("{output}: {} bytes", std::fs::metadata(output)?.len());
    Ok(())
}
