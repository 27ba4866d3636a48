//! How an error reaches the user: its message (a reader's error as
//! `FILE:LINE: …`, others with their causes), whether it is a usage error
//! (exit status 2), and a closed standard output, which ends quietly.

use std::io;

/// A command called wrongly (a missing argument, options that do not fit
/// together, a malformed option value): exit status 2, as for the errors
/// clap finds, where errors in the input exit with 1.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A [`Usage`] error, formatted as `format!` does.
#[macro_export]
macro_rules! usage {
    ($($t:tt)*) => { anyhow::Error::new($crate::Usage(format!($($t)*))) };
}

/// Returns a [`Usage`] error from the enclosing function.
#[macro_export]
macro_rules! usage_bail {
    ($($t:tt)*) => { return Err($crate::usage!($($t)*)) };
}

/// Prints an error: parse errors as `FILE:LINE: message`, others with their
/// chain of causes.
pub fn report(e: &anyhow::Error) {
    // A reader's error names its file and line already; with context
    // added, the whole chain is printed.
    let outer = e.chain().next();
    let formats = outer.and_then(|o| match o.downcast_ref::<tally_input::Error>() {
        Some(tally_input::Error::Formats(f)) => Some(f),
        _ => o.downcast_ref::<tally_formats::Error>(),
    });
    if let Some(f) = formats {
        eprintln!("{f}");
    } else {
        eprintln!("tally: {}", chain(e));
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose text
/// is already said (an I/O error that names its cause in its message and
/// carries it as its source too).
fn chain(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for c in e.chain() {
        let s = c.to_string();
        if msg.contains(&s) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&s);
    }
    msg
}

/// Whether an error is a usage error: the command was called wrongly.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.is::<Usage>() || matches!(c.downcast_ref(), Some(tally_input::Error::Usage(_))))
}

/// Whether an error comes from a closed standard output (`tally … | head`):
/// tally then ends quietly with status 0, as ripgrep and other filters do.
/// Rust ignores SIGPIPE in its binaries, so a write to a closed pipe fails
/// with EPIPE (this error) instead of killing the process.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(broken_pipe)
}

/// Whether `e`, or an error it wraps, is an I/O error of kind
/// [`io::ErrorKind::BrokenPipe`]. `source()` does not always lead there:
/// an `io::Error::other(inner)` gives `inner`'s source, never `inner`
/// itself, and serde_json's error hides the I/O error it carries; both
/// are opened here.
fn broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(c) = next {
        if let Some(io) = c.downcast_ref::<io::Error>() {
            if io.kind() == io::ErrorKind::BrokenPipe {
                return true;
            }
            if let Some(inner) = io.get_ref()
                && broken_pipe(inner)
            {
                return true;
            }
        }
        if let Some(j) = c.downcast_ref::<serde_json::Error>()
            && j.io_error_kind() == Some(io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        if let Some(
            tally_formats::Error::Io { source, .. } | tally_formats::Error::Read { source, .. },
        ) = c.downcast_ref::<tally_formats::Error>()
            && source.kind() == io::ErrorKind::BrokenPipe
        {
            return true;
        }
        next = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn pipe() -> io::Error {
        io::Error::from(io::ErrorKind::BrokenPipe)
    }

    #[test]
    fn a_closed_pipe_is_seen_however_it_is_wrapped() {
        assert!(is_broken_pipe(&anyhow::Error::new(pipe())));
        assert!(is_broken_pipe(
            &anyhow::Error::new(pipe()).context("writing the report")
        ));
        // `tally annotate --json`: serde_json's error in io::Error::other,
        // in the report's error.
        let json = io::Error::other(serde_json::Error::io(pipe()));
        let report = tally_report::ReportError::Io(json);
        assert!(is_broken_pipe(&anyhow::Error::new(report)));
        let formats = tally_formats::Error::Io {
            path: "-".into(),
            source: pipe(),
        };
        let input = tally_input::Error::Formats(formats);
        assert!(is_broken_pipe(
            &Err::<(), _>(input).context("converting").unwrap_err()
        ));
    }

    #[test]
    fn other_errors_are_not_a_closed_pipe() {
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(!is_broken_pipe(&anyhow::Error::new(denied)));
        let json = serde_json::from_str::<u32>("x").unwrap_err();
        assert!(!is_broken_pipe(&anyhow::Error::new(io::Error::other(json))));
        assert!(!is_broken_pipe(&anyhow::anyhow!("Broken pipe")));
        assert!(!is_broken_pipe(&anyhow::Error::new(Usage("x".into()))));
    }
}
