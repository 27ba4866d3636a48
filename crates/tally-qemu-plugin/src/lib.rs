//! A QEMU user-mode TCG plugin (plugin API version 1, QEMU 7.2 and later)
//! that streams what the guest executes to `tally sim`: every executed
//! instruction and every memory access, in the binary trace format that
//! `tally_sim::trace` documents and reads.
//!
//! Arguments (`-plugin libtally_qemu_plugin.so,fd=N` or `,out=PATH`): where
//! the stream goes; `mem=off` leaves memory accesses out (for runs that
//! count executions only); `d1=SIZE:ASSOC:LINE` (and `d1policy=`, as
//! `tally sim --policy` takes it: LRU by default) simulates the
//! first-level data cache here (`tally_sim::filter`): a hit is written as
//! two bytes, only a miss with its address, so that tally, simulating the
//! rest in another process while the program runs, has a tenth of the
//! accesses to decode and none to look up in D1. (Built with the
//! `inprocess` feature, `inprocess=on` simulates everything inside QEMU
//! instead and prints the totals: see `inprocess`.)
//!
//! The filter simulates the accesses of vCPU 0. When a second vCPU starts
//! (in QEMU 7.2 its init callback runs in the thread that creates it,
//! before it runs), the filter writes D1's state into the stream and stops;
//! every access is then written whole again, for tally to simulate. (A
//! QEMU that initializes the new vCPU in its own thread makes the handover
//! wait for vCPU 0's next callback; accesses of the new thread before it
//! are simulated by tally on the D1 it had.)
//!
//! Each run of a block is one record (its first instruction id and length:
//! the ids of a block are consecutive), and each memory access one record
//! naming its instruction's index in the block; blocks over 255
//! instructions get a record per instruction instead.
//!
//! Records are buffered per vCPU and written in whole buffers; a buffer
//! from a different vCPU than the last one is preceded by a thread record.
//! With `shm=FD` (a file tally made) the buffers of the first vCPUs live in
//! that file, each behind a length that is updated after every record, so
//! when QEMU dies without running the exit callback (the guest crashed or
//! was killed by a signal) tally still finds the records not yet written.
//! Instruction declarations (address, size, bytes) are written as soon as a
//! block is translated, before any execution of it can be written. When a
//! block lies outside every mapping already reported, the plugin reads the
//! host's `/proc/self/maps` and reports the file mapping that holds it, in
//! guest addresses (`guest = host - guest_base`, where `guest_base` is the
//! difference between an instruction's host and guest addresses).
//!
//! The modules, by role: [`args`] parses the arguments; [`install`] is
//! what QEMU calls outside the guest's run (install, a vCPU's start, a
//! block's translation, the exit); [`callbacks`] what it calls as the
//! guest runs; [`filter`] is the D1 filter's state and handover;
//! [`buffers`] the per-vCPU buffers, the shared file and the stream;
//! [`records`] the bytes of each record; [`children`] following the
//! processes the guest forks and execs (`ctl=FD,children=on`); [`layout`]
//! data addresses moved where Valgrind would map them (`layout=qemu`
//! keeps QEMU's).

#![deny(missing_docs)]

mod args;
mod buffers;
mod callbacks;
mod children;
mod filter;
#[cfg(feature = "inprocess")]
mod inprocess;
mod install;
mod layout;
mod records;

#[cfg(test)]
mod tests;

/// A message in QEMU's log (`-d plugin`).
#[cfg(feature = "inprocess")]
fn say(msg: &str) {
    if let Ok(s) = std::ffi::CString::new(format!("tally-qemu-plugin: {msg}\n")) {
        // SAFETY: a valid NUL-terminated string.
        unsafe { qemu_plugin_sys::qemu_plugin_outs(s.as_ptr()) };
    }
}
