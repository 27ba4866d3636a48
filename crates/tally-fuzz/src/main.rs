//! `tally-fuzz`: runs the fuzzer (see docs/fuzzing.md), or replays case
//! files.
//!
//!     tally-fuzz [--seed N] [--cases N] [--first N] [--target NAME,…]
//!                [--out DIR] [--time-ms MS] [--data DIR]
//!     tally-fuzz --replay FILE…

use peak_alloc::PeakAlloc;
use std::cell::Cell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tally_fuzz::run::Outcome;
use tally_fuzz::{Budget, Case, Corpus, Driver, Kind, Memory, Settings};

/// Counts every allocation, so that a case's peak memory is known.
#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

/// Peak memory per case from the counting allocator.
struct Counted {
    base: Cell<usize>,
}

impl Memory for Counted {
    fn start(&self) {
        ALLOC.reset_peak_usage();
        self.base.set(ALLOC.current_usage());
    }
    fn peak(&self) -> usize {
        ALLOC.peak_usage().saturating_sub(self.base.get())
    }
}

struct Args {
    seed: u64,
    cases: u64,
    first: u64,
    kinds: Vec<Kind>,
    out: PathBuf,
    time_ms: u64,
    data: PathBuf,
    replay: Vec<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seed: 1,
        cases: 100_000,
        first: 0,
        kinds: Kind::ALL.to_vec(),
        out: PathBuf::from("fuzz-failures"),
        time_ms: 1000,
        data: tally_fuzz::corpus::default_dir(),
        replay: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, flag: &str| -> Result<u64, String> {
        v.ok_or(format!("{flag} needs a value"))?
            .replace('_', "")
            .parse()
            .map_err(|e| format!("{flag}: {e}"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seed" => a.seed = num(it.next(), "--seed")?,
            "--cases" => a.cases = num(it.next(), "--cases")?,
            "--first" => a.first = num(it.next(), "--first")?,
            "--time-ms" => a.time_ms = num(it.next(), "--time-ms")?,
            "--out" => a.out = it.next().ok_or("--out needs a directory")?.into(),
            "--data" => a.data = it.next().ok_or("--data needs a directory")?.into(),
            "--target" => {
                let v = it.next().ok_or("--target needs a name")?;
                a.kinds = v
                    .split(',')
                    .map(|n| Kind::from_name(n).ok_or(format!("unknown target `{n}`")))
                    .collect::<Result<_, _>>()?;
            }
            "--replay" => {
                a.replay.extend(it.by_ref().map(PathBuf::from));
                if a.replay.is_empty() {
                    return Err("--replay needs files".into());
                }
            }
            "-h" | "--help" => {
                return Err("usage: tally-fuzz [--seed N] [--cases N] [--first N] \
                            [--target callgrind,cachegrind,gmon,dcpi] [--out DIR] \
                            [--time-ms MS] [--data DIR] | --replay FILE..."
                    .into());
            }
            _ => return Err(format!("unknown argument `{arg}` (see --help)")),
        }
    }
    Ok(a)
}

/// The case now running, for the watchdog: target index + 1 (0: none),
/// case number, and when it started (ms since the start of the run).
static NOW: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// A case that never ends cannot be caught in-process: after 30 budgets
/// the watchdog names it and ends the run.
fn watchdog(start: Instant, budget: Duration, seed: u64) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let k = NOW[0].load(Ordering::Relaxed);
            let since = NOW[2].load(Ordering::Relaxed);
            let now = start.elapsed().as_millis() as u64;
            if k > 0 && now.saturating_sub(since) > 30 * budget.as_millis() as u64 {
                let n = NOW[1].load(Ordering::Relaxed);
                let kind = Kind::ALL[k as usize - 1].name();
                eprintln!(
                    "FAIL {kind} seed={seed} case={n}: still running after {} s\n  \
                     again: tally-fuzz --target {kind} --seed {seed} --first {n} --cases 1",
                    (now - since) / 1000
                );
                std::process::exit(1);
            }
        }
    });
}

fn replay(
    driver: &Driver<'_>,
    files: &[PathBuf],
    budget: &Budget,
    memory: &dyn Memory,
) -> ExitCode {
    let mut failed = 0;
    for f in files {
        let case = match std::fs::read(f) {
            Ok(b) => Case::from_file(&b),
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                return ExitCode::from(2);
            }
        };
        let Some(case) = case else {
            eprintln!("{}: not a tally-fuzz case file", f.display());
            return ExitCode::from(2);
        };
        match tally_fuzz::run_case(driver, &case, budget, memory) {
            Ok(()) => println!("ok   {}", f.display()),
            Err(e) => {
                failed += 1;
                println!("FAIL {}: {e}", f.display());
            }
        }
    }
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tally-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let corpus = match Corpus::load(&args.data) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tally-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let memory = Counted { base: Cell::new(0) };
    let budget = Budget {
        time: Duration::from_millis(args.time_ms),
        ..Budget::default()
    };
    tally_fuzz::run::silence_panics();
    let driver = Driver::new(&corpus);
    if !args.replay.is_empty() {
        return replay(&driver, &args.replay, &budget, &memory);
    }
    let start = Instant::now();
    watchdog(start, budget.time, args.seed);
    let settings = Settings {
        seed: args.seed,
        cases: args.cases,
        kinds: args.kinds.clone(),
        out: args.out.clone(),
        budget,
    };
    println!(
        "tally-fuzz: seed {}, {} cases per target from case {}, {} seeds",
        args.seed,
        args.cases,
        args.first,
        corpus.seeds.len()
    );
    let mut total = Outcome::default();
    for &kind in &args.kinds {
        let ki = Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0) as u64 + 1;
        let o = tally_fuzz::run::run_range(
            &driver,
            kind,
            &settings,
            args.first,
            &memory,
            |n| {
                NOW[1].store(n, Ordering::Relaxed);
                NOW[2].store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
                NOW[0].store(ki, Ordering::Relaxed);
            },
            |line| println!("{line}"),
        );
        let secs = o.time.as_secs_f64();
        println!(
            "{:<10} {:>8} cases {:>6} failed ({} distinct) {:>7.1} s {:>8.0} cases/s  ({} seeds)",
            kind.name(),
            o.cases,
            o.failures,
            o.findings.len(),
            secs,
            o.cases as f64 / secs.max(1e-9),
            corpus.of(kind).len()
        );
        total.cases += o.cases;
        total.failures += o.failures;
        total.findings.extend(o.findings);
    }
    println!(
        "total: {} cases, {} failed ({} distinct), {:.1} s",
        total.cases,
        total.failures,
        total.findings.len(),
        start.elapsed().as_secs_f64()
    );
    for (sig, (count, file, _)) in &total.findings {
        println!("  {count:>6} x {sig}\n           {}", file.display());
    }
    if total.failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
