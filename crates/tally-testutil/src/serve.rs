//! A running `tally serve` for tests and benchmarks: started from a
//! command, its URL read from the line it prints, stopped when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

/// A `tally serve` process and the address it serves.
pub struct Server {
    /// The process (its id for memory readings).
    pub child: Child,
    /// The URL it printed, `http://127.0.0.1:PORT/?t=TOKEN`.
    pub url: String,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The URL's token.
    pub token: String,
}

impl Server {
    /// Starts `command` (a `tally serve …`) and waits for its URL; panics
    /// if it ends without printing one.
    pub fn start(mut command: Command) -> Server {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("tally serve starts");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut printed = Vec::new();
        let mut url = None;
        for line in out.lines().map_while(Result::ok) {
            url = line
                .split_whitespace()
                .find(|w| w.starts_with("http://127.0.0.1:"))
                .map(str::to_owned);
            printed.push(line);
            if url.is_some() {
                break;
            }
        }
        let url = url.unwrap_or_else(|| panic!("tally serve printed no URL: {printed:?}"));
        let (port, token) = url["http://127.0.0.1:".len()..]
            .split_once("/?t=")
            .unwrap_or_else(|| panic!("no token in {url}"));
        Server {
            port: port.parse().expect("a port"),
            token: token.to_owned(),
            url,
            child,
        }
    }

    /// `GET /api/{call}` on a new connection: the status and the body.
    pub fn get(&self, call: &str) -> (u16, String) {
        let sep = if call.contains('?') { '&' } else { '?' };
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        write!(
            s,
            "GET /api/{call}{sep}t={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.token, self.port
        )
        .expect("request sent");
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).expect("reply read");
        let reply = String::from_utf8_lossy(&reply).into_owned();
        let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
        let status = head
            .strip_prefix("HTTP/1.1 ")
            .and_then(|r| r.get(..3))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("{call}: no HTTP reply: {reply}"));
        (status, body.to_owned())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Holds `idle` connections that send nothing and `slow` ones that send
/// a request's head (with `padding` bytes of header) one byte every
/// `pause`, each opened again when the server closes it, until `stop`;
/// the thread returns how many times the server closed one (slowloris).
pub fn hold(
    port: u16,
    token: &str,
    idle: usize,
    slow: usize,
    padding: usize,
    pause: std::time::Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    let head = format!(
        "GET /api/meta?t={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(padding)
    )
    .into_bytes();
    let connect = move || {
        TcpStream::connect(("127.0.0.1", port))
            .inspect(|s| s.set_nonblocking(true).expect("non-blocking"))
            .ok()
    };
    let mut conns: Vec<(Option<TcpStream>, usize)> =
        (0..idle + slow).map(|_| (connect(), 0)).collect();
    std::thread::spawn(move || {
        let mut closed = 0;
        let mut buf = [0u8; 1024];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for (k, (c, sent)) in conns.iter_mut().enumerate() {
                let open = c.as_mut().is_some_and(|s| {
                    let sending = k >= idle && *sent < head.len();
                    let wrote = !sending || s.write_all(&head[*sent..=*sent]).is_ok();
                    // Open while reading would block: no reply, no end.
                    matches!(s.read(&mut buf),
                        Err(e) if wrote && e.kind() == std::io::ErrorKind::WouldBlock)
                });
                if open {
                    *sent += usize::from(k >= idle);
                } else {
                    closed += 1;
                    *c = connect();
                    *sent = 0;
                }
            }
            std::thread::sleep(pause);
        }
        closed
    })
}
