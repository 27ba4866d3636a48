//! tally's binary trace stream: what the QEMU plugin
//! (`crates/tally-qemu-plugin`) writes while the program runs and what
//! [`TraceReader`] reads, record by record, from a pipe or a file.
//!
//! The stream starts with the 8 bytes `TALLYTR1`; then records, each a tag
//! byte and a fixed little-endian body:
//!
//! | tag | record | body |
//! |---|---|---|
//! | 1 | declare an instruction | id u32, address u64, size u8, `size` bytes of code |
//! | 2 | execute instruction `id` | id u32 |
//! | 3 | load | address u64, size u8 |
//! | 4 | store | address u64, size u8 |
//! | 5 | a file mapping | start u64, end u64, file offset u64, path length u16, path |
//! | 6 | end: the program exited normally | — |
//! | 7 | the following records are of thread (vCPU) `n` | n u32 |
//! | 8 | a block runs: ids `first ..first + count` | first u32, count u8 |
//! | 9 | load by instruction `index` of the block | index u8, address u64, size u8 |
//! | 10 | store by instruction `index` of the block | index u8, address u64, size u8 |
//! | 11 | records in a slot of the shared buffer file | slot u32, length u32 |
//! | 12 / 13 | a load / store by instruction `index` that hit D1 | index u8 |
//! | 14 / 15 | a load / store by instruction `index` that missed D1 | index u8, address u64, size u16 |
//! | 16 | D1's state: the plugin's D1 filter stops here | length u32, `length` bytes |
//! | 17 | the plugin simulates D1 (records 12–16 instead of 9 and 10) | size u64, associativity u64, line size u64, policy u8, seed u64 |
//! | 128–255 | a hit by instruction `tag & 63`, a store if `tag & 64` | — |
//! | 18 | the last block ran up to `progress`, then a block runs: ids `first ..first + count` | first u32, count u8, progress u8 |
//! | 19 | the current block ran up to `progress` | progress u8 |
//! | 20 | the process forked here; the child's stream goes on from this point | token u32 |
//! | 21 | the process calls execve here (its image is replaced unless more follows) | — |
//!
//! With the plugin's `hits=on` the D1 filter counts hits by instruction in
//! the shared buffer file ([`shared`]) instead of writing them; the stream
//! then shows how far each block ran by its accesses (`progress`: one more
//! than the index of its last access, 0 for none) in records 18 and 19.
//!
//! Records 12–17 and 128–255 are those of the plugin's D1 filter
//! ([`crate::filter`]); the one-byte hits are the commonest record then:
//! a hit or miss record is a whole access (QEMU's pieces merged), and an
//! index of 255 stands for the last executed instruction (blocks recorded
//! an instruction at a time). Policies: 0 LRU, 1 FIFO, 2 tree pseudo-LRU,
//! 3 random (from `seed`).
//!
//! Executions and accesses come in program order per thread; the accesses
//! after an execution record are that instruction's. A stream that stops
//! without an end record is of a program that crashed or was killed.
//! Declarations are compact because an instruction is executed far more
//! often than translated: an execution costs 5 bytes.

use crate::Error;
use std::io::{self, Read, Write};

/// The first bytes of every stream.
pub const MAGIC: &[u8; 8] = b"TALLYTR1";
/// Tag of [`Record::Declare`]: id u32, address u64, size u8, code.
pub const T_DECL: u8 = 1;
/// Tag of [`Record::Exec`]: id u32.
pub const T_EXEC: u8 = 2;
/// Tag of [`Record::Load`]: address u64, size u8.
pub const T_LOAD: u8 = 3;
/// Tag of [`Record::Store`]: address u64, size u8.
pub const T_STORE: u8 = 4;
/// Tag of [`Record::Map`]: start u64, end u64, file offset u64, path
/// length u16, path.
pub const T_MAP: u8 = 5;
/// Tag of [`Record::End`]: no body.
pub const T_END: u8 = 6;
/// Tag of [`Record::Thread`]: vCPU u32.
pub const T_THREAD: u8 = 7;
/// Tag of [`Record::Block`]: first id u32, count u8.
pub const T_BLOCK: u8 = 8;
/// Tag of [`Record::LoadAt`]: index u8, address u64, size u8.
pub const T_LOAD_AT: u8 = 9;
/// Tag of [`Record::StoreAt`]: index u8, address u64, size u8.
pub const T_STORE_AT: u8 = 10;
/// Tag of [`Record::Slot`]: slot u32, length u32.
pub const T_SLOT: u8 = 11;
/// Tag of a load [`Record::Hit`] with an index of 64 or more: index u8.
pub const T_READ_HIT: u8 = 12;
/// Tag of a store [`Record::Hit`] with an index of 64 or more: index u8.
pub const T_WRITE_HIT: u8 = 13;
/// Tag of a load [`Record::Miss`]: index u8, address u64, size u16.
pub const T_READ_MISS: u8 = 14;
/// Tag of a store [`Record::Miss`]: index u8, address u64, size u16.
pub const T_WRITE_MISS: u8 = 15;
/// Tag of [`Record::D1State`]: length u32, state.
pub const T_D1_STATE: u8 = 16;
/// Tag of [`Record::D1Filter`]: size u64, associativity u64, line size
/// u64, policy u8, seed u64.
pub const T_D1_FILTER: u8 = 17;
/// The first tag of a one-byte [`Record::Hit`]: `T_SHORT_HIT | store << 6
/// | index`, for an index below 64.
pub const T_SHORT_HIT: u8 = 0x80;
/// Tag of [`Record::BlockAfter`]: first id u32, count u8, progress u8.
pub const T_BLOCK_AFTER: u8 = 18;
/// Tag of [`Record::Progress`]: progress u8.
pub const T_PROGRESS: u8 = 19;
/// Tag of [`Record::Fork`]: token u32.
pub const T_FORK: u8 = 20;
/// Tag of [`Record::Execve`]: no body.
pub const T_EXECVE: u8 = 21;

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// An instruction translated: its id, address and code bytes.
    Declare {
        /// The id that execution and block records name it by.
        id: u32,
        /// Its guest address.
        addr: u64,
        /// Its machine code (as many bytes as the instruction is long).
        code: &'a [u8],
    },
    /// A declared instruction executed.
    Exec {
        /// The id it was declared with.
        id: u32,
    },
    /// A data load by the last executed instruction.
    Load {
        /// The first byte loaded.
        addr: u64,
        /// Bytes loaded (one of QEMU's pieces of an access).
        size: u8,
    },
    /// A data store by the last executed instruction.
    Store {
        /// The first byte stored.
        addr: u64,
        /// Bytes stored (one of QEMU's pieces of an access).
        size: u8,
    },
    /// `[start, end)` maps `path` from file offset `offset` (empty path:
    /// anonymous memory).
    Map {
        /// The first address mapped.
        start: u64,
        /// The address after the last one mapped.
        end: u64,
        /// The offset in the file of the byte at `start`.
        offset: u64,
        /// The file's path, as bytes (empty: anonymous memory).
        path: &'a [u8],
    },
    /// A block starts: instructions `first .. first + count` (declared,
    /// with consecutive ids) run in order. Each counts as executed once a
    /// later record shows it ran: an access by it or a later one of the
    /// block, or any record but a declaration or a mapping; so a block cut
    /// short by a fault counts to the faulting access, and, at the end of
    /// the stream, whole.
    Block {
        /// The id of the block's first instruction.
        first: u32,
        /// How many instructions the block has.
        count: u8,
    },
    /// A data load by instruction `index` of the current block.
    LoadAt {
        /// The loading instruction's index in the current block.
        index: u8,
        /// The first byte loaded.
        addr: u64,
        /// Bytes loaded (one of QEMU's pieces of an access).
        size: u8,
    },
    /// A data store by instruction `index` of the current block.
    StoreAt {
        /// The storing instruction's index in the current block.
        index: u8,
        /// The first byte stored.
        addr: u64,
        /// Bytes stored (one of QEMU's pieces of an access).
        size: u8,
    },
    /// A load (`store` false) or store by instruction `index` of the
    /// current block (255: by the last executed instruction), whole, that
    /// hit D1 in the plugin.
    Hit {
        /// The instruction's index in the current block (255: the last
        /// executed instruction).
        index: u8,
        /// A store; a load if false.
        store: bool,
    },
    /// The same, for one that missed D1: the lower levels must see it.
    Miss {
        /// The instruction's index in the current block (255: the last
        /// executed instruction).
        index: u8,
        /// A store; a load if false.
        store: bool,
        /// The first byte accessed.
        addr: u64,
        /// Bytes accessed, QEMU's pieces merged.
        size: u16,
    },
    /// D1's state when the plugin stopped simulating it; the accesses
    /// that follow are in records 9 and 10 again.
    D1State(&'a [u8]),
    /// The plugin simulates D1 of this geometry and policy (code and
    /// seed, see [`crate::filter::policy_from_code`]).
    D1Filter {
        /// D1's size in bytes.
        size: u64,
        /// D1's associativity (ways per set).
        assoc: u64,
        /// D1's line size in bytes.
        line_size: u64,
        /// The replacement policy's code (0 LRU, 1 FIFO, 2 tree
        /// pseudo-LRU, 3 random).
        policy: u8,
        /// The random policy's seed (unused by the others).
        seed: u64,
    },
    /// The current block ran at least to `progress` (ids `first ..first +
    /// progress` of it), as an access by its instruction `progress - 1`
    /// would show; then, for `BlockAfter`, a block starts.
    Progress {
        /// How many of the block's instructions ran, at least.
        progress: u8,
    },
    /// [`Record::Progress`], then [`Record::Block`].
    BlockAfter {
        /// The id of the new block's first instruction.
        first: u32,
        /// How many instructions the new block has.
        count: u8,
        /// How many of the last block's instructions ran, at least.
        progress: u8,
    },
    /// Records that follow are of another thread.
    Thread(u32),
    /// The next `len` bytes of records are in slot `slot` of the shared
    /// buffer file ([`shared`]), not in the stream; the reader hands the
    /// slot back once they are read.
    Slot {
        /// Which slot of the shared buffer file holds them.
        slot: u32,
        /// How many bytes of records it holds.
        len: u32,
    },
    /// The process forked here (`tally sim --trace-children=yes`): the
    /// child's own stream, which the plugin announces with the same
    /// token, goes on from the state at this point.
    Fork {
        /// Names this fork among the process's, in the child's announcement.
        token: u32,
    },
    /// The process calls execve here: if the stream ends right after, the
    /// program's image was replaced (its run goes on in another stream).
    Execve,
    /// The program exited normally; nothing follows.
    End,
}

/// Reads a stream through a large buffer; records borrow from it.
pub struct TraceReader<R> {
    input: R,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl<R: Read> TraceReader<R> {
    /// Checks the magic bytes and returns a reader positioned after them.
    pub fn new(input: R) -> Result<Self, Error> {
        let mut r = TraceReader {
            input,
            buf: vec![0; 1 << 20],
            pos: 0,
            len: 0,
            base: 0,
            eof: false,
        };
        if !r.fill(8)? || &r.buf[..8] != MAGIC {
            return Err(Error::StreamMagic);
        }
        r.pos = 8;
        Ok(r)
    }

    /// Offset in the stream of the next record.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The bytes read but not yet taken as records (for a caller that
    /// decodes the commonest records itself, see
    /// [`crate::Feeder::feed_bytes`], [`crate::Simulation`]).
    #[inline(always)]
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.pos..self.len]
    }

    /// Takes `n` bytes of [`TraceReader::unread`] as read.
    #[inline(always)]
    pub fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.len);
    }

    /// Makes `n` bytes available at `pos`; `false` at the end of input.
    #[inline(always)]
    fn fill(&mut self, n: usize) -> Result<bool, Error> {
        if self.len - self.pos >= n {
            return Ok(true);
        }
        self.refill(n)
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self, n: usize) -> Result<bool, Error> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.len, 0);
            self.base += self.pos as u64;
            self.len -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        while self.len < n && !self.eof {
            match self.input.read(&mut self.buf[self.len..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.len += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::StreamIo {
                        offset: self.base + self.len as u64,
                        source,
                    });
                }
            }
        }
        Ok(self.len - self.pos >= n)
    }

    /// Reads on until the record at the start of [`TraceReader::unread`]
    /// is whole (for a caller that decodes records from those bytes
    /// itself); `false` when the input has ended with no byte left.
    pub fn more(&mut self) -> Result<bool, Error> {
        let at = self.offset();
        let n = record_len(&self.buf[self.pos..self.len])
            .map_err(|tag| Error::StreamTag { offset: at, tag })?;
        if self.fill(n)? {
            return Ok(true);
        }
        if self.pos == self.len {
            return Ok(false);
        }
        Err(Error::StreamTruncated { offset: at })
    }

    /// The next record; `None` when the input ends (without an end record
    /// if the program did not exit normally).
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
        loop {
            let at = self.offset();
            let n = record_len(&self.buf[self.pos..self.len])
                .map_err(|tag| Error::StreamTag { offset: at, tag })?;
            if self.len - self.pos >= n {
                let from = self.pos;
                self.pos += n;
                return Ok(Some(parse(&self.buf[from..from + n])));
            }
            if !self.fill(n)? {
                if self.pos == self.len {
                    return Ok(None);
                }
                return Err(Error::StreamTruncated { offset: at });
            }
        }
    }
}

/// What [`decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A record and its length in bytes.
    Record(Record<'a>, usize),
    /// The bytes hold only part of a record that takes this many.
    Need(usize),
}

/// Decodes the record at the start of `b`; the error is an unknown tag.
#[inline]
pub fn decode(b: &[u8]) -> Result<Decoded<'_>, u8> {
    let n = record_len(b)?;
    Ok(match b.get(..n) {
        Some(b) => Decoded::Record(parse(b), n),
        None => Decoded::Need(n),
    })
}

/// The length of the record at the start of `b`, as far as `b` shows it
/// (1 for no bytes; more than `b.len()` if the record is cut off); the
/// error is an unknown tag.
fn record_len(b: &[u8]) -> Result<usize, u8> {
    let Some(&tag) = b.first() else {
        return Ok(1);
    };
    Ok(match tag {
        T_EXEC | T_THREAD | T_FORK => 5,
        T_BLOCK => 6,
        T_SLOT => 9,
        T_LOAD | T_STORE => 10,
        T_LOAD_AT | T_STORE_AT => 11,
        T_READ_MISS | T_WRITE_MISS => 12,
        T_READ_HIT | T_WRITE_HIT | T_PROGRESS => 2,
        T_BLOCK_AFTER => 7,
        T_SHORT_HIT.. => 1,
        T_D1_FILTER => 34,
        T_D1_STATE => match b.get(1..5) {
            Some(n) => 5 + u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize,
            None => 5,
        },
        T_END | T_EXECVE => 1,
        T_DECL => match b.get(13) {
            Some(&n) => 14 + n as usize,
            None => 14,
        },
        T_MAP => match b.get(25..27) {
            Some(n) => 27 + u16::from_le_bytes([n[0], n[1]]) as usize,
            None => 27,
        },
        _ => return Err(tag),
    })
}

/// The record `b` holds, whole (its length checked by [`record_len`]).
fn parse(b: &[u8]) -> Record<'_> {
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    match b[0] {
        T_EXEC => Record::Exec { id: u32_at(1) },
        T_LOAD => Record::Load {
            addr: u64_at(1),
            size: b[9],
        },
        T_STORE => Record::Store {
            addr: u64_at(1),
            size: b[9],
        },
        T_BLOCK => Record::Block {
            first: u32_at(1),
            count: b[5],
        },
        T_LOAD_AT => Record::LoadAt {
            index: b[1],
            addr: u64_at(2),
            size: b[10],
        },
        T_STORE_AT => Record::StoreAt {
            index: b[1],
            addr: u64_at(2),
            size: b[10],
        },
        t @ T_SHORT_HIT.. => Record::Hit {
            index: t & 63,
            store: t & 64 != 0,
        },
        T_READ_HIT | T_WRITE_HIT => Record::Hit {
            index: b[1],
            store: b[0] == T_WRITE_HIT,
        },
        T_READ_MISS | T_WRITE_MISS => Record::Miss {
            index: b[1],
            store: b[0] == T_WRITE_MISS,
            addr: u64_at(2),
            size: u16::from_le_bytes([b[10], b[11]]),
        },
        T_D1_STATE => Record::D1State(&b[5..]),
        T_PROGRESS => Record::Progress { progress: b[1] },
        T_BLOCK_AFTER => Record::BlockAfter {
            first: u32_at(1),
            count: b[5],
            progress: b[6],
        },
        T_D1_FILTER => Record::D1Filter {
            size: u64_at(1),
            assoc: u64_at(9),
            line_size: u64_at(17),
            policy: b[25],
            seed: u64_at(26),
        },
        T_THREAD => Record::Thread(u32_at(1)),
        T_SLOT => Record::Slot {
            slot: u32_at(1),
            len: u32_at(5),
        },
        T_END => Record::End,
        T_FORK => Record::Fork { token: u32_at(1) },
        T_EXECVE => Record::Execve,
        T_DECL => Record::Declare {
            id: u32_at(1),
            addr: u64_at(5),
            code: &b[14..],
        },
        _ => Record::Map {
            start: u64_at(1),
            end: u64_at(9),
            offset: u64_at(17),
            path: &b[27..],
        },
    }
}

/// Writes a stream (for tests and benchmarks; the plugin writes its own).
pub struct TraceWriter<W: Write> {
    out: W,
}

impl<W: Write> TraceWriter<W> {
    /// Starts a stream.
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(MAGIC)?;
        Ok(TraceWriter { out })
    }

    /// Writes one record.
    pub fn write(&mut self, r: &Record<'_>) -> io::Result<()> {
        let o = &mut self.out;
        match *r {
            Record::Declare { id, addr, code } => {
                let n = u8::try_from(code.len())
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "code too long"))?;
                o.write_all(&[T_DECL])?;
                o.write_all(&id.to_le_bytes())?;
                o.write_all(&addr.to_le_bytes())?;
                o.write_all(&[n])?;
                o.write_all(code)
            }
            Record::Exec { id } => {
                o.write_all(&[T_EXEC])?;
                o.write_all(&id.to_le_bytes())
            }
            Record::Load { addr, size } | Record::Store { addr, size } => {
                let t = if matches!(r, Record::Load { .. }) {
                    T_LOAD
                } else {
                    T_STORE
                };
                o.write_all(&[t])?;
                o.write_all(&addr.to_le_bytes())?;
                o.write_all(&[size])
            }
            Record::Map {
                start,
                end,
                offset,
                path,
            } => {
                let n = u16::try_from(path.len())
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path too long"))?;
                o.write_all(&[T_MAP])?;
                o.write_all(&start.to_le_bytes())?;
                o.write_all(&end.to_le_bytes())?;
                o.write_all(&offset.to_le_bytes())?;
                o.write_all(&n.to_le_bytes())?;
                o.write_all(path)
            }
            Record::Block { first, count } => {
                o.write_all(&[T_BLOCK])?;
                o.write_all(&first.to_le_bytes())?;
                o.write_all(&[count])
            }
            Record::LoadAt { index, addr, size } | Record::StoreAt { index, addr, size } => {
                let t = if matches!(r, Record::LoadAt { .. }) {
                    T_LOAD_AT
                } else {
                    T_STORE_AT
                };
                o.write_all(&[t, index])?;
                o.write_all(&addr.to_le_bytes())?;
                o.write_all(&[size])
            }
            Record::Hit { index, store } if index < 64 => {
                o.write_all(&[T_SHORT_HIT | u8::from(store) << 6 | index])
            }
            Record::Hit { index, store } => {
                o.write_all(&[if store { T_WRITE_HIT } else { T_READ_HIT }, index])
            }
            Record::Miss {
                index,
                store,
                addr,
                size,
            } => {
                o.write_all(&[if store { T_WRITE_MISS } else { T_READ_MISS }, index])?;
                o.write_all(&addr.to_le_bytes())?;
                o.write_all(&size.to_le_bytes())
            }
            Record::Progress { progress } => o.write_all(&[T_PROGRESS, progress]),
            Record::BlockAfter {
                first,
                count,
                progress,
            } => {
                o.write_all(&[T_BLOCK_AFTER])?;
                o.write_all(&first.to_le_bytes())?;
                o.write_all(&[count, progress])
            }
            Record::D1State(b) => {
                let n = u32::try_from(b.len())
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "state too long"))?;
                o.write_all(&[T_D1_STATE])?;
                o.write_all(&n.to_le_bytes())?;
                o.write_all(b)
            }
            Record::D1Filter {
                size,
                assoc,
                line_size,
                policy,
                seed,
            } => {
                o.write_all(&[T_D1_FILTER])?;
                o.write_all(&size.to_le_bytes())?;
                o.write_all(&assoc.to_le_bytes())?;
                o.write_all(&line_size.to_le_bytes())?;
                o.write_all(&[policy])?;
                o.write_all(&seed.to_le_bytes())
            }
            Record::Thread(n) => {
                o.write_all(&[T_THREAD])?;
                o.write_all(&n.to_le_bytes())
            }
            Record::Slot { slot, len } => {
                o.write_all(&[T_SLOT])?;
                o.write_all(&slot.to_le_bytes())?;
                o.write_all(&len.to_le_bytes())
            }
            Record::Fork { token } => {
                o.write_all(&[T_FORK])?;
                o.write_all(&token.to_le_bytes())
            }
            Record::Execve => o.write_all(&[T_EXECVE]),
            Record::End => o.write_all(&[T_END]),
        }
    }

    /// Writes bytes that are whole records already.
    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)
    }

    /// The output, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The buffer file the QEMU plugin shares with `tally sim` (`shm=FD`).
///
/// The plugin keeps each of its first vCPUs' unwritten records in a slot of
/// this file, behind a count updated after every record. QEMU skips the
/// plugin's exit callback when the guest dies of a signal; the records it
/// had not yet written are then still here, and [`pending`](shared::pending)
/// turns them into the stream's tail.
///
/// The slots are a pool when the plugin is also given a pipe of free slot
/// numbers (`free=FD`): a thread fills a slot it took from that pipe,
/// publishing its byte count as it goes; when the slot is full it zeroes
/// the count, writes a [`Record::Slot`] into the stream, and takes another
/// slot. The reader feeds the slot's records where that record stands and
/// writes the slot number back into the pipe. Records then cross from the
/// plugin to tally without being copied through the stream. A slot whose
/// count is not zero holds records not yet in the stream: what a thread
/// had written when QEMU stopped.
pub mod shared {
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    /// First bytes of the file; then the slot count and slot size (u32 each).
    pub const MAGIC: &[u8; 8] = b"TALLYSH1";
    /// Bytes before the first slot.
    pub const HEADER: usize = 16;
    /// Slots in the file `tally sim` makes (and the plugin of a program
    /// exec'd under `--trace-children=yes`): few, so that the ones in use
    /// stay in the processors' caches.
    pub const SLOTS: u32 = 8;
    /// Bytes of records after which the plugin hands a slot over (or
    /// writes its buffer into the stream).
    pub const FLUSH_AT: usize = 1 << 18;
    /// Bytes of records a slot holds: a flush starts at [`FLUSH_AT`], and
    /// no record is longer than the rest.
    pub const CAPACITY: usize = FLUSH_AT + 64;
    /// A slot: the pending-byte count (u64), then the records.
    pub const SLOT: usize = 8 + CAPACITY;

    /// Where in the file the `len` bytes of records of slot `slot` are
    /// (`None` if more than a slot holds).
    pub fn records(slot: u32, len: u32) -> Option<std::ops::Range<usize>> {
        let at = HEADER.checked_add((slot as usize).checked_mul(SLOT)?)? + 8;
        (len as usize <= CAPACITY).then(|| at..at + len as usize)
    }

    /// Size of a file with `slots` slots.
    pub fn size(slots: u32) -> u64 {
        (HEADER + slots as usize * SLOT) as u64
    }

    /// Instructions (stream ids) whose D1 hits the plugin counts in the
    /// file (`hits=on`), two u64 each (reads, writes), after the slots;
    /// hits of later ids are written as records. The file is sparse: only
    /// the pages of the ids used take memory.
    pub const HIT_IDS: u64 = 1 << 22;

    /// Size of a file with `slots` slots and the hit counts.
    pub fn size_with_hits(slots: u32) -> u64 {
        size(slots) + 16 * HIT_IDS
    }

    /// The header for `slots` slots.
    pub fn header(slots: u32) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&slots.to_le_bytes());
        h[12..].copy_from_slice(&(SLOT as u32).to_le_bytes());
        h
    }

    /// The records left in the slots, each slot's behind a thread record:
    /// stream bytes to append to what the plugin wrote. A slot whose count
    /// is impossible is skipped.
    pub fn pending(file: &File, slots: u32) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        for k in 0..slots {
            let at = (HEADER + k as usize * SLOT) as u64;
            let mut n = [0u8; 8];
            file.read_exact_at(&mut n, at)?;
            let n = u64::from_le_bytes(n);
            if n == 0 || n > CAPACITY as u64 {
                continue;
            }
            out.push(super::T_THREAD);
            out.extend_from_slice(&k.to_le_bytes());
            let from = out.len();
            out.resize(from + n as usize, 0);
            file.read_exact_at(&mut out[from..], at + 8)?;
        }
        Ok(out)
    }
}

/// The control socket of `tally sim --trace-children=yes`: an
/// `AF_UNIX` `SOCK_SEQPACKET` socket from every traced process to tally,
/// on which the plugin announces each process it starts recording: a
/// forked child (its stream goes on from the parent's at the fork record
/// with the same token), a program a process exec'd (a fresh stream), or
/// an exec it could not follow. Each message is a [`control::HEADER`]-byte header
/// (kind u8, three zero bytes, pid u32, parent pid u32, token u32), then
/// the payload; the stream, the buffer file and the free-slot pipe's
/// writing end come with a fork or exec message as `SCM_RIGHTS`.
pub mod control {
    /// Bytes of a message's header.
    pub const HEADER: usize = 16;
    /// A forked child: its stream goes on from the parent's state at the
    /// parent's fork record of the same token.
    pub const FORK: u8 = b'F';
    /// A program a traced process exec'd, traced afresh; the payload is
    /// its command line, the arguments separated by NUL bytes.
    pub const EXEC: u8 = b'X';
    /// An exec the plugin could not follow (a program for another
    /// machine, or QEMU could not be run); the payload is the path.
    pub const UNFOLLOWED: u8 = b'U';
    /// The most payload bytes a message carries (longer ones are cut).
    pub const MAX_PAYLOAD: usize = 4096;

    /// A message's header.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Header {
        /// [`FORK`], [`EXEC`] or [`UNFOLLOWED`].
        pub kind: u8,
        /// The process announced.
        pub pid: u32,
        /// The process that forked it (for [`FORK`]).
        pub parent: u32,
        /// The fork's token in the parent's stream (for [`FORK`]).
        pub token: u32,
    }

    impl Header {
        /// Its bytes.
        pub fn encode(&self) -> [u8; HEADER] {
            let mut b = [0u8; HEADER];
            b[0] = self.kind;
            b[4..8].copy_from_slice(&self.pid.to_le_bytes());
            b[8..12].copy_from_slice(&self.parent.to_le_bytes());
            b[12..16].copy_from_slice(&self.token.to_le_bytes());
            b
        }

        /// The header at the start of a message (`None`: too short).
        pub fn decode(b: &[u8]) -> Option<Header> {
            let w = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
            Some(Header {
                kind: *b.first()?,
                pid: w(4)?,
                parent: w(8)?,
                token: w(12)?,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record<'static>> {
        vec![
            Record::Map {
                start: 0x400000,
                end: 0x403000,
                offset: 0x1000,
                path: b"/bin/x",
            },
            Record::Declare {
                id: 0,
                addr: 0x401000,
                code: &[0x48, 0x89, 0xe5],
            },
            Record::Exec { id: 0 },
            Record::Load {
                addr: 0x7fff_0000,
                size: 8,
            },
            Record::Thread(3),
            Record::Fork { token: 7 },
            Record::Execve,
            Record::Store { addr: 16, size: 1 },
            Record::Block {
                first: 7,
                count: 200,
            },
            Record::LoadAt {
                index: 3,
                addr: 0x1234,
                size: 32,
            },
            Record::StoreAt {
                index: 199,
                addr: u64::MAX,
                size: 2,
            },
            Record::D1Filter {
                size: 32768,
                assoc: 8,
                line_size: 64,
                policy: 3,
                seed: 99,
            },
            Record::Hit {
                index: 4,
                store: false,
            },
            Record::Hit {
                index: 255,
                store: true,
            },
            Record::Miss {
                index: 7,
                store: true,
                addr: 0x7fff_fff8,
                size: 4096,
            },
            Record::D1State(&[1, 2, 3]),
            Record::Progress { progress: 3 },
            Record::BlockAfter {
                first: 77,
                count: 9,
                progress: 0,
            },
            Record::End,
        ]
    }

    /// [`sample`] as a stream.
    fn sample_bytes() -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for r in sample() {
            w.write(&r).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trip() {
        let bytes = sample_bytes();
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        let mut got = Vec::new();
        while let Some(x) = r.next_record().unwrap() {
            got.push(format!("{x:?}"));
        }
        let want: Vec<String> = sample().iter().map(|x| format!("{x:?}")).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_cut_is_an_error_or_a_clean_end() {
        let bytes = sample_bytes();
        for cut in 0..bytes.len() {
            let Ok(mut r) = TraceReader::new(&bytes[..cut]) else {
                assert!(cut < 8);
                continue;
            };
            loop {
                match r.next_record() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        assert!(matches!(e, Error::StreamTruncated { .. }), "{e}");
                        break;
                    }
                }
            }
        }
        let mut bad = bytes.clone();
        bad[8] = 99;
        let mut r = TraceReader::new(&bad[..]).unwrap();
        assert!(matches!(
            r.next_record(),
            Err(Error::StreamTag { offset: 8, tag: 99 })
        ));
    }
}
