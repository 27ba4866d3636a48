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
    // Devices, pipes and the like (`/dev/null`, `/dev/stdout`, a FIFO) are
    // written in place: renaming over them would replace them.
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
    {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let mut w = BufWriter::with_capacity(1 << 16, file);
        return f(&mut w)
            .and_then(|_| w.flush())
            .map_err(|e| Error::io(path, e));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_regular_files_whole_and_keeps_them_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        std::fs::write(&p, b"old").unwrap();
        let r = write_file(&p, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        write_file(&p, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "temporary files are cleaned up");
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_written_in_place() {
        use std::os::unix::fs::FileTypeExt;
        write_file(Path::new("/dev/null"), |w| w.write_all(b"x")).unwrap();
        let meta = std::fs::metadata("/dev/null").unwrap();
        assert!(meta.file_type().is_char_device());
    }
}
