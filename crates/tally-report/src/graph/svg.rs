//! SVG by Graphviz: the DOT text piped through `dot -Tsvg`. Graphviz's
//! layout is the reference for call graphs (gprof2dot's pictures are
//! made by it), so tally does not lay graphs out itself.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

/// Why `dot` could not make the SVG.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SvgError {
    /// `dot` is not installed.
    #[error(
        "Graphviz's `dot` is needed for SVG output and was not found (install the `graphviz` package, e.g. `apt-get install graphviz`), or write DOT with `-o FILE.dot`"
    )]
    NoDot,
    /// `dot` could not be run or talked to.
    #[error("running Graphviz's `dot`: {0}")]
    Io(#[from] std::io::Error),
    /// `dot` failed.
    #[error("Graphviz's `dot` failed ({status}): {stderr}")]
    Failed {
        /// Its exit status.
        status: String,
        /// What it printed.
        stderr: String,
    },
}

/// The SVG of a DOT text, and what `dot` said on standard error (its
/// warnings).
pub fn render(dot_text: &[u8]) -> Result<(Vec<u8>, String), SvgError> {
    let program = std::env::var_os("TALLY_DOT").unwrap_or_else(|| "dot".into());
    let mut child = match Command::new(&program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(SvgError::NoDot),
        Err(e) => return Err(SvgError::Io(e)),
    };
    // Feed standard input from a thread so that a large graph cannot
    // deadlock against dot's output.
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no stdin"))?;
    let input = dot_text.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let mut stderr = child
        .stderr
        .take()
        .ok_or_else(|| std::io::Error::other("no stderr"))?;
    let errs = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let mut svg = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_end(&mut svg)?;
    }
    let status = child.wait()?;
    let fed = feeder
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("writer panicked")));
    let stderr = String::from_utf8_lossy(&errs.join().unwrap_or_default()).into_owned();
    if !status.success() {
        return Err(SvgError::Failed {
            status: status.to_string(),
            stderr: stderr.trim().to_owned(),
        });
    }
    fed?;
    Ok((svg, stderr))
}
