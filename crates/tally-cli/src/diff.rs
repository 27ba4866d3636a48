//! `tally diff A B`: the difference B − A of two profiles, written as a
//! profile with signed counts (see docs/merge-diff.md).

use crate::Outcome;
use crate::inputs::{self as combine, To};
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
    let (la, lb) = both(a, b, reduce);
    let (la, wa) = la?;
    combine::print_lines(&wa);
    let (lb, wb) = lb?;
    combine::print_lines(&wb);
    if la.format() != lb.format() {
        bail!(mixed(a, la.format(), b, lb.format()));
    }
    options.per_function = by_function(la.format());
    Ok(Inputs {
        a: la,
        b: lb,
        options,
    })
}

/// B − A of both inputs' foldings, made straight from them: each input's
/// records, summed as they were read, are subtracted or added once, with
/// the renames applied once; no sum of either input is built on its own.
/// What [`inputs`] and [`difference`] give, for a caller that needs
/// nothing else of the inputs.
pub fn direct(
    a: &Path,
    b: &Path,
    mut options: CombineOptions,
    per_function: bool,
    per_line: bool,
) -> anyhow::Result<Combined<i64>> {
    let by_function = |f: Format| per_function || (f == Format::Cachegrind && !per_line);
    let (la, lb) = both(a, b, |path| Ok(combine::load_folded_by(path, by_function)?));
    let la = la?;
    combine::print_lines(&combine::read_warnings(&la, a));
    let lb = lb?;
    combine::print_lines(&combine::read_warnings(&lb, b));
    let (fa, fb) = (combine::folded_format(&la), combine::folded_format(&lb));
    if fa != fb {
        bail!(mixed(a, fa, b, fb));
    }
    options.per_function = by_function(fa);
    options.keep_zero = false;
    let mut c = Combiner::<i64>::new(options);
    // A first, so that the first input named in errors is A and the
    // output keeps A's order, with what is new in B after it.
    // An overflow is located by scanning A and B again as one sum.
    let located =
        |e, c: &Combiner<i64>| combine::locate::<i64>(e, &[a, b], &combine::event_names(c));
    combine::add_folded_to(&mut c, &la, Sign::Minus, &combine::label(a))
        .map_err(|e| located(e, &c))?;
    let cmds = [combine::folded_cmd(&la), combine::folded_cmd(&lb)];
    drop(la);
    combine::add_folded_to(&mut c, &lb, Sign::Plus, &combine::label(b))
        .map_err(|e| located(e, &c))?;
    drop(lb);
    let events = combine::event_names(&c);
    let mut d = c
        .finish()
        .map_err(|e| combine::locate::<i64>(e, &[a, b], &events))?;
    describe(&mut d, a, b, [cmds[0].as_deref(), cmds[1].as_deref()]);
    Ok(d)
}

/// `read` of A on this thread and of B on another, both results.
fn both<T: Send>(
    a: &Path,
    b: &Path,
    read: impl Fn(&Path) -> anyhow::Result<T> + Sync,
) -> (anyhow::Result<T>, anyhow::Result<T>) {
    std::thread::scope(|scope| {
        let other = scope.spawn(|| read(b));
        let la = read(a);
        let lb = other
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("{}: reading failed", b.display())));
        (la, lb)
    })
}

/// The error of inputs of two formats.
fn mixed(a: &Path, fa: Format, b: &Path, fb: Format) -> String {
    let name = |f| match f {
        Format::Callgrind => "Callgrind",
        Format::Cachegrind => "Cachegrind",
    };
    format!(
        "{} is a {} profile but {} is a {} profile: a diff needs two of one kind (convert the Callgrind one with `tally convert --to cachegrind` to compare self costs)",
        a.display(),
        name(fa),
        b.display(),
        name(fb)
    )
}

/// As cg_diff: says what was compared and the commands of both runs.
fn describe(d: &mut Combined<i64>, a: &Path, b: &Path, cmds: [Option<&[u8]>; 2]) {
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
}

/// B − A of the inputs' sums. The sums have the renames applied, so the
/// difference does not apply them again.
pub fn difference(i: &Inputs, a: &Path, b: &Path) -> anyhow::Result<Combined<i64>> {
    let options = CombineOptions {
        rename_file: None,
        rename_function: None,
        ..i.options.clone()
    };
    let mut c = Combiner::<i64>::new(options);
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
    describe(&mut d, a, b, [i.a.cmd(), i.b.cmd()]);
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
    // The JSON summary ranks each side's own sums; without it, the
    // difference is made straight from the inputs as read.
    let d = if args.json {
        let inputs = inputs(&args.a, &args.b, options, args.per_function, args.per_line)?;
        let d = difference(&inputs, &args.a, &args.b)?;
        let summary = summary(&inputs, &args)?;
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        serde_json::to_writer_pretty(&mut out, &summary)?;
        writeln!(out)?;
        out.flush()?;
        d
    } else {
        // Cachegrind files as Valgrind writes them are compared per
        // function from their bytes.
        let output = args.output.clone().unwrap_or_else(|| PathBuf::from("-"));
        let to = args.to.map(combine::output_format);
        if !args.per_line && combine::diff_flat(&args.a, &args.b, &options, &output, to)? {
            return Ok(Outcome::Ok);
        }
        direct(&args.a, &args.b, options, args.per_function, args.per_line)?
    };
    let output = match (&args.output, args.json) {
        (Some(o), _) => o.clone(),
        (None, true) => return Ok(Outcome::Ok),
        (None, false) => PathBuf::from("-"),
    };
    let inputs = [args.a.clone(), args.b.clone()];
    combine::write_result(
        d,
        &output,
        args.to.map(combine::output_format),
        !args.no_compress,
        "diff",
        &inputs,
    )?;
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
