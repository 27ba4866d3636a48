//! How every command takes its input: difference profiles (signed counts)
//! from a file and from standard input, plain and gzip'd, Callgrind and
//! Cachegrind, give the same output; files of formats a command does not
//! read are refused with a message naming what they are and what reads
//! them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(rel)
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tally");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let bytes = bytes.to_vec();
        // Written from another thread: tally may answer before reading all.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        });
    }
    child.wait_with_output().expect("wait for tally")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// A difference of two Cachegrind profiles, made by the real cg_diff when
/// it is installed, else the one it made for the fixtures.
fn cachegrind_diff(dir: &Path) -> PathBuf {
    let out = dir.join("ab.cg_diff");
    let o = Command::new("cg_diff")
        .arg(data("merge/workload.a.cachegrind.out"))
        .arg(data("merge/workload.b.cachegrind.out"))
        .env("LC_ALL", "C")
        .output();
    match o {
        Ok(o) if o.status.success() => std::fs::write(&out, &o.stdout).unwrap(),
        _ => {
            eprintln!("note: cg_diff is not installed; using tests/data/merge/ab.cg_diff");
            std::fs::copy(data("merge/ab.cg_diff"), &out).unwrap();
        }
    }
    out
}

/// A difference of two Callgrind profiles (cg_diff reads no Callgrind
/// files), made by `tally diff`.
fn callgrind_diff(dir: &Path) -> PathBuf {
    let out = dir.join("ab.callgrind");
    let o = run(
        &[
            "diff",
            data("merge/workload.a.callgrind.out").to_str().unwrap(),
            data("merge/workload.b.callgrind.out").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    out
}

/// Runs `args` with `FILE` replaced by the file, then by `-` with the file
/// on standard input: both succeed and print the same, up to the name.
fn same_from_stdin(args: &[&str], file: &Path) {
    let path = file.to_str().unwrap();
    let with = |name: &str| -> Vec<String> {
        args.iter()
            .map(|a| {
                if *a == "FILE" {
                    name.to_string()
                } else {
                    a.to_string()
                }
            })
            .collect()
    };
    let from_file = with(path);
    let from_file: Vec<&str> = from_file.iter().map(String::as_str).collect();
    let a = run(&from_file, None);
    assert_eq!(
        a.status.code(),
        Some(0),
        "tally {from_file:?}: {}",
        text(&a.stderr)
    );
    let from_stdin = with("-");
    let from_stdin: Vec<&str> = from_stdin.iter().map(String::as_str).collect();
    let b = run(&from_stdin, Some(&std::fs::read(file).unwrap()));
    assert_eq!(
        b.status.code(),
        Some(0),
        "tally {from_stdin:?} < {path}: {}",
        text(&b.stderr)
    );
    let a = text(&a.stdout).replace(path, "-");
    let b = text(&b.stdout).replace("<stdin>", "-");
    assert!(!a.is_empty(), "tally {from_file:?} printed nothing");
    assert!(
        a == b,
        "tally {from_stdin:?} < {path} differs:\n{a}\n---\n{b}"
    );
}

/// The four signed inputs: Cachegrind and Callgrind differences, plain and
/// gzip'd, each with an unsigned profile of the same kind.
fn signed_inputs(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut v = Vec::new();
    for (diff, other) in [
        (
            cachegrind_diff(dir),
            data("merge/workload.b.cachegrind.out"),
        ),
        (callgrind_diff(dir), data("merge/workload.b.callgrind.out")),
    ] {
        let gz = dir.join(format!(
            "{}.gz",
            diff.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&gz, gzip(&std::fs::read(&diff).unwrap())).unwrap();
        v.push((diff, other.clone()));
        v.push((gz, other));
    }
    v
}

#[test]
fn check_reads_signed_profiles_from_files_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    for (p, _) in signed_inputs(dir.path()) {
        let o = run(&["check", p.to_str().unwrap()], None);
        assert!(
            text(&o.stdout).contains("signed costs (a difference)"),
            "{}: {}",
            p.display(),
            text(&o.stderr)
        );
        same_from_stdin(&["check", "FILE"], &p);
    }
}

#[test]
fn convert_reads_signed_profiles_from_files_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    for (p, _) in signed_inputs(dir.path()) {
        same_from_stdin(&["convert", "FILE", "-o", "-"], &p);
        same_from_stdin(&["convert", "FILE", "-o", "-", "--to", "json"], &p);
    }
}

#[test]
fn annotate_reads_signed_profiles_from_files_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    for (p, other) in signed_inputs(dir.path()) {
        let other = other.to_str().unwrap();
        same_from_stdin(&["annotate", "FILE"], &p);
        same_from_stdin(&["annotate", "--inclusive=yes", "FILE"], &p);
        same_from_stdin(&["annotate", "--diff", "FILE", other], &p);
        same_from_stdin(&["annotate", "--diff", other, "FILE"], &p);
    }
}

#[test]
fn merge_and_diff_read_signed_profiles_from_files_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    for (p, other) in signed_inputs(dir.path()) {
        let other = other.to_str().unwrap();
        same_from_stdin(&["merge", "FILE", other, "-o", "-"], &p);
        same_from_stdin(&["merge", other, "FILE", "-o", "-"], &p);
        same_from_stdin(&["diff", "FILE", other, "-o", "-"], &p);
        same_from_stdin(&["diff", other, "FILE", "--json"], &p);
    }
}

#[test]
fn gprof_reads_a_signed_callgrind_profile_from_a_file_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    for (p, _) in signed_inputs(dir.path()) {
        if p.to_string_lossy().contains("callgrind") {
            same_from_stdin(&["gprof", "-b", "FILE"], &p);
        }
    }
}

#[test]
fn merge_reads_stdin_once_when_a_later_input_is_signed() {
    // The unsigned sum so far is read again as signed when the difference
    // comes: standard input must still be there.
    let dir = tempfile::tempdir().unwrap();
    let diff = cachegrind_diff(dir.path());
    let a = data("merge/workload.a.cachegrind.out");
    let from_file = run(
        &[
            "merge",
            a.to_str().unwrap(),
            diff.to_str().unwrap(),
            "-o",
            "-",
        ],
        None,
    );
    let from_stdin = run(
        &["merge", "-", diff.to_str().unwrap(), "-o", "-"],
        Some(&std::fs::read(&a).unwrap()),
    );
    assert_eq!(
        from_stdin.status.code(),
        Some(0),
        "{}",
        text(&from_stdin.stderr)
    );
    assert_eq!(text(&from_file.stdout), text(&from_stdin.stdout));
}

/// Runs a command that must refuse its input; returns its message.
fn refused(args: &[&str], stdin: Option<&[u8]>) -> String {
    let o = run(args, stdin);
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "tally {args:?}: {e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(o.stdout.is_empty(), "tally {args:?} printed a report");
    e
}

#[test]
fn gmon_files_are_named_with_the_command_that_reads_them() {
    let gmon = data("gprof/cycles.O0.gmon");
    let g = gmon.to_str().unwrap();
    let want = format!("{g}: a gprof gmon.out file: use `tally gprof PROG FILE`");
    for args in [
        vec!["check", g],
        vec!["annotate", g],
        vec!["merge", g, g, "-o", "-"],
        vec!["diff", g, g],
    ] {
        let e = refused(&args, None);
        assert!(e.starts_with(&want), "tally {args:?}: {e}");
    }
    // Every command that takes gmon input says the same, a usage error.
    let o = run(&["convert", g, "-o", "-"], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(
        e.contains(&format!(
            "{g}: a gmon file needs the program that wrote it: add --binary PROG"
        )),
        "{e}"
    );
    let e = refused(&["gprof", g], None);
    assert!(e.contains("name the program that wrote it first"), "{e}");
    let e = refused(&["check", "-"], Some(&std::fs::read(&gmon).unwrap()));
    assert!(e.starts_with("<stdin>: a gprof gmon.out file"), "{e}");
}

#[test]
fn dcpi_files_are_sent_to_tally_dcpi() {
    let f = data("dcpi/real/workload.run1.dcpi");
    let f = f.to_str().unwrap();
    for args in [
        vec!["annotate", f],
        vec!["merge", f, "-o", "-"],
        vec!["diff", f, f],
    ] {
        let e = refused(&args, None);
        assert!(
            e.starts_with(&format!(
                "{f}: a DCPI profile: use `tally dcpi prof IMAGE FILE`"
            )),
            "tally {args:?}: {e}"
        );
    }
    // check reads DCPI profiles, from a file or standard input.
    let o = run(&["check", "-"], Some(&std::fs::read(f).unwrap()));
    assert!(
        text(&o.stdout).starts_with("<stdin>: valid DCPI profile"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn tallys_json_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let src = data("callgrind/recursion.default.out");
    let o = run(
        &[
            "convert",
            src.to_str().unwrap(),
            "-o",
            json.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let j = json.to_str().unwrap();
    for args in [
        vec!["annotate", j],
        vec!["check", j],
        vec!["convert", j, "-o", "-"],
        vec!["merge", j, "-o", "-"],
    ] {
        let o = run(&args, None);
        assert_eq!(
            o.status.code(),
            Some(0),
            "tally {args:?}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn other_profilers_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let perf = dir.path().join("perf.data");
    let mut bytes = b"PERFILE2".to_vec();
    bytes.extend_from_slice(&[0x68, 0, 0, 0, 0, 0, 0, 0]);
    bytes.resize(512, 0);
    std::fs::write(&perf, &bytes).unwrap();
    // perf.data is read now: a header the parser cannot take (here an
    // attribute size of 0) is refused with its offset, never a panic.
    let e = refused(&["check", perf.to_str().unwrap()], None);
    assert!(
        e.contains("byte 16: malformed perf.data: the attribute size is 0"),
        "{e}"
    );

    let pprof = dir.path().join("cpu.pb.gz");
    // A pprof Profile message: sample_type {type: 1, unit: 2}, string_table.
    let msg = b"\x0a\x04\x08\x01\x10\x02\x32\x00\x32\x07samples\x32\x05count";
    std::fs::write(&pprof, gzip(msg)).unwrap();
    // pprof is read (tests/it/pprof.rs): an empty one has its event.
    let out = tally_testutil::tally!().ok(&["annotate", pprof.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("Events recorded:  samples"), "{out}");

    let prog = data("gprof/cycles.O0");
    let e = refused(&["check", prog.to_str().unwrap()], None);
    assert!(
        e.contains("an ELF program or library, not a profile"),
        "{e}"
    );
}

/// Callgrind with `--separate-threads=yes` creates its output file empty
/// and writes each thread to `FILE-01`, `FILE-02`, …: the empty file is
/// refused with a message that names those, and they read summed, to the
/// sum of callgrind_annotate's totals of each.
#[test]
fn separate_threads_files_are_pointed_to() {
    if !tally_testutil::require(&["gcc", "valgrind", "callgrind_annotate"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let src = dir.path().join("thr.c");
    std::fs::write(
        &src,
        "#include <pthread.h>\n\
         static long work(long n){ long s=0; for(long i=0;i<n;i++) s+=i%7; return s; }\n\
         static void *run(void *a){ return (void*)work((long)a); }\n\
         int main(void){ pthread_t t[2]; for(long i=0;i<2;i++) pthread_create(&t[i],0,run,(void*)(20000*(i+1)));\n\
         long s=work(10000); for(int i=0;i<2;i++){ void *r; pthread_join(t[i],&r); s+=(long)r; } return s==42; }\n",
    )
    .unwrap();
    let exe = dir.path().join("thr");
    let built = Command::new("gcc")
        .args(["-g", "-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success());
    let base = dir.path().join("cg.out");
    let ran = Command::new("valgrind")
        .args(["--tool=callgrind", "--separate-threads=yes"])
        .arg(format!("--callgrind-out-file={}", base.display()))
        .arg(&exe)
        .output()
        .unwrap();
    assert!(base.is_file(), "{}", text(&ran.stderr));
    assert_eq!(std::fs::metadata(&base).unwrap().len(), 0);
    let threads: Vec<PathBuf> = (1..)
        .map(|n| PathBuf::from(format!("{}-{n:02}", base.display())))
        .take_while(|p| p.is_file())
        .collect();
    // Valgrind numbers threads as it sees them; one that has ended may
    // lend its number to the next.
    let n = threads.len();
    assert!(n >= 2, "{n} thread files");

    let out = run(&["annotate", base.to_str().unwrap()], None);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}:1:", base.display()))
            && err.contains(&format!(
                "{}-01 to {}-{n:02}",
                base.display(),
                base.display()
            ))
            && err.contains(&format!("({n} files): name those")),
        "{err}"
    );

    let total = tally_testutil::program_total;
    let want: u64 = threads
        .iter()
        .map(|t| {
            let o = Command::new("callgrind_annotate").arg(t).output().unwrap();
            total(&text(&o.stdout))
        })
        .sum();
    let mut args = vec!["annotate", "--auto=no"];
    args.extend(threads.iter().map(|p| p.to_str().unwrap()));
    let out = run(&args, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(total(&text(&out.stdout)), want);
}
