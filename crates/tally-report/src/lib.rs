//! Reports: the analyses a report needs, laid out as text or JSON.
//! Reports read the model and the analyses; they never parse profiles,
//! and compute no more than their layout needs (gprof's analysis and the
//! conversions between profile kinds are `tally-analysis`'s).
//!
//! - `annotate`: function tables, inclusive costs with cycles, call trees,
//!   source, assembly and jumps (`tally annotate`).
//! - `gprof`: GNU gprof's flat profile and call graph, from gmon data or a
//!   Callgrind profile (`tally gprof`), as `tally_analysis::gprof` made it.
//! - `dcpi`: the DCPI tools' reports (`tally dcpi`).
//! - `diff`: the JSON summary of `tally diff`.
//! - `flame`: flame graphs as interactive SVGs (`tally flame`).
//! - `graph`: the call graph as DOT or SVG (`tally graph`).
//! - `gate`: the verdict of `tally gate` as text, JSON, JUnit XML and Markdown.
//! - `format`: number formatting and styles shared by the text writers.
#![deny(missing_docs)]

pub mod annotate;
pub mod check;
pub mod dcpi;
pub mod diff;
pub mod flame;
pub mod format;
pub mod gate;
pub mod gprof;
pub mod graph;

impl From<tally_analysis::Error> for ReportError {
    fn from(e: tally_analysis::Error) -> Self {
        use tally_analysis::Error as E;
        match e {
            E::UnknownEvent { name, known } => ReportError::UnknownEvent { name, known },
            E::Input(m) => ReportError::Input(m),
            E::NoSuchPart(m) => ReportError::NoSuchPart(m),
            other => ReportError::Input(other.to_string()),
        }
    }
}

impl From<tally_model::UnknownEvent> for ReportError {
    fn from(e: tally_model::UnknownEvent) -> Self {
        ReportError::UnknownEvent {
            name: e.name,
            known: e.known,
        }
    }
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// An event name the profile does not have.
    #[error("unknown event `{name}` (the profile has: {known})")]
    UnknownEvent {
        /// The name given.
        name: String,
        /// The events the profile has.
        known: String,
    },
    /// A part or thread the profile does not have.
    #[error("{0}")]
    NoSuchPart(String),
    /// Input that cannot be analysed (a program without symbols, …).
    #[error("{0}")]
    Input(String),
    /// Writing the report failed.
    #[error("writing the report: {0}")]
    Io(#[from] std::io::Error),
}
