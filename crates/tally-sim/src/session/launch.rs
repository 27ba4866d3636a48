//! Finding QEMU and the plugin, and starting the program under them.
//!
//! QEMU's user-mode emulator for the program's ELF machine runs it with
//! tally's plugin, given three descriptors: 3, the stream (a pipe, made
//! large so that QEMU and tally run side by side with few wake-ups); 4,
//! the buffer file ([`super::pool`]); 5, the pipe of free slots. The
//! plugin moves them above 1000 and closes them on exec at once, so the
//! guest finds its descriptors as usual, and a process the guest forks
//! stops recording.

use super::SessionError;
use crate::HierarchyConfig;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The plugin's file name, looked for next to the tally binary.
const PLUGIN_NAME: &str = "libtally_qemu_plugin.so";

/// Where the plugin finds the stream, the buffer file and the free-slot
/// pipe in QEMU's process.
const STREAM_FD: i32 = 3;
const BUFFERS_FD: i32 = 4;
const FREE_FD: i32 = 5;

/// The QEMU user-mode emulator for the ELF program `prog`, and whether it
/// is x86-64 (whose instructions tally classifies for branches and calls).
pub fn emulator_for(prog: &Path) -> Result<(&'static str, bool), SessionError> {
    let mut head = [0u8; 20];
    std::fs::File::open(prog)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|source| SessionError::ReadProgram {
            path: prog.to_path_buf(),
            source,
        })?;
    if &head[..4] != b"\x7fELF" {
        return Err(SessionError::NotElf {
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
            return Err(SessionError::UnknownMachine {
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

/// The plugin: `explicit` if given (it must exist), else
/// `$TALLY_QEMU_PLUGIN`, else the one next to the running binary.
pub fn find_plugin(explicit: Option<&Path>) -> Result<PathBuf, SessionError> {
    if let Some(p) = explicit
        && !p.is_file()
    {
        return Err(SessionError::NoPluginFile {
            path: p.to_path_buf(),
        });
    }
    explicit
        .map(Path::to_path_buf)
        .into_iter()
        .chain(std::env::var_os("TALLY_QEMU_PLUGIN").map(PathBuf::from))
        .chain(
            std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(|d| d.join(PLUGIN_NAME))),
        )
        .find(|p| p.is_file())
        .ok_or(SessionError::NoPlugin)
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
}

/// Starts `qemu` running `prog args` with the plugin and its arguments
/// `plugin_args` (after the descriptors'), the descriptors in place.
pub fn spawn(
    qemu: &Path,
    plugin: &Path,
    plugin_args: &str,
    prog: &Path,
    args: &[String],
    fds: Descriptors,
) -> Result<Child, SessionError> {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(qemu);
    c.arg("-plugin")
        .arg(format!(
            "{},fd={STREAM_FD},shm={BUFFERS_FD},free={FREE_FD}{plugin_args}",
            plugin.display()
        ))
        .arg(prog)
        .args(args)
        .stdin(Stdio::inherit());
    let Descriptors {
        stream,
        buffers,
        free,
    } = fds;
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe calls (dup2), allocating nothing.
    unsafe {
        c.pre_exec(move || {
            if libc::dup2(stream, STREAM_FD) < 0
                || libc::dup2(buffers, BUFFERS_FD) < 0
                || libc::dup2(free, FREE_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.spawn().map_err(|source| SessionError::Spawn {
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
