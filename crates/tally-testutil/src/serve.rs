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
