//! The server of `tally serve`: on 127.0.0.1 only, every request checked
//! for the secret token of the printed URL (`?t=`) and for one Host header
//! naming the loopback address and port (so a page of another site, whose
//! name was rebound to 127.0.0.1, is refused). `/` is the page, `/api/*`
//! the JSON API; anything else is 404.
//!
//! Any local program can connect, so the server bounds what a client may
//! hold: a request's head must arrive whole within a timeout (which also
//! closes idle keep-alive connections), its size is bounded, a reply whose
//! reader stops reading is dropped, and connections are capped below the
//! process's descriptor limit. Past the cap, the least recently used
//! connection without a request in progress is closed for the new one,
//! or, if every connection is busy, new ones wait in the kernel's queue.
//! An error of `accept` (no descriptor left, no memory) closes such a
//! connection too, waits a moment and goes on: the server never stops.

mod conns;
mod request;
mod stall;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::session::Session;
use crate::{Error, page};
use conns::Conns;
use request::App;

/// A listening socket, the token its URL carries and the server's bounds.
pub struct Bound {
    listener: TcpListener,
    token: String,
    port: u16,
    limits: Limits,
}

/// What one client may hold of the server.
#[derive(Clone, Debug)]
struct Limits {
    /// Connections open at once.
    connections: usize,
    /// Time for a request's head to arrive whole, from the connection's
    /// start or the end of the previous reply: slow senders and idle
    /// keep-alive connections are closed after it.
    head: Duration,
    /// Time a reply may wait for its reader to take more of it.
    stall: Duration,
}

/// Connections at most, whatever the descriptor limit.
const MAX_CONNECTIONS: usize = 1024;
/// Descriptors kept for the rest of the process (inputs, sources,
/// `dot`'s pipes, the runtime's own).
const RESERVED_FDS: u64 = 32;
/// Bytes of a request's head (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// Header lines of a request.
const MAX_HEADERS: usize = 64;
/// Connections the kernel queues for `accept`.
const BACKLOG: i32 = 1024;
/// Threads answering requests that are not kept already.
const WORKERS: usize = 8;

impl Default for Limits {
    /// Three quarters of the descriptors left after the reserve (at most
    /// [`MAX_CONNECTIONS`]), 10 s for a request's head, 30 s for a stalled
    /// reply.
    fn default() -> Limits {
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        let room = soft.saturating_sub(RESERVED_FDS).saturating_mul(3) / 4;
        Limits {
            connections: usize::try_from(room)
                .unwrap_or(MAX_CONNECTIONS)
                .clamp(1, MAX_CONNECTIONS),
            head: Duration::from_secs(10),
            stall: Duration::from_secs(30),
        }
    }
}

/// Listens on 127.0.0.1 (never another address), on `port` or one the
/// system chooses, with a new random token.
pub fn bind(port: Option<u16>) -> Result<Bound, Error> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port.unwrap_or(0))))?;
    // A longer queue than the standard library's 128, so that a burst of
    // connections waits for `accept` instead of having its SYNs dropped.
    rustix::net::listen(&listener, BACKLOG).map_err(std::io::Error::from)?;
    let port = listener.local_addr()?.port();
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Io(std::io::Error::other(format!("no random token: {e}"))))?;
    let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(Bound {
        listener,
        token,
        port,
        limits: Limits::default(),
    })
}

impl Bound {
    /// The URL to open: `http://127.0.0.1:PORT/?t=TOKEN`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/?t={}", self.port, self.token)
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves at most `n` connections at once (at least 1) instead of the
    /// default, which stays below the descriptor limit.
    pub fn max_connections(mut self, n: usize) -> Bound {
        self.limits.connections = n.max(1);
        self
    }

    /// Closes a connection whose request head has not arrived whole
    /// `after` its start or the previous reply (10 s by default).
    pub fn head_timeout(mut self, after: Duration) -> Bound {
        self.limits.head = after;
        self
    }

    /// Drops a reply its reader has taken nothing of for `after` (30 s by
    /// default).
    pub fn stall_timeout(mut self, after: Duration) -> Bound {
        self.limits.stall = after;
        self
    }

    /// Serves `session` until the process ends (shared: the caller may
    /// go on preparing views in another thread).
    pub fn serve(self, session: Arc<Session>) -> Result<(), Error> {
        let title = format!("tally — {}", session.inputs[session.main()].name);
        let app = Arc::new(App::new(
            session,
            self.token,
            self.port,
            page(&title, "null"),
        ));
        self.listener.set_nonblocking(true)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(WORKERS)
            .build()?;
        let limits = self.limits;
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)?;
            accept_loop(listener, app, limits).await;
            Ok::<(), std::io::Error>(())
        })?;
        Ok(())
    }
}

/// Accepts connections for ever: within the cap, each served by its own
/// task; on an error of `accept`, backs off and goes on.
async fn accept_loop(listener: tokio::net::TcpListener, app: Arc<App>, limits: Limits) {
    let conns = Arc::new(Conns::new(limits.connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.head)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .max_buf_size(2 * MAX_HEAD);
    let mut backoff = Backoff::new();
    loop {
        conns.room().await;
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                if !conns::passing(&e) {
                    if conns::out_of_resources(&e) {
                        conns.close_one();
                    }
                    backoff.wait(&e, conns.open()).await;
                }
                continue;
            }
        };
        backoff.reset();
        let _ = stream.set_nodelay(true);
        let (conn, open) = conns.opened();
        let io = TokioIo::new(stall::Stall::new(stream, limits.stall));
        let service = request::service(app.clone(), conns.clone(), conn.clone());
        let served = http.serve_connection(io, service);
        let task = tokio::spawn(async move {
            // Errors are the client's (reset, timeout, bad request): hyper
            // has answered what it could, and the connection ends.
            let _ = served.await;
            drop(open);
        });
        conns.track(&conn, task.abort_handle());
    }
}

/// Waits growing from 5 ms to 1 s while `accept` keeps failing, and says
/// so on standard error at most every 10 s.
struct Backoff {
    delay: Duration,
    said: Option<Instant>,
    unsaid: u64,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            delay: Duration::from_millis(5),
            said: None,
            unsaid: 0,
        }
    }

    fn reset(&mut self) {
        self.delay = Duration::from_millis(5);
    }

    async fn wait(&mut self, e: &std::io::Error, open: usize) {
        if self
            .said
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            let more = if self.unsaid > 0 {
                format!(", {} more since the last message", self.unsaid)
            } else {
                String::new()
            };
            eprintln!(
                "tally: serve: cannot accept a connection: {e} ({open} open{more}); retrying"
            );
            self.said = Some(Instant::now());
            self.unsaid = 0;
        } else {
            self.unsaid += 1;
        }
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(Duration::from_secs(1));
    }
}
