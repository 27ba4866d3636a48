//! The sources `tally report --html` and `tally serve` show: only files
//! under the source directories (`--source-dir`, else the profile's own
//! and the current one), symlinks and `..` resolved, never `/proc`. A
//! profile names `/etc/shadow`, `/proc/self/environ` (tally runs with a
//! secret in its environment), a file with a secret outside the
//! directories, and a symlink inside them pointing to it: none of their
//! lines is published, and the report says they were left out. Its
//! object file is `/dev/zero`, which the assembly view never reads.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tally_testutil::serve::Server;
use tally_testutil::{path_str, tally, temp_dir};

/// The value of the secret in tally's environment.
const ENV_SECRET: &str = "env-secret-5d1c0b7e";
/// The line of the secret file outside the source directories.
const FILE_SECRET: &str = "file-secret-9a4f2e61";
/// A line of the source that may be shown.
const ALLOWED: &str = "int allowed_marker = 42;";

/// The files of one test: the profile in `prof/`, the allowed source in
/// `src/` with a symlink to `outside/secret.c`.
struct Files {
    _root: tempfile::TempDir,
    profile: PathBuf,
    src: PathBuf,
    /// The first line of /etc/shadow, when this test can read it.
    shadow: Option<String>,
}

/// The functions of the profile, by the file each is in.
const FUNCTIONS: [&str; 5] = ["shadow", "environ", "secret", "linked", "allowed"];

/// Lays out the files; `next_to_profile` puts the allowed source (and the
/// symlink) beside the profile instead of in `src/`.
fn files(next_to_profile: bool) -> Files {
    let root = temp_dir();
    let r = root.path().canonicalize().unwrap();
    let prof = r.join("prof");
    let src = if next_to_profile {
        prof.clone()
    } else {
        r.join("src")
    };
    let outside = r.join("outside");
    for d in [&prof, &src, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    let secret = outside.join("secret.c");
    std::fs::write(&secret, format!("{FILE_SECRET}\n{FILE_SECRET}\n")).unwrap();
    let allowed = src.join("allowed.c");
    std::fs::write(&allowed, format!("/* allowed */\n{ALLOWED}\nint x;\n")).unwrap();
    let linked = src.join("linked.c");
    std::os::unix::fs::symlink(&secret, &linked).unwrap();
    let files = [
        Path::new("/etc/shadow"),
        Path::new("/proc/self/environ"),
        &secret,
        &linked,
        &allowed,
    ];
    let mut text = String::from("positions: instr line\nevents: Ir\nob=/dev/zero\n");
    for (k, (f, name)) in files.iter().zip(FUNCTIONS).enumerate() {
        text.push_str(&format!(
            "fl=({k}) {}\nfn=({k}) {name}\n0x{k}00 1 100\n+4 2 100\n",
            f.display()
        ));
    }
    text.push_str("totals: 1000\n");
    let profile = prof.join("callgrind.out");
    std::fs::write(&profile, text).unwrap();
    let shadow = std::fs::read_to_string("/etc/shadow")
        .ok()
        .and_then(|s| s.lines().next().map(str::to_owned))
        .filter(|l| !l.is_empty());
    Files {
        _root: root,
        profile,
        src,
        shadow,
    }
}

/// Asserts that `text` holds none of the secrets.
fn holds_no_secret(f: &Files, text: &str) {
    assert!(!text.contains(ENV_SECRET), "the environment was published");
    assert!(!text.contains(FILE_SECRET), "the secret file was published");
    if let Some(l) = &f.shadow {
        assert!(!text.contains(l.as_str()), "/etc/shadow was published");
    }
}

/// `tally report --html` with `args`, run in `dir` with the secret in its
/// environment: the embedded data and standard error.
fn report(f: &Files, dir: &Path, args: &[&str]) -> (Value, String) {
    let html = f.profile.with_file_name("report.html");
    let o = tally!()
        .in_dir(dir)
        .command()
        .env("TALLY_TEST_SECRET", ENV_SECRET)
        .args(["report", path_str(&f.profile), "--html", path_str(&html)])
        // Reading /dev/zero would stop here rather than take the machine.
        .args(["--memory-limit", "256M"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(&html).unwrap();
    holds_no_secret(f, &text);
    let start = text.find("const DATA = ").unwrap() + "const DATA = ".len();
    let end = start + text[start..].find(";</script>").unwrap();
    let data = serde_json::from_str(&text[start..end].replace("<\\/", "</")).unwrap();
    (data, stderr)
}

/// The report's source of each function, by name.
fn sources_by_name(data: &Value) -> Vec<(String, String)> {
    let rows = data["views"]["Ir"]["rows"].as_array().unwrap();
    rows.iter()
        .map(|r| {
            let node = r["node"].as_u64().unwrap().to_string();
            let src = data["sources"][&node].to_string();
            (r["name"].as_str().unwrap().to_owned(), src)
        })
        .collect()
}

/// The report's verdict on every function: the allowed source embedded,
/// the others left out with a note, and one line on standard error.
fn check_report(data: &Value, stderr: &str, f: &Files) {
    let sources = sources_by_name(data);
    assert_eq!(sources.len(), FUNCTIONS.len(), "{data}");
    for (name, src) in &sources {
        if name == "allowed" {
            assert!(src.contains(ALLOWED), "{src}");
        } else if name != "shadow" || f.shadow.is_some() {
            assert!(src.contains("left out of this report"), "{name}: {src}");
        }
    }
    let left_out: Vec<&str> = data["sources_left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let asm = &data["asm"].to_string();
    assert!(
        asm.contains("/dev/zero: under /proc, /sys or /dev"),
        "{asm}"
    );
    let n = if f.shadow.is_some() { 4 } else { 3 };
    assert_eq!(left_out.len(), n, "{left_out:?}");
    assert!(left_out.contains(&"/proc/self/environ"), "{left_out:?}");
    assert!(left_out.iter().any(|l| l.ends_with("/linked.c")));
    assert!(left_out.iter().any(|l| l.ends_with("/secret.c")));
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("left out")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains(&format!("{n} source files left out"))
            && lines[0].contains("--source-dir"),
        "{stderr}"
    );
}

/// With `--source-dir`: the file under it is embedded; /etc/shadow,
/// /proc/self/environ, a file outside it and a symlink inside it to that
/// file are not, and the report says so.
#[test]
fn a_report_embeds_sources_from_the_source_dirs_only() {
    let f = files(false);
    let cwd = f.profile.parent().unwrap().to_path_buf();
    let (data, stderr) = report(&f, &cwd, &["--source-dir", path_str(&f.src)]);
    check_report(&data, &stderr, &f);
}

/// Without `--source-dir`: the profile's own directory (and the current
/// one, but not `/`, where this runs): the same verdicts.
#[test]
fn a_report_embeds_sources_from_beside_the_profile_by_default() {
    let f = files(true);
    let (data, stderr) = report(&f, Path::new("/"), &[]);
    check_report(&data, &stderr, &f);
    // A missing source directory is an error naming it.
    let o = tally!().run(&[
        "report",
        path_str(&f.profile),
        "--html",
        path_str(&f.profile.with_file_name("r.html")),
        "--source-dir",
        "/nonexistent-source-dir",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("/nonexistent-source-dir"), "{e}");
}

/// `tally serve --source-dir`, with the secret in its environment.
fn start(f: &Files) -> Server {
    let mut command = tally!().command();
    command.env("TALLY_TEST_SECRET", ENV_SECRET).args([
        "serve",
        path_str(&f.profile),
        "--source-dir",
        path_str(&f.src),
    ]);
    Server::start(command)
}

/// The body of `GET /api/{call}`, which must succeed.
fn get(server: &Server, call: &str) -> String {
    let (status, body) = server.get(call);
    assert_eq!(status, 200, "{call}: {body}");
    body
}

/// The server's source view, cut to the function and whole, follows the
/// same rule: the allowed file shown, the others said to be left out.
#[test]
fn the_server_shows_sources_from_the_source_dirs_only() {
    let f = files(false);
    let server = start(&f);
    get(&server, "ready");
    let table: Value = serde_json::from_str(&get(&server, "functions")).unwrap();
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), FUNCTIONS.len(), "{table}");
    let asm = get(&server, &format!("asm?node={}", rows[0]["node"]));
    assert!(
        asm.contains("/dev/zero: under /proc, /sys or /dev"),
        "{asm}"
    );
    for r in rows {
        let name = r["name"].as_str().unwrap();
        let node = r["node"].as_u64().unwrap();
        for whole in ["0", "1"] {
            let src = get(&server, &format!("source?node={node}&whole={whole}"));
            holds_no_secret(&f, &src);
            if name == "allowed" {
                assert!(src.contains(ALLOWED), "{src}");
            } else if name != "shadow" || f.shadow.is_some() {
                assert!(src.contains("left out"), "{name}: {src}");
                assert!(!src.contains(ALLOWED), "{name}: {src}");
            }
        }
    }
}
