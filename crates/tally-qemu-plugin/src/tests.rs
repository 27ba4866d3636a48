//! Tests of the buffers as the callbacks and the D1 filter use them,
//! through the plugin's global state: the stream, the shared file, the
//! pool of slots, the shared overflow buffer. They run in one test, in order, since that
//! state is made once per process (as in QEMU).
//!
//! The test executable links without QEMU: no test reaches a function
//! that calls QEMU's plugin API (nor the exported entry point), so those
//! functions, and their references to symbols only QEMU defines, are left
//! out of it as dead code. A test that reached one would fail to link.

use crate::buffers::{self, FLUSH_AT, MAX_VCPUS, OUT, Out, flush_all, record, record_words};
use crate::filter::{Filter, take};
use crate::records;
use std::fs::File;
use std::io::Write;
use std::os::fd::IntoRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use tally_sim::filter::{Filtered, LAST_EXECUTED, Step};
use tally_sim::trace::{MAGIC, Record, TraceReader, shared};

/// A file in the temporary folder, removed when dropped.
struct Temp(std::path::PathBuf);

impl Temp {
    fn new(name: &str) -> Temp {
        let p =
            std::env::temp_dir().join(format!("tally-qemu-plugin-{}-{name}", std::process::id()));
        Temp(p)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The records of a stream, slots read from the shared file `shm`.
fn read(stream: &[u8], shm: Option<&File>) -> Vec<Record<'static>> {
    let mut r = TraceReader::new(stream).unwrap();
    let mut got = Vec::new();
    while let Some(x) = r.next_record().unwrap() {
        match x {
            Record::Slot { slot, len } => {
                let at = shared::records(slot, len).unwrap();
                let mut b = vec![0u8; at.len()];
                shm.unwrap().read_exact_at(&mut b, at.start as u64).unwrap();
                let mut s = MAGIC.to_vec();
                s.extend_from_slice(&b);
                got.push(Record::Slot { slot, len });
                got.extend(read(&s, None));
            }
            x => got.push(owned(x)),
        }
    }
    got
}

/// `x`, borrowing nothing (the records these tests write borrow nothing).
fn owned(x: Record<'_>) -> Record<'static> {
    match x {
        Record::Exec { id } => Record::Exec { id },
        Record::Thread(n) => Record::Thread(n),
        Record::Block { first, count } => Record::Block { first, count },
        Record::End => Record::End,
        Record::Hit { index, store } => Record::Hit { index, store },
        Record::Miss {
            index,
            store,
            addr,
            size,
        } => Record::Miss {
            index,
            store,
            addr,
            size,
        },
        x => panic!("unexpected {x:?}"),
    }
}

fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: two ints for pipe to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: new descriptors, owned by nothing else.
    unsafe {
        use std::os::fd::FromRawFd;
        (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1]))
    }
}

/// The bytes of the stream file, behind the magic install writes.
fn stream_bytes(path: &std::path::Path) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&std::fs::read(path).unwrap());
    bytes
}

/// Records go through the buffers into the stream in program order per
/// vCPU: heap buffers written whole when full, a thread record before
/// another vCPU's records, the shared overflow buffer past `MAX_VCPUS`, a
/// vCPU's own slot of the shared file, slots of the pool handed over and
/// taken back, the pending count of a slot kept in the file, and the end
/// record.
#[test]
fn records_reach_the_stream() {
    let stream = Temp::new("stream");
    *OUT.lock().unwrap() = Some(Out::new(File::create(&stream.0).unwrap()));
    let mut want = Vec::new();
    let block = |i: u32| records::block(records::block_udata(i, 1));

    // Heap buffers (no shared file yet): vCPU 0 fills its buffer twice
    // over; vCPU 1's records wait in its buffer.
    let per_buffer = FLUSH_AT.div_ceil(6) as u32;
    for i in 0..2 * per_buffer {
        record_words(0, 6, block(i), 0);
        want.push(Record::Block { first: i, count: 1 });
    }
    let len = std::fs::metadata(&stream.0).unwrap().len();
    assert_eq!(
        len,
        2 * 6 * u64::from(per_buffer),
        "two full buffers written"
    );
    for i in 0..10 {
        record_words(0, 6, block(i), 0);
    }
    record(1, &records::exec(5));
    record(1, &records::exec(6));

    // Past `MAX_VCPUS`: one shared buffer, written when another vCPU of
    // them records, or when full.
    let big = MAX_VCPUS as u32;
    record(big, &records::exec(100));
    record(big + 1, &records::exec(101));
    record(big + 1, &records::exec(102));
    want.extend([Record::Thread(big), Record::Exec { id: 100 }]);
    want.extend([
        Record::Thread(big + 1),
        Record::Exec { id: 101 },
        Record::Exec { id: 102 },
    ]);
    let to_fill = (FLUSH_AT - 10).div_ceil(6) as u32;
    let before = std::fs::metadata(&stream.0).unwrap().len();
    for i in 0..to_fill {
        record_words(big + 1, 6, block(i), 0);
        want.push(Record::Block { first: i, count: 1 });
    }
    let written = std::fs::metadata(&stream.0).unwrap().len() - before;
    assert_eq!(
        written,
        5 + 10 + 6 * u64::from(to_fill),
        "the full overflow buffer"
    );
    record(big + 1, &records::exec(103));

    // The shared file: 8 slots, and room for 100 ids' hit counts.
    let shm = Temp::new("shm");
    let slots = 8;
    {
        let mut f = File::create(&shm.0).unwrap();
        f.write_all(&shared::header(slots)).unwrap();
        f.set_len(shared::size(slots) + 16 * 100).unwrap();
    }
    let fd = File::options().read(true).write(true).open(&shm.0).unwrap();
    buffers::map_shared(fd.into_raw_fd()).unwrap();
    assert!(!buffers::HITS.load(Ordering::Relaxed).is_null());
    assert_eq!(buffers::HIT_IDS.load(Ordering::Relaxed), 100);
    let shm_file = File::open(&shm.0).unwrap();
    let pending = |k: u64| {
        let mut n = [0u8; 8];
        let at = shared::HEADER as u64 + k * shared::SLOT as u64;
        shm_file.read_exact_at(&mut n, at).unwrap();
        u64::from_le_bytes(n)
    };

    // The D1 filter writes into vCPU 0's buffer: a record it replaces is
    // amended, a hit it counts is not written, and uncounted when the
    // access turns out a miss.
    let d1 = || crate::args::parse_d1("32768:8:64", "lru").unwrap();
    let hit = |index, store| Step::Emit(Filtered::Hit { index, store });
    let miss = |index, store, addr| Filtered::Miss {
        index,
        store,
        addr,
        size: 8,
    };
    let mut f = Filter::new(d1(), false);
    take(&mut f, hit(3, false));
    take(&mut f, Step::Replace(miss(3, false, 0x1234)));
    take(&mut f, hit(70, true));
    let mut f = Filter::new(d1(), true);
    f.first = 10;
    let hits = |id: u64, store: u64| {
        let mut n = [0u8; 8];
        let at = shared::size(slots) + (2 * id + store) * 8;
        shm_file.read_exact_at(&mut n, at).unwrap();
        u64::from_le_bytes(n)
    };
    take(&mut f, hit(1, true));
    assert_eq!(hits(11, 1), 1, "counted");
    take(&mut f, Step::Replace(miss(1, true, 0x5678)));
    assert_eq!(hits(11, 1), 0, "uncounted");
    take(&mut f, hit(LAST_EXECUTED, false));
    take(&mut f, Step::Nothing);
    f.first = 200;
    take(&mut f, hit(0, false));
    let filtered = [
        Record::Miss {
            index: 3,
            store: false,
            addr: 0x1234,
            size: 8,
        },
        Record::Hit {
            index: 70,
            store: true,
        },
        Record::Miss {
            index: 1,
            store: true,
            addr: 0x5678,
            size: 8,
        },
        Record::Hit {
            index: LAST_EXECUTED,
            store: false,
        },
        Record::Hit {
            index: 0,
            store: false,
        },
    ];

    // Without a pool, vCPU 2 writes into its own slot, its pending count
    // kept in the file.
    record(2, &records::exec(200));
    assert_eq!(pending(2), 5);

    // With a pool, vCPU 3 (of the first half) takes slot 5, hands it over
    // full and takes slot 6.
    let (free, mut give) = pipe();
    buffers::use_pool(free.into_raw_fd()).unwrap();
    give.write_all(&5u32.to_le_bytes()).unwrap();
    give.write_all(&6u32.to_le_bytes()).unwrap();
    record(3, &records::exec(300));
    assert_eq!(pending(5), 5);
    want.extend([
        Record::Thread(3),
        Record::Slot {
            slot: 5,
            len: 5 + 6 * (per_buffer - 1),
        },
    ]);
    want.push(Record::Exec { id: 300 });
    for i in 0..per_buffer - 1 {
        record_words(3, 6, block(i), 0);
        want.push(Record::Block { first: i, count: 1 });
    }
    assert_eq!(pending(5), 0, "handed over");
    record_words(3, 6, block(7), 0);
    assert_eq!(pending(6), 6);

    flush_all();
    want.push(Record::Thread(0));
    want.extend((0..10).map(|i| Record::Block { first: i, count: 1 }));
    want.extend(filtered);
    want.extend([
        Record::Thread(1),
        Record::Exec { id: 5 },
        Record::Exec { id: 6 },
    ]);
    want.extend([Record::Thread(2), Record::Exec { id: 200 }]);
    want.extend([Record::Thread(3), Record::Slot { slot: 6, len: 6 }]);
    want.push(Record::Block { first: 7, count: 1 });
    want.extend([Record::Thread(big + 1), Record::Exec { id: 103 }]);
    want.push(Record::End);
    assert_eq!(pending(2), 0);
    assert_eq!(pending(6), 0);
    let got = read(&stream_bytes(&stream.0), Some(&shm_file));
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the stream differs");
}

/// A thread record goes before the records of another vCPU than the last
/// one; once the reader is gone nothing more is written, and the program
/// goes on.
#[test]
fn write_out_names_threads_and_stops_when_the_reader_is_gone() {
    let path = Temp::new("write-out");
    let mut out = Out::new(File::create(&path.0).unwrap());
    buffers::write_out(&mut out, 0, &records::exec(1));
    buffers::write_out(&mut out, 4, &records::exec(2));
    buffers::write_out(&mut out, 4, &[]);
    buffers::write_out(&mut out, 4, &records::exec(3));
    buffers::write_out(&mut out, 0, &records::exec(4));
    let want = [
        Record::Exec { id: 1 },
        Record::Thread(4),
        Record::Exec { id: 2 },
        Record::Exec { id: 3 },
        Record::Thread(0),
        Record::Exec { id: 4 },
    ];
    assert_eq!(read(&stream_bytes(&path.0), None), want);

    let (r, w) = pipe();
    drop(r);
    let mut out = Out::new(w);
    assert!(!out.failed);
    buffers::write_out(&mut out, 0, &records::exec(1));
    assert!(out.failed);
    buffers::write_out(&mut out, 1, &records::exec(2));
    assert_eq!(out.last_vcpu, 0, "nothing tried once failed");
}
