//! The crate's one error type.

/// Why inputs could not be loaded. Every variant names the file it
/// concerns (a reader's error its line or byte offset too).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A reader's or writer's error, as the format library gives it.
    #[error(transparent)]
    Formats(#[from] tally_formats::Error),
    /// A conversion or analysis that failed on the input.
    #[error(transparent)]
    Report(#[from] tally_report::ReportError),
    /// An analysis failed: summing or subtracting profiles, or a
    /// conversion that needs the program's symbols.
    #[error(transparent)]
    Analysis(#[from] tally_analysis::Error),
    /// Inputs given wrongly (a gmon file without its program, `-` twice):
    /// a usage error, exit status 2 in the CLI.
    #[error("{0}")]
    Usage(String),
    /// Input that cannot be used as asked (already names its file).
    #[error("{0}")]
    Input(String),
    /// Writing an output failed.
    #[error("{}: cannot write", path.display())]
    Write {
        /// The output.
        path: std::path::PathBuf,
        /// The cause; kept as the source, so that a closed pipe is seen.
        #[source]
        source: std::io::Error,
    },
}
