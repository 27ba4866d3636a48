//! The fuzz loop: cases made from seeds, each run under `catch_unwind`
//! with time and memory budgets, failures printed with their seed and
//! case number and written out as case files.

use crate::check::Failure;
use crate::corpus::{Corpus, Kind};
use crate::drive::{Case, Driver, save};
use crate::mutate::mutate;
use crate::rng::{Rng, mix};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Measures the memory a case takes (the fuzz binary counts allocations
/// with a global allocator; library users may measure nothing).
pub trait Memory {
    /// Starts a measurement: the peak is reset to what is in use now.
    fn start(&self);
    /// The peak allocated since [`Memory::start`], beyond what was in use
    /// then.
    fn peak(&self) -> usize;
}

/// No measurement.
pub struct NoMemory;

impl Memory for NoMemory {
    fn start(&self) {}
    fn peak(&self) -> usize {
        0
    }
}

/// The limits of one case.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// CPU time of the thread running the case (wall time where the
    /// system does not say).
    pub time: Duration,
    /// Memory: this many times the input's (decompressed) size…
    pub per_byte: usize,
    /// …plus this many bytes.
    pub fixed: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            time: Duration::from_secs(1),
            per_byte: 64,
            fixed: 64 << 20,
        }
    }
}

/// The last panic's message and place, caught by the silent hook.
static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Replaces the panic hook with one that prints nothing and keeps the
/// message and place for the failure report.
pub fn silence_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "a panic".to_string()
        };
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{msg}{place}"));
    }));
}

/// The CPU time this thread has used (user + system), from
/// `/proc/thread-self/stat` (in units of 1/100 s); `None` where there is
/// no such file. A case's budget is CPU time: on a loaded machine (CI
/// runners, other builds, a CPU quota) wall time measures the neighbours.
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Runs one case with every condition checked.
pub fn run_case(
    driver: &Driver<'_>,
    case: &Case,
    budget: &Budget,
    memory: &dyn Memory,
) -> Result<(), Failure> {
    memory.start();
    crate::drive::take_held_output();
    let t = Instant::now();
    let cpu = thread_cpu();
    let r = catch_unwind(AssertUnwindSafe(|| driver.run(case)));
    let wall = t.elapsed();
    let elapsed = match (cpu, thread_cpu()) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => wall,
    };
    let peak = memory.peak();
    match r {
        Err(_) => {
            let msg = PANIC
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_default();
            return Err(Failure::new("panic", "any", msg));
        }
        Ok(Err(f)) => return Err(f),
        Ok(Ok(())) => {}
    }
    if elapsed > budget.time {
        return Err(Failure::new(
            "time",
            "all",
            format!(
                "{:.2} s of CPU, {:.2} s of wall time (budget {:.2} s)",
                elapsed.as_secs_f64(),
                wall.as_secs_f64(),
                budget.time.as_secs_f64()
            ),
        ));
    }
    let size = crate::check::Extent::of(&case.input).bytes as usize;
    // An output the harness holds to read back counts four times: the
    // buffer, its last doubling, and tally's own buffers while writing it.
    let held = crate::drive::take_held_output();
    let limit = size
        .saturating_mul(budget.per_byte)
        .saturating_add(budget.fixed)
        .saturating_add(held.saturating_mul(4));
    if peak > limit {
        return Err(Failure::new(
            "memory",
            "all",
            format!(
                "peak {peak} bytes for {size} input bytes and {held} output bytes held (budget {limit})"
            ),
        ));
    }
    Ok(())
}

/// A run's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The run's seed.
    pub seed: u64,
    /// Cases per target.
    pub cases: u64,
    /// The targets.
    pub kinds: Vec<Kind>,
    /// Where failing cases are written.
    pub out: PathBuf,
    /// Limits of each case.
    pub budget: Budget,
}

/// What a target's run found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Cases run.
    pub cases: u64,
    /// Cases that failed.
    pub failures: u64,
    /// Distinct findings: signature → (count, first case file, failure).
    pub findings: BTreeMap<String, (u64, PathBuf, Failure)>,
    /// Time taken.
    pub time: Duration,
}

/// Text seeds larger than this are mostly cut to a window of their lines.
const WINDOW_FROM: usize = 16 << 10;
/// Lines of the window.
const WINDOW_LINES: usize = 200;

/// The case with this number: seed, mutations, and whether gzip'd.
pub fn make_case(
    corpus: &Corpus,
    kind: Kind,
    seed: u64,
    number: u64,
) -> Option<(Case, Vec<&'static str>)> {
    let seeds = corpus.of(kind);
    if seeds.is_empty() {
        return None;
    }
    let mut rng = Rng::new(mix(
        seed ^ mix(number.wrapping_add(kind as u64 * 0x1_0000_0000))
    ));
    // Small seeds more often: a case costs about its size, and small
    // files reach every kind of line as well.
    let s = if rng.one_in(4) {
        *rng.pick(&seeds)
    } else {
        let a = *rng.pick(&seeds);
        let b = *rng.pick(&seeds);
        if a.bytes.len() <= b.bytes.len() { a } else { b }
    };
    let window;
    let bytes = if !kind.binary() && s.bytes.len() > WINDOW_FROM && !rng.one_in(8) {
        window = crate::mutate::window(&mut rng, &s.bytes, WINDOW_LINES);
        &window[..]
    } else {
        &s.bytes[..]
    };
    // Binary stack formats: half their cases aim at the fields that size
    // and place the rest (only these kinds: the older ones' cases stay
    // what their numbers made them).
    let (mut input, mut names) = if kind.binary() && kind.stacks() && rng.one_in(2) {
        crate::fields::mutate(&mut rng, bytes, kind == Kind::Pprof)
    } else {
        mutate(&mut rng, bytes, kind.binary(), &corpus.lines)
    };
    if s.gzip || rng.one_in(16) {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = gz.write_all(&input);
        input = gz.finish().unwrap_or_default();
        if rng.one_in(4) {
            // A broken stream: cut anywhere.
            input.truncate(rng.below(input.len() + 1));
            names.push("cut-gzip");
        } else {
            names.push("gzip");
        }
    }
    Some((
        Case {
            kind,
            seed: s.path.clone(),
            input,
        },
        names,
    ))
}

/// Runs `settings.cases` cases of one target; prints each new finding.
pub fn run_target(
    driver: &Driver<'_>,
    kind: Kind,
    settings: &Settings,
    memory: &dyn Memory,
    report: impl FnMut(&str),
) -> Outcome {
    run_range(driver, kind, settings, 0, memory, |_| {}, report)
}

/// Runs cases `first..first + settings.cases` of one target; `started`
/// is told each case's number before it runs (for a watchdog), `report`
/// each new finding.
pub fn run_range(
    driver: &Driver<'_>,
    kind: Kind,
    settings: &Settings,
    first: u64,
    memory: &dyn Memory,
    mut started: impl FnMut(u64),
    mut report: impl FnMut(&str),
) -> Outcome {
    let mut o = Outcome::default();
    let t = Instant::now();
    for n in first..first.saturating_add(settings.cases) {
        let Some((case, names)) = make_case(driver.corpus(), kind, settings.seed, n) else {
            break;
        };
        started(n);
        o.cases += 1;
        if let Err(f) = run_case(driver, &case, &settings.budget, memory) {
            o.failures += 1;
            let sig = f.signature();
            match o.findings.get_mut(&sig) {
                Some(e) => e.0 += 1,
                None => {
                    let file = save(&settings.out, &case, settings.seed, n).unwrap_or_default();
                    report(&format!(
                        "FAIL {} seed={} case={n} from {} ({}): {f}\n  replay: tally-fuzz --replay {}",
                        kind.name(),
                        settings.seed,
                        case.seed,
                        names.join("+"),
                        file.display()
                    ));
                    o.findings.insert(sig, (1, file, f));
                }
            }
        }
    }
    o.time = t.elapsed();
    o
}
