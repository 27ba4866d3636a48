//! `tally merge`: sums Callgrind or Cachegrind profiles per function, line,
//! instruction, call arc and jump (see docs/merge-diff.md).

use crate::Outcome;
use crate::inputs::{self as combine, To};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tally_analysis::combine::{CombineOptions, Combiner, Sign};
use tally_model::AnyCost;

/// Arguments of `tally merge`.
#[derive(clap::Args)]
pub struct Args {
    /// Profiles to sum (Callgrind or Cachegrind, all of one format; `.gz`
    /// is decompressed).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output file (`-` for standard output; `.gz` compresses).
    #[arg(short, long, default_value = "-")]
    output: PathBuf,
    /// Events of the output: a comma list every input has, or `common`
    /// for the events all inputs share. By default every input must
    /// record the same events.
    #[arg(long, value_name = "LIST|common")]
    events: Option<String>,
    /// Sum all parts (threads, dumps) into one. By default part N of every
    /// input is summed into part N of the output.
    #[arg(long)]
    combine_parts: bool,
    /// A Perl-style `s/regex/replacement/` applied to every file name.
    #[arg(long, value_name = "EXPR")]
    mod_filename: Option<String>,
    /// A Perl-style `s/regex/replacement/` applied to every function name.
    #[arg(long, value_name = "EXPR")]
    mod_funcname: Option<String>,
    /// Output format (default: the inputs').
    #[arg(long, value_enum)]
    to: Option<To>,
    /// Write plain names and absolute positions (Callgrind output).
    #[arg(long)]
    no_compress: bool,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    combine::stdin_once(&args.files)?;
    let options = CombineOptions {
        events: combine::event_choice(args.events.as_deref(), &args.files)?,
        combine_parts: args.combine_parts,
        per_function: false,
        keep_zero: true,
        rename_file: combine::subst(args.mod_filename.as_deref(), "--mod-filename")?,
        rename_function: combine::subst(args.mod_funcname.as_deref(), "--mod-funcname")?,
    };
    // Unsigned until an input turns out to be a difference; then the
    // files read so far are folded again into a signed sum. Files are read
    // on reader threads (one per core, at most four) while the main thread
    // folds them in order.
    let mut sum = Sum::Unsigned(Combiner::new(options.clone()));
    let files = &args.files;
    let readers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4)
        .min(files.len());
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(readers);
        for _ in 0..readers {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    if tx.send((i, combine::load_folded(f))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let result = (|| -> anyhow::Result<()> {
            let mut ready = BTreeMap::new();
            for (i, f) in files.iter().enumerate() {
                let p = loop {
                    if let Some(p) = ready.remove(&i) {
                        break p;
                    }
                    let (j, r) = rx
                        .recv()
                        .map_err(|_| anyhow::anyhow!("{}: the readers stopped", f.display()))?;
                    ready.insert(j, r);
                }?;
                combine::print_lines(&combine::read_warnings(&p, f));
                let label = combine::label(f);
                if combine::folded_signed(&p)
                    && let Sum::Unsigned(_) = sum
                {
                    let mut s = Combiner::<i64>::new(options.clone());
                    for (j, g) in files[..i].iter().enumerate() {
                        let p = combine::load_folded(g)?;
                        combine::add_folded_to(&mut s, &p, Sign::Plus, &combine::label(g))
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
                    (Sum::Unsigned(u), p) => combine::add_folded_to(u, &p, Sign::Plus, &label)
                        .map_err(|e| located(e, u, &files[..=i]))?,
                    (Sum::Signed(s), p) => combine::add_folded_to(s, &p, Sign::Plus, &label)
                        .map_err(|e| located(e, s, &files[..=i]))?,
                }
            }
            Ok(())
        })();
        // On an error the readers stop after the file they are reading.
        stop.store(true, Ordering::Relaxed);
        drop(rx);
        result
    })?;
    let compress = !args.no_compress;
    match sum {
        Sum::Unsigned(u) => {
            let events = combine::event_names(&u);
            let r = u.finish().map_err(|e| locate::<u64>(e, files, &events))?;
            combine::write_result(
                r,
                &args.output,
                args.to.map(combine::output_format),
                compress,
                "merge",
                files,
            )?
        }
        Sum::Signed(s) => {
            let events = combine::event_names(&s);
            let r = s.finish().map_err(|e| locate::<i64>(e, files, &events))?;
            combine::write_result(
                r,
                &args.output,
                args.to.map(combine::output_format),
                compress,
                "merge",
                files,
            )?
        }
    }
    Ok(Outcome::Ok)
}

/// An overflow of the sum so far, located in `files`.
fn located<C: tally_model::Cost>(
    e: tally_analysis::combine::CombineError,
    c: &Combiner<C>,
    files: &[PathBuf],
) -> anyhow::Error {
    locate::<C>(e, files, &combine::event_names(c))
}

fn locate<C: tally_model::Cost>(
    e: tally_analysis::combine::CombineError,
    files: &[PathBuf],
    events: &[String],
) -> anyhow::Error {
    let files: Vec<&std::path::Path> = files.iter().map(|f| f.as_path()).collect();
    combine::locate::<C>(e, &files, events).into()
}

enum Sum {
    Unsigned(Combiner<u64>),
    Signed(Combiner<i64>),
}
