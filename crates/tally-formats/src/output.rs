//! The one way out: a profile written in the format and compression the
//! options and the output's name ask for ([`write_profile`]), without
//! losing what was there: a temporary file in the target folder, synced
//! and renamed over the target only when complete, with the target's mode
//! ([`write_file`]). The temporary files of writes in progress are
//! registered, so that a signal can remove them ([`abandon_writes`]).

use crate::error::Error;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
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
    /// pprof's profile.proto, gzip'd unless `gzip` is `Some(false)`
    /// ([`crate::pprof`]).
    Pprof,
    /// speedscope's JSON file format ([`crate::speedscope`]).
    Speedscope,
    /// Folded stacks of one event ([`crate::folded`]); the profile must
    /// hold stacks ([`tally_model::Profile::stacks`]).
    Folded,
    /// Firefox Profiler's processed format, one event's weights
    /// ([`crate::firefox`]).
    Firefox,
}

impl OutputFormat {
    /// The format an output's name implies: `*.speedscope.json`,
    /// `*.firefox.json`, `*.json`,
    /// `*.dcpi`, `*.pb` or `*.pprof`, `*.folded`, `cachegrind.out*` or
    /// `*.cachegrind`, `callgrind.out*` or `*.callgrind`, with or without
    /// `.gz`.
    pub fn from_name(path: &Path) -> Option<OutputFormat> {
        let name = path.file_name()?.to_string_lossy();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".speedscope.json") {
            Some(OutputFormat::Speedscope)
        } else if name.ends_with(".firefox.json") {
            Some(OutputFormat::Firefox)
        } else if name.ends_with(".pb") || name.ends_with(".pprof") {
            Some(OutputFormat::Pprof)
        } else if name.ends_with(".json") {
            Some(OutputFormat::Json)
        } else if name.ends_with(".dcpi") {
            Some(OutputFormat::Dcpi)
        } else if name.ends_with(".folded") {
            Some(OutputFormat::Folded)
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
            OutputFormat::Pprof => "pprof",
            OutputFormat::Speedscope => "speedscope",
            OutputFormat::Folded => "folded",
            OutputFormat::Firefox => "firefox",
        }
    }
}

impl OutputFormat {
    /// Whether the format holds whole stacks (pprof, speedscope, folded,
    /// Firefox), which a profile of call arcs has estimated first.
    pub fn holds_stacks(self) -> bool {
        matches!(
            self,
            OutputFormat::Pprof
                | OutputFormat::Speedscope
                | OutputFormat::Folded
                | OutputFormat::Firefox
        )
    }

    /// Whether the format holds one event ([`OutputOptions::event`]).
    pub fn one_event(self) -> bool {
        matches!(self, OutputFormat::Folded | OutputFormat::Firefox)
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
            OutputFormat::Pprof,
            OutputFormat::Speedscope,
            OutputFormat::Folded,
            OutputFormat::Firefox,
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
    /// Folded and Firefox output: the recorded event written (index in the
    /// profile's events); `None` for the first.
    pub event: Option<usize>,
}

impl Default for OutputOptions {
    fn default() -> Self {
        OutputOptions {
            format: None,
            compress_names: true,
            gzip: None,
            event: None,
        }
    }
}

/// Whether a file can be written at `path`, asked before the work that
/// makes it (a recording, a simulation) so that it is not lost at the end:
/// its folder exists and takes new files, and it is not a folder itself.
/// `-` (standard output) always can.
pub fn check_writable(path: &Path) -> Result<(), Error> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let fail = |why: String| Error::Unwritable {
        path: path.to_path_buf(),
        why,
    };
    let dir = match path.parent() {
        Some(d) if d.as_os_str().is_empty() => Path::new("."),
        Some(d) => d,
        None => return Err(fail("not a file name".into())),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(fail(format!("{} is not a directory", dir.display()))),
        Err(e) => return Err(fail(format!("directory {}: {e}", dir.display()))),
    }
    if path.is_dir() {
        return Err(fail("it is a directory".into()));
    }
    // A probe, as permissions alone do not say (read-only mounts, ACLs).
    let probe = dir.join(format!(".tally-check.{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(fail(format!(
            "cannot create files in {}: {e}",
            dir.display()
        ))),
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
            "{}: DCPI output is made with tally_analysis::convert::dcpi::from_callgrind and written by tally_formats::dcpi::write_file",
            path.display()
        )));
    }
    if format == OutputFormat::Folded && profile.stacks.is_none() {
        return Err(Error::Incompatible(format!(
            "{}: folded output needs whole stacks, and the profile holds only caller-callee arcs",
            path.display()
        )));
    }
    let event = options.event.unwrap_or(0);
    // pprof files are gzip'd whatever their name, as Go writes them.
    let gzip = options.gzip.unwrap_or_else(|| {
        format == OutputFormat::Pprof || path.extension().is_some_and(|e| e == "gz")
    });
    let title = path
        .file_name()
        .map_or_else(|| "profile".into(), |n| n.to_string_lossy());
    let writer = format.writer::<C>(&title, event, options.compress_names);
    let emit = |w: &mut dyn Write| writer.write(profile, w);
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

/// Writes to `path` (or standard output for `-`) through `f`, durably and
/// whole: a temporary file in the target's folder (`.tally-*.tmp`, with
/// the existing file's mode and owner, or the umask's mode for a new one),
/// synced, renamed over the target, and the folder synced, so that a crash
/// at any point leaves either the old file or the new one. A symlink is
/// followed and its target written; devices and pipes are written in place.
/// Until the rename, a signal stopping tally removes the temporary file
/// (see [`crate::signals`]).
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
    write_file_send(path, |w| f(w))
}

/// [`write_file`] for writers that must be `Send` (Parquet's): the same
/// temporary file and rename, and no standard output (`-` is a file
/// named `-`).
pub fn write_file_send(
    path: &Path,
    f: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()>,
) -> Result<(), Error> {
    let target = follow_links(path).map_err(|e| Error::io(path, e))?;
    let existing = std::fs::metadata(&target).ok();
    // Devices, pipes and the like (`/dev/null`, `/dev/stdout`, a FIFO) are
    // written in place: renaming over them would replace them.
    if let Some(meta) = &existing
        && !meta.is_file()
    {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&target)
            .map_err(|e| Error::io(path, e))?;
        let mut w = BufWriter::with_capacity(1 << 16, file);
        return f(&mut w)
            .and_then(|_| w.flush())
            .map_err(|e| Error::io(path, e));
    }
    let tmp =
        Temporary::create(path, &target, existing.as_ref()).map_err(|e| Error::io(path, e))?;
    write_syncing(&tmp.file, f).map_err(|e| Error::io(path, e))?;
    tmp.commit().map_err(|e| Error::io(path, e))
}

/// Bytes written between two syncs of a large output.
const SYNC_EVERY: u64 = 32 << 20;

/// Writes through `f` to `file`; past every [`SYNC_EVERY`] bytes a
/// helper thread (started at the first) syncs what is written so far, so
/// that the disk writes while the output is made and the final sync has
/// only the last part left, instead of all of it at the end.
fn write_syncing(
    file: &File,
    f: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()>,
) -> io::Result<()> {
    std::thread::scope(|scope| {
        let syncing = Syncing {
            file,
            written: 0,
            scope,
            helper: None,
        };
        let mut w = BufWriter::with_capacity(1 << 16, syncing);
        let written = f(&mut w).and_then(|_| w.flush());
        let syncing = w.into_inner().map_err(|e| e.into_error())?;
        let synced = match syncing.helper {
            Some((requests, helper)) => {
                drop(requests);
                helper
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("the sync thread failed")))
            }
            None => Ok(()),
        };
        written.and(synced)
    })
}

/// A sync request channel and the thread that serves it.
type Helper<'scope> = (
    std::sync::mpsc::SyncSender<()>,
    std::thread::ScopedJoinHandle<'scope, io::Result<()>>,
);

/// The file written by [`write_syncing`], with its helper thread once one
/// is needed.
struct Syncing<'scope, 'env> {
    file: &'env File,
    written: u64,
    scope: &'scope std::thread::Scope<'scope, 'env>,
    helper: Option<Helper<'scope>>,
}

impl Write for Syncing<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = (&*self.file).write(buf)?;
        let before = self.written / SYNC_EVERY;
        self.written += n as u64;
        if self.written / SYNC_EVERY != before {
            let file = self.file;
            let (requests, _) = self.helper.get_or_insert_with(|| {
                let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
                let helper = self.scope.spawn(move || {
                    for () in rx {
                        file.sync_data()?;
                    }
                    Ok(())
                });
                (tx, helper)
            });
            // A sync already asked for and not begun covers these bytes
            // too; a helper that failed reports it when joined.
            let _ = requests.try_send(());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The file a path names once symlinks in its last component are
/// followed (to a target that may not exist yet), so that the target is
/// written and the link stays; at most 40 links, as the kernel allows.
fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// Temporary files being written, with the outputs they are for: what
/// [`abandon_writes`] removes. Creating a temporary (and registering it)
/// and renaming it (and unregistering it) happen under this lock, so that
/// a file is either here or no longer a temporary.
static LIVE: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<(PathBuf, PathBuf)>> {
    // A panic elsewhere while holding the lock leaves the list consistent
    // (each change is one push or one removal).
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes stopped by [`abandon_writes`]; until this is dropped, no output
/// is created or completed.
pub struct Abandoned {
    _held: MutexGuard<'static, Vec<(PathBuf, PathBuf)>>,
    outputs: Vec<PathBuf>,
}

impl Abandoned {
    /// The outputs whose writes were in progress, left as they were.
    pub fn outputs(&self) -> &[PathBuf] {
        &self.outputs
    }
}

/// Removes every temporary file of a write in progress and holds back all
/// writes (new ones and renames) while the result lives: what a process
/// about to exit on a signal calls, so that it leaves each output either
/// complete or as it was, and no temporary file.
pub fn abandon_writes() -> Abandoned {
    abandon(live())
}

/// [`abandon_writes`] for tally ending from inside an allocation
/// (`limits`): the lock may be held by a thread that never lets it go
/// (this one, or one whose memory the system refused), so it is tried
/// for a second at most.
pub(crate) fn try_abandon_writes() -> Option<Abandoned> {
    for _ in 0..100 {
        match LIVE.try_lock() {
            Ok(held) => return Some(abandon(held)),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(abandon(e.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
        }
    }
    None
}

fn abandon(mut held: MutexGuard<'static, Vec<(PathBuf, PathBuf)>>) -> Abandoned {
    let mut outputs = Vec::new();
    for (tmp, output) in held.drain(..) {
        let _ = std::fs::remove_file(&tmp);
        outputs.push(output);
    }
    Abandoned {
        _held: held,
        outputs,
    }
}

/// A temporary file in its target's folder, registered in [`LIVE`] and
/// removed when dropped unless committed.
struct Temporary {
    file: File,
    path: PathBuf,
    target: PathBuf,
}

impl Temporary {
    /// A new temporary file for `target` (`existing`: its metadata;
    /// `output`: the name the user gave, for messages). A
    /// replacement gets the old file's owner and mode before anything is
    /// written (created 0600, so nothing is readable in between); a new
    /// file is created with mode 0666 less the umask, as any file.
    fn create(
        output: &Path,
        target: &Path,
        existing: Option<&std::fs::Metadata>,
    ) -> io::Result<Temporary> {
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".tally-").suffix(".tmp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = if existing.is_some() { 0o600 } else { 0o666 };
            builder.permissions(std::fs::Permissions::from_mode(mode));
        }
        let mut registry = live();
        let (file, path) = builder.tempfile_in(dir)?.keep().map_err(|e| e.error)?;
        registry.push((path.clone(), output.to_path_buf()));
        drop(registry);
        let tmp = Temporary {
            file,
            path,
            target: target.to_path_buf(),
        };
        if let Some(meta) = existing {
            tmp.take_owner_and_mode(meta)?;
        }
        Ok(tmp)
    }

    #[cfg(unix)]
    fn take_owner_and_mode(&self, old: &std::fs::Metadata) -> io::Result<()> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let new = self.file.metadata()?;
        if (new.uid(), new.gid()) != (old.uid(), old.gid()) {
            // Only root may give a file away, and only a member may
            // change its group: where not allowed, the writer owns it.
            let _ = std::os::unix::fs::fchown(&self.file, Some(old.uid()), Some(old.gid()));
        }
        self.file
            .set_permissions(std::fs::Permissions::from_mode(old.mode() & 0o7777))
    }

    #[cfg(not(unix))]
    fn take_owner_and_mode(&self, old: &std::fs::Metadata) -> io::Result<()> {
        self.file.set_permissions(old.permissions())
    }

    /// Syncs the file, renames it over its target and syncs the folder.
    fn commit(self) -> io::Result<()> {
        self.file.sync_all()?;
        {
            let mut registry = live();
            std::fs::rename(&self.path, &self.target)?;
            // No longer a temporary: dropping `self` leaves it.
            registry.retain(|(p, _)| *p != self.path);
        }
        sync_folder(&self.target)
    }
}

impl Drop for Temporary {
    /// Removes the file unless it was renamed (or already removed by
    /// [`abandon_writes`]).
    fn drop(&mut self) {
        let mut registry = live();
        if let Some(i) = registry.iter().position(|(p, _)| *p == self.path) {
            let _ = std::fs::remove_file(&self.path);
            registry.swap_remove(i);
        }
    }
}

/// Syncs the folder holding `file`, so that a rename into it survives a
/// crash. Filesystems that cannot sync a folder say so with `EINVAL`;
/// there the rename is as durable as they make it.
fn sync_folder(file: &Path) -> io::Result<()> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if cfg!(not(unix)) {
        return Ok(());
    }
    match File::open(dir).and_then(|d| d.sync_all()) {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry of temporaries is the process's: tests that write run
    /// one at a time, so that `abandon_writes` sees only its own.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn abandoned_writes_lose_their_temporaries_and_never_complete() {
        let _serial = serial();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.txt");
        std::fs::write(&p, b"old").unwrap();
        let (writing_tx, writing) = std::sync::mpsc::channel();
        let (go_on, go_on_rx) = std::sync::mpsc::channel::<()>();
        let writer = {
            let p = p.clone();
            std::thread::spawn(move || {
                write_file(&p, |w| {
                    w.write_all(b"new")?;
                    writing_tx.send(()).unwrap();
                    go_on_rx.recv().unwrap();
                    Ok(())
                })
            })
        };
        writing.recv().unwrap();
        let names = || -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names().len(), 2, "the output and its temporary");
        let held = abandon_writes();
        assert_eq!(held.outputs(), std::slice::from_ref(&p));
        assert_eq!(names(), ["out.txt"], "the temporary is gone");
        go_on.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!writer.is_finished(), "no rename while writes are held");
        drop(held);
        assert!(writer.join().unwrap().is_err(), "the abandoned write fails");
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(), ["out.txt"]);
    }

    #[test]
    fn replaces_regular_files_whole_and_keeps_them_on_failure() {
        let _serial = serial();
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
        let _serial = serial();
        use std::os::unix::fs::FileTypeExt;
        write_file(Path::new("/dev/null"), |w| w.write_all(b"x")).unwrap();
        let meta = std::fs::metadata("/dev/null").unwrap();
        assert!(meta.file_type().is_char_device());
    }
}
