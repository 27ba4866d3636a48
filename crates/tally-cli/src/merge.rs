//! `tally merge`: sums Callgrind or Cachegrind profiles per function, line,
//! instruction, call arc and jump (see docs/merge-diff.md).

use crate::Outcome;
use crate::combine::{self, To};
use std::path::PathBuf;
use tally_analysis::combine::{CombineOptions, Combiner, Sign};

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
    let options = CombineOptions {
        events: combine::event_choice(args.events.as_deref(), &args.files)?,
        combine_parts: args.combine_parts,
        per_function: false,
        keep_zero: true,
        rename_file: combine::subst(args.mod_filename.as_deref(), "--mod-filename")?,
        rename_function: combine::subst(args.mod_funcname.as_deref(), "--mod-funcname")?,
    };
    // Unsigned until an input turns out to be a difference; then the
    // files read so far are folded again into a signed sum. The next file
    // is read on another thread while one is folded.
    let mut sum = Sum::Unsigned(Combiner::new(options.clone()));
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let files = &args.files;
        scope.spawn(move || {
            for f in files {
                let r = combine::load(f);
                let failed = r.is_err();
                if tx.send(r).is_err() || failed {
                    break;
                }
            }
        });
        for (i, f) in args.files.iter().enumerate() {
            let p = rx
                .recv()
                .map_err(|_| anyhow::anyhow!("{}: the reader stopped", f.display()))??;
            let label = combine::label(f);
            if p.is_signed()
                && let Sum::Unsigned(_) = sum
            {
                let mut s = Combiner::<i64>::new(options.clone());
                for g in &args.files[..i] {
                    combine::load(g)?.add_to(&mut s, Sign::Plus, &combine::label(g))?;
                }
                sum = Sum::Signed(s);
            }
            match &mut sum {
                Sum::Unsigned(u) => p.add_to(u, Sign::Plus, &label)?,
                Sum::Signed(s) => p.add_to(s, Sign::Plus, &label)?,
            }
        }
        Ok(())
    })?;
    let compress = !args.no_compress;
    match sum {
        Sum::Unsigned(u) => {
            combine::write_result(u.finish()?, &args.output, args.to, compress, "merge")?
        }
        Sum::Signed(s) => {
            combine::write_result(s.finish()?, &args.output, args.to, compress, "merge")?
        }
    }
    Ok(Outcome::Ok)
}

enum Sum {
    Unsigned(Combiner<u64>),
    Signed(Combiner<i64>),
}
