//! The plugin's buffer file: a memfd of slots that the plugin fills with
//! records and tally reads where they lie.
//!
//! tally creates the file ([`shared_buffers`]: anonymous, sparse, with
//! the header of [`trace::shared`]) and a pipe of free slot numbers, all
//! of which it writes at once; QEMU inherits both. A thread of the plugin
//! takes a slot from that pipe, writes each record into it as whole words
//! and publishes its byte count after each one; when the slot is full it
//! zeroes the count, announces the slot with a slot record in the stream
//! (so that the slot's records stay in order with the declarations that
//! come through the pipe) and takes another. tally feeds the slot's
//! records straight from its read-only mapping ([`Pool::records`]) and
//! writes the slot number back ([`Pool::give_back`]), which also paces
//! the plugin: no record of the bulk is copied through the pipe.
//!
//! A slot whose count is not zero when the stream ends holds what a
//! thread had written when QEMU stopped: QEMU 7.2 skips the plugin's exit
//! callbacks when the guest dies of a signal, so [`WithTail`] appends
//! those records ([`trace::shared::pending`]) to the stream.

use crate::trace;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

/// Slots in the plugin's buffer file, the pool its buffers come from:
/// few, so that the ones in use stay in the processors' caches. The
/// plugin gives them to its first `BUFFER_SLOTS / 2` threads (so that a
/// thread that hands one over always gets one back); the others write
/// their records into the stream itself, and lose their last unwritten
/// ones if QEMU dies of a signal.
pub const BUFFER_SLOTS: u32 = trace::shared::SLOTS;

/// An anonymous file for the plugin's buffers (sparse: only the slots of
/// running threads take memory), with its header written.
pub fn shared_buffers() -> std::io::Result<std::fs::File> {
    // SAFETY: memfd_create with a valid NUL-terminated name; the
    // descriptor returned is checked and owned by nothing else.
    let fd = unsafe { libc::memfd_create(c"tally-sim-buffers".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new, valid descriptor owned by nothing else.
    let f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.set_len(trace::shared::size_with_hits(BUFFER_SLOTS))?;
    f.write_all_at(&trace::shared::header(BUFFER_SLOTS), 0)?;
    Ok(f)
}

/// A pipe of free slot numbers with every slot in it: the plugin takes
/// its slots from the reading end.
pub fn free_slots() -> std::io::Result<(PipeReader, PipeWriter)> {
    let (r, mut w) = std::io::pipe()?;
    for k in 0..BUFFER_SLOTS {
        w.write_all(&k.to_le_bytes())?;
    }
    Ok((r, w))
}

/// The plugin's buffer file, mapped to read the slots it hands over, and
/// the pipe that hands them back.
pub struct Pool {
    base: *const u8,
    size: usize,
    free: PipeWriter,
}

impl Pool {
    /// Maps `file` (read-only, shared with the plugin); slots go back
    /// through `free`.
    pub fn new(file: &std::fs::File, free: PipeWriter) -> std::io::Result<Pool> {
        let size = file.metadata()?.len() as usize;
        // SAFETY: mapping a file we own, read-only and shared; the result
        // is checked before use and unmapped only in `drop`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Pool {
            base: base as *const u8,
            size,
            free,
        })
    }

    /// The records in `slot`, which the plugin has handed over; `None` if
    /// they lie outside the file.
    pub fn records(&self, slot: u32, len: u32) -> Option<&[u8]> {
        let r = trace::shared::records(slot, len)?;
        if r.end > self.size {
            return None;
        }
        // SAFETY: inside the mapping, which lives as long as `self`; the
        // plugin does not write a slot it handed over until it is given
        // back.
        Some(unsafe { std::slice::from_raw_parts(self.base.add(r.start), r.len()) })
    }

    /// The D1 hits the plugin counted by stream id (`hits=on`), after the
    /// slots: reads and writes of each id. Read once the plugin has
    /// exited.
    pub fn hits(&self) -> &[u64] {
        let from = trace::shared::size(BUFFER_SLOTS) as usize;
        let n = self.size.saturating_sub(from) / 8;
        // SAFETY: inside the mapping, 8-aligned (the slots are), and the
        // plugin has exited: nothing writes them any more.
        unsafe { std::slice::from_raw_parts(self.base.add(from.min(self.size)) as *const u64, n) }
    }

    /// Gives `slot` back to the plugin (which may have exited: then
    /// nobody takes it).
    pub fn give_back(&mut self, slot: u32) {
        let _ = self.free.write_all(&slot.to_le_bytes());
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped, no longer borrowed.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.size) };
    }
}

/// The plugin's stream, then, once it ends, the records left in the
/// buffer file.
pub struct WithTail<'a> {
    head: PipeReader,
    tail: Option<std::io::Cursor<Vec<u8>>>,
    buffers: &'a std::fs::File,
}

impl<'a> WithTail<'a> {
    /// The stream read from `head`, then what `buffers` holds.
    pub fn new(head: PipeReader, buffers: &'a std::fs::File) -> Self {
        WithTail {
            head,
            tail: None,
            buffers,
        }
    }
}

impl Read for WithTail<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(t) = &mut self.tail {
            return t.read(buf);
        }
        match self.head.read(buf)? {
            0 => {
                let rest = trace::shared::pending(self.buffers, BUFFER_SLOTS)?;
                self.tail.insert(std::io::Cursor::new(rest)).read(buf)
            }
            n => Ok(n),
        }
    }
}
