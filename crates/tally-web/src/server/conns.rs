//! The open connections, at most a cap: which are busy (a request being
//! answered), which were used least recently, and which to close when a
//! new one needs the room or `accept` runs out of descriptors.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rustix::io::Errno;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

/// The connections open, and the cap on them.
pub struct Conns {
    cap: usize,
    open: Mutex<HashMap<u64, Entry>>,
    /// A connection ended or finished a request: there may be room.
    changed: Notify,
    /// Ticks of use: a connection's last use is the tick of its last
    /// request (or of its start).
    clock: AtomicU64,
}

struct Entry {
    conn: Arc<Conn>,
    /// Stops the connection's task (and so closes it).
    abort: Option<AbortHandle>,
}

/// One connection's state, shared with the requests it carries.
pub struct Conn {
    id: u64,
    /// Requests being answered.
    busy: AtomicUsize,
    /// Whether a request has arrived: a connection that never sent one
    /// is closed before any that did.
    served: AtomicBool,
    last: AtomicU64,
}

/// Held by a connection's task: the connection leaves the table when its
/// task ends or is stopped.
pub struct Open {
    conns: Arc<Conns>,
    id: u64,
}

/// Held while a request is answered: its connection is not closed for
/// room meanwhile.
pub struct Busy {
    conns: Arc<Conns>,
    conn: Arc<Conn>,
}

impl Conns {
    /// No connection yet; at most `cap` at once.
    pub fn new(cap: usize) -> Conns {
        Conns {
            cap,
            open: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            clock: AtomicU64::new(0),
        }
    }

    /// The table; a panic elsewhere while it was held leaves it usable.
    fn table(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The number of connections open.
    pub fn open(&self) -> usize {
        self.table().len()
    }

    /// Returns once a new connection may be accepted: below the cap, or
    /// at it with a connection that may be closed for the new one.
    pub async fn room(&self) {
        loop {
            {
                let t = self.table();
                if t.len() < self.cap || t.values().any(|e| e.conn.idle()) {
                    return;
                }
            }
            self.changed.notified().await;
        }
    }

    /// Closes the connection to lose least: among those without a request
    /// being answered, one that never sent a request, else the least
    /// recently used. Returns whether there was one.
    pub fn close_one(&self) -> bool {
        let mut t = self.table();
        let victim = t
            .iter()
            .filter(|(_, e)| e.conn.idle())
            .min_by_key(|(_, e)| {
                (
                    e.conn.served.load(Ordering::Relaxed),
                    e.conn.last.load(Ordering::Relaxed),
                )
            })
            .map(|(&id, _)| id);
        let Some(entry) = victim.and_then(|id| t.remove(&id)) else {
            return false;
        };
        if let Some(a) = entry.abort {
            a.abort();
        }
        true
    }

    /// A new connection, made room for at the cap: its state, and the
    /// guard its task holds.
    pub fn opened(self: &Arc<Self>) -> (Arc<Conn>, Open) {
        if self.open() >= self.cap {
            self.close_one();
        }
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id: tick,
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            last: AtomicU64::new(tick),
        });
        self.table().insert(
            tick,
            Entry {
                conn: conn.clone(),
                abort: None,
            },
        );
        let open = Open {
            conns: self.clone(),
            id: tick,
        };
        (conn, open)
    }

    /// The handle that stops `conn`'s task, once it is spawned.
    pub fn track(&self, conn: &Conn, abort: AbortHandle) {
        if let Some(e) = self.table().get_mut(&conn.id) {
            e.abort = Some(abort);
        }
    }

    /// A request arrived on `conn`.
    pub fn busy(self: &Arc<Self>, conn: &Arc<Conn>) -> Busy {
        conn.busy.fetch_add(1, Ordering::Relaxed);
        conn.served.store(true, Ordering::Relaxed);
        conn.last.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        Busy {
            conns: self.clone(),
            conn: conn.clone(),
        }
    }
}

impl Conn {
    fn idle(&self) -> bool {
        self.busy.load(Ordering::Relaxed) == 0
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.conns.table().remove(&self.id);
        self.conns.changed.notify_one();
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn.busy.fetch_sub(1, Ordering::Relaxed);
        self.conns.changed.notify_one();
    }
}

/// An error of `accept` that concerns only the connection it was about
/// (gone before it was accepted): the next one is accepted at once.
pub fn passing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || [
        Errno::PROTO,
        Errno::NOPROTOOPT,
        Errno::HOSTDOWN,
        Errno::NONET,
        Errno::HOSTUNREACH,
        Errno::OPNOTSUPP,
        Errno::NETDOWN,
        Errno::NETUNREACH,
        Errno::PERM,
    ]
    .contains(&Errno::from_io_error(e).unwrap_or(Errno::INVAL))
}

/// An error of `accept` that closing a connection may cure: no descriptor
/// left (in the process or the system) or no memory for one.
pub fn out_of_resources(e: &io::Error) -> bool {
    [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
        .contains(&Errno::from_io_error(e).unwrap_or(Errno::INVAL))
}
