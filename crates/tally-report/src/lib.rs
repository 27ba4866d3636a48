//! Reports: the analyses a report needs, laid out as text or JSON.
//! Reports read the model and the analyses; they never parse profiles,
//! and compute no more than their layout needs (gprof's analysis and the
//! conversions between profile kinds are `tally-analysis`'s).
//!
//! - `annotate`: function tables, inclusive costs with cycles, call trees,
//!   source, assembly and jumps (`tally annotate`).
//! - `calltree`: top-down and inverted call trees (`annotate --call-tree`).
//! - `gprof`: GNU gprof's flat profile and call graph, from gmon data or a
//!   Callgrind profile (`tally gprof`), as `tally_analysis::gprof` made it.
//! - `dcpi`: the DCPI tools' reports (`tally dcpi`).
//! - `diff`: the JSON summary of `tally diff`.
//! - `flame`: flame graphs as interactive SVGs (`tally flame`).
//! - `graph`: the call graph as DOT or SVG (`tally graph`).
//! - `gate`: the verdict of `tally gate` as text, JSON, JUnit XML and Markdown.
//!
//! The text writers share their number formatting: [`thousands`] and the
//! colours of [`Style`].
#![deny(missing_docs)]

pub mod annotate;
pub mod calltree;
pub mod check;
pub mod dcpi;
pub mod diff;
pub mod flame;
mod format;
pub mod gate;
pub mod gprof;
pub mod graph;

pub use format::{Style, thousands};

impl From<tally_model::UnknownEvent> for ReportError {
    fn from(e: tally_model::UnknownEvent) -> Self {
        ReportError::Analysis(e.into())
    }
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The analysis failed: an event or part the profile lacks, input it
    /// cannot use.
    #[error(transparent)]
    Analysis(#[from] tally_analysis::Error),
    /// Input that cannot be analysed (a program without symbols, …).
    #[error("{0}")]
    Input(String),
    /// `graph`: the pattern names no function of the profile.
    #[error("{option} `{pattern}`: no function of the profile is called that")]
    NoSuchFunction {
        /// The option (`--root`, `--leaf`, `--focus`).
        option: &'static str,
        /// The pattern given.
        pattern: String,
    },
    /// `graph`: the pattern names functions, but the thresholds left them out.
    #[error(
        "{option} `{pattern}`: the functions called that are below the thresholds (try --node-thres 0 --edge-thres 0)"
    )]
    Pruned {
        /// The option.
        option: &'static str,
        /// The pattern given.
        pattern: String,
    },
    /// `graph`: Graphviz's `dot` is not installed.
    #[error(
        "Graphviz's `dot` is needed for SVG output and was not found (install the `graphviz` package, e.g. `apt-get install graphviz`), or write DOT with `-o FILE.dot`"
    )]
    NoDot,
    /// `dot` could not be run or talked to.
    #[error("running Graphviz's `dot`: {0}")]
    DotIo(std::io::Error),
    /// `dot` failed.
    #[error("Graphviz's `dot` failed ({status}): {stderr}")]
    DotFailed {
        /// Its exit status.
        status: String,
        /// What it printed.
        stderr: String,
    },
    /// `dot` ran past its bounds, with its usual settings and with fewer
    /// layout iterations.
    #[error(
        "Graphviz's `dot` did not lay the graph out within {seconds} s, even with fewer iterations: raise --node-thres and --edge-thres to show fewer functions, or write DOT with `-o FILE.dot`"
    )]
    DotTimedOut {
        /// The bounds, summed.
        seconds: u64,
    },
    /// Writing the report failed.
    #[error("writing the report: {0}")]
    Io(#[from] std::io::Error),
}
