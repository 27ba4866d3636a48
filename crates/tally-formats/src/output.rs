//! The one way out: a profile written in the format and compression the
//! options and the output's name ask for ([`write_profile`]), without
//! losing what was there: a temporary file in the target folder, renamed
//! over the target only when complete ([`write_file`]).

use crate::callgrind::{self, WriteOptions};
use crate::error::Error;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use tally_model::{Cost, Format, Profile};

/// The formats a profile can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutputFormat {
    /// Callgrind (calls and jumps kept).
    Callgrind,
    /// Cachegrind (self costs per file, function and line).
    Cachegrind,
    /// tally's JSON (docs/json.md).
    Json,
    /// DCPI 0.07: made from a profile by `tally_report::dcpi::convert` and
    /// written by [`crate::dcpi::write_file`], not by [`write_profile`].
    Dcpi,
}

impl OutputFormat {
    /// The format an output's name implies: `*.json`, `*.dcpi`,
    /// `cachegrind.out*` or `*.cachegrind`, `callgrind.out*` or
    /// `*.callgrind`, with or without `.gz`.
    pub fn from_name(path: &Path) -> Option<OutputFormat> {
        let name = path.file_name()?.to_string_lossy();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".json") {
            Some(OutputFormat::Json)
        } else if name.ends_with(".dcpi") {
            Some(OutputFormat::Dcpi)
        } else if name.starts_with("cachegrind.out") || name.ends_with(".cachegrind") {
            Some(OutputFormat::Cachegrind)
        } else if name.starts_with("callgrind.out") || name.ends_with(".callgrind") {
            Some(OutputFormat::Callgrind)
        } else {
            None
        }
    }
}

impl OutputFormat {
    /// The format's name on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Callgrind => "callgrind",
            OutputFormat::Cachegrind => "cachegrind",
            OutputFormat::Json => "json",
            OutputFormat::Dcpi => "dcpi",
        }
    }
}

impl std::str::FromStr for OutputFormat {
    type Err = String;

    /// The format [`OutputFormat::name`] names (case-insensitive).
    fn from_str(s: &str) -> Result<Self, String> {
        [
            OutputFormat::Callgrind,
            OutputFormat::Cachegrind,
            OutputFormat::Json,
            OutputFormat::Dcpi,
        ]
        .into_iter()
        .find(|f| f.name().eq_ignore_ascii_case(s))
        .ok_or_else(|| format!("unknown output format `{s}`"))
    }
}

impl From<Format> for OutputFormat {
    fn from(f: Format) -> Self {
        match f {
            Format::Callgrind => OutputFormat::Callgrind,
            Format::Cachegrind => OutputFormat::Cachegrind,
        }
    }
}

/// How [`write_profile`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputOptions {
    /// The format; `None` writes the profile's own (Callgrind or
    /// Cachegrind).
    pub format: Option<OutputFormat>,
    /// Callgrind output: name compression and relative positions (as
    /// Valgrind writes); `false` writes plain names and absolute positions.
    pub compress_names: bool,
    /// gzip the output; `None` compresses when the name ends in `.gz`.
    pub gzip: Option<bool>,
}

impl Default for OutputOptions {
    fn default() -> Self {
        OutputOptions {
            format: None,
            compress_names: true,
            gzip: None,
        }
    }
}

/// Writes a profile to `path` (`-` for standard output) as `options` say,
/// through [`write_file`]: a failed write leaves the old file.
pub fn write_profile<C: Cost>(
    profile: &Profile<C>,
    path: &Path,
    options: &OutputOptions,
) -> Result<(), Error> {
    let format = options
        .format
        .unwrap_or_else(|| OutputFormat::from(profile.format));
    if format == OutputFormat::Dcpi {
        return Err(Error::Incompatible(format!(
            "{}: DCPI output is made with tally_report::dcpi::convert and written on its own",
            path.display()
        )));
    }
    let gzip = options
        .gzip
        .unwrap_or_else(|| path.extension().is_some_and(|e| e == "gz"));
    let callgrind_options = WriteOptions {
        compress: options.compress_names,
    };
    let emit = |w: &mut dyn Write| match format {
        OutputFormat::Callgrind => callgrind::write(profile, w, callgrind_options),
        OutputFormat::Cachegrind => crate::cachegrind::write(profile, w),
        OutputFormat::Json => crate::json::write(profile, w),
        OutputFormat::Dcpi => Err(io::Error::other("DCPI output is written on its own")),
    };
    write_file(path, |w| {
        if gzip {
            let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            emit(&mut gz)?;
            gz.finish()?.flush()
        } else {
            emit(w)
        }
    })
}

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
