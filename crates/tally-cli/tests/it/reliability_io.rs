//! Writing outputs and stopping on signals, as a user meets them: an
//! output keeps its mode (or takes the umask's), a symlinked output writes
//! its target, a write is synced before and after its rename, and SIGINT,
//! SIGTERM or SIGHUP, sent to tally or to its process group while it reads
//! or writes a large profile, end it within a second with status 128 +
//! signal, no temporary file left and the old output as it was.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tally_testutil::{path_str as s, temp_dir as tmp};

/// A small real profile (Valgrind's, from tests/data).
fn small() -> PathBuf {
    tally_testutil::data("callgrind/inline.default.out")
}

fn tally() -> tally_testutil::Tally {
    tally_testutil::tally!()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The files tally's temporaries are named like, in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tally-") && n.ends_with(".tmp"))
        .collect()
}

/// What `tally convert` writes for `small()` to a plain new file.
fn expected() -> Vec<u8> {
    let dir = tmp();
    let out = dir.path().join("plain.callgrind");
    tally().ok(&["convert", s(&small()), "-o", s(&out)]);
    fs::read(&out).unwrap()
}

#[test]
fn replacing_an_output_keeps_its_mode() {
    let dir = tmp();
    let want = expected();
    for m in [0o600, 0o640, 0o664, 0o444] {
        let out = dir.path().join(format!("out-{m:o}.callgrind"));
        fs::write(&out, "old\n").unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(m)).unwrap();
        tally().ok(&["convert", s(&small()), "-o", s(&out)]);
        assert_eq!(fs::read(&out).unwrap(), want, "{m:o}: new contents");
        assert_eq!(mode(&out), m, "an output of mode {m:o} keeps it");
    }
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn new_outputs_honour_the_umask() {
    let dir = tmp();
    for (umask, want) in [("077", 0o600), ("002", 0o664), ("022", 0o644)] {
        let out = dir.path().join(format!("new-{umask}.callgrind"));
        let st = Command::new("sh")
            .args(["-c", &format!("umask {umask} && exec \"$0\" \"$@\"")])
            .arg(env!("CARGO_BIN_EXE_tally"))
            .args(["convert", s(&small()), "-o", s(&out)])
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(mode(&out), want, "a new output under umask {umask}");
    }
}

#[test]
fn a_symlinked_output_writes_its_target() {
    let dir = tmp();
    let want = expected();
    let real = dir.path().join("real");
    let links = dir.path().join("links");
    fs::create_dir_all(&real).unwrap();
    fs::create_dir_all(&links).unwrap();
    let target = real.join("target.callgrind");
    fs::write(&target, "old\n").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
    // A relative link, a link to that link, and a link whose target does
    // not exist yet (written as `>` in a shell would write it).
    symlink("../real/target.callgrind", links.join("out.callgrind")).unwrap();
    symlink("out.callgrind", links.join("again.callgrind")).unwrap();
    symlink("../real/new.callgrind", links.join("dangling.callgrind")).unwrap();

    for (link, points_to, written) in [
        ("out.callgrind", "../real/target.callgrind", &target),
        ("again.callgrind", "out.callgrind", &target),
        (
            "dangling.callgrind",
            "../real/new.callgrind",
            &real.join("new.callgrind"),
        ),
    ] {
        fs::write(&target, "old\n").unwrap();
        let l = links.join(link);
        tally().ok(&["convert", s(&small()), "-o", s(&l)]);
        let meta = fs::symlink_metadata(&l).unwrap();
        assert!(meta.file_type().is_symlink(), "{link} is still a link");
        assert_eq!(fs::read_link(&l).unwrap(), Path::new(points_to));
        assert_eq!(
            &fs::read(written).unwrap(),
            &want,
            "{link} wrote its target"
        );
    }
    assert_eq!(mode(&target), 0o600, "the target keeps its mode");
    assert!(temporaries(&real).is_empty());
    assert!(temporaries(&links).is_empty());
}

#[test]
fn writes_are_synced_before_and_after_the_rename() {
    if !tally_testutil::require(&["strace"]) {
        return;
    }
    let dir = tmp();
    let out = dir.path().join("out.callgrind");
    fs::write(&out, "old\n").unwrap();
    let log = dir.path().join("strace.log");
    let st = Command::new("strace")
        .args(["-f", "-y", "-qq", "-o", s(&log)])
        .args(["-e", "trace=fsync,fdatasync,rename,renameat,renameat2"])
        .arg(env!("CARGO_BIN_EXE_tally"))
        .args(["convert", s(&small()), "-o", s(&out)])
        .status()
        .unwrap();
    assert!(st.success());
    let log = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let rename = lines
        .iter()
        .position(|l| l.contains("rename") && l.contains("/.tally-") && l.contains("out.callgrind"))
        .unwrap_or_else(|| panic!("no rename of a temporary onto the output:\n{log}"));
    let synced = |l: &&str, what: &str| {
        (l.contains("fsync(") || l.contains("fdatasync(")) && l.contains(what) && l.ends_with("= 0")
    };
    assert!(
        lines[..rename].iter().any(|l| synced(l, "/.tally-")),
        "the temporary file is synced before its rename:\n{log}"
    );
    let dir_name = format!("<{}>", fs::canonicalize(dir.path()).unwrap().display());
    assert!(
        lines[rename + 1..].iter().any(|l| synced(l, &dir_name)),
        "the folder is synced after the rename:\n{log}"
    );
}

/// A large generated profile, made once for all the signal tests.
fn big() -> &'static Path {
    static BIG: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &BIG.get_or_init(|| {
        let dir = tmp();
        let p = dir.path().join("big.callgrind");
        let config = tally_gen::Config {
            size: 32 << 20,
            ..Default::default()
        };
        let mut f = std::io::BufWriter::new(fs::File::create(&p).unwrap());
        tally_gen::generate(&config, &mut f).unwrap();
        std::io::Write::flush(&mut f).unwrap();
        (dir, p)
    })
    .1
}

#[derive(Clone, Copy, Debug)]
enum Sig {
    Int = 2,
    Hup = 1,
    Term = 15,
}

impl Sig {
    fn name(self) -> &'static str {
        match self {
            Sig::Int => "INT",
            Sig::Hup => "HUP",
            Sig::Term => "TERM",
        }
    }
}

/// When the signal is sent: a while after the start (tally is reading),
/// or as soon as tally's temporary file appears in the folder (writing).
///
/// While reading, tally's standard input is `big()` fed through a pipe:
/// half of it at once, the rest in small pieces over more than a second,
/// so tally is between parsing and waiting for input when the signal
/// comes, and cannot have finished however fast it reads.
#[derive(Clone, Copy, Debug)]
enum When {
    Reading,
    Writing,
}

/// Writes `big()` to `pipe` as `When::Reading` says, until tally closes
/// its end (the write then fails) or all of it is written.
fn feed(mut pipe: std::process::ChildStdin) -> std::thread::JoinHandle<()> {
    use std::io::Write;
    let data = fs::read(big()).unwrap();
    std::thread::spawn(move || {
        let (first, rest) = data.split_at(data.len() / 2);
        if pipe.write_all(first).is_err() {
            return;
        }
        let piece = rest.len() / 2000 + 1;
        for chunk in rest.chunks(piece) {
            std::thread::sleep(Duration::from_millis(1));
            if pipe.write_all(chunk).is_err() {
                return;
            }
        }
    })
}

/// Runs `tally ARGS` in `dir` (its own process group), sends `sig` to its
/// process or its group as `when` says, and checks that it ends within a
/// second with status 128 + signal, a one-line message, no temporary file
/// in `dir` and `dir/out.callgrind` as it was.
fn stopped(args: &[&str], sig: Sig, group: bool, when: When) {
    let dir = tmp();
    let out = dir.path().join("out.callgrind");
    fs::write(&out, "the user's old output\n").unwrap();
    let mut child = tally()
        .in_dir(dir.path())
        .command()
        .args(args)
        .stdin(match when {
            When::Reading => Stdio::piped(),
            When::Writing => Stdio::null(),
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let feeder = child.stdin.take().map(feed);
    match when {
        When::Reading => std::thread::sleep(Duration::from_millis(200)),
        When::Writing => {
            while temporaries(dir.path()).is_empty() {
                assert!(
                    child.try_wait().unwrap().is_none(),
                    "{args:?} ended before writing"
                );
                assert!(
                    start.elapsed() < Duration::from_secs(60),
                    "{args:?}: no write"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "{args:?} ended before the signal: the input is too small"
    );
    let target = if group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    let sent = Instant::now();
    let st = Command::new("kill")
        .args(["-s", sig.name(), "--", &target])
        .status()
        .unwrap();
    assert!(st.success());
    let status = wait_at_most(&mut child, Duration::from_secs(10));
    let took = sent.elapsed();
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    let stderr = {
        let mut e = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e).unwrap();
        e
    };
    let case = format!(
        "{args:?}, SIG{} to its {}",
        sig.name(),
        if group { "group" } else { "pid" }
    );
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(128 + sig as i32),
        "{case}: exit status ({status:?}); stderr: {stderr}"
    );
    assert!(
        took < Duration::from_secs(1),
        "{case}: took {took:?} to end"
    );
    assert_eq!(stderr.lines().count(), 1, "{case}: one line: {stderr}");
    assert!(
        stderr.starts_with("tally: ") && stderr.contains(&format!("SIG{}", sig.name())),
        "{case}: {stderr}"
    );
    assert!(
        temporaries(dir.path()).is_empty(),
        "{case}: temporary files left"
    );
    assert_eq!(
        fs::read_to_string(&out).unwrap(),
        "the user's old output\n",
        "{case}: the old output changed"
    );
}

/// Waits for `child` at most `limit`; kills it (and returns `None`) past it.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn convert_stops_cleanly_while_writing() {
    let big = s(big());
    stopped(
        &["convert", big, "-o", "out.callgrind"],
        Sig::Int,
        false,
        When::Writing,
    );
    stopped(
        &["convert", big, "-o", "out.callgrind"],
        Sig::Hup,
        true,
        When::Writing,
    );
    stopped(
        &["convert", big, "-o", "out.callgrind.gz"],
        Sig::Term,
        false,
        When::Writing,
    );
}

#[test]
fn merge_stops_cleanly_while_writing() {
    let big = s(big());
    stopped(
        &["merge", big, big, "-o", "out.callgrind"],
        Sig::Term,
        true,
        When::Writing,
    );
}

#[test]
fn long_commands_stop_cleanly_while_reading() {
    let big = s(big());
    stopped(
        &["convert", "-", "-o", "out.callgrind"],
        Sig::Term,
        false,
        When::Reading,
    );
    stopped(
        &["merge", big, "-", "-o", "out.callgrind"],
        Sig::Int,
        true,
        When::Reading,
    );
    stopped(
        &["check", big, big, "-", big],
        Sig::Hup,
        false,
        When::Reading,
    );
    stopped(&["annotate", "-"], Sig::Int, false, When::Reading);
    stopped(&["gprof", "-"], Sig::Term, true, When::Reading);
}

#[test]
fn a_read_from_a_silent_pipe_stops_cleanly() {
    // Standard input that never ends: tally waits in read(2).
    let dir = tmp();
    let mut child = tally()
        .command()
        .args(["check", "-"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-s", "TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = wait_at_most(&mut child, Duration::from_secs(10));
    assert!(sent.elapsed() < Duration::from_secs(1));
    assert_eq!(status.and_then(|s| s.code()), Some(143));
}

/// A reader that stops early (`tally merge A B | head`) ends tally
/// quietly with status 0, as it ends `cat`: the closed pipe is no error of
/// tally's or the user's. Both outputs are larger than a pipe's buffer.
#[test]
fn a_closed_output_pipe_ends_quietly() {
    use std::io::Read;
    let a = tally_testutil::data("cachegrind/workload.branch.out");
    let b = tally_testutil::data("cachegrind/inline.branch.out");
    let c = tally_testutil::data("callgrind/mutual.cache.out");
    for args in [
        vec!["merge", s(&a), s(&b)],
        vec!["annotate", "--inclusive=yes", "--tree=both", s(&c)],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        // Only the inputs' own warnings (Valgrind's cache-simulation
        // summaries are off by a few counts), no error.
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.lines().all(|l| l.contains(": warning:")),
            "{args:?}: {err}"
        );
    }
}
