//! Starting a program: `fork`, the set-up in the child, `execve`. One
//! launcher for `tally sim` (QEMU, its descriptors in place) and `tally
//! record` (the program held before `exec`, so that its counters are
//! attached before its first instruction).
//!
//! In the child, between `fork` and `exec`, in this order: the parent's
//! ends of the launcher's pipes are closed; the process joins a new
//! process group if asked ([`Command::process_group`]); it asks for a
//! signal when tally dies ([`Command::death_signal`], `PR_SET_PDEATHSIG`);
//! the descriptors asked for are put in place ([`Command::fd`]); the
//! signal mask is emptied and SIGPIPE, which Rust programs ignore, is set
//! back to its default, as `std::process::Command` does; with
//! [`Command::hold`], it waits for [`Child::release`]; then it `exec`s.
//! A failure of any of these is reported through a pipe closed on `exec`
//! (end of file: the `exec` succeeded) and the child exits with 127.
//!
//! `std::process::Command` cannot hold a child before `exec`: its `spawn`
//! waits for the `exec`. Only async-signal-safe calls are made in the
//! child, on memory prepared before the `fork`.
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// A program to start, and how.
#[derive(Clone, Debug)]
pub struct Command {
    program: PathBuf,
    argv: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    fds: Vec<(RawFd, RawFd)>,
    hold: bool,
    process_group: Option<i32>,
    death_signal: Option<i32>,
}

impl Command {
    /// `program` (looked for on `PATH` if it has no slash), with itself as
    /// `argv[0]`, no other argument, tally's environment and descriptors.
    pub fn new(program: impl AsRef<Path>) -> Command {
        let program = program.as_ref().to_path_buf();
        Command {
            argv: vec![program.clone().into_os_string()],
            program,
            env: Vec::new(),
            fds: Vec::new(),
            hold: false,
            process_group: None,
            death_signal: None,
        }
    }

    /// The program's name, `argv[0]`.
    pub fn arg0(&mut self, name: impl AsRef<OsStr>) -> &mut Command {
        self.argv[0] = name.as_ref().to_os_string();
        self
    }

    /// One more argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.argv.push(arg.as_ref().to_os_string());
        self
    }

    /// More arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&mut self, args: I) -> &mut Command {
        for a in args {
            self.arg(a);
        }
        self
    }

    /// Variable `key` is `value` in the program's environment.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Command {
        self.env.push((
            key.as_ref().to_os_string(),
            Some(value.as_ref().to_os_string()),
        ));
        self
    }

    /// Variable `key` is not in the program's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.env.push((key.as_ref().to_os_string(), None));
        self
    }

    /// Tally's descriptor `from` is the program's `to` (`dup2`, not
    /// closed on exec). Put in place in the order given.
    pub fn fd(&mut self, from: RawFd, to: RawFd) -> &mut Command {
        self.fds.push((from, to));
        self
    }

    /// The child waits before `exec` until [`Child::release`] (`spawn`
    /// then returns at once; an `exec` failure is the release's error).
    pub fn hold(&mut self, hold: bool) -> &mut Command {
        self.hold = hold;
        self
    }

    /// The child joins process group `pgid` (0: a new one, its own), so
    /// that a terminal's signals do not reach it.
    pub fn process_group(&mut self, pgid: i32) -> &mut Command {
        self.process_group = Some(pgid);
        self
    }

    /// The child gets signal `sig` when tally (the thread that started
    /// it) dies, so that it does not outlive tally (`PR_SET_PDEATHSIG`).
    pub fn death_signal(&mut self, sig: i32) -> &mut Command {
        self.death_signal = Some(sig);
        self
    }

    /// The program's path: as given if it has a slash, else the first
    /// file of that name on `PATH` (as given if none: `exec` then fails).
    fn resolve(&self) -> PathBuf {
        if self.program.as_os_str().as_bytes().contains(&b'/') {
            return self.program.clone();
        }
        std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(&self.program))
                    .find(|p| p.is_file())
            })
            .unwrap_or_else(|| self.program.clone())
    }

    /// The environment, when it is not tally's.
    fn environment(&self) -> Option<Vec<CString>> {
        if self.env.is_empty() {
            return None;
        }
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        for (k, v) in &self.env {
            vars.retain(|(key, _)| key != k);
            if let Some(v) = v {
                vars.push((k.clone(), v.clone()));
            }
        }
        Some(
            vars.into_iter()
                .filter_map(|(k, v)| {
                    let mut kv = k.into_vec();
                    kv.push(b'=');
                    kv.extend_from_slice(v.as_bytes());
                    CString::new(kv).ok()
                })
                .collect(),
        )
    }

    /// Starts the program; without [`Command::hold`], returns once it
    /// has `exec`'d (or with the error that stopped it).
    pub fn spawn(&self) -> io::Result<Child> {
        let bad = |_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument");
        let path = CString::new(self.resolve().into_os_string().into_vec()).map_err(bad)?;
        let argv: Vec<CString> = self
            .argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(bad)?;
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let envp = self.environment();
        let mut envp_ptrs: Vec<*const libc::c_char> =
            envp.iter().flatten().map(|a| a.as_ptr()).collect();
        envp_ptrs.push(std::ptr::null());
        let gate = if self.hold { Some(pipe()?) } else { None };
        let (err_r, err_w) = pipe()?;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: after fork the child calls only async-signal-safe
        // functions, on memory prepared before the fork (see `child`).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let setup = Setup {
                path: &path,
                argv: &argv_ptrs,
                envp: envp.as_ref().map(|_| envp_ptrs.as_slice()),
                fds: &self.fds,
                gate: gate.as_ref().map(|(r, w)| (r.as_raw_fd(), w.as_raw_fd())),
                errors: (err_r.as_raw_fd(), err_w.as_raw_fd()),
                process_group: self.process_group,
                death_signal: self.death_signal.map(|s| (s, parent)),
            };
            // SAFETY: in the child just forked, as above; never returns.
            unsafe { child(&setup) }
        }
        drop(err_w);
        let mut child = Child {
            pid,
            gate: gate.map(|(r, w)| {
                drop(r);
                w
            }),
            errors: Some(err_r),
            status: None,
        };
        if !self.hold {
            child.exec_result()?;
        }
        Ok(child)
    }
}

/// What the child needs between `fork` and `exec`, all prepared before.
struct Setup<'a> {
    path: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: Option<&'a [*const libc::c_char]>,
    fds: &'a [(RawFd, RawFd)],
    /// The hold pipe's ends (read, write).
    gate: Option<(RawFd, RawFd)>,
    /// The error pipe's ends (read, write).
    errors: (RawFd, RawFd),
    process_group: Option<i32>,
    /// The signal, and the parent's pid to check it is still there.
    death_signal: Option<(i32, libc::pid_t)>,
}

/// The child's side: the set-up, then `exec`; an error's `errno` goes to
/// the error pipe, and the child exits with 127.
///
/// # Safety
///
/// Only in a child just forked: it calls async-signal-safe functions
/// only and never returns.
unsafe fn child(s: &Setup<'_>) -> ! {
    let fail = || {
        // SAFETY: reading errno and writing it from a local to our pipe
        // end, then _exit: all async-signal-safe.
        unsafe {
            let errno = *libc::__errno_location();
            libc::write(s.errors.1, (&errno as *const i32).cast(), 4);
            libc::_exit(127)
        }
    };
    // SAFETY: the calls below are async-signal-safe, on descriptors and
    // memory prepared before the fork.
    unsafe {
        if let Some((_, w)) = s.gate {
            // Otherwise a dropped gate would never give end of file.
            libc::close(w);
        }
        libc::close(s.errors.0);
        if let Some(pgid) = s.process_group
            && libc::setpgid(0, pgid) < 0
        {
            fail();
        }
        if let Some((sig, parent)) = s.death_signal {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) < 0 {
                fail();
            }
            // Tally died before the request: the signal would never come.
            if libc::getppid() != parent {
                libc::_exit(127);
            }
        }
        for &(from, to) in s.fds {
            if from == to {
                // Kept, but no longer closed on exec.
                let flags = libc::fcntl(from, libc::F_GETFD);
                if flags < 0 || libc::fcntl(from, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    fail();
                }
            } else if libc::dup2(from, to) < 0 {
                fail();
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) < 0
            || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
        {
            fail();
        }
        if let Some((r, _)) = s.gate {
            let mut byte = 0u8;
            let n = loop {
                let n = libc::read(r, (&mut byte as *mut u8).cast(), 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            if n != 1 {
                // Abandoned: never run.
                libc::_exit(127);
            }
        }
        match s.envp {
            Some(envp) => libc::execve(s.path.as_ptr(), s.argv.as_ptr(), envp.as_ptr()),
            None => libc::execv(s.path.as_ptr(), s.argv.as_ptr()),
        };
    }
    fail();
    // `fail` exits; this is for the type.
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(127) }
}

/// A program started by [`Command::spawn`].
#[derive(Debug)]
pub struct Child {
    pid: i32,
    gate: Option<OwnedFd>,
    errors: Option<OwnedFd>,
    status: Option<ExitStatus>,
}

impl Child {
    /// Its process id.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Lets a held program `exec`; an error if the set-up or `exec`
    /// failed (the child has then exited with 127). Nothing to do for a
    /// program not held, or already released.
    pub fn release(&mut self) -> io::Result<()> {
        if let Some(gate) = self.gate.take() {
            // SAFETY: writing one byte from a local to our pipe end.
            unsafe { libc::write(gate.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        }
        self.exec_result()
    }

    /// Reads the error pipe to its end: the `exec` succeeded, or the
    /// child's `errno` (the child is then waited for).
    fn exec_result(&mut self) -> io::Result<()> {
        let Some(errors) = self.errors.take() else {
            return Ok(());
        };
        let mut errno = [0u8; 4];
        let n = loop {
            // SAFETY: reading into a local buffer from our pipe end; end
            // of file (the exec succeeded, closing the child's end) gives 0.
            let n = unsafe { libc::read(errors.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break n;
            }
        };
        if n == 4 {
            let _ = self.wait();
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
        }
        Ok(())
    }

    /// Kills a held program before it ran (it exits with 127), and waits
    /// for it.
    pub fn abandon(mut self) {
        self.gate = None;
        let _ = self.wait();
    }

    /// Sends `sig` to the program's process group (for a program started
    /// in a group of its own, [`Command::process_group`] 0): it and
    /// whatever it started. Nothing once it has been waited for, as its
    /// id may then be another's.
    pub fn signal_group(&self, sig: i32) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        // SAFETY: kill takes plain integers; a negative pid names a group.
        if unsafe { libc::kill(-self.pid, sig) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits for the program to end.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        self.wait_with(0).map(|s| s.expect("a blocking wait"))
    }

    /// Whether the program has ended, without waiting: `None` while it
    /// runs.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.wait_with(libc::WNOHANG)
    }

    fn wait_with(&mut self, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our child with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, flags) };
            if r == 0 {
                return Ok(None);
            }
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let s = ExitStatus::from_raw(status);
            self.status = Some(s);
            return Ok(Some(s));
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two descriptors of a valid array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::tests::ONE;

    #[test]
    fn a_program_runs_with_its_arguments_and_status() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let mut c = Command::new("sh");
        c.args(["-c", "exit $#", "x", "a", "b"]);
        let mut child = c.spawn().unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(2));
        assert_eq!(child.try_wait().unwrap().and_then(|s| s.code()), Some(2));
    }

    #[test]
    fn a_held_program_waits_for_its_release() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("tally-process-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let mut c = Command::new("/bin/sh");
        c.arg0("sh")
            .arg("-c")
            .arg(format!("touch {}", dir.display()))
            .hold(true);
        let mut child = c.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(child.try_wait().unwrap().is_none());
        assert!(!dir.exists(), "held before exec");
        child.release().unwrap();
        assert!(child.wait().unwrap().success());
        assert!(dir.exists());
        let _ = std::fs::remove_file(&dir);
        // Abandoned: never run.
        let held = c.spawn().unwrap();
        held.abandon();
        assert!(!dir.exists());
    }

    #[test]
    fn exec_failures_are_errors() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let e = Command::new("/nonexistent/program").spawn().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let mut held = Command::new("/nonexistent/program")
            .hold(true)
            .spawn()
            .unwrap();
        assert_eq!(held.release().unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn descriptors_environment_and_process_group() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let (r, w) = std::io::pipe().unwrap();
        let mut c = Command::new("sh");
        c.args(["-c", "echo \"$TALLY_PROCESS_TEST $(ps -o pgid= $$)\" >&7"])
            .env("TALLY_PROCESS_TEST", "here")
            .fd(w.as_raw_fd(), 7)
            .process_group(0)
            .death_signal(libc::SIGKILL);
        let mut child = c.spawn().unwrap();
        drop(w);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut &r, &mut out).unwrap();
        assert!(child.wait().unwrap().success());
        let mut words = out.split_whitespace();
        assert_eq!(words.next(), Some("here"));
        assert_eq!(
            words.next().and_then(|p| p.parse::<u32>().ok()),
            Some(child.id())
        );
    }
}
