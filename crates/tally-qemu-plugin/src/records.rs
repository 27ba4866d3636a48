//! The bytes of each record the plugin writes, in the layout that
//! `tally_sim::trace` documents and reads, with its tags.
//!
//! The records of the hot callbacks are built as two little-endian words,
//! `a` (the first 8 bytes) and `b` (the next 4), which
//! [`Buf::push_words`](crate::buffers::Buf::push_words) stores whole: a
//! record assembled byte by byte on the stack and then copied reads back
//! words just written in pieces, which stalls the store buffer. The rest
//! are byte arrays or appended to a `Vec`.

use tally_sim::filter::Filtered;
use tally_sim::trace::{
    T_BLOCK, T_BLOCK_AFTER, T_DECL, T_EXEC, T_LOAD, T_LOAD_AT, T_MAP, T_PROGRESS, T_READ_HIT,
    T_READ_MISS, T_SHORT_HIT, T_SLOT, T_STORE, T_STORE_AT, T_THREAD, T_WRITE_HIT, T_WRITE_MISS,
};

/// Longest block written as one block record; longer ones (rare) get a
/// record per instruction.
pub(crate) const MAX_BLOCK: usize = 255;

/// The `udata` of a block's callback: its first instruction id (bits
/// 8..40) and its length (bits 40..48), where its block records have them.
pub(crate) fn block_udata(first: u32, count: usize) -> u64 {
    u64::from(first) << 8 | (count as u64) << 40
}

/// A block runs (`v`: [`block_udata`]): tag, first id (4 bytes), length;
/// 6 bytes.
#[inline(always)]
pub(crate) fn block(v: u64) -> u64 {
    u64::from(T_BLOCK) | v
}

/// The last block ran up to `progress`, then a block runs (`v`:
/// [`block_udata`]): tag, first id, length, progress; 7 bytes.
#[inline(always)]
pub(crate) fn block_after(v: u64, progress: u8) -> u64 {
    u64::from(T_BLOCK_AFTER) | v | u64::from(progress) << 48
}

/// The running block ran up to `progress`: tag, progress; 2 bytes.
#[inline(always)]
pub(crate) fn progress(progress: u8) -> u64 {
    u64::from(T_PROGRESS) | u64::from(progress) << 8
}

/// An access of `1 << shift` bytes at `addr` by instruction `index` of
/// the running block: tag, index, address (8 bytes), size; 11 bytes.
#[inline(always)]
pub(crate) fn access_at(store: bool, index: u8, addr: u64, shift: u32) -> (u64, u32) {
    let tag = if store { T_STORE_AT } else { T_LOAD_AT };
    let a = u64::from(tag) | u64::from(index) << 8 | addr << 16;
    let b = (addr >> 48) as u32 | 1 << (16 + shift);
    (a, b)
}

/// What the D1 filter decided about an access: its length in bytes and
/// its words. A hit by an instruction below 64 is one byte, other hits
/// two (tag, index), a miss 12 (tag, index, address, size in 2 bytes).
#[inline(always)]
pub(crate) fn filtered(x: Filtered) -> (usize, u64, u32) {
    match x {
        Filtered::Hit { index, store } if index < 64 => {
            (1, u64::from(T_SHORT_HIT | u8::from(store) << 6 | index), 0)
        }
        Filtered::Hit { index, store } => {
            let tag = if store { T_WRITE_HIT } else { T_READ_HIT };
            (2, u64::from(tag) | u64::from(index) << 8, 0)
        }
        Filtered::Miss {
            index,
            store,
            addr,
            size,
        } => {
            let tag = if store { T_WRITE_MISS } else { T_READ_MISS };
            let a = u64::from(tag) | u64::from(index) << 8 | addr << 16;
            (12, a, (addr >> 48) as u32 | u32::from(size) << 16)
        }
    }
}

/// Instruction `id` runs (blocks over [`MAX_BLOCK`] instructions).
#[inline(always)]
pub(crate) fn exec(id: u32) -> [u8; 5] {
    let mut r = [T_EXEC, 0, 0, 0, 0];
    r[1..].copy_from_slice(&id.to_le_bytes());
    r
}

/// An access of `1 << shift` bytes at `addr` by the instruction executed
/// last (blocks over [`MAX_BLOCK`] instructions).
#[inline(always)]
pub(crate) fn access(store: bool, addr: u64, shift: u32) -> [u8; 10] {
    let mut r = [0u8; 10];
    r[0] = if store { T_STORE } else { T_LOAD };
    r[1..9].copy_from_slice(&addr.to_le_bytes());
    r[9] = 1u8 << shift;
    r
}

/// The records that follow are vCPU `vcpu`'s.
pub(crate) fn thread(vcpu: u32) -> [u8; 5] {
    let mut t = [T_THREAD, 0, 0, 0, 0];
    t[1..].copy_from_slice(&vcpu.to_le_bytes());
    t
}

/// `len` bytes of records are in slot `slot` of the shared file.
pub(crate) fn slot(slot: u32, len: u32) -> [u8; 9] {
    let mut r = [T_SLOT, 0, 0, 0, 0, 0, 0, 0, 0];
    r[1..5].copy_from_slice(&slot.to_le_bytes());
    r[5..].copy_from_slice(&len.to_le_bytes());
    r
}

/// Appends the declaration of instruction `id` at `vaddr`, whose code is
/// `code` (at most 255 bytes). Inlined: it runs per instruction
/// translated.
#[inline(always)]
pub(crate) fn declare(records: &mut Vec<u8>, id: u32, vaddr: u64, code: &[u8]) {
    records.push(T_DECL);
    records.extend_from_slice(&id.to_le_bytes());
    records.extend_from_slice(&vaddr.to_le_bytes());
    records.push(code.len() as u8);
    records.extend_from_slice(code);
}

/// Appends a mapping of guest `[start, end)` from file offset `offset` of
/// `path` (empty: unnamed; cut at 65,535 bytes).
pub(crate) fn map(records: &mut Vec<u8>, start: u64, end: u64, offset: u64, path: &[u8]) {
    let len = path.len().min(u16::MAX as usize);
    records.push(T_MAP);
    records.extend_from_slice(&start.to_le_bytes());
    records.extend_from_slice(&end.to_le_bytes());
    records.extend_from_slice(&offset.to_le_bytes());
    records.extend_from_slice(&(len as u16).to_le_bytes());
    records.extend_from_slice(&path[..len]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffers::{FLUSH_AT, heap_buffer};
    use tally_sim::trace::{MAGIC, Record, TraceReader};

    /// Decodes `bytes` (records after the magic) with tally's reader.
    fn read(bytes: &[u8]) -> Vec<String> {
        let mut stream = MAGIC.to_vec();
        stream.extend_from_slice(bytes);
        let mut r = TraceReader::new(&stream[..]).unwrap();
        let mut got = Vec::new();
        while let Some(x) = r.next_record().unwrap() {
            got.push(format!("{x:?}"));
        }
        got
    }

    fn show(records: &[Record]) -> Vec<String> {
        records.iter().map(|r| format!("{r:?}")).collect()
    }

    /// Every record the callbacks write, through a buffer as they write
    /// them, reads back as what was meant.
    #[test]
    fn buffered_records_decode_to_what_was_written() {
        let mut buf = heap_buffer();
        let v = block_udata(0x1234_5678, 200);
        let far = 0xfedc_ba98_7654_3210;
        // SAFETY: a new buffer, far below `FLUSH_AT`; no record over 12 bytes.
        unsafe {
            buf.push_words(6, block(v), 0);
            buf.push_words(7, block_after(v, 77), 0);
            buf.push_words(2, progress(9), 0);
            for (store, index, addr, shift) in [
                (false, 0, 0x1000, 0),
                (true, 254, far, 3),
                (false, 3, u64::MAX, 4),
            ] {
                let (a, b) = access_at(store, index, addr, shift);
                buf.push_words(11, a, b);
            }
            for x in [
                Filtered::Hit {
                    index: 0,
                    store: false,
                },
                Filtered::Hit {
                    index: 63,
                    store: true,
                },
                Filtered::Hit {
                    index: 64,
                    store: false,
                },
                Filtered::Hit {
                    index: 255,
                    store: true,
                },
                Filtered::Miss {
                    index: 5,
                    store: false,
                    addr: far,
                    size: 8,
                },
                Filtered::Miss {
                    index: 255,
                    store: true,
                    addr: 0x40,
                    size: 300,
                },
            ] {
                let (n, a, b) = filtered(x);
                buf.push_words(n, a, b);
            }
            buf.push(&exec(u32::MAX));
            buf.push(&access(false, far, 2));
            buf.push(&access(true, 8, 0));
            buf.push(&thread(3));
            buf.push(&slot(2, 12345));
        }
        assert!(buf.len < FLUSH_AT);
        let want = [
            Record::Block {
                first: 0x1234_5678,
                count: 200,
            },
            Record::BlockAfter {
                first: 0x1234_5678,
                count: 200,
                progress: 77,
            },
            Record::Progress { progress: 9 },
            Record::LoadAt {
                index: 0,
                addr: 0x1000,
                size: 1,
            },
            Record::StoreAt {
                index: 254,
                addr: far,
                size: 8,
            },
            Record::LoadAt {
                index: 3,
                addr: u64::MAX,
                size: 16,
            },
            Record::Hit {
                index: 0,
                store: false,
            },
            Record::Hit {
                index: 63,
                store: true,
            },
            Record::Hit {
                index: 64,
                store: false,
            },
            Record::Hit {
                index: 255,
                store: true,
            },
            Record::Miss {
                index: 5,
                store: false,
                addr: far,
                size: 8,
            },
            Record::Miss {
                index: 255,
                store: true,
                addr: 0x40,
                size: 300,
            },
            Record::Exec { id: u32::MAX },
            Record::Load { addr: far, size: 4 },
            Record::Store { addr: 8, size: 1 },
            Record::Thread(3),
            Record::Slot {
                slot: 2,
                len: 12345,
            },
        ];
        assert_eq!(read(buf.bytes()), show(&want));
    }

    /// A record given as words leaves the bytes past its length to the
    /// next record: what a shorter record overwrites is not read.
    #[test]
    fn words_past_a_record_are_overwritten() {
        let mut buf = heap_buffer();
        // SAFETY: a new buffer, far below `FLUSH_AT`.
        unsafe {
            let (a, b) = access_at(true, 1, u64::MAX, 3);
            buf.push_words(11, a, b);
            buf.len = 0;
            buf.push_words(2, progress(4), u32::MAX);
            buf.push_words(
                1,
                filtered(Filtered::Hit {
                    index: 2,
                    store: false,
                })
                .1,
                0,
            );
        }
        let want = [
            Record::Progress { progress: 4 },
            Record::Hit {
                index: 2,
                store: false,
            },
        ];
        assert_eq!(read(buf.bytes()), show(&want));
    }

    #[test]
    fn declarations_and_mappings() {
        let mut r = Vec::new();
        let code = [0x48, 0x89, 0xe5];
        declare(&mut r, 7, 0x40_1000, &code);
        declare(&mut r, 8, 0x40_1003, &[0x90; 255]);
        map(&mut r, 0x40_0000, 0x40_2000, 0x1000, b"/usr/bin/gzip");
        map(&mut r, 0x1000, 0x2000, 0, b"");
        let long = vec![b'/'; 70_000];
        map(&mut r, 0, 0x1000, 0, &long);
        let want = [
            Record::Declare {
                id: 7,
                addr: 0x40_1000,
                code: &code,
            },
            Record::Declare {
                id: 8,
                addr: 0x40_1003,
                code: &[0x90; 255],
            },
            Record::Map {
                start: 0x40_0000,
                end: 0x40_2000,
                offset: 0x1000,
                path: b"/usr/bin/gzip",
            },
            Record::Map {
                start: 0x1000,
                end: 0x2000,
                offset: 0,
                path: b"",
            },
            Record::Map {
                start: 0,
                end: 0x1000,
                offset: 0,
                path: &long[..65_535],
            },
        ];
        assert_eq!(read(&r), show(&want));
    }

    /// The D1 filter's records, as `tally_sim::filter` makes them, follow
    /// the plugin's records in the same stream.
    #[test]
    fn the_filters_records_decode_beside_these() {
        let f = crate::args::parse_d1("32768:8:64", "lru").unwrap();
        let mut r = tally_sim::filter::filter_record(f.config(), f.policy());
        r.extend_from_slice(&exec(1));
        r.extend_from_slice(&tally_sim::filter::state_record(&f.save()));
        let got = read(&r);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].starts_with("D1Filter { size: 32768, assoc: 8, line_size: 64"));
        assert_eq!(got[1], "Exec { id: 1 }");
        assert!(got[2].starts_with("D1State("));
    }
}
