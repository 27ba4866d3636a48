//! The front ends under mutated input, as a user runs them: the `tally`
//! binary itself, one process per case, for `graph` (DOT, and SVG through
//! Graphviz or tally's own layout), `flame`, `gate` and `report --html`;
//! and one `tally serve` per seed, sent mutated HTTP requests with its
//! token. A process that dies of a signal or panics (101), an error that
//! names no input, an output that is cut short, a case past its time
//! bound, a reply that is no HTTP, or a server that stops answering, is a
//! failure, kept as a file that reproduces it.

use crate::corpus::{Corpus, Kind, Seed};
use crate::mutate::mutate;
use crate::rng::{Rng, mix};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The command lines a case runs through, `{in}`, `{seed}` and `{out}`
/// standing for the case's file, its seed's and the output.
const COMMANDS: [&[&str]; 6] = [
    &["graph", "{in}", "-o", "{out}.dot"],
    &["graph", "{in}", "-n", "0", "-e", "0", "-o", "{out}.svg"],
    &["flame", "{in}", "-o", "{out}.svg"],
    &["gate", "{in}", "{in}"],
    &["gate", "{seed}", "{in}", "--format", "json"],
    &["report", "--html", "{out}.html", "{in}"],
];

/// The API routes of `tally serve`, and query keys they take.
const ROUTES: [&str; 9] = [
    "/",
    "/api/meta",
    "/api/functions",
    "/api/ready",
    "/api/function",
    "/api/graph",
    "/api/flame",
    "/api/source",
    "/api/asm",
];
const KEYS: [&str; 8] = [
    "event", "node", "part", "limit", "sort", "group", "offset", "file",
];

/// One failure: what ran, and why it failed.
#[derive(Debug, Clone)]
pub struct FrontFailure {
    /// The command or request.
    pub what: String,
    /// What went wrong.
    pub why: String,
    /// A file holding the input that reproduces it.
    pub case: PathBuf,
}

/// Settings of a front-end run.
pub struct FrontSettings {
    /// The `tally` binary.
    pub tally: PathBuf,
    /// Cases run through the commands.
    pub cases: u64,
    /// Requests sent to each server.
    pub requests: u64,
    /// The seed of the random choices.
    pub seed: u64,
    /// How long one process or request may take.
    pub bound: Duration,
    /// Where failing inputs are kept.
    pub out: PathBuf,
}

/// The seeds the front ends read: Callgrind, Cachegrind and folded ones,
/// small enough that a process per case stays quick.
fn seeds(corpus: &Corpus) -> Vec<&Seed> {
    [Kind::Callgrind, Kind::Cachegrind, Kind::Folded]
        .into_iter()
        .flat_map(|k| corpus.of(k))
        .filter(|s| s.bytes.len() <= 256 << 10)
        .collect()
}

/// Runs the cases and the requests; returns the failures.
pub fn run(corpus: &Corpus, s: &FrontSettings) -> std::io::Result<Vec<FrontFailure>> {
    let dir = tempfile_dir()?;
    let seeds = seeds(corpus);
    let mut failures = Vec::new();
    if seeds.is_empty() {
        return Ok(failures);
    }
    for i in 0..s.cases {
        let mut rng = Rng::new(mix(s.seed ^ mix(i)));
        let seed = *rng.pick(&seeds);
        let (input, _) = mutate(&mut rng, &seed.bytes, false, &corpus.lines);
        let command = *rng.pick(&COMMANDS);
        let input_path = dir.join(format!("case-{i}.{}", extension(seed.kind)));
        let seed_path = dir.join(format!("seed-{i}.{}", extension(seed.kind)));
        std::fs::write(&input_path, &input)?;
        std::fs::write(&seed_path, &seed.bytes)?;
        let out = dir.join(format!("out-{i}"));
        let args: Vec<String> = command
            .iter()
            .map(|a| {
                a.replace("{in}", &input_path.to_string_lossy())
                    .replace("{seed}", &seed_path.to_string_lossy())
                    .replace("{out}", &out.to_string_lossy())
            })
            .collect();
        if let Err(why) = one_command(s, &args, &input_path) {
            let case = keep(s, &format!("front-{}-{i}", command[0]), &input)?;
            failures.push(FrontFailure {
                what: format!("tally {}", command.join(" ")),
                why,
                case,
            });
        }
        for f in [&input_path, &seed_path] {
            let _ = std::fs::remove_file(f);
        }
        for ext in ["dot", "svg", "html"] {
            let _ = std::fs::remove_file(out.with_extension(ext));
        }
    }
    // One server per text format, on its first seed that reads.
    for kind in [Kind::Callgrind, Kind::Cachegrind] {
        let path = dir.join(format!("serve.{}", extension(kind)));
        for seed in corpus
            .of(kind)
            .into_iter()
            .filter(|x| x.bytes.len() <= 256 << 10)
        {
            std::fs::write(&path, &seed.bytes)?;
            let check = Command::new(&s.tally)
                .arg("check")
                .arg(&path)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?;
            if check.success() {
                failures.extend(serve(s, &path, kind)?);
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(failures)
}

fn extension(kind: Kind) -> &'static str {
    match kind {
        Kind::Folded => "folded",
        _ => "out",
    }
}

/// A fresh folder for the cases' files.
fn tempfile_dir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("tally-fuzz-front-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Keeps a failing input in the output folder.
fn keep(s: &FrontSettings, name: &str, input: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(&s.out)?;
    let p = s.out.join(format!("{name}.input"));
    std::fs::write(&p, input)?;
    Ok(p)
}

/// Waits for `child` within `bound`, killing it past that. Its output
/// goes to files, not pipes, which a child blocks on when they fill.
fn wait(mut child: Child, bound: Duration) -> Result<std::process::ExitStatus, String> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if start.elapsed() > bound => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("still running after {bound:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Runs one command line and checks how it ended and what it wrote.
fn one_command(s: &FrontSettings, args: &[String], input: &Path) -> Result<(), String> {
    let err_path = input.with_extension("stderr");
    let err_file = std::fs::File::create(&err_path).map_err(|e| e.to_string())?;
    let child = Command::new(&s.tally)
        .args(args)
        // Graphviz's bound kept short, so that tally's own layout is
        // driven too; stdout is large for `graph -o -`, so not piped.
        .env("TALLY_DOT_TIMEOUT", "0.5")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", s.tally.display()))?;
    let status = wait(child, s.bound)?;
    let err = clip(&String::from_utf8_lossy(
        &std::fs::read(&err_path).map_err(|e| e.to_string())?,
    ));
    let _ = std::fs::remove_file(&err_path);
    let gate = args[0] == "gate";
    // `gate` exits 1 for a regression and 2 for input it cannot read;
    // every other command exits 1 for bad input.
    let bad_input = if gate { 2 } else { 1 };
    match status.code() {
        Some(0) => {}
        Some(1) if gate => {
            if args[1] == args[2] {
                return Err(format!(
                    "a profile failed its gate against itself: {}",
                    err.trim()
                ));
            }
            return Ok(());
        }
        Some(code) if code == bad_input => {
            // The error names the input it concerns.
            let name = input.file_name().map(|n| n.to_string_lossy().into_owned());
            if !name.is_some_and(|n| err.contains(&n)) && !err.contains("seed-") {
                return Err(format!("an error that names no input: {}", err.trim()));
            }
            return Ok(());
        }
        Some(code) => return Err(format!("exit status {code}: {}", err.trim())),
        None => return Err(format!("ended by a signal: {}", err.trim())),
    }
    if err.contains("panicked") {
        return Err(format!("a panic: {}", err.trim()));
    }
    // Outputs are whole.
    let out = args
        .iter()
        .find(|a| a.ends_with(".dot") || a.ends_with(".svg") || a.ends_with(".html"));
    if let Some(out) = out {
        let bytes = std::fs::read(out).map_err(|e| format!("{out}: {e}"))?;
        let tail: &[u8] = if out.ends_with(".dot") {
            b"}\n"
        } else if out.ends_with(".svg") {
            b"</svg>\n"
        } else {
            b"</html>\n"
        };
        if !bytes.ends_with(tail) {
            return Err(format!(
                "{out} does not end with {:?}",
                String::from_utf8_lossy(tail)
            ));
        }
    }
    Ok(())
}

/// At most 400 characters of a message, for the report.
fn clip(s: &str) -> String {
    match s.char_indices().nth(400) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Starts `tally serve` on `path`, sends it mutated requests, and checks
/// that each gets an HTTP reply and that it still serves at the end.
fn serve(s: &FrontSettings, path: &Path, kind: Kind) -> std::io::Result<Vec<FrontFailure>> {
    let mut child = Command::new(&s.tally)
        .args(["serve", &path.to_string_lossy()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut failures = Vec::new();
    let fail = |what: String, why: String| FrontFailure {
        what,
        why,
        case: path.to_path_buf(),
    };
    let (port, token) = match url(&mut child) {
        Ok(u) => u,
        Err(said) => {
            let _ = child.kill();
            let _ = child.wait();
            failures.push(fail(
                "tally serve".into(),
                format!("printed no URL: {said}"),
            ));
            return Ok(failures);
        }
    };
    for i in 0..s.requests {
        let mut rng = Rng::new(mix(s.seed ^ mix(i) ^ 0x5e7e));
        let request = request(&mut rng, port, &token);
        if let Err(why) = exchange(port, &request, s.bound) {
            let case = keep(s, &format!("serve-{}-{i}", kind.name()), &request)?;
            failures.push(FrontFailure {
                what: format!("request {i} to tally serve"),
                why,
                case,
            });
            if child.try_wait()?.is_some() {
                break;
            }
        }
    }
    // Still up, and still answering the page's first request.
    let meta = format!(
        "GET /api/meta?t={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    match exchange(port, meta.as_bytes(), s.bound) {
        Ok(200) => {}
        Ok(code) => failures.push(fail("GET /api/meta".into(), format!("status {code}"))),
        Err(why) => failures.push(fail("GET /api/meta".into(), why)),
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(failures)
}

/// The port and token of the URL `tally serve` prints, waiting at most
/// a minute for it.
fn url(child: &mut Child) -> Result<(u16, String), String> {
    let mut out = child.stdout.take().ok_or("no standard output")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    seen.extend_from_slice(&buf[..n]);
                    if seen.contains(&b'\n') {
                        let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
                        // The rest is not read again: drained.
                        let _ = std::io::copy(&mut out, &mut std::io::sink());
                        return;
                    }
                }
            }
        }
        let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
    });
    let text = rx
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| "nothing within a minute".to_string())?;
    let at = text.find("http://127.0.0.1:").ok_or_else(|| clip(&text))?;
    let rest = &text[at + "http://127.0.0.1:".len()..];
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    rest[..end]
        .split_once('/')
        .and_then(|(port, query)| {
            Some((port.parse().ok()?, query.strip_prefix("?t=")?.to_string()))
        })
        .ok_or_else(|| clip(&text))
}

/// A request: a route with mutated query values, sometimes a wrong or
/// missing token, a doubled or wrong Host, odd methods, huge fields.
fn request(rng: &mut Rng, port: u16, token: &str) -> Vec<u8> {
    let route = *rng.pick(&ROUTES);
    let mut query = String::new();
    match rng.below(10) {
        0 => {}
        1 => query.push_str("t=0000"),
        _ => query.push_str(&format!("t={token}")),
    }
    for _ in 0..rng.below(4) {
        let key = *rng.pick(&KEYS);
        let value = match rng.below(8) {
            0 => "-1".to_string(),
            1 => "18446744073709551616".to_string(),
            2 => "%00%ff".to_string(),
            3 => "x".repeat(rng.below(20_000)),
            4 => "Ir".to_string(),
            5 => "".to_string(),
            _ => rng.below(50).to_string(),
        };
        query.push_str(&format!("&{key}={value}"));
    }
    let method = *rng.pick(&["GET", "GET", "GET", "HEAD", "POST", "DELETE", "G\u{1}T"]);
    let mut r = format!("{method} {route}?{query} HTTP/1.1\r\n");
    match rng.below(8) {
        0 => {}
        1 => r.push_str("Host: evil.example\r\n"),
        2 => r.push_str(&format!("Host: 127.0.0.1:{port}\r\nHost: evil.example\r\n")),
        _ => r.push_str(&format!("Host: 127.0.0.1:{port}\r\n")),
    }
    if rng.one_in(6) {
        r.push_str(&format!("X-Big: {}\r\n", "y".repeat(rng.below(200_000))));
    }
    if rng.one_in(6) {
        r.push_str("Content-Length: 5\r\n\r\nhello");
    } else {
        r.push_str("Connection: close\r\n\r\n");
    }
    r.into_bytes()
}

/// Sends a request and reads the reply's status, within `bound`.
fn exchange(port: u16, request: &[u8], bound: Duration) -> Result<u16, String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(bound)).map_err(|e| e.to_string())?;
    c.set_write_timeout(Some(bound))
        .map_err(|e| e.to_string())?;
    // A server may answer a huge request before reading all of it and
    // close: a failed write is then no failure, a missing reply is.
    let _ = c.write_all(request);
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    while !head.windows(2).any(|w| w == b"\r\n") {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("no reply within {:?}: {e}", start.elapsed())),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let status = line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse::<u16>().ok());
    match status {
        Some(code) if code < 500 || code == 503 => Ok(code),
        Some(code) => Err(format!(
            "status {code}: {}",
            line.lines().next().unwrap_or("")
        )),
        // A connection closed with no reply: only for requests that are
        // no HTTP at all (a bad method) does the server owe none.
        None if request.starts_with(b"G\x01T") => Ok(400),
        None => Err(format!(
            "no HTTP reply: {:?}",
            line.chars().take(80).collect::<String>()
        )),
    }
}
