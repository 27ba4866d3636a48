//! `tally-fuzz`: runs the fuzzer (see docs/fuzzing.md), or replays case
//! files.
//!
//!     tally-fuzz [--seed N] [--cases N] [--cases-of NAME=N,…] [--first N] [--target NAME,…]
//!                [--out DIR] [--time-ms MS] [--data DIR] [--jobs N]
//!     tally-fuzz --replay FILE…
//!
//! With more than one job the cases are cut into ranges, each run by a
//! child process of this binary: a process per range keeps the counting
//! allocator's peak that of one case.

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
    /// Case counts of single targets (`--cases-of`), over `cases`.
    cases_of: Vec<(Kind, u64)>,
    first: u64,
    kinds: Vec<Kind>,
    out: PathBuf,
    time_ms: u64,
    data: PathBuf,
    replay: Vec<PathBuf>,
    jobs: u64,
    /// Run as a parent's child: print machine lines (`@finding`, `@done`).
    child: bool,
    /// Front-end cases (`--front N`): the `tally` binary run on mutated
    /// profiles, and requests sent to `tally serve`, instead of the
    /// readers.
    front: Option<u64>,
    requests: u64,
    tally: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seed: 1,
        cases: 100_000,
        cases_of: Vec::new(),
        first: 0,
        kinds: Kind::ALL.to_vec(),
        out: PathBuf::from("fuzz-failures"),
        time_ms: 1000,
        data: tally_fuzz::corpus::default_dir(),
        replay: Vec::new(),
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        child: false,
        front: None,
        requests: 2000,
        tally: None,
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
            "--cases-of" => {
                let v = it.next().ok_or("--cases-of needs TARGET=N,…")?;
                for item in v.split(',') {
                    let (k, n) = item
                        .split_once('=')
                        .ok_or(format!("--cases-of: `{item}` is not TARGET=N"))?;
                    let k = Kind::from_name(k).ok_or(format!("unknown target `{k}`"))?;
                    a.cases_of
                        .push((k, num(Some(n.to_string()), "--cases-of")?));
                }
            }
            "--time-ms" => a.time_ms = num(it.next(), "--time-ms")?,
            "--jobs" => a.jobs = num(it.next(), "--jobs")?.max(1),
            "--child" => a.child = true,
            "--front" => a.front = Some(num(it.next(), "--front")?),
            "--requests" => a.requests = num(it.next(), "--requests")?,
            "--tally" => a.tally = Some(it.next().ok_or("--tally needs a path")?.into()),
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
                return Err("usage: tally-fuzz [--seed N] [--cases N] \
                            [--cases-of TARGET=N,...] [--first N] \
                            [--target callgrind,cachegrind,gmon,dcpi,perf-data,perf-script,folded,pprof] \
                            [--out DIR] \
                            [--time-ms MS] [--data DIR] [--jobs N] | --replay FILE... \
                            | --front N [--requests N] [--tally PATH]"
                    .into());
            }
            _ => return Err(format!("unknown argument `{arg}` (see --help)")),
        }
    }
    Ok(a)
}

impl Args {
    /// The number of cases of one target.
    fn cases_of(&self, kind: Kind) -> u64 {
        self.cases_of
            .iter()
            .rev()
            .find(|(k, _)| *k == kind)
            .map_or(self.cases, |c| c.1)
    }
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

/// The front ends (`--front N`): see `tally_fuzz::front`.
fn front(args: &Args, corpus: &Corpus, cases: u64) -> ExitCode {
    // The `tally` built with this binary, unless named.
    let tally = args.tally.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .map(|p| p.with_file_name("tally"))
            .unwrap_or_else(|_| "tally".into())
    });
    let settings = tally_fuzz::front::FrontSettings {
        tally,
        cases,
        requests: args.requests,
        seed: args.seed,
        bound: Duration::from_secs(30).max(Duration::from_millis(args.time_ms)),
        out: args.out.clone(),
    };
    let start = Instant::now();
    match tally_fuzz::front::run(corpus, &settings) {
        Ok(failures) => {
            for f in &failures {
                println!("FAIL {}: {}\n  input: {}", f.what, f.why, f.case.display());
            }
            println!(
                "tally-fuzz: front ends, seed {}: {cases} cases, {} requests per server, \
                 {} failed, {:.1?}",
                args.seed,
                args.requests,
                failures.len(),
                start.elapsed()
            );
            if failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("tally-fuzz: front ends: {e}");
            ExitCode::from(2)
        }
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
    if let Some(cases) = args.front {
        return front(&args, &corpus, cases);
    }
    tally_fuzz::run::silence_panics();
    let driver = Driver::new(&corpus);
    if !args.replay.is_empty() {
        return replay(&driver, &args.replay, &budget, &memory);
    }
    if args.jobs > 1 && !args.child {
        return parent(&args, &corpus);
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
        let settings = Settings {
            cases: args.cases_of(kind),
            ..settings.clone()
        };
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
        if args.child {
            for (sig, (count, file, _)) in &o.findings {
                println!("@finding {count} {}\t{sig}", file.display());
            }
            println!("@done {} {} {} {secs}", kind.name(), o.cases, o.failures);
        }
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
    for (sig, (count, file, _)) in total.findings.iter().filter(|_| !args.child) {
        println!("  {count:>6} x {sig}\n           {}", file.display());
    }
    if total.failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What the children found for one target.
#[derive(Default)]
struct Tally {
    cases: u64,
    failures: u64,
    /// Seconds of the children's runs, summed (time on one core).
    secs: f64,
    /// Signature → (count, first case file).
    findings: std::collections::BTreeMap<String, (u64, String)>,
}

/// Cuts every target's cases into one range per job, runs each range in a
/// child process (`jobs` at a time), passes their findings through, and
/// prints the totals: per target the cases, failures and cases per second
/// of one core, then the wall time.
fn parent(args: &Args, corpus: &Corpus) -> ExitCode {
    use std::io::BufRead;
    use std::sync::Mutex;
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("tally-fuzz: cannot find its own binary: {e}");
            return ExitCode::from(2);
        }
    };
    let mut chunks = Vec::new();
    for &kind in &args.kinds {
        let cases = args.cases_of(kind);
        let per = cases.div_ceil(args.jobs);
        let mut first = args.first;
        let end = args.first.saturating_add(cases);
        while first < end {
            let n = per.min(end - first);
            chunks.push((kind, first, n));
            first += n;
        }
    }
    println!(
        "tally-fuzz: seed {}, {} cases per target from case {}, {} seeds, {} jobs",
        args.seed,
        args.cases,
        args.first,
        corpus.seeds.len(),
        args.jobs
    );
    let start = Instant::now();
    let queue = Mutex::new(chunks.into_iter());
    let tallies: Mutex<Vec<Tally>> =
        Mutex::new(Kind::ALL.iter().map(|_| Tally::default()).collect());
    let broken = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..args.jobs {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some((kind, first, n)) = next else { break };
                    let ki = Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0);
                    let child = std::process::Command::new(&exe)
                        .args(["--child", "--target", kind.name()])
                        .args(["--seed", &args.seed.to_string()])
                        .args(["--first", &first.to_string()])
                        .args(["--cases", &n.to_string()])
                        .args(["--time-ms", &args.time_ms.to_string()])
                        .arg("--out")
                        .arg(&args.out)
                        .arg("--data")
                        .arg(&args.data)
                        .stdout(std::process::Stdio::piped())
                        .spawn();
                    let mut child = match child {
                        Ok(c) => c,
                        Err(e) => {
                            eprintln!("tally-fuzz: cannot start a child: {e}");
                            broken.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    let mut done = false;
                    if let Some(out) = child.stdout.take() {
                        for line in std::io::BufReader::new(out).lines() {
                            let Ok(line) = line else { break };
                            if let Some(rest) = line.strip_prefix("@finding ") {
                                let (head, sig) = rest.split_once('\t').unwrap_or((rest, ""));
                                let (count, file) = head.split_once(' ').unwrap_or((head, ""));
                                let count: u64 = count.parse().unwrap_or(1);
                                let mut t = tallies.lock().unwrap_or_else(|e| e.into_inner());
                                let e = t[ki]
                                    .findings
                                    .entry(sig.to_string())
                                    .or_insert((0, file.to_string()));
                                e.0 += count;
                            } else if let Some(rest) = line.strip_prefix("@done ") {
                                let v: Vec<&str> = rest.split(' ').collect();
                                let num = |i: usize| v.get(i).and_then(|x| x.parse().ok());
                                let mut t = tallies.lock().unwrap_or_else(|e| e.into_inner());
                                t[ki].cases += num(1).unwrap_or(0);
                                t[ki].failures += num(2).unwrap_or(0);
                                t[ki].secs += v.get(3).and_then(|x| x.parse().ok()).unwrap_or(0.0);
                                done = true;
                            } else if line.starts_with("FAIL") || line.starts_with("  ") {
                                println!("{line}");
                            }
                        }
                    }
                    let status = child.wait();
                    if !done {
                        eprintln!(
                            "FAIL {} seed={} cases {first}..{}: the child ended without a result ({status:?})",
                            kind.name(),
                            args.seed,
                            first + n
                        );
                        broken.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let tallies = tallies.into_inner().unwrap_or_else(|e| e.into_inner());
    let (mut cases, mut failures, mut distinct) = (0, 0, 0);
    for (kind, t) in Kind::ALL.iter().zip(&tallies) {
        if !args.kinds.contains(kind) {
            continue;
        }
        println!(
            "{:<10} {:>8} cases {:>6} failed ({} distinct) {:>7.1} s {:>8.0} cases/s per core  ({} seeds)",
            kind.name(),
            t.cases,
            t.failures,
            t.findings.len(),
            t.secs,
            t.cases as f64 / t.secs.max(1e-9),
            corpus.of(*kind).len()
        );
        cases += t.cases;
        failures += t.failures;
        distinct += t.findings.len();
    }
    let broken = broken.load(Ordering::Relaxed);
    println!(
        "total: {cases} cases, {failures} failed ({distinct} distinct), {broken} children failed, {:.1} s on {} jobs",
        start.elapsed().as_secs_f64(),
        args.jobs
    );
    for t in &tallies {
        for (sig, (count, file)) in &t.findings {
            println!("  {count:>6} x {sig}\n           {file}");
        }
    }
    if failures > 0 || broken > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
