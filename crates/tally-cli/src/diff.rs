//! `tally diff A B`: the difference B − A of two profiles, written as a
//! profile with signed counts (see docs/merge-diff.md).

use crate::Outcome;
use crate::combine::{self, To};
use anyhow::bail;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use tally_analysis::combine::{CombineOptions, Combined, Combiner, Sign};
use tally_model::{AnyCost, AnyProfile, Format};

/// Arguments of `tally diff`.
#[derive(clap::Args)]
pub struct Args {
    /// The old profile (A).
    #[arg(value_name = "A")]
    a: PathBuf,
    /// The new profile (B); the output is B − A.
    #[arg(value_name = "B")]
    b: PathBuf,
    /// Output file (`-` for standard output; `.gz` compresses). With
    /// `--json` and no `-o`, no profile is written.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// A Perl-style `s/regex/replacement/` applied to every file name of
    /// both inputs (as cg_diff's).
    #[arg(long, value_name = "EXPR")]
    mod_filename: Option<String>,
    /// A Perl-style `s/regex/replacement/` applied to every function name
    /// of both inputs.
    #[arg(long, value_name = "EXPR")]
    mod_funcname: Option<String>,
    /// Events to compare: a comma list both inputs have, or `common`.
    #[arg(long, value_name = "LIST|common")]
    events: Option<String>,
    /// One line per function (line 0), as cg_diff writes; the default for
    /// Cachegrind inputs.
    #[arg(long, conflicts_with = "per_line")]
    per_function: bool,
    /// Keep source lines (and instructions) of Cachegrind inputs apart;
    /// Callgrind inputs always are.
    #[arg(long)]
    per_line: bool,
    /// Print a JSON summary of the largest changes (functions and calls).
    #[arg(long)]
    json: bool,
    /// Entries per list in the JSON summary.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// The event that ranks the JSON summary (default: the first).
    #[arg(long, value_name = "EVENT")]
    sort: Option<String>,
    /// Output format (default: the inputs').
    #[arg(long, value_enum)]
    to: Option<To>,
    /// Write plain names and absolute positions (Callgrind output).
    #[arg(long)]
    no_compress: bool,
}

/// The two inputs read, and the options that apply to both.
pub struct Inputs {
    pub a: AnyProfile,
    pub b: AnyProfile,
    pub options: CombineOptions,
}

/// Reads both inputs and settles the options (per function for
/// Cachegrind unless `per_line`).
pub fn inputs(
    a: &Path,
    b: &Path,
    mut options: CombineOptions,
    per_function: bool,
    per_line: bool,
) -> anyhow::Result<Inputs> {
    // Each file is read and summed on its own thread (per function for
    // Cachegrind, unless asked otherwise); B − A is then a fold of the two
    // sums, small when per function.
    let by_function = |f: Format| per_function || (f == Format::Cachegrind && !per_line);
    // Each returns its warnings, printed for A and then for B.
    let reduce = |path: &Path| -> anyhow::Result<(AnyProfile, Vec<String>)> {
        // Per function, each line is summed into its function as it is
        // read, so no input's lines are kept.
        let loaded = combine::load_folded_by(path, by_function)?;
        let mut warnings = combine::read_warnings(&loaded, path);
        let mut o = options.clone();
        o.per_function = by_function(combine::folded_format(&loaded));
        o.keep_zero = false;
        let mut c = Combiner::<i64>::new(o);
        let located =
            |e, c: &Combiner<i64>| combine::locate::<i64>(e, &[path], &combine::event_names(c));
        combine::add_folded_to(&mut c, &loaded, Sign::Plus, &combine::label(path))
            .map_err(|e| located(e, &c))?;
        let events = combine::event_names(&c);
        let sum = c
            .finish()
            .map_err(|e| combine::locate::<i64>(e, &[path], &events))?;
        warnings.extend(combine::stated_warnings(&sum, "diff", path));
        Ok((AnyCost::Signed(sum.profile), warnings))
    };
    let (la, lb) = std::thread::scope(|scope| {
        let other = scope.spawn(|| reduce(b));
        let la = reduce(a);
        let lb = other
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("{}: reading failed", b.display())));
        (la, lb)
    });
    let (la, wa) = la?;
    combine::print_lines(&wa);
    let (lb, wb) = lb?;
    combine::print_lines(&wb);
    if la.format() != lb.format() {
        let name = |f| match f {
            Format::Callgrind => "Callgrind",
            Format::Cachegrind => "Cachegrind",
        };
        bail!(
            "{} is a {} profile but {} is a {} profile: a diff needs two of one kind (convert the Callgrind one with `tally convert --to cachegrind` to compare self costs)",
            a.display(),
            name(la.format()),
            b.display(),
            name(lb.format())
        );
    }
    options.per_function = per_function || (la.format() == Format::Cachegrind && !per_line);
    Ok(Inputs {
        a: la,
        b: lb,
        options,
    })
}

/// B − A.
pub fn difference(i: &Inputs, a: &Path, b: &Path) -> anyhow::Result<Combined<i64>> {
    let mut c = Combiner::<i64>::new(i.options.clone());
    // A first, so that the first input named in errors is A and the
    // output keeps A's order, with what is new in B after it.
    // An overflow is located by scanning A and B again as one sum.
    let located =
        |e, c: &Combiner<i64>| combine::locate::<i64>(e, &[a, b], &combine::event_names(c));
    combine::add_to(&mut c, &i.a, Sign::Minus, &combine::label(a)).map_err(|e| located(e, &c))?;
    combine::add_to(&mut c, &i.b, Sign::Plus, &combine::label(b)).map_err(|e| located(e, &c))?;
    let events = combine::event_names(&c);
    let mut d = c
        .finish()
        .map_err(|e| combine::locate::<i64>(e, &[a, b], &events))?;
    // As cg_diff: say what was compared; the commands of both runs.
    let cmds = [i.a.cmd(), i.b.cmd()];
    for part in &mut d.profile.parts {
        part.info.desc = vec![(
            b"Files compared".to_vec(),
            format!("   {}; {}", a.display(), b.display()).into_bytes(),
        )];
        let trim = |c: Option<&[u8]>| c.unwrap_or_default().trim_ascii().to_vec();
        let mut cmd = trim(cmds[0]);
        cmd.extend_from_slice(b"; ");
        cmd.extend_from_slice(&trim(cmds[1]));
        part.info.cmd = Some(cmd);
    }
    if d.profile.format == Format::Callgrind {
        d.profile.creator = Some(format!("tally {} diff", env!("CARGO_PKG_VERSION")).into_bytes());
    }
    Ok(d)
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    combine::stdin_once([&args.a, &args.b])?;
    let options = CombineOptions {
        events: combine::event_choice(args.events.as_deref(), &[args.a.clone(), args.b.clone()])?,
        combine_parts: true,
        per_function: false,
        keep_zero: false,
        rename_file: combine::subst(args.mod_filename.as_deref(), "--mod-filename")?,
        rename_function: combine::subst(args.mod_funcname.as_deref(), "--mod-funcname")?,
    };
    let inputs = inputs(&args.a, &args.b, options, args.per_function, args.per_line)?;
    let d = difference(&inputs, &args.a, &args.b)?;
    if args.json {
        let summary = summary(&inputs, &args)?;
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        serde_json::to_writer_pretty(&mut out, &summary)?;
        writeln!(out)?;
        out.flush()?;
    }
    let output = match (&args.output, args.json) {
        (Some(o), _) => o.clone(),
        (None, true) => return Ok(Outcome::Ok),
        (None, false) => PathBuf::from("-"),
    };
    let inputs = [args.a.clone(), args.b.clone()];
    combine::write_result(d, &output, args.to, !args.no_compress, "diff", &inputs)?;
    Ok(Outcome::Ok)
}

/// The JSON summary, from each side's own sum.
fn summary(i: &Inputs, args: &Args) -> anyhow::Result<serde_json::Value> {
    let (AnyCost::Signed(pa), AnyCost::Signed(pb)) = (&i.a, &i.b) else {
        anyhow::bail!("the inputs were not summed");
    };
    Ok(tally_report::diff::summary(
        pa,
        pb,
        &tally_report::diff::SummaryOptions {
            a: args.a.display().to_string(),
            b: args.b.display().to_string(),
            sort: args.sort.clone(),
            top: args.top,
        },
    )?)
}
