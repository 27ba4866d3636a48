//! The inputs of `tally merge`, `tally diff`, `tally gate` and `tally
//! annotate --diff`: each read straight into a folding sink (signed or
//! not), summed or subtracted in the order named, and the result written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tally_analysis::Error as AnalysisError;
use tally_analysis::Folding;
use tally_analysis::combine::{CombineOptions, Combined, Combiner, EventChoice, Sign};
use tally_formats::cachegrind::flat::{self, FlatInput};
use tally_formats::callgrind::ReadOutcome;
use tally_formats::{OutputFormat, OutputOptions, Source};
use tally_model::{AnyCost, AnyProfile, Cost, Format};

use crate::Error;

/// An input read for a merge or diff: its header facts and names (a
/// profile without records) and its records folded as they were read,
/// unsigned or signed.
pub type Folded = AnyCost<(ReadOutcome<u64>, Folding<u64>), (ReadOutcome<i64>, Folding<i64>)>;

/// Reads a Callgrind or Cachegrind file (or `-`) straight into a
/// [`Folding`] (signed if it holds a negative count; its warnings in
/// [`read_warnings`]): each distinct record once, grouped as the combiner takes
/// them, so memory grows with the distinct records and no profile is
/// built per input.
pub fn load_folded(path: &Path) -> Result<Folded, Error> {
    load_folded_by(path, |_| false)
}

/// [`load_folded`], keeping one record per function ([`Folding::per_function`])
/// when `per_function` says so for the input's format. The format is known
/// for sure only once the file is read: the guess from its first bytes
/// decides how it is read, and an input that turns out otherwise is read
/// again.
pub fn load_folded_by(path: &Path, per_function: impl Fn(Format) -> bool) -> Result<Folded, Error> {
    let source = Source::open(path)?;
    fn make<C: Cost>(by_function: bool) -> Folding<C> {
        if by_function {
            Folding::per_function()
        } else {
            Folding::default()
        }
    }
    let read_as = |by_function: bool| {
        tally_formats::parse_any(&source, make(by_function), || make(by_function), None)
    };
    let guess = per_function(match source.format() {
        tally_formats::FileFormat::Cachegrind => Format::Cachegrind,
        _ => Format::Callgrind,
    });
    let mut read = read_as(guess)?;
    if per_function(folded_format(&read)) != guess {
        read = read_as(!guess)?;
    }
    fn check<C: Cost>(o: &ReadOutcome<C>, f: &Folding<C>, path: &Path) -> Result<(), Error> {
        if let Some(function) = f.overflow() {
            return Err(Error::Input(format!(
                "{}: in function `{}`: a sum of repeated records does not fit in 64 bits",
                path.display(),
                String::from_utf8_lossy(o.profile.names.function_name(function))
            )));
        }
        Ok(())
    }
    match &read {
        AnyCost::Unsigned((o, f)) => check(o, f, path)?,
        AnyCost::Signed((o, f)) => check(o, f, path)?,
    }
    Ok(read)
}

/// The reader's warnings about an input, one line each. Inputs read on
/// threads are warned about in the order they were named, not the order
/// their reads end in, so the messages do not vary from run to run.
pub fn read_warnings(f: &Folded, path: &Path) -> Vec<String> {
    let warnings = match f {
        AnyCost::Unsigned((o, _)) => &o.warnings,
        AnyCost::Signed((o, _)) => &o.warnings,
    };
    warnings
        .iter()
        .map(|w| format!("{}: warning: {w}", path.display()))
        .collect()
}

/// Prints lines collected for standard error.
pub fn print_lines(lines: &[String]) {
    for l in lines {
        eprintln!("{l}");
    }
}

/// Whether a folded input holds negative counts.
pub fn folded_signed(f: &Folded) -> bool {
    matches!(f, AnyCost::Signed(_))
}

/// The format of a folded input.
pub fn folded_format(f: &Folded) -> Format {
    match f {
        AnyCost::Unsigned((o, _)) => o.profile.format,
        AnyCost::Signed((o, _)) => o.profile.format,
    }
}

/// The command of a folded input: its first part's, as a sum of it with
/// its parts combined states.
pub fn folded_cmd(f: &Folded) -> Option<Vec<u8>> {
    match f {
        AnyCost::Unsigned((o, _)) => o.profile.parts.first()?.info.cmd.clone(),
        AnyCost::Signed((o, _)) => o.profile.parts.first()?.info.cmd.clone(),
    }
}

/// Adds or subtracts a folded input, whatever its counts.
pub fn add_folded_to<C: Cost>(
    c: &mut Combiner<C>,
    f: &Folded,
    sign: Sign,
    label: &str,
) -> Result<(), AnalysisError> {
    match f {
        AnyCost::Unsigned((o, f)) => c.add_folded(&o.profile, f, sign, label),
        AnyCost::Signed((o, f)) => c.add_folded(&o.profile, f, sign, label),
    }
}

/// The error of writing the output: an I/O error says which file and that
/// writing it failed; a count that overflows when the Cachegrind writer
/// sums a profile per line names the inputs.
pub fn write_error(e: tally_formats::Error, inputs: &[PathBuf]) -> Error {
    match e {
        tally_formats::Error::Io { path, source } => {
            if source
                .get_ref()
                .and_then(|r| r.downcast_ref::<tally_formats::Error>())
                .is_some_and(|e| matches!(e, tally_formats::Error::CachegrindSumOverflow))
            {
                let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
                return Error::Input(format!("{}: {source}", names.join(", ")));
            }
            // The I/O error stays in the chain, so that a closed pipe
            // (`tally merge A B | head`) ends quietly, as for the reports.
            Error::Write { path, source }
        }
        e => e.into(),
    }
}

/// Adds or subtracts a profile, whatever its counts.
pub fn add_to<C: Cost>(
    c: &mut Combiner<C>,
    p: &AnyProfile,
    sign: Sign,
    label: &str,
) -> Result<(), AnalysisError> {
    match p {
        AnyCost::Unsigned(p) => c.add(p, sign, label),
        AnyCost::Signed(p) => c.add(p, sign, label),
    }
}

/// The output's event names, for [`locate`].
pub fn event_names<C: Cost>(c: &Combiner<C>) -> Vec<String> {
    c.events().map_or_else(Vec::new, |e| {
        e.recorded().iter().map(|e| e.name.clone()).collect()
    })
}

/// A merge's or diff's overflow with its place: the inputs (`files`, in
/// the order summed) are scanned again as one sum of `C`, and the input,
/// line and function where their running sums pass what `C` holds are
/// named. Standard input cannot be read again; its error stays unlocated.
pub fn locate<C: Cost>(e: AnalysisError, files: &[&Path], events: &[String]) -> Error {
    let overflow = matches!(
        e,
        AnalysisError::Overflow { .. } | AnalysisError::Unreadable { .. }
    );
    if !overflow || files.iter().any(|f| f.as_os_str() == "-") {
        return e.into();
    }
    let sources: Result<Vec<Source>, _> = files.iter().map(|f| Source::open(f)).collect();
    let found = sources.and_then(|s| {
        let s: Vec<&Source> = s.iter().collect();
        tally_formats::sum_bound::<C>(&s, events)
    });
    match found {
        Err(located) if files.len() > 1 => {
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            Error::Input(format!("{located} (in the sum of {})", names.join(", ")))
        }
        Err(located) => located.into(),
        Ok(()) => e.into(),
    }
}

/// Writes the result (temporary file and rename; `-` is standard output),
/// in the inputs' format unless `to` says otherwise; warns where the
/// inputs' stated totals do not add up to their costs.
pub fn write_result<C: Cost>(
    c: Combined<C>,
    out: &Path,
    to: Option<OutputFormat>,
    compress: bool,
    command: &str,
    inputs: &[PathBuf],
) -> Result<(), Error> {
    warn_stated(&c, command, out);
    if let Some(f @ (OutputFormat::Pprof | OutputFormat::Folded | OutputFormat::Speedscope)) = to
        && c.profile.stacks.is_none()
    {
        // A sum of arcs has no stacks to write; estimating them is
        // `tally convert`'s job, which says that it estimates.
        return Err(Error::Input(format!(
            "--to {}: the inputs hold caller-callee arcs, not whole stacks; write Callgrind and \
             use `tally convert --to {}` on it to get estimated stacks",
            f.name(),
            f.name()
        )));
    }
    let options = OutputOptions {
        format: to,
        compress_names: compress,
        gzip: None,
        ..Default::default()
    };
    tally_formats::write_profile(&c.profile, out, &options).map_err(|e| write_error(e, inputs))?;
    Ok(())
}

/// Warns where the inputs' stated totals (`summary:`/`totals:`) do not add
/// up to their costs; the output states the costs.
pub fn warn_stated<C: Cost>(c: &Combined<C>, command: &str, what: &Path) {
    print_lines(&stated_warnings(c, command, what));
}

/// The lines [`warn_stated`] prints.
pub fn stated_warnings<C: Cost>(c: &Combined<C>, command: &str, what: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, (part, stated)) in c.profile.parts.iter().zip(&c.stated).enumerate() {
        let Some(stated) = stated else { continue };
        let computed = part.info.totals.as_ref().or(part.info.summary.as_ref());
        if let Some(computed) = computed
            && computed
                .iter()
                .map(|v| v.to_i128())
                .ne(stated.iter().copied())
        {
            let show = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(" ");
            lines.push(format!(
                "tally {command}: warning: {}: part {}: the inputs' stated totals add up to {} but their costs to {}; the output states the costs",
                what.display(),
                i + 1,
                show(&mut stated.iter().map(|v| v.to_string())),
                show(&mut computed.iter().map(|v| v.to_string())),
            ));
        }
    }
    lines
}

/// The label of an input in messages.
pub fn label(p: &Path) -> String {
    p.display().to_string()
}

/// `--events`: a comma list, or `common` for the events every input has
/// (in the first input's order).
pub fn event_choice(
    arg: Option<&str>,
    files: &[PathBuf],
) -> Result<tally_analysis::combine::EventChoice, Error> {
    use tally_analysis::combine::EventChoice;
    let Some(arg) = arg else {
        return Ok(EventChoice::Same);
    };
    if arg != "common" {
        let v: Vec<String> = arg
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if v.is_empty() {
            return Err(Error::Usage("--events: no event names given".into()));
        }
        return Ok(EventChoice::Only(v));
    }
    // Only the headers are needed; a scan keeps no records.
    let mut common: Option<Vec<String>> = None;
    for f in files {
        let names: Vec<String> = match tally_formats::scan_file::<i64>(f, None) {
            Ok(o) => o
                .profile
                .events
                .recorded()
                .iter()
                .map(|e| e.name.clone())
                .collect(),
            Err(e) => return Err(e.into()),
        };
        common = Some(match common {
            None => names,
            Some(c) => c.into_iter().filter(|n| names.contains(n)).collect(),
        });
    }
    let common = common.unwrap_or_default();
    if common.is_empty() {
        return Err(Error::Input(
            "--events common: the inputs have no event in common".into(),
        ));
    }
    Ok(EventChoice::Only(common))
}

/// A sum of inputs: unsigned until an input turns out to be a difference.
pub enum Sum {
    /// Every input so far has unsigned counts.
    Unsigned(Combiner<u64>),
    /// An input held negative counts: the sum is signed.
    Signed(Combiner<i64>),
}

/// Sums `files` in the order named (`tally merge`): they are read on
/// reader threads (one per core, at most four), each folded as read,
/// while this thread adds them in order. When an input holds a
/// difference, the files added so far are read again into a signed sum.
/// `warn` is given each input's warnings as it is added, in the order
/// named, so that the messages do not vary from run to run.
pub fn sum_in_order(
    files: &[PathBuf],
    options: &CombineOptions,
    mut warn: impl FnMut(Vec<String>),
) -> Result<Sum, Error> {
    let mut sum = Sum::Unsigned(Combiner::new(options.clone()));
    let readers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4)
        .min(files.len());
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| -> Result<(), Error> {
        let (tx, rx) = std::sync::mpsc::sync_channel(readers);
        for _ in 0..readers {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    if tx.send((i, load_folded(f))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut add_all = || -> Result<(), Error> {
            let mut ready = BTreeMap::new();
            for (i, f) in files.iter().enumerate() {
                let p = loop {
                    if let Some(p) = ready.remove(&i) {
                        break p;
                    }
                    let (j, r) = rx.recv().map_err(|_| {
                        Error::Input(format!("{}: the readers stopped", f.display()))
                    })?;
                    ready.insert(j, r);
                }?;
                warn(read_warnings(&p, f));
                let label = label(f);
                if folded_signed(&p)
                    && let Sum::Unsigned(_) = sum
                {
                    let mut s = Combiner::<i64>::new(options.clone());
                    for (j, g) in files[..i].iter().enumerate() {
                        let p = load_folded(g)?;
                        add_folded_to(&mut s, &p, Sign::Plus, &self::label(g))
                            .map_err(|e| located(e, &s, &files[..=j]))?;
                    }
                    sum = Sum::Signed(s);
                }
                // An input of the sum's cost type is handed over, so that
                // the first becomes the sum without being folded again.
                match (&mut sum, p) {
                    (Sum::Unsigned(u), AnyCost::Unsigned((o, f))) => u
                        .add_folded_owned(&o.profile, f, Sign::Plus, &label)
                        .map_err(|e| located(e, u, &files[..=i]))?,
                    (Sum::Signed(s), AnyCost::Signed((o, f))) => s
                        .add_folded_owned(&o.profile, f, Sign::Plus, &label)
                        .map_err(|e| located(e, s, &files[..=i]))?,
                    (Sum::Unsigned(u), p) => add_folded_to(u, &p, Sign::Plus, &label)
                        .map_err(|e| located(e, u, &files[..=i]))?,
                    (Sum::Signed(s), p) => add_folded_to(s, &p, Sign::Plus, &label)
                        .map_err(|e| located(e, s, &files[..=i]))?,
                }
            }
            Ok(())
        };
        let result = add_all();
        // On an error the readers stop after the file they are reading.
        stop.store(true, Ordering::Relaxed);
        drop(rx);
        result
    })?;
    Ok(sum)
}

impl Sum {
    /// Finishes the sum of `files` and writes it to `out` (see
    /// [`write_result`]); an overflow is located in the inputs.
    pub fn write(
        self,
        files: &[PathBuf],
        out: &Path,
        to: Option<OutputFormat>,
        compress: bool,
        command: &str,
    ) -> Result<(), Error> {
        match self {
            Sum::Unsigned(u) => {
                let events = event_names(&u);
                let r = u
                    .finish()
                    .map_err(|e| locate_in::<u64>(e, files, &events))?;
                write_result(r, out, to, compress, command, files)
            }
            Sum::Signed(s) => {
                let events = event_names(&s);
                let r = s
                    .finish()
                    .map_err(|e| locate_in::<i64>(e, files, &events))?;
                write_result(r, out, to, compress, command, files)
            }
        }
    }
}

/// An overflow of the sum so far, located in `files`.
fn located<C: Cost>(e: AnalysisError, c: &Combiner<C>, files: &[PathBuf]) -> Error {
    locate_in::<C>(e, files, &event_names(c))
}

fn locate_in<C: Cost>(e: AnalysisError, files: &[PathBuf], events: &[String]) -> Error {
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    locate::<C>(e, &files, events)
}

/// Reads and scans `files` for the plain Cachegrind way
/// ([`tally_formats::cachegrind::flat`]), two at a time on their own
/// threads; `None` as soon as one is not a plain Cachegrind file (or
/// cannot be read: the general way then says why).
fn flat_inputs(files: &[&Path]) -> Option<Vec<FlatInput>> {
    if files.iter().any(|f| f.as_os_str() == "-") {
        return None;
    }
    let read = |f: &Path| -> Option<FlatInput> {
        use std::io::Read;
        let mut file = std::fs::File::open(f).ok()?;
        // A Callgrind, gzip'd or other file is told apart by its first
        // bytes, before it is read whole.
        let mut bytes = Vec::new();
        file.by_ref().take(7).read_to_end(&mut bytes).ok()?;
        if ![&b"desc: "[..], b"cmd:", b"events:"]
            .iter()
            .any(|p| bytes.starts_with(p))
        {
            return None;
        }
        let size = file.metadata().ok()?.len() as usize;
        bytes.reserve(size + 1);
        file.read_to_end(&mut bytes).ok()?;
        FlatInput::scan(bytes)
    };
    let next = AtomicUsize::new(0);
    let declined = AtomicBool::new(false);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4)
        .min(files.len());
    let mut done: Vec<Option<FlatInput>> = std::thread::scope(|scope| {
        let work = || {
            let mut mine = Vec::new();
            while !declined.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(f) = files.get(i) else { break };
                let r = read(f);
                if r.is_none() {
                    declined.store(true, Ordering::Relaxed);
                }
                mine.push((i, r));
            }
            mine
        };
        let others: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut all = work();
        for t in others {
            all.extend(t.join().unwrap_or_default());
        }
        let mut slots: Vec<Option<FlatInput>> = files.iter().map(|_| None).collect();
        for (i, r) in all {
            slots[i] = r;
        }
        slots
    });
    if declined.load(Ordering::Relaxed) {
        return None;
    }
    done.iter_mut().map(Option::take).collect()
}

/// Whether an output is one the plain Cachegrind way writes: a Cachegrind
/// file, not compressed.
fn flat_output(out: &Path, to: Option<OutputFormat>) -> bool {
    matches!(to, None | Some(OutputFormat::Cachegrind)) && out.extension().is_none_or(|e| e != "gz")
}

/// Whether the byte-level way may serve: no option changes names or
/// events, and the output is a Cachegrind file it can write.
fn flat_applies(options: &CombineOptions, out: &Path, to: Option<OutputFormat>) -> bool {
    options.events == EventChoice::Same
        && options.rename_file.is_none()
        && options.rename_function.is_none()
        && flat_output(out, to)
}

/// `tally merge` of Cachegrind files as Valgrind writes them, with no
/// option that changes names, events or parts, straight from their bytes
/// (see [`tally_formats::cachegrind::flat`]): the same output as
/// [`sum_in_order`] and [`Sum::write`]. `Ok(false)` when the inputs or the
/// output need the general way.
pub fn merge_flat(
    files: &[PathBuf],
    options: &CombineOptions,
    out: &Path,
    to: Option<OutputFormat>,
) -> Result<bool, Error> {
    if !flat_applies(options, out, to) {
        return Ok(false);
    }
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let Some(inputs) = flat_inputs(&paths) else {
        return Ok(false);
    };
    let Some(plan) = flat::merge_plan(&inputs) else {
        return Ok(false);
    };
    tally_formats::write_file(out, |w| plan.write(w)).map_err(|e| write_error(e, files))?;
    Ok(true)
}

/// `tally diff A B` per function of Cachegrind files as Valgrind writes
/// them, with no option that changes names or events, straight from their
/// bytes: the same output as the general way. `Ok(false)` when the inputs
/// or the output need the general way.
pub fn diff_flat(
    a: &Path,
    b: &Path,
    options: &CombineOptions,
    out: &Path,
    to: Option<OutputFormat>,
) -> Result<bool, Error> {
    if !flat_applies(options, out, to) {
        return Ok(false);
    }
    let Some(inputs) = flat_inputs(&[a, b]) else {
        return Ok(false);
    };
    let (la, lb) = (label(a), label(b));
    let Some(plan) = flat::diff_plan(&inputs[0], &inputs[1], [&la, &lb]) else {
        return Ok(false);
    };
    tally_formats::write_file(out, |w| plan.write(w))
        .map_err(|e| write_error(e, &[a.to_path_buf(), b.to_path_buf()]))?;
    Ok(true)
}
