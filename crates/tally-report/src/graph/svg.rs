//! SVG by Graphviz: the DOT text piped through `dot -Tsvg`. Graphviz's
//! layout is the reference for call graphs (gprof2dot's pictures are
//! made by it), so tally uses it, bounded in time; where `dot` runs past
//! its bounds, tally lays the graph out itself (the `layout` module).

use super::{Graph, Kept, dot, layout};
use crate::ReportError;
use std::ffi::{OsStr, OsString};
use std::time::Duration;
use tally_process::{Ran, run_bounded};

/// An SVG made by `dot`.
#[derive(Debug)]
pub struct Rendered {
    /// The picture.
    pub svg: Vec<u8>,
    /// What `dot` printed on standard error (its warnings).
    pub dot_stderr: String,
    /// What tally did differently, for the user.
    pub notes: Vec<String>,
}

/// Layout settings that bound the work of `dot`'s network simplex and
/// crossing minimisation, which on some graphs (a few hundred nodes of
/// a deep program) run for many minutes: the picture is a little less
/// tidy, and made in seconds.
const FEWER_ITERATIONS: [&str; 3] = ["-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.5"];

/// How long `dot` may run with its usual settings: `TALLY_DOT_TIMEOUT`
/// seconds, 5 by default (at most a day); with fewer iterations it gets
/// twice as long. A value that is no positive number is an error.
fn bound() -> Result<Duration, ReportError> {
    let Ok(v) = std::env::var("TALLY_DOT_TIMEOUT") else {
        return Ok(Duration::from_secs(5));
    };
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s.min(86_400.0))),
        _ => Err(ReportError::Input(format!(
            "TALLY_DOT_TIMEOUT: expected a positive number of seconds, got `{v}`"
        ))),
    }
}

/// The SVG of a DOT text. `dot` (or `TALLY_DOT`) runs bounded in time, in
/// its own process group, and dies with tally; past its bound it is killed
/// and run again with fewer layout iterations, and past that bound too the
/// answer is [`ReportError::DotTimedOut`].
pub fn render(dot_text: &[u8]) -> Result<Rendered, ReportError> {
    let program = std::env::var_os("TALLY_DOT").unwrap_or_else(|| "dot".into());
    let first = bound()?;
    let mut notes = Vec::new();
    let mut out = run(&program, &[], dot_text, first)?;
    if out.is_none() {
        notes.push(format!(
            "Graphviz's `dot` ran past {} s; laid out again with fewer iterations ({})",
            first.as_secs_f64(),
            FEWER_ITERATIONS.join(" ")
        ));
        out = run(&program, &FEWER_ITERATIONS, dot_text, first * 2)?;
    }
    let Some(o) = out else {
        return Err(ReportError::DotTimedOut {
            seconds: (first * 3).as_secs_f64().ceil() as u64,
        });
    };
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    if !o.status.success() {
        return Err(ReportError::DotFailed {
            status: o.status.to_string(),
            stderr: stderr.trim().to_owned(),
        });
    }
    Ok(Rendered {
        svg: o.stdout,
        dot_stderr: stderr,
        notes,
    })
}

/// The SVG of the kept part of `g`: by `dot` as [`render`] makes it, or,
/// when `dot` runs past its bounds, laid out by tally, with a note.
pub fn render_graph(g: &Graph, kept: &Kept) -> Result<Rendered, ReportError> {
    let mut text = Vec::new();
    dot::write(g, kept, &mut text).map_err(|e| ReportError::Input(e.to_string()))?;
    match render(&text) {
        Err(ReportError::DotTimedOut { .. }) => {
            let first = bound()?.as_secs_f64();
            let title = format!("{} — {}", g.title, dot::unit_name(&g.unit));
            Ok(Rendered {
                svg: layout::svg(g, kept, &title),
                dot_stderr: String::new(),
                notes: vec![format!(
                    "Graphviz's `dot` ran past {first} s, and laid out again with fewer \
                     iterations past {} s too: laid out by tally instead (plainer; \
                     `-o FILE.dot` writes the graph for dot)",
                    first * 2.0
                )],
            })
        }
        r => r,
    }
}

/// One bounded run of `dot -Tsvg`; `None` past the bound.
fn run(
    program: &OsString,
    extra: &[&str],
    dot_text: &[u8],
    bound: Duration,
) -> Result<Option<tally_process::Output>, ReportError> {
    let mut args: Vec<&OsStr> = vec![OsStr::new("-Tsvg")];
    args.extend(extra.iter().map(OsStr::new));
    match run_bounded(program, &args, dot_text.to_vec(), bound) {
        Ok(Ran::Done(o)) => Ok(Some(o)),
        Ok(Ran::TimedOut) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ReportError::NoDot),
        Err(e) => Err(ReportError::DotIo(e)),
    }
}
