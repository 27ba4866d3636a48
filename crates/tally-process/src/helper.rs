//! Running a helper program (Graphviz's `dot`): its input on standard
//! input, its output and its errors collected, and bounded. A helper runs
//! in a process group of its own (a terminal's Ctrl-C is tally's to
//! handle), gets SIGKILL if tally dies (so none is left running, adopted
//! by init, when tally is killed or stops on a signal), and is killed with
//! whatever it started when it runs past its time bound.

use crate::launch::Command;
use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// What a helper printed, and how it ended.
#[derive(Debug)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
}

/// How a bounded run ended.
#[derive(Debug)]
pub enum Ran {
    /// The helper ended by itself.
    Done(Output),
    /// It ran past the bound and was killed.
    TimedOut,
}

/// Runs `program` with `args`, `input` on its standard input, for at most
/// `bound`. An error if it cannot be started (`NotFound` when it is not
/// installed).
pub fn run_bounded(
    program: &OsStr,
    args: &[&OsStr],
    input: Vec<u8>,
    bound: Duration,
) -> io::Result<Ran> {
    let (in_r, mut in_w) = io::pipe()?;
    let (mut out_r, out_w) = io::pipe()?;
    let (mut err_r, err_w) = io::pipe()?;
    let mut command = Command::new(program);
    command
        .args(args)
        .fd(in_r.as_raw_fd(), 0)
        .fd(out_w.as_raw_fd(), 1)
        .fd(err_w.as_raw_fd(), 2)
        .process_group(0)
        .death_signal(libc::SIGKILL);
    let mut child = command.spawn()?;
    // The child's ends, closed here so that its exit ends the reads.
    drop((in_r, out_w, err_w));
    // Input is fed and output read by threads, so that a large input
    // cannot deadlock against the helper's output.
    let feeder = std::thread::spawn(move || {
        // A helper that stops reading (it failed) is not our error.
        let _ = in_w.write_all(&input);
    });
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_r.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_r.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() >= bound {
            let _ = child.signal_group(libc::SIGKILL);
            child.wait()?;
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = feeder.join();
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(match status {
        Some(status) => Ran::Done(Output {
            status,
            stdout,
            stderr,
        }),
        None => Ran::TimedOut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, input: &[u8], bound: Duration) -> io::Result<Ran> {
        run_bounded(
            OsStr::new("sh"),
            &[OsStr::new("-c"), OsStr::new(script)],
            input.to_vec(),
            bound,
        )
    }

    /// Input reaches the helper, and its output and errors come back,
    /// also when they are larger than a pipe holds.
    #[test]
    fn input_output_and_errors_pass_through() {
        let big = vec![b'x'; 1 << 20];
        let Ran::Done(o) = sh("cat; echo warn >&2", &big, Duration::from_secs(30)).unwrap() else {
            panic!("timed out")
        };
        assert!(o.status.success());
        assert_eq!(o.stdout, big);
        assert_eq!(o.stderr, b"warn\n");
    }

    /// A helper past its bound is killed with what it started.
    #[test]
    fn a_helper_past_its_bound_is_killed_with_its_children() {
        let dir = std::env::temp_dir().join(format!("tally-helper-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("pid");
        let script = format!("sleep 60 & echo $! > {}; wait", pid_file.display());
        let start = Instant::now();
        let ran = sh(&script, b"", Duration::from_millis(300)).unwrap();
        assert!(matches!(ran, Ran::TimedOut));
        assert!(start.elapsed() < Duration::from_secs(10));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The grandchild is gone (a zombie of init at most, briefly).
        let gone = (0..200).any(|_| {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let dead = state.is_empty() || state.contains(") Z");
            if !dead {
                std::thread::sleep(Duration::from_millis(10));
            }
            dead
        });
        assert!(gone, "the helper's child {pid} still runs");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A program that is not installed is `NotFound`.
    #[test]
    fn a_missing_program_is_not_found() {
        let e = run_bounded(
            OsStr::new("tally-no-such-helper"),
            &[],
            Vec::new(),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
