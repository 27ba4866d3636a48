//! The one loop that feeds a tally trace stream ([`crate::trace`]) to an
//! [`Engine`]: `tally sim` reading the plugin's pipe or a saved trace, the
//! criterion benchmark, and the plugin's in-process harness all go through
//! [`Simulation`].
//!
//! The commonest records (blocks and accesses) are decoded by the
//! [`Feeder`] straight from the bytes; every other record is decoded once
//! and taken here: the D1 filter's records set up or hand over the
//! engine's D1, a slot record feeds the records in a slot of the shared
//! buffer file, and what concerns only the caller (file mappings, the
//! buffer file itself) goes to its [`Host`]. The loop works on whatever
//! bytes it is given and leaves a record cut off at their end for the
//! next call, so a push source (the in-process harness) and a pull source
//! ([`Simulation::feed_reader`] over a [`TraceReader`]) share it.

use crate::engine::{Engine, Feeder, Output};
use crate::filter::policy_from_code;
use crate::trace::{self, Decoded, Record, TraceReader};
use crate::{CacheConfig, Error};
use std::io::Read;

/// The caller's side of a stream: what the records that cost nothing
/// concern. Every method has a default for a stream without a buffer file
/// whose mappings do not matter (`()` is such a host).
pub trait Host {
    /// `[start, end)` maps `path` from file offset `offset` (empty path:
    /// anonymous memory): names code, for attribution.
    fn map(&mut self, start: u64, end: u64, offset: u64, path: &[u8]) {
        let _ = (start, end, offset, path);
    }

    /// The `len` bytes of records in slot `slot` of the plugin's shared
    /// buffer file, handed over by the plugin.
    fn slot(&self, slot: u32, len: u32) -> Result<&[u8], SlotProblem> {
        let _ = (slot, len);
        Err(SlotProblem::NoBufferFile)
    }

    /// Slot `slot` has been read: the plugin may fill it again.
    fn give_back(&mut self, slot: u32) {
        let _ = slot;
    }

    /// The D1 hits the plugin counted in the buffer file by stream id
    /// (`hits=on`): reads and writes of each id. Read once the stream has
    /// ended.
    fn hits(&self) -> &[u64] {
        &[]
    }
}

/// A stream without a buffer file whose mappings are of no interest.
impl Host for () {}

/// Why a slot record cannot be fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotProblem {
    /// The stream has no shared buffer file.
    NoBufferFile,
    /// The slot or its length lies outside the buffer file.
    OutOfRange,
}

/// How a stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// With its end record: the program exited normally.
    Complete,
    /// The input ended without an end record (the program crashed or was
    /// killed).
    Stopped,
    /// The input ended inside a record at this byte.
    Cut {
        /// Where the cut record starts.
        offset: u64,
    },
    /// A fork record ([`Record::Fork`]) was fed: the caller may take the
    /// child's starting state ([`Simulation::fork`]) and then feed on.
    Forked {
        /// The fork's token.
        token: u32,
    },
}

/// A stream being fed to an engine: the engine, the feeder that maps the
/// stream's ids to it, and how far the stream has come.
#[derive(Clone)]
pub struct Simulation {
    engine: Engine,
    feeder: Feeder,
    x86: bool,
    /// Stream offset of the next byte to feed.
    offset: u64,
    ended: bool,
    /// A fork record was fed and not yet reported.
    forked: Option<u32>,
    /// The offset after the last execve record.
    execve_at: Option<u64>,
}

impl Simulation {
    /// A simulation of a stream whose magic bytes have been read;
    /// instructions are classified as x86-64 when `x86`.
    pub fn new(engine: Engine, x86: bool) -> Simulation {
        Simulation {
            engine,
            feeder: Feeder::new(),
            x86,
            offset: trace::MAGIC.len() as u64,
            ended: false,
            forked: None,
            execve_at: None,
        }
    }

    /// The state a forked child's stream starts from: this one's, at the
    /// fork record just fed (the child's stream starts with its own magic
    /// bytes).
    pub fn fork(&self) -> Simulation {
        Simulation {
            offset: trace::MAGIC.len() as u64,
            forked: None,
            execve_at: None,
            ..self.clone()
        }
    }

    /// Whether the stream stopped right after an execve record: the
    /// process replaced its image (and, followed, goes on in a stream of
    /// its own).
    pub fn replaced(&self) -> bool {
        !self.ended && self.execve_at == Some(self.offset)
    }

    /// The stream's end record has been fed: what follows is ignored.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Feeds the whole records at the start of `bytes`, the stream's next
    /// bytes; returns how many bytes it took: all but a record cut off at
    /// their end (to be given again with what follows), or up to the end
    /// record.
    pub fn feed(&mut self, bytes: &[u8], host: &mut impl Host) -> Result<usize, Error> {
        // A fork not taken by `feed_reader` is of no interest.
        self.forked = None;
        let mut p = 0;
        let r = self.feed_from(bytes, &mut p, host);
        self.offset += p as u64;
        r.map(|()| p)
    }

    fn feed_from(
        &mut self,
        bytes: &[u8],
        p: &mut usize,
        host: &mut impl Host,
    ) -> Result<(), Error> {
        while !self.ended && self.forked.is_none() {
            let rest = bytes.get(*p..).unwrap_or_default();
            match self.feeder.feed_bytes(&mut self.engine, rest) {
                Ok(n) => *p += n,
                Err((n, id)) => {
                    *p += n;
                    return Err(Error::Undeclared {
                        offset: self.offset + *p as u64,
                        id,
                    });
                }
            }
            let at = self.offset + *p as u64;
            let rest = bytes.get(*p..).unwrap_or_default();
            match trace::decode(rest) {
                Err(tag) => {
                    return Err(Error::StreamTag { offset: at, tag });
                }
                Ok(Decoded::Need(_)) => break,
                Ok(Decoded::Record(rec, n)) => {
                    self.record(rec, at, host)?;
                    *p += n;
                }
            }
        }
        Ok(())
    }

    /// One record the feeder does not decode from the bytes itself, at
    /// stream offset `at`.
    fn record(&mut self, rec: Record<'_>, at: u64, host: &mut impl Host) -> Result<(), Error> {
        let e = &mut self.engine;
        match rec {
            Record::Map {
                start,
                end,
                offset,
                path,
            } => host.map(start, end, offset, path),
            Record::End => self.ended = true,
            Record::Fork { token } => self.forked = Some(token),
            Record::Execve => self.execve_at = Some(at + 1),
            Record::D1Filter {
                size,
                assoc,
                line_size,
                policy,
                seed,
            } => {
                let config = CacheConfig {
                    size,
                    assoc,
                    line_size,
                };
                let policy = policy_from_code(policy, seed);
                if !policy.is_some_and(|p| e.takes_d1_filter(config, p)) {
                    return Err(Error::D1Filter {
                        offset: at,
                        config,
                        policy,
                    });
                }
            }
            Record::D1State(state) => {
                if !e.restore_d1(state) {
                    return Err(Error::D1State { offset: at });
                }
            }
            Record::Slot { slot, len } => {
                let bytes = host.slot(slot, len).map_err(|p| match p {
                    SlotProblem::NoBufferFile => Error::NoBufferFile { offset: at },
                    SlotProblem::OutOfRange => Error::NoSlot {
                        offset: at,
                        slot,
                        len,
                    },
                })?;
                self.feeder
                    .feed_slice(e, bytes, self.x86)
                    .map_err(|(k, kind)| Error::InSlot {
                        offset: at,
                        slot,
                        at: k,
                        kind: Box::new(kind),
                    })?;
                host.give_back(slot);
            }
            rec => self
                .feeder
                .feed(e, &rec, self.x86)
                .map_err(|id| Error::Undeclared { offset: at, id })?,
        }
        Ok(())
    }

    /// Feeds the rest of the stream `r` reads, to its end record, the end
    /// of its input, or a fork record (then call again to go on).
    pub fn feed_reader<R: Read>(
        &mut self,
        r: &mut TraceReader<R>,
        host: &mut impl Host,
    ) -> Result<Ending, Error> {
        loop {
            let n = self.feed(r.unread(), host)?;
            r.consume(n);
            if self.ended {
                return Ok(Ending::Complete);
            }
            if let Some(token) = self.forked.take() {
                return Ok(Ending::Forked { token });
            }
            match r.more() {
                Ok(true) => {}
                Ok(false) => return Ok(Ending::Stopped),
                Err(Error::StreamTruncated { offset }) => return Ok(Ending::Cut { offset }),
                Err(e) => return Err(e),
            }
        }
    }

    /// Ends the run: the hits the host counted are added, the blocks still
    /// open run to their ends, and the engine gives its costs.
    pub fn finish(mut self, host: &impl Host) -> Result<Output, Error> {
        self.feeder.add_hits(&mut self.engine, host.hits());
        self.feeder
            .finish(&mut self.engine)
            .map_err(|id| Error::Undeclared {
                offset: self.offset,
                id,
            })?;
        Ok(self.engine.finish())
    }
}
