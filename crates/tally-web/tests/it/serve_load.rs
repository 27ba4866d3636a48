//! `tally serve`'s server under load and abuse: a thousand idle
//! connections, clients that send a request's head a byte at a time, too
//! few descriptors, duplicate Host headers. Each server runs in a process
//! of its own (this test binary run again, [`server_process`]), so that it
//! has its own descriptor limit and a crash shows as its exit; every reply
//! a normal client gets is compared with the API's reply made in this
//! process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tally_testutil::{data, temp_dir};
use tally_web::{LoadOptions, Session};

/// Set in the server's process: `PROFILE|CONNECTIONS|HEAD_MS` (0
/// connections: the default cap).
const CHILD: &str = "TALLY_WEB_TEST_SERVER";

const PROFILE: &str = "callgrind/workload.default.out";

/// The server the other tests start: run by them, never alone.
#[test]
#[ignore = "the server process of this module's tests, which start it"]
fn server_process() {
    let spec = std::env::var(CHILD).expect("started by serve_load's tests, with the server's spec");
    let parts: Vec<&str> = spec.split('|').collect();
    let [profile, connections, head] = parts[..] else {
        panic!("{CHILD}: `{spec}` is not PROFILE|CONNECTIONS|HEAD_MS");
    };
    let session = Session::load(&[PathBuf::from(profile)], &LoadOptions::default()).expect("loads");
    let mut bound = tally_web::bind(None).expect("binds");
    let connections: usize = connections.parse().expect("a number of connections");
    if connections > 0 {
        bound = bound.max_connections(connections);
    }
    bound = bound.head_timeout(Duration::from_millis(head.parse().expect("milliseconds")));
    println!("{}", bound.url());
    std::io::stdout().flush().expect("stdout");
    bound.serve(Arc::new(session)).expect("serves");
}

/// A server process: killed when dropped.
struct Server {
    child: Child,
    port: u16,
    token: String,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Serves the test profile; with `nofile`, under that descriptor
    /// limit (soft and hard).
    fn start(nofile: Option<u32>, connections: usize, head: Duration) -> Server {
        let dir = temp_dir();
        let stderr = dir.path().join("stderr");
        let exe = std::env::current_exe().expect("the test binary");
        let limit = nofile.map_or(String::new(), |n| format!("ulimit -n {n} && "));
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("{limit}exec \"$0\" \"$@\""))
            .arg(exe)
            .args([
                "serve_load::server_process",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(
                CHILD,
                format!(
                    "{}|{connections}|{}",
                    data(PROFILE).display(),
                    head.as_millis()
                ),
            )
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("starts the server");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let url = out
            .lines()
            .map(|l| l.expect("the server's output"))
            .find(|l| l.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL: {}", read(&stderr)));
        let rest = url.strip_prefix("http://127.0.0.1:").expect("loopback");
        let (port, token) = rest.split_once("/?t=").expect("a token");
        Server {
            child,
            port: port.parse().expect("a port"),
            token: token.to_owned(),
            stderr,
            _dir: dir,
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `GET /api/CALL` with the token and the right Host.
    fn get(&self, call: &str) -> (u16, Vec<u8>) {
        let sep = if call.contains('?') { '&' } else { '?' };
        let head = format!(
            "GET /api/{call}{sep}t={} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.token,
            self.host()
        );
        exchange(self.port, head.as_bytes())
    }

    /// Asserts that the process still runs.
    fn alive(&mut self) {
        let status = self.child.try_wait().expect("waits");
        assert!(
            status.is_none(),
            "the server ended ({status:?}): {}",
            read(&self.stderr)
        );
    }

    /// Its peak resident memory, in KiB.
    fn peak_kib(&self) -> u64 {
        let status = read(Path::new(&format!("/proc/{}/status", self.child.id())));
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Sends `request` on a connection of its own and reads the reply to its
/// end: the status (0 if the connection ended without one) and body.
fn exchange(port: u16, request: &[u8]) -> (u16, Vec<u8>) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, Vec::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut reply = Vec::new();
    if s.write_all(request).is_err() || s.read_to_end(&mut reply).is_err() {
        return (0, Vec::new());
    }
    let Some(end) = reply.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (0, Vec::new());
    };
    let head = String::from_utf8_lossy(&reply[..end]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, reply[end + 4..].to_vec())
}

/// The API's reply to `call` made in this process, as JSON.
fn expected(s: &Session, call: &str) -> Value {
    let (path, query) = call.split_once('?').unwrap_or((call, ""));
    let q = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let r = tally_web::handle(s, path, &q).unwrap_or_else(|e| panic!("{call}: {e}"));
    serde_json::from_slice(&r.body).expect("JSON")
}

/// Asserts that the server answers `call` as the API does here, trying
/// again while `retry` lasts (a connection closed for room is retried, as
/// browsers do).
fn answered(server: &Server, s: &Session, call: &str, retry: Duration) {
    let start = Instant::now();
    loop {
        let (status, body) = server.get(call);
        if status == 200 {
            let got: Value = serde_json::from_slice(&body).expect("JSON");
            assert_eq!(got, expected(s, call), "{call}");
            return;
        }
        assert!(
            status == 0 && start.elapsed() < retry,
            "{call}: status {status}: {}",
            String::from_utf8_lossy(&body)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Raises this process's descriptor limit to at least `n` if the hard
/// limit allows; returns the limit.
fn descriptors(n: u64) -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    let soft = l.current.unwrap_or(u64::MAX);
    if soft >= n {
        return soft;
    }
    let hard = l.maximum.unwrap_or(u64::MAX);
    l.current = Some(n.min(hard));
    let _ = setrlimit(Resource::Nofile, l);
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// `count` connections that send nothing.
fn idle(port: u16, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map_while(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect()
}

/// `idle` clients that send nothing and `slow` ones that send a request's
/// head a byte every 100 ms, each connecting again when the server closes
/// it, until `stop`; returns how many times the server closed one.
fn attackers(
    server: &Server,
    idle: usize,
    slow: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    tally_testutil::serve::hold(
        server.port,
        &server.token,
        idle,
        slow,
        4000,
        Duration::from_millis(100),
        stop,
    )
}

#[test]
fn duplicate_or_missing_host_gets_400() {
    let server = Server::start(None, 0, Duration::from_secs(10));
    let token = &server.token;
    let host = server.host();
    let with = |headers: &str| {
        let head =
            format!("GET /api/meta?t={token} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n");
        exchange(server.port, head.as_bytes()).0
    };
    assert_eq!(with(&format!("Host: {host}\r\n")), 200);
    // The right Host first, then another: RFC 9112 says 400.
    assert_eq!(
        with(&format!("Host: {host}\r\nHost: evil.example\r\n")),
        400
    );
    assert_eq!(with(&format!("Host: {host}\r\nHost: {host}\r\n")), 400);
    assert_eq!(with(""), 400);
    assert_eq!(with("Host: evil.example\r\n"), 403);
    // A target in absolute form names the host that counts.
    let absolute = format!(
        "GET http://evil.example/api/meta?t={token} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(exchange(server.port, absolute.as_bytes()).0, 403);
    // Only GET and HEAD; no bodies; heads of bounded size.
    let post = format!(
        "POST /api/meta?t={token} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    assert_eq!(exchange(server.port, post.as_bytes()).0, 405);
    let body = format!(
        "GET /api/meta?t={token} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    assert_eq!(exchange(server.port, body.as_bytes()).0, 413);
    assert_eq!(
        with(&format!(
            "Host: {host}\r\nX-Big: {}\r\n",
            "a".repeat(20_000)
        )),
        431
    );
    let long = format!(
        "GET /api/meta?t={token}&x={} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_ne!(exchange(server.port, long.as_bytes()).0, 200);
}

#[test]
fn slow_and_idle_connections_are_closed() {
    let head = Duration::from_secs(1);
    let mut server = Server::start(None, 0, head);
    let s = Session::load(&[data(PROFILE)], &LoadOptions::default()).expect("loads");
    // One sends nothing, one has had its reply and stays open, one sends
    // its head a byte at a time for ever.
    let silent = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut kept = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(
        kept,
        "GET /api/meta?t={} HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.token,
        server.host()
    )
    .unwrap();
    let mut slow = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let start = Instant::now();
    for c in [&silent, &kept, &slow] {
        c.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
    }
    let head_bytes = format!(
        "GET /api/meta?t={} HTTP/1.1\r\nHost: {}\r\nX-Padding: {}\r\n\r\n",
        server.token,
        server.host(),
        "a".repeat(1000)
    );
    let mut open = [true; 3];
    let mut sent = 0;
    let mut buf = [0u8; 4096];
    while open.iter().any(|&o| o) {
        assert!(
            start.elapsed() < 30 * head,
            "still open after {:?}: silent, kept, slow = {open:?}",
            start.elapsed()
        );
        if open[2] && sent < head_bytes.len() {
            if slow.write_all(&head_bytes.as_bytes()[sent..=sent]).is_err() {
                open[2] = false;
            }
            sent += 1;
        }
        for (k, mut c) in [&silent, &kept, &slow].into_iter().enumerate() {
            // A reply to `kept` first; then the end of the stream.
            loop {
                match c.read(&mut buf) {
                    Ok(0) => open[k] = false,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => open[k] = false,
                    Err(_) => {}
                }
                break;
            }
        }
        // Meanwhile others are answered.
        answered(&server, &s, "functions?limit=5", Duration::ZERO);
    }
    assert!(
        sent < head_bytes.len(),
        "the slow head was sent whole before it was cut off"
    );
    server.alive();
}

#[test]
fn too_few_descriptors_is_survived() {
    let s = Session::load(&[data(PROFILE)], &LoadOptions::default()).expect("loads");
    // 64 descriptors: the default cap stays below them; a cap of 1,000
    // does not, so `accept` fails with EMFILE.
    for connections in [0, 1000] {
        let mut server = Server::start(Some(64), connections, Duration::from_secs(10));
        let hog = idle(server.port, 300);
        assert_eq!(hog.len(), 300);
        answered(&server, &s, "meta", Duration::from_secs(60));
        answered(&server, &s, "functions?limit=10", Duration::from_secs(60));
        server.alive();
        if connections > 0 {
            let err = read(&server.stderr);
            assert!(
                err.contains("cannot accept a connection: Too many open files"),
                "{err}"
            );
        }
        drop(hog);
        answered(
            &server,
            &s,
            "functions?limit=10&sort=name",
            Duration::from_secs(60),
        );
        server.alive();
    }
}

#[test]
fn a_thousand_connections_and_slowloris_leave_a_client_answered() {
    let wanted = 1000;
    let limit = descriptors(wanted as u64 + 512);
    let held = wanted.min(limit.saturating_sub(256) as usize);
    let mut server = Server::start(None, 0, Duration::from_secs(2));
    let s = Session::load(&[data(PROFILE)], &LoadOptions::default()).expect("loads");
    let stop = Arc::new(AtomicBool::new(false));
    let hog = attackers(&server, held, 20, stop.clone());
    let calls = [
        "functions?limit=100",
        "functions?limit=100&sort=name",
        "functions?limit=100&offset=50&desc=0",
        "functions?limit=20&filter=main|sort",
        "functions?group=file",
        "function?node=0",
        "function?node=3",
        "meta",
    ];
    let start = Instant::now();
    let rounds = 8;
    for _ in 0..rounds {
        for call in calls {
            answered(&server, &s, call, Duration::from_secs(60));
        }
    }
    let elapsed = start.elapsed();
    let with_two_hosts = format!(
        "GET /api/meta?t={} HTTP/1.1\r\nHost: {}\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
        server.token,
        server.host()
    );
    assert_eq!(exchange(server.port, with_two_hosts.as_bytes()).0, 400);
    stop.store(true, Ordering::Relaxed);
    let cut = hog.join().expect("the idle and slow clients");
    server.alive();
    let requests = rounds * calls.len();
    eprintln!(
        "{held} idle connections and 20 slowloris clients (closed by the server {cut} times): \
         {requests} requests answered at {:.0}/s, server peak RSS {} MiB",
        requests as f64 / elapsed.as_secs_f64(),
        server.peak_kib() / 1024
    );
}
