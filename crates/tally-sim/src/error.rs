//! The one error type of the simulation: machines that cannot be
//! simulated, trace streams and Lackey traces that cannot be read or fed,
//! and (with the `session` feature) runs that fail.

use crate::{CacheConfig, Policy};
use std::path::PathBuf;

/// Why a simulation cannot be set up, a trace cannot be read or
/// simulated, or a run failed. Offsets in a tally trace stream are bytes
/// from its start, its magic bytes included.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A cache geometry Cachegrind (and tally) cannot simulate.
    #[error("invalid {cache} cache: {message}")]
    Geometry {
        /// Which cache (`I1`, `D1`, `LL`, …).
        cache: String,
        /// What is wrong.
        message: String,
    },

    // A tally trace stream (`crate::trace`).
    /// Reading the stream failed.
    #[error("byte {offset}: {source}")]
    StreamIo {
        /// The stream's byte offset the read was to fill from.
        offset: u64,
        /// What the reader reported.
        #[source]
        source: std::io::Error,
    },
    /// Not a tally trace stream.
    #[error("not a tally trace stream (it does not start with `TALLYTR1`)")]
    StreamMagic,
    /// An unknown record tag in the stream.
    #[error("byte {offset}: unknown record tag {tag}")]
    StreamTag {
        /// The stream's byte offset of the tag.
        offset: u64,
        /// The tag byte.
        tag: u8,
    },
    /// The stream ends inside a record.
    #[error("byte {offset}: the stream ends inside a record")]
    StreamTruncated {
        /// The stream's byte offset of the record's tag.
        offset: u64,
    },

    // A record in a slot of the plugin's shared buffer file, inside
    // `InSlot`.
    /// A record in a slot of the shared buffer file executes an
    /// instruction before its declaration.
    #[error("instruction {0} executed before it was declared")]
    SlotUndeclared(u32),
    /// An unknown tag in a slot.
    #[error("unknown record tag {0}")]
    SlotTag(u8),
    /// The slot ends inside a record.
    #[error("the slot ends inside a record")]
    SlotTruncated,
    /// A record in a slot that belongs in the stream itself.
    #[error("a mapping, end or slot record inside a slot")]
    SlotMisplaced,

    // Feeding a stream to the engine (`Simulation`).
    /// A record runs a stream id before its declaration.
    #[error("byte {offset}: instruction {id} executed before it was declared")]
    Undeclared {
        /// Where the record is.
        offset: u64,
        /// The stream id.
        id: u32,
    },
    /// The plugin simulated a D1 that is not this engine's (or the engine
    /// has more than one machine).
    #[error(
        "byte {offset}: the plugin simulated D1 ({}) in this trace; simulate it with that D1 alone (one machine, --D1={},{},{}{})",
        config.describe(),
        config.size,
        config.assoc,
        config.line_size,
        match policy {
            Some(Policy::Lru) | None => String::new(),
            Some(p) => format!(", policy {p:?}"),
        }
    )]
    D1Filter {
        /// Where the record is.
        offset: u64,
        /// The plugin's D1.
        config: CacheConfig,
        /// Its policy, if the code is known.
        policy: Option<Policy>,
    },
    /// The D1 state the plugin handed over is not one of this D1.
    #[error("byte {offset}: the D1 state the plugin handed over does not fit this D1")]
    D1State {
        /// Where the record is.
        offset: u64,
    },
    /// A slot record in a stream without a shared buffer file.
    #[error("byte {offset}: a record of the plugin's buffer file in a stream without one")]
    NoBufferFile {
        /// Where the record is.
        offset: u64,
    },
    /// A slot record naming bytes outside the buffer file.
    #[error("byte {offset}: slot {slot} ({len} bytes) is not in the plugin's buffer file")]
    NoSlot {
        /// Where the record is.
        offset: u64,
        /// The slot.
        slot: u32,
        /// Its length in bytes.
        len: u32,
    },
    /// A record in a slot is wrong.
    #[error("byte {offset}: slot {slot}, byte {at}: {kind}")]
    InSlot {
        /// Where the slot record is.
        offset: u64,
        /// The slot.
        slot: u32,
        /// Where the record at fault is in the slot.
        at: usize,
        /// What is wrong with it: one of the `Slot…` variants.
        kind: Box<Error>,
    },

    // A Lackey trace (`crate::lackey`).
    /// Reading a Lackey trace failed.
    #[error("line {line}: {source}")]
    LackeyIo {
        /// The line being read.
        line: u64,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not a Lackey record.
    #[error("line {line}: not a Lackey trace line: `{text}`")]
    LackeyLine {
        /// Its number.
        line: u64,
        /// Its text (cut to 80 characters).
        text: String,
    },

    // A run (`tally sim`).
    /// A trace cannot be opened.
    #[error("cannot open {}", path.display())]
    Open {
        /// The trace.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A Lackey trace cannot be read.
    #[error("{}: {error}", path.display())]
    Lackey {
        /// The trace.
        path: PathBuf,
        /// What is wrong, and where.
        error: Box<Error>,
    },
    /// A Lackey trace shows an instruction longer than any.
    #[error("{}: line {line}: an instruction of {size} bytes", path.display())]
    LackeySize {
        /// The trace.
        path: PathBuf,
        /// The line.
        line: u64,
        /// The size it gives.
        size: u64,
    },
    /// A tally trace stream cannot be simulated.
    #[error("{}: {error}", name.display())]
    Stream {
        /// The stream (`<qemu plugin>` for the plugin's pipe).
        name: PathBuf,
        /// What is wrong, and where.
        error: Box<Error>,
    },
    /// The program's ELF header cannot be read.
    #[error("cannot read {}", path.display())]
    ReadProgram {
        /// The program.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The program is not an ELF file.
    #[error("{}: not an ELF program (scripts: give their interpreter as PROG)", path.display())]
    NotElf {
        /// The program.
        path: PathBuf,
    },
    /// The program is for a machine without a known QEMU emulator.
    #[error("{}: ELF machine {machine} has no QEMU user-mode emulator known to tally", path.display())]
    UnknownMachine {
        /// The program.
        path: PathBuf,
        /// Its ELF machine number.
        machine: u16,
    },
    /// The program is neither a file nor on PATH.
    #[error("{program}: no such program (not a file, and not found on PATH)")]
    NoProgram {
        /// The program as given.
        program: String,
    },
    /// QEMU's emulator is not on PATH.
    #[error(
        "{name} not found: install QEMU's user-mode emulators (Debian: apt-get install qemu-user)"
    )]
    NoEmulator {
        /// The emulator looked for.
        name: &'static str,
    },
    /// The plugin given does not exist.
    #[error("--plugin {}: no such file", path.display())]
    NoPluginFile {
        /// The plugin given.
        path: PathBuf,
    },
    /// No plugin was found.
    #[error(
        "tally's QEMU plugin (libtally_qemu_plugin.so) was not found; tally looked in order at\n{looked}\nBuild it and install it where tally looks with\n  cargo build --release --manifest-path crates/tally-qemu-plugin/Cargo.toml --target-dir target\n  tally sim --install-plugin target/release/libtally_qemu_plugin.so\n(or give --plugin PATH, or set TALLY_QEMU_PLUGIN)"
    )]
    NoPlugin {
        /// Each place looked at, one a line.
        looked: String,
    },
    /// The plugin cannot be installed.
    #[error("cannot install the plugin: {}", path.display())]
    Install {
        /// The file that cannot be read or written.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// What is to be installed is not a shared library.
    #[error("{}: not a shared library (give the built libtally_qemu_plugin.so)", path.display())]
    NotAPlugin {
        /// The file given.
        path: PathBuf,
    },
    /// Neither `XDG_DATA_HOME` nor `HOME` says where the data directory is.
    #[error("no data directory to install into: set XDG_DATA_HOME or HOME")]
    NoDataDir,
    /// A pipe to QEMU cannot be made.
    #[error("cannot create a pipe")]
    Pipe(#[source] std::io::Error),
    /// The buffer file cannot be made.
    #[error("cannot create the plugin's buffer file")]
    Buffers(#[source] std::io::Error),
    /// The buffer file cannot be mapped.
    #[error("cannot map the plugin's buffer file")]
    Map(#[source] std::io::Error),
    /// QEMU cannot be started.
    #[error("cannot run {}", qemu.display())]
    Spawn {
        /// The emulator.
        qemu: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for QEMU failed.
    #[error("waiting for the program")]
    Wait(#[source] std::io::Error),
    /// The profile could not be written where asked.
    #[error("cannot write {} ({why}); the program was not run", path.display())]
    OutFile {
        /// The output file.
        path: PathBuf,
        /// Why not.
        why: String,
    },
}
