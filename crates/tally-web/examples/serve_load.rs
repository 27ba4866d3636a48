//! Measures `tally serve` on one profile: latency of the table, callers
//! and graph routes (first request and repeated), requests per second of
//! the table route with several clients, and a client's latency while a
//! thousand idle connections and slowloris clients hold the server, with
//! the server's peak memory.
//!
//!     cargo build --release -p tally-cli -p tally-gen
//!     target/release/tally-gen --size 330M --seed 1 -o /tmp/gen330   # 102,220 functions
//!     cargo run --release -p tally-web --example serve_load -- /tmp/gen330
//!
//! Options: `--tally PATH` (default `target/release/tally`),
//! `--connections N` (idle, default 1000), `--slowloris N` (default 50),
//! `--clients N` (for requests per second, default 4).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tally_testutil::serve::Server;

/// A keep-alive client.
struct Client {
    port: u16,
    token: String,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    fn new(s: &Server) -> Client {
        Client {
            port: s.port,
            token: s.token.clone(),
            conn: None,
        }
    }

    /// `GET /api/CALL`: the status and the body; a closed connection is
    /// opened again once.
    fn get(&mut self, call: &str) -> (u16, Vec<u8>) {
        for _ in 0..2 {
            if let Some(r) = self.try_get(call) {
                return r;
            }
            self.conn = None;
        }
        (0, Vec::new())
    }

    fn try_get(&mut self, call: &str) -> Option<(u16, Vec<u8>)> {
        if self.conn.is_none() {
            let s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
            s.set_nodelay(true).ok()?;
            self.conn = Some(BufReader::new(s));
        }
        let c = self.conn.as_mut()?;
        let sep = if call.contains('?') { '&' } else { '?' };
        let req = format!(
            "GET /api/{call}{sep}t={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.token, self.port
        );
        c.get_mut().write_all(req.as_bytes()).ok()?;
        let mut status = 0;
        let mut length = 0;
        let mut line = String::new();
        loop {
            line.clear();
            if c.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some(code) = l.strip_prefix("HTTP/1.1 ") {
                status = code.get(..3)?.parse().ok()?;
            } else if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().ok()?;
            }
        }
        let mut body = vec![0; length];
        c.read_exact(&mut body).ok()?;
        Some((status, body))
    }

    /// The time of `GET /api/CALL`, which must answer 200.
    fn time(&mut self, call: &str) -> Duration {
        let t = Instant::now();
        let (status, body) = self.get(call);
        let d = t.elapsed();
        assert_eq!(status, 200, "{call}: {}", String::from_utf8_lossy(&body));
        d
    }
}

fn start(tally: &str, profile: &str) -> Server {
    let mut command = Command::new(tally);
    command.args(["serve", profile]);
    Server::start(command)
}

fn peak_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// `n requests, p50 X ms, p99 Y ms` of `times`.
fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let n = times.len();
    format!(
        "{n} requests, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(times[n / 2]),
        ms(times[(n * 99 / 100).min(n - 1)]),
        ms(times[n - 1])
    )
}

/// Idle and slowloris connections held (and opened again when the server
/// closes them) until `stop`.
fn attack(
    s: &Server,
    idle: usize,
    slow: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    tally_testutil::serve::hold(
        s.port,
        &s.token,
        idle,
        slow,
        8000,
        Duration::from_millis(200),
        stop,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut profile = None;
    let mut tally = "target/release/tally".to_owned();
    let (mut idle, mut slow, mut clients) = (1000, 50, 4);
    while let Some(a) = args.next() {
        let mut value = || args.next().expect("a value");
        match a.as_str() {
            "--tally" => tally = value(),
            "--connections" => idle = value().parse().expect("a number"),
            "--slowloris" => slow = value().parse().expect("a number"),
            "--clients" => clients = value().parse().expect("a number"),
            _ => profile = Some(a),
        }
    }
    let profile = profile.expect(
        "usage: serve_load PROFILE [--tally PATH] [--connections N] [--slowloris N] [--clients N]",
    );
    let t = Instant::now();
    let server = start(&tally, &profile);
    let mut c = Client::new(&server);
    c.time("ready");
    println!(
        "{profile}: ready (gprof's analysis done) after {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let (_, first) = c.get("functions?limit=200");
    let page: serde_json::Value = serde_json::from_slice(&first).expect("JSON");
    let count = page["count"].as_u64().unwrap_or(0) as usize;
    let nodes: Vec<u64> = page["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["node"].as_u64())
        .collect();
    println!("{count} rows in the table");

    let same: Vec<Duration> = (0..1000).map(|_| c.time("functions?limit=100")).collect();
    println!("table, one page again:      {}", summary(same));
    let pages = (count / 100).min(1000);
    let scroll: Vec<Duration> = (0..pages)
        .map(|k| c.time(&format!("functions?limit=100&offset={}", k * 100)))
        .collect();
    println!("table, every page once:     {}", summary(scroll));
    for sort in ["name", "file", "inclusive", "calls"] {
        let first = c.time(&format!("functions?limit=100&sort={sort}"));
        let next = c.time(&format!("functions?limit=100&sort={sort}&offset=100"));
        println!(
            "table sorted by {sort}: first page {:.1} ms, next page {:.2} ms",
            first.as_secs_f64() * 1e3,
            next.as_secs_f64() * 1e3
        );
    }
    let cold: Vec<Duration> = nodes
        .iter()
        .map(|n| c.time(&format!("function?node={n}")))
        .collect();
    println!("callers, first time:        {}", summary(cold));
    let warm: Vec<Duration> = (0..1000)
        .map(|k| c.time(&format!("function?node={}", nodes[k % nodes.len()])))
        .collect();
    println!("callers, again:             {}", summary(warm));
    let drawn = &nodes[..20.min(nodes.len())];
    let cold: Vec<Duration> = drawn
        .iter()
        .map(|n| c.time(&format!("graph?node={n}")))
        .collect();
    println!("graph, first time (dot):    {}", summary(cold));
    let warm: Vec<Duration> = (0..1000)
        .map(|k| c.time(&format!("graph?node={}", drawn[k % drawn.len()])))
        .collect();
    println!("graph, again:               {}", summary(warm));

    // Requests per second: `clients` keep-alive clients on pages of the table.
    let done = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|w| {
            let mut c = Client::new(&server);
            let done = done.clone();
            std::thread::spawn(move || {
                let mut k = w;
                while t.elapsed() < Duration::from_secs(5) {
                    c.time(&format!(
                        "functions?limit=100&offset={}",
                        (k % pages.max(1)) * 100
                    ));
                    done.fetch_add(1, Ordering::Relaxed);
                    k += clients;
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a client");
    }
    let n = done.load(Ordering::Relaxed);
    println!(
        "table, {clients} clients for {:.1} s: {n} requests, {:.0} requests/s",
        t.elapsed().as_secs_f64(),
        n as f64 / t.elapsed().as_secs_f64()
    );

    // Under attack.
    let before = peak_mib(server.child.id());
    let stop = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let hog = attack(&server, idle, slow, stop.clone());
    println!(
        "{idle} idle and {slow} slowloris connections opened in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let mut c = Client::new(&server);
    let times: Vec<Duration> = (0..2000)
        .map(|k| {
            if k % 2 == 0 {
                c.time(&format!(
                    "functions?limit=100&offset={}",
                    (k % pages.max(1)) * 100
                ))
            } else {
                c.time(&format!("function?node={}", nodes[k % nodes.len()]))
            }
        })
        .collect();
    println!("a client meanwhile:         {}", summary(times));
    std::thread::sleep(Duration::from_secs(12));
    let fresh: Vec<Duration> = (0..200)
        .map(|k| {
            let mut c = Client::new(&server);
            c.time(&format!(
                "functions?limit=100&offset={}",
                (k % pages.max(1)) * 100
            ))
        })
        .collect();
    println!("after 12 s, new connections: {}", summary(fresh));
    stop.store(true, Ordering::Relaxed);
    let closed = hog.join().expect("the attack");
    println!(
        "server peak RSS {} MiB before the connections, {} MiB after; the server closed the attack's connections {closed} times",
        before,
        peak_mib(server.child.id())
    );
}
