//! Writing output files without losing what was there: a temporary file in
//! the target folder, renamed over the target only when complete.

use crate::error::Error;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Writes to `path` (or standard output for `-`) through `f`.
pub fn write_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), Error> {
    if path.as_os_str() == "-" {
        let stdout = io::stdout();
        let mut w = BufWriter::with_capacity(1 << 16, stdout.lock());
        return f(&mut w)
            .and_then(|_| w.flush())
            .map_err(|e| Error::io(Path::new("<stdout>"), e));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".tally-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io(path, e))?;
    {
        let mut w = BufWriter::with_capacity(1 << 16, tmp.as_file());
        f(&mut w)
            .and_then(|_| w.flush())
            .map_err(|e| Error::io(path, e))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644));
    }
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}
