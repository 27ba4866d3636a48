//! `tally serve` (a local web UI) and `tally report --html` (the same page
//! in one file); everything but the arguments is in tally-web.

use std::path::PathBuf;

use anyhow::Result;
use tally_web::{Error, LoadOptions, ReportOptions, Session};

use crate::Outcome;

/// Arguments of `tally serve`.
#[derive(clap::Args)]
pub struct Args {
    /// Profiles (several are summed), gmon.out files with `--binary`, or
    /// with `--diff` two profiles A and B.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The port on 127.0.0.1 (default: one the system chooses).
    #[arg(long)]
    port: Option<u16>,
    /// Open the page in the default browser (`xdg-open`).
    #[arg(long)]
    open: bool,
    /// Compare two profiles: every view shows B − A.
    #[arg(long)]
    diff: bool,
    /// The program that wrote the gmon files (built with `-pg`).
    #[arg(long, visible_alias = "program", value_name = "PROG")]
    binary: Option<PathBuf>,
    /// Show sources only from under DIR (repeatable; symlinks and `..`
    /// resolved first, never /proc, /sys or /dev), also searched as
    /// `annotate -I DIR` is. Default: the profiles' own directories and
    /// the current one (unless it is /).
    #[arg(long = "source-dir", value_name = "DIR")]
    source_dirs: Vec<PathBuf>,
    /// Transforms the page opens with (the menu adds and pops them).
    #[command(flatten)]
    transforms: crate::explore::TransformArgs,
}

/// Arguments of `tally report`.
#[derive(clap::Args)]
pub struct ReportArgs {
    /// Profiles, as for `tally serve`.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The HTML file to write: one file, its data embedded, no network.
    #[arg(long, value_name = "OUT.html", required = true)]
    html: PathBuf,
    /// Compare two profiles: B − A.
    #[arg(long)]
    diff: bool,
    /// The program that wrote the gmon files.
    #[arg(long, visible_alias = "program", value_name = "PROG")]
    binary: Option<PathBuf>,
    /// Embed sources only from under DIR (repeatable; symlinks and `..`
    /// resolved first, never /proc, /sys or /dev), also searched as
    /// `annotate -I DIR` is: a profile may name any file, and the report
    /// is made to be published. Default: the profiles' own directories
    /// and the current one (unless it is /).
    #[arg(long = "source-dir", value_name = "DIR")]
    source_dirs: Vec<PathBuf>,
    /// Keep functions whose self or inclusive cost is at least this
    /// percentage of the total.
    #[arg(long, default_value = "0.1", value_name = "PERCENT")]
    threshold: f64,
    /// Transforms applied to the profile the report holds.
    #[command(flatten)]
    transforms: crate::explore::TransformArgs,
}

/// A library error as every command reports it: a reader's error as it
/// is (it names file and line), a misuse with exit status 2.
fn wrap(e: Error) -> anyhow::Error {
    match e {
        Error::Formats(f) => f.into(),
        Error::Usage(u) => crate::usage!("{u}"),
        e => e.into(),
    }
}

fn load(files: &[PathBuf], options: LoadOptions) -> Result<Session> {
    crate::inputs::stdin_once(files)?;
    let session = Session::load(files, &options).map_err(wrap)?;
    for i in &session.inputs {
        for w in &i.warnings {
            eprintln!("tally: {w}");
        }
    }
    Ok(session)
}

/// Runs `tally serve`: reads and checks the inputs, then listens.
pub fn run(args: Args) -> Result<Outcome> {
    let options = LoadOptions {
        binary: args.binary,
        diff: args.diff,
        source_dirs: args.source_dirs,
    };
    let list = args.transforms.list()?;
    let session = std::sync::Arc::new(load(&args.files, options)?);
    // Applied once now: a pattern that cannot apply fails before serving.
    if !list.is_empty() {
        tally_web::with_transforms(&session, &list).map_err(wrap)?;
    }
    // The first view is analysed while the browser opens the page: its
    // first requests wait for that analysis instead of starting another.
    let first = session.clone();
    std::thread::spawn(move || {
        if let Err(e) = first.view(first.main(), None, None) {
            eprintln!("tally: {e}");
        }
    });
    let bound = tally_web::bind(args.port).map_err(wrap)?;
    let mut url = bound.url();
    if !list.is_empty() {
        url = format!("{url}#{}", tally_web::fragment(&list));
    }
    println!(
        "tally: serving {} at {url}",
        session.inputs[session.main()].name
    );
    use std::io::Write;
    std::io::stdout().flush()?;
    if args.open
        && let Err(e) = std::process::Command::new("xdg-open").arg(&url).spawn()
    {
        eprintln!("tally: cannot open a browser ({e}); open {url}");
    }
    bound.serve(session).map_err(wrap)?;
    Ok(Outcome::Ok)
}

/// Runs `tally report --html`.
pub fn report(args: ReportArgs) -> Result<Outcome> {
    if !(0.0..=100.0).contains(&args.threshold) {
        crate::usage_bail!(
            "--threshold: {} is not a percentage from 0 to 100",
            args.threshold
        );
    }
    let options = LoadOptions {
        binary: args.binary,
        diff: args.diff,
        source_dirs: args.source_dirs,
    };
    let list = args.transforms.list()?;
    let mut session = std::sync::Arc::new(load(&args.files, options)?);
    if !list.is_empty() {
        session = tally_web::with_transforms(&session, &list).map_err(wrap)?;
    }
    let opts = ReportOptions {
        threshold: args.threshold / 100.0,
        transforms: list
            .iter()
            .map(|t| (t.kind().key().to_owned(), t.pattern().to_owned()))
            .collect(),
    };
    let written = tally_web::write_report(&session, &opts, &args.html).map_err(wrap)?;
    let n = written.sources_left_out.len();
    if n > 0 {
        let dirs: Vec<String> = session
            .sources
            .dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        eprintln!(
            "tally: {n} source file{} left out of the report, outside the source directories ({}): name a directory to allow with --source-dir DIR",
            if n == 1 { "" } else { "s" },
            dirs.join(", ")
        );
    }
    Ok(Outcome::Ok)
}
