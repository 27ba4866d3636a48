//! `tally merge`: sums Callgrind or Cachegrind profiles per function, line,
//! instruction, call arc and jump (see docs/merge-diff.md).

use crate::Outcome;
use crate::inputs::{self as combine, To};
use std::path::PathBuf;
use tally_analysis::combine::CombineOptions;

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
    let to = args.to.map(combine::output_format);
    // Cachegrind files as Valgrind writes them are merged from their bytes.
    if combine::merge_flat(&args.files, &options, &args.output, to)? {
        return Ok(Outcome::Ok);
    }
    let sum = combine::sum_in_order(&args.files, &options, |w| combine::print_lines(&w))?;
    sum.write(&args.files, &args.output, to, !args.no_compress, "merge")?;
    Ok(Outcome::Ok)
}
