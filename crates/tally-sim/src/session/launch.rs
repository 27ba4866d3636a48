//! Finding QEMU and the plugin, and starting the program under them
//! (with tally-process's launcher).
//!
//! QEMU's user-mode emulator for the program's ELF machine runs it with
//! tally's plugin, given three descriptors: 3, the stream (a pipe, made
//! large so that QEMU and tally run side by side with few wake-ups); 4,
//! the buffer file ([`super::pool`]); 5, the pipe of free slots; 6, the
//! pipe of notes (a byte for each fork and execve of the program); with
//! `--trace-children=yes`, 7, the control socket
//! ([`crate::trace::control`]) on which every traced process announces
//! itself. The plugin moves them above 1000 and closes them on exec at
//! once, so the guest finds its descriptors as usual; without the control
//! socket a process the guest forks stops recording.

use crate::{Error, HierarchyConfig};
use std::io::Read;
use std::path::{Path, PathBuf};
use tally_process::Child;

/// The plugin's file name, looked for next to the tally binary.
const PLUGIN_NAME: &str = "libtally_qemu_plugin.so";

/// Where the plugin finds the stream, the buffer file and the free-slot
/// pipe in QEMU's process.
const STREAM_FD: i32 = 3;
const BUFFERS_FD: i32 = 4;
const FREE_FD: i32 = 5;
const NOTES_FD: i32 = 6;
const CTL_FD: i32 = 7;

/// The QEMU user-mode emulator for the ELF program `prog`, and whether it
/// is x86-64 (whose instructions tally classifies for branches and calls).
pub fn emulator_for(prog: &Path) -> Result<(&'static str, bool), Error> {
    let mut head = [0u8; 20];
    std::fs::File::open(prog)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|source| Error::ReadProgram {
            path: prog.to_path_buf(),
            source,
        })?;
    if &head[..4] != b"\x7fELF" {
        return Err(Error::NotElf {
            path: prog.to_path_buf(),
        });
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    Ok(match machine {
        62 => ("qemu-x86_64", true),
        3 => ("qemu-i386", false),
        183 => ("qemu-aarch64", false),
        40 => ("qemu-arm", false),
        243 => ("qemu-riscv64", false),
        machine => {
            return Err(Error::UnknownMachine {
                path: prog.to_path_buf(),
                machine,
            });
        }
    })
}

/// Finds `name` on PATH (or as given, if it has a slash).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The places the plugin is looked for when none is given, in order,
/// each with where it comes from: `$TALLY_QEMU_PLUGIN`, next to the
/// running tally (where a build puts it), then tally's directory under
/// the user's data directory ([`plugin_data_dir`], where
/// `tally sim --install-plugin` puts it). A place that cannot be known
/// (a variable not set) has no path.
pub fn plugin_places() -> Vec<(&'static str, Option<PathBuf>)> {
    vec![
        (
            "$TALLY_QEMU_PLUGIN",
            std::env::var_os("TALLY_QEMU_PLUGIN")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        ),
        (
            "next to tally",
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|d| d.join(PLUGIN_NAME))),
        ),
        (
            "the data directory",
            plugin_data_dir().map(|d| d.join(PLUGIN_NAME)),
        ),
    ]
}

/// tally's directory under the user's data directory:
/// `$XDG_DATA_HOME/tally`, or `$HOME/.local/share/tally` when that is not
/// set (the XDG base directory rule: a relative `XDG_DATA_HOME` counts as
/// not set).
pub fn plugin_data_dir() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_DATA_HOME")
        .and_then(abs)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(abs)
                .map(|h| h.join(".local/share"))
        })
        .map(|d| d.join("tally"))
}

/// The plugin: `explicit` if given (it must exist), else the first of
/// [`plugin_places`] that is a file.
pub fn find_plugin(explicit: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(p) = explicit {
        if !p.is_file() {
            return Err(Error::NoPluginFile {
                path: p.to_path_buf(),
            });
        }
        return Ok(p.to_path_buf());
    }
    let places = plugin_places();
    if let Some(p) = places
        .iter()
        .filter_map(|(_, p)| p.as_ref())
        .find(|p| p.is_file())
    {
        return Ok(p.clone());
    }
    let looked = places
        .iter()
        .map(|(what, p)| match p {
            Some(p) => format!("  {} ({what}): not found", p.display()),
            None => format!("  {what}: not set"),
        })
        .collect::<Vec<_>>()
        .join("\n");
    Err(Error::NoPlugin { looked })
}

/// Copies the plugin built at `from` to where tally looks for it
/// ([`plugin_data_dir`]), the directory made if need be; returns where
/// it went. Written beside and renamed, so a QEMU loading the old one
/// never reads half a file.
pub fn install_plugin(from: &Path) -> Result<PathBuf, Error> {
    let fail = |source| Error::Install {
        path: from.to_path_buf(),
        source,
    };
    let bytes = std::fs::read(from).map_err(fail)?;
    if !bytes.starts_with(b"\x7fELF") {
        return Err(Error::NotAPlugin {
            path: from.to_path_buf(),
        });
    }
    let dir = plugin_data_dir().ok_or(Error::NoDataDir)?;
    let to = dir.join(PLUGIN_NAME);
    let fail_to = |source| Error::Install {
        path: to.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(fail_to)?;
    let tmp = dir.join(format!(".{PLUGIN_NAME}.{}", std::process::id()));
    std::fs::write(&tmp, &bytes)
        .and_then(|()| std::fs::rename(&tmp, &to))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail_to(e)
        })?;
    Ok(to)
}

/// The plugin's `d1=` arguments for a machine; with `count`, hits are
/// counted in the buffer file, not written (their costs are added at the
/// end, so not with calls tracked, whose inclusive costs need them as
/// they come).
pub fn plugin_d1_arg(c: &HierarchyConfig, count: bool) -> String {
    let d = c.d1;
    format!(
        "d1={}:{}:{},d1policy={}{}",
        d.size,
        d.assoc,
        d.line_size,
        c.policy.name(),
        if count { ",hits=on" } else { "" }
    )
}

/// The descriptors QEMU's process inherits, in tally's process.
pub struct Descriptors {
    /// The stream's writing end.
    pub stream: i32,
    /// The buffer file.
    pub buffers: i32,
    /// The free-slot pipe's reading end.
    pub free: i32,
    /// The notes pipe's writing end.
    pub notes: i32,
    /// The plugin's end of the control socket, to follow children.
    pub ctl: Option<i32>,
}

/// Starts `qemu` running `prog args` with the plugin and its arguments
/// `plugin_args` (after the descriptors'), the descriptors in place
/// (through tally-process's launcher, which `tally record` uses too).
pub fn spawn(
    qemu: &Path,
    plugin: &Path,
    plugin_args: &str,
    prog: &Path,
    args: &[String],
    fds: Descriptors,
) -> Result<Child, Error> {
    let mut c = tally_process::Command::new(qemu);
    // QEMU and the program end with tally, however tally ends.
    c.death_signal(libc::SIGKILL);
    let children = if fds.ctl.is_some() {
        format!(",ctl={CTL_FD},children=on")
    } else {
        String::new()
    };
    c.arg("-plugin")
        .arg(format!(
            "{},fd={STREAM_FD},shm={BUFFERS_FD},free={FREE_FD},notes={NOTES_FD}{children}{plugin_args}",
            plugin.display()
        ))
        .arg(prog)
        .args(args);
    let Descriptors {
        stream,
        buffers,
        free,
        notes,
        ctl,
    } = fds;
    c.fd(stream, STREAM_FD)
        .fd(buffers, BUFFERS_FD)
        .fd(free, FREE_FD)
        .fd(notes, NOTES_FD);
    if let Some(ctl) = ctl {
        c.fd(ctl, CTL_FD);
    }
    c.spawn().map_err(|source| Error::Spawn {
        qemu: qemu.to_path_buf(),
        source,
    })
}

/// Makes the pipe behind `fd` larger, so that QEMU and tally run side by
/// side with fewer wake-ups; the system may refuse (its limit), which
/// only costs time.
pub fn widen_pipe(fd: i32) {
    // SAFETY: fcntl on a descriptor the caller owns; the result is only
    // advisory.
    unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, 1 << 20) };
}
