//! `tally-gen`: writes a large, realistic Callgrind profile for benchmarks.

use clap::Parser;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tally_gen::{Config, EventSet, Shape, Stats, generate, parse_size};
use tally_model::thousands;

/// Generate a deterministic, realistic Callgrind profile (as Valgrind 3.19
/// writes with --dump-instr=yes --collect-jumps=yes).
#[derive(Parser)]
#[command(name = "tally-gen", version, about)]
struct Args {
    /// Target size: bytes, or with a suffix K, M, G (binary: 1K = 1024).
    #[arg(long, value_parser = size_arg, required_unless_present = "measure")]
    size: Option<u64>,
    /// Seed of all random choices; the same arguments give the same bytes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Recorded events: `ir` (Callgrind's default), `cache` (the nine
    /// events of --cache-sim=yes) or `branch` (those and the four of
    /// --branch-sim=yes, thirteen as in a Cachegrind profile).
    #[arg(long, value_enum, default_value_t = Events::Ir)]
    events: Events,
    /// Plain names and absolute positions (--compress-strings=no
    /// --compress-pos=no).
    #[arg(long)]
    no_compress: bool,
    /// Write exactly this many function blocks (the size then only scales
    /// the program): with `--no-compress`, the same profile as without.
    #[arg(long)]
    blocks: Option<u64>,
    /// Name every function by its last N callers too, as Callgrind's
    /// --separate-callers=N does (`f'caller'caller's caller`): the long
    /// context names of a profile such as cc1's.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=MAX_CALLERS))]
    separate_callers: u32,
    /// The program's own code has no debug information (file `???`, line
    /// 0), as in a release build such as Debian's gcc.
    #[arg(long)]
    no_debug_info: bool,
    /// The shape of a real profile, as bench/corpus.sh makes them: `cc1`
    /// is --separate-callers=3 --no-debug-info (GCC's cc1); `python` is a
    /// C interpreter with debug information (CPython): short names, much
    /// inlined code, dense calls.
    #[arg(long, value_enum, conflicts_with_all = ["separate_callers", "no_debug_info"])]
    like: Option<Like>,
    /// Output file (`-` for standard output).
    #[arg(short, long, required_unless_present = "measure")]
    output: Option<PathBuf>,
    /// Generate nothing: print the line mix of these Callgrind files
    /// (kinds of lines, name lengths, first definitions, context names,
    /// call and jump density) as a Markdown table, a column per file.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with_all = ["size", "output"])]
    measure: Vec<PathBuf>,
}

/// The most callers a context name may have: each adds a name of about
/// 50 bytes to every function's, so a larger count only fills memory.
const MAX_CALLERS: i64 = 64;

#[derive(Clone, Copy, clap::ValueEnum)]
enum Like {
    Cc1,
    Python,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Events {
    Ir,
    Cache,
    Branch,
}

fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).ok_or_else(|| format!("`{s}` is not a size (e.g. 500M, 64K, 2G, 1000)"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.measure.is_empty() {
        return measure(&args.measure);
    }
    let (Some(size), Some(output)) = (args.size, args.output) else {
        eprintln!("tally-gen: --size and --output are needed to generate");
        return ExitCode::from(2);
    };
    let config = Config {
        seed: args.seed,
        size,
        events: match args.events {
            Events::Ir => EventSet::Ir,
            Events::Cache => EventSet::Cache,
            Events::Branch => EventSet::Branch,
        },
        compress: !args.no_compress,
        blocks: args.blocks,
        shape: match args.like {
            Some(Like::Cc1) => Shape::CC1,
            Some(Like::Python) => Shape::PYTHON,
            None => Shape {
                separate_callers: args.separate_callers,
                no_debug_info: args.no_debug_info,
                c_program: false,
            },
        },
    };
    let start = Instant::now();
    let result = if output.as_os_str() == "-" {
        generate(&config, &mut io::stdout().lock())
    } else {
        File::create(&output).and_then(|mut f| generate(&config, &mut f))
    };
    match result {
        Ok(stats) => {
            print_stats(&output, &stats, start.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tally-gen: {}: {e}", output.display());
            ExitCode::from(1)
        }
    }
}

/// `--measure`: the line mix of each file, one table.
fn measure(files: &[PathBuf]) -> ExitCode {
    let mut mixes = Vec::new();
    for f in files {
        match std::fs::read(f) {
            Ok(text) => mixes.push(tally_gen::measure::measure(&text)),
            Err(e) => {
                eprintln!("tally-gen: {}: {e}", f.display());
                return ExitCode::from(1);
            }
        }
    }
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into())
        })
        .collect();
    match tally_gen::measure::report(&mut io::stdout().lock(), &names, &mixes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tally-gen: standard output: {e}");
            ExitCode::from(1)
        }
    }
}

fn print_stats(path: &std::path::Path, s: &Stats, secs: f64) {
    let mut err = io::stderr().lock();
    let mb = s.bytes as f64 / 1e6;
    let _ = writeln!(
        err,
        "tally-gen: wrote {}: {} bytes in {secs:.2} s ({:.0} MB/s)",
        path.display(),
        thousands(s.bytes),
        mb / secs.max(1e-9)
    );
    let width = s.events.iter().map(|e| e.len()).max().unwrap_or(0);
    for (e, t) in s.events.iter().zip(&s.totals) {
        let _ = writeln!(err, "  total {e:<width$}  {}", thousands(*t));
    }
    for (what, n) in [
        ("cost lines", s.lines),
        ("calls", s.calls),
        ("jumps", s.jumps),
        ("functions", s.functions),
        ("blocks", s.blocks),
        ("objects", s.objects),
        ("files", s.files),
    ] {
        let _ = writeln!(err, "  {what:<11} {}", thousands(n));
    }
}
