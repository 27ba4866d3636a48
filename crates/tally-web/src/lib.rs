//! tally's web UI: `tally serve` (a local server of a JSON API and one
//! embedded page) and `tally report --html` (the same page in one file,
//! its data embedded).
//!
//! - [`Session`]: the inputs, read once before the server starts
//!   ([`Session::load`]), and the analyses made from them once per event
//!   and part.
//! - [`View`]: one analysis (gprof's report, the one `tally gprof` prints)
//!   and the functions [`Table`] drawn from it.
//! - [`handle`]: the JSON API, one function from a request to a
//!   [`Reply`], used by the server and, ahead of time, by the report.
//! - [`bind`]: the server, loopback only, a secret token in the URL, the
//!   Host header checked (DNS rebinding), nothing outside the API.
//! - [`write_report`]: the self-contained HTML file.
//!
//! The page (`assets/`) is plain JavaScript and CSS, inlined into the one
//! HTML document served, so nothing is fetched from anywhere else.
#![deny(missing_docs)]

mod api;
mod compare;
mod explore;
mod report;
mod server;
mod session;
mod timeline;
mod view;

#[cfg(test)]
mod tests;

pub use api::{Query, Reply, handle};
pub use explore::{fragment, with_transforms};
pub use report::{ReportOptions, Written, write as write_report};
pub use server::{Bound, bind};
pub use session::{Annotation, AnnotationKey, Input, LoadOptions, Session, WholeStacks};
pub use view::{Base, Grouping, Provisional, Row, Table, View};

/// What can go wrong reading inputs or answering a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A reader's error (names the file and line).
    #[error(transparent)]
    Formats(#[from] tally_formats::Error),
    /// A report's error.
    #[error(transparent)]
    Report(#[from] tally_report::ReportError),
    /// An input that could not be loaded (names the file).
    #[error(transparent)]
    Load(tally_input::Error),
    /// An input that cannot be shown.
    #[error("{0}")]
    Input(String),
    /// The command was called wrongly.
    #[error("{0}")]
    Usage(String),
    /// A request for something that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A malformed request.
    #[error("{0}")]
    BadRequest(String),
    /// The server could not listen or run.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A thread panicked while holding the views.
    #[error("internal error: the analyses' cache is unusable")]
    Poisoned,
}

impl From<tally_input::Error> for Error {
    /// A usage error stays one (exit status 2); a reader's error stays the
    /// reader's, so that it is printed as `FILE:LINE: …`.
    fn from(e: tally_input::Error) -> Error {
        match e {
            tally_input::Error::Usage(m) => Error::Usage(m),
            tally_input::Error::Input(m) => Error::Input(m),
            tally_input::Error::Formats(f) => Error::Formats(f),
            tally_input::Error::Report(r) => Error::Report(r),
            e => Error::Load(e),
        }
    }
}

/// An analysis's error (`tally_analysis::gprof`) is a report error: same
/// variant, same message.
impl From<tally_analysis::Error> for Error {
    fn from(e: tally_analysis::Error) -> Error {
        Error::Report(e.into())
    }
}

/// The page: HTML with its CSS and script inlined, and `data` (JSON, or
/// `null` for a server) as the report's embedded replies.
pub fn page(title: &str, data: &str) -> String {
    const HTML: &str = include_str!("../assets/index.html");
    const CSS: &str = include_str!("../assets/app.css");
    const JS: &str = include_str!("../assets/app.js");
    const TIMELINE_JS: &str = include_str!("../assets/timeline.js");
    const EXPLORE_JS: &str = include_str!("../assets/explore.js");
    const COMPARE_JS: &str = include_str!("../assets/compare.js");
    // `</` cannot end the script early once escaped; JSON allows `<\/`.
    let data = data.replace("</", "<\\/");
    HTML.replace("{{TITLE}}", &html_escape(title))
        .replace("/*{{CSS}}*/", CSS)
        .replace("/*{{DATA}}*/null", &data)
        .replace("/*{{TIMELINE_JS}}*/", TIMELINE_JS)
        .replace("/*{{EXPLORE_JS}}*/", EXPLORE_JS)
        .replace("/*{{COMPARE_JS}}*/", COMPARE_JS)
        .replace("/*{{JS}}*/", JS)
}

/// Text escaped for HTML.
pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
