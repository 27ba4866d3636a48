//! gprof's `gmon.out` profiles: reading (GNU and BSD layouts), combining
//! several runs as GNU gprof does, and writing the GNU layout as `gprof -s`
//! writes `gmon.sum`.
//!
//! A `gmon.out` file does not say how wide addresses are or in which byte
//! order its numbers are: both are those of the profiled program, so the
//! caller passes them as a [`Layout`] taken from the program's ELF header
//! (gprof takes them from the program too).
//!
//! # The GNU layout
//!
//! Written by glibc (and by `gprof -s`): a 20-byte header — the magic
//! `gmon`, a 4-byte version (1; gprof also accepts 0) and 12 spare bytes —
//! then records, each a tag byte and its body, until the end of the file:
//!
//! | tag | record | body |
//! |-----|--------|------|
//! | 0 | histogram | `low_pc`, `high_pc` (words), bin count (4 bytes), sampling rate (4 bytes), dimension (15 bytes, NUL-padded), its abbreviation (1 byte), then the bins, 2 bytes each |
//! | 1 | call-graph arc | `from_pc`, `self_pc` (words), count (4 bytes) |
//! | 2 | basic-block counts | block count (4 bytes), then that many (address, count) pairs of words |
//!
//! glibc and gprof leave the 12 spare header bytes zero (or, in gprof's
//! `gmon.sum`, uninitialised); `tally record` writes [`SAMPLED_MARK`]
//! there, because its arcs count sampled stacks, not calls, and the
//! reader keeps that fact in [`Gmon::sampled`].
//!
//! A "word" is 4 or 8 bytes as [`Layout::word_size`] says. glibc writes one
//! histogram record, one record per arc and no basic-block records (only the
//! long-gone `gcc -a` filled them), but gprof accepts any number of each, in
//! any order, and several histograms for disjoint address ranges.
//!
//! # The BSD layouts
//!
//! Files without the magic are read as gprof reads them: a header of
//! `low_pc`, `high_pc` (words) and `ncnt` (4 bytes: the size of header and
//! bins together); in the 4.4BSD variant the header goes on with a version
//! ([`BSD44_VERSION`]), the sampling rate and 12 spare bytes. The bins
//! (2 bytes each) follow the header immediately — the old header has no
//! padding, so it is 12 or 20 bytes, the 4.4BSD one 32 or 40 — then arcs of
//! `from_pc`, `self_pc` and a count, all three words, until the end of the
//! file.

use crate::error::Error;
use rustc_hash::FxHashMap;
use std::io::{self, Write};
use std::path::Path;

/// The magic at the start of a GNU `gmon.out`.
pub const GMON_MAGIC: &[u8; 4] = b"gmon";

/// What `tally record` writes in the spare bytes of a GNU header: the
/// file came from sampling, so its arc counts are sampled stacks through
/// each arc (a recursion counted once per stack), not exact call counts.
pub const SAMPLED_MARK: &[u8; 12] = b"tally-sample";

/// The version glibc and `gprof -s` write, and the one [`Gmon::write`]
/// writes.
pub const GMON_VERSION: u32 = 1;

/// The version word that marks a 4.4BSD header (`GMONVERSION` in BSD's
/// `<sys/gmon.h>`).
pub const BSD44_VERSION: u32 = 0x0005_1879;

/// The dimension glibc writes and gprof assumes for BSD files.
pub const DEFAULT_DIMENSION: &str = "seconds";

/// The abbreviation of [`DEFAULT_DIMENSION`].
pub const DEFAULT_DIMENSION_ABBREV: char = 's';

/// The sampling rate given to the histogram of an old BSD file, whose
/// header has none.
///
/// gprof asks the machine it runs on (`hertz()`, the resolution of an
/// interval timer), which is 100 on Linux — the rate of `profil` there.
pub const BSD_DEFAULT_RATE: u32 = 100;

const TAG_HISTOGRAM: u8 = 0;
const TAG_ARC: u8 = 1;
const TAG_BLOCKS: u8 = 2;
const GNU_HEADER_LEN: usize = 20;
const DIMENSION_LEN: usize = 15;

/// Byte order of the numbers in a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endian {
    /// Least significant byte first (x86, most ARM and RISC-V systems).
    Little,
    /// Most significant byte first (s390x, classic SPARC and PowerPC).
    Big,
}

/// How numbers are encoded in a `gmon.out`: the address size and byte order
/// of the profiled program, which the file itself does not record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Bytes in an address ("word"): 4 or 8, the ELF class of the program.
    pub word_size: u8,
    /// Byte order, the ELF data encoding of the program.
    pub endian: Endian,
}

impl Layout {
    /// x86-64 (and other 64-bit little-endian systems: aarch64, riscv64,
    /// ppc64le).
    pub const X86_64: Layout = Layout {
        word_size: 8,
        endian: Endian::Little,
    };

    /// The layout of a program from its ELF header: `is_64` for
    /// `ELFCLASS64`, `little_endian` for `ELFDATA2LSB`.
    pub const fn from_elf_class(is_64: bool, little_endian: bool) -> Layout {
        Layout {
            word_size: if is_64 { 8 } else { 4 },
            endian: if little_endian {
                Endian::Little
            } else {
                Endian::Big
            },
        }
    }

    /// The layout of programs built for the machine tally runs on.
    pub const fn host() -> Layout {
        Layout::from_elf_class(
            cfg!(target_pointer_width = "64"),
            cfg!(target_endian = "little"),
        )
    }

    /// The word size in bytes, or why it is not one gmon files use.
    fn word(self) -> Result<usize, String> {
        match self.word_size {
            4 => Ok(4),
            8 => Ok(8),
            n => Err(format!("unsupported word size {n} (gmon files use 4 or 8)")),
        }
    }

    fn get(self, bytes: &[u8]) -> u64 {
        let mut v = 0u64;
        match self.endian {
            Endian::Little => {
                for &b in bytes.iter().rev() {
                    v = v << 8 | u64::from(b);
                }
            }
            Endian::Big => {
                for &b in bytes {
                    v = v << 8 | u64::from(b);
                }
            }
        }
        v
    }

    /// Appends the low `len` bytes of `v`.
    fn put(self, out: &mut Vec<u8>, v: u64, len: usize) {
        let bytes = v.to_le_bytes();
        match self.endian {
            Endian::Little => out.extend_from_slice(&bytes[..len]),
            Endian::Big => out.extend(bytes[..len].iter().rev()),
        }
    }
}

/// The kind of file a [`Gmon`] was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GmonFormat {
    /// The GNU layout: magic, version and tagged records.
    Gnu {
        /// The version in the header: 1, or 0 for the earliest GNU files
        /// (which differ only in their basic-block records).
        version: u32,
    },
    /// A BSD layout without magic: one histogram, then arcs.
    Bsd {
        /// Whether the header is the 4.4BSD one, which carries the sampling
        /// rate; otherwise the histogram's rate is [`BSD_DEFAULT_RATE`].
        bsd44: bool,
    },
}

/// A histogram of program-counter samples over `low_pc..high_pc`.
///
/// The range is split into `bins.len()` equal bins; each counts the samples
/// that fell into it (on disk, 16 bits per bin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    /// First address covered.
    pub low_pc: u64,
    /// End of the covered range (exclusive).
    pub high_pc: u64,
    /// Samples per unit of the dimension (per second: the `profil` rate,
    /// 100 on Linux).
    pub prof_rate: u32,
    /// What the samples measure, normally `"seconds"`: at most 15 bytes on
    /// disk, read and written as Latin-1 so that every byte string survives
    /// a round trip; bytes after a NUL are not kept.
    pub dimension: String,
    /// One-letter abbreviation of the dimension, normally `'s'`
    /// (one Latin-1 byte on disk).
    pub dimension_abbrev: char,
    /// Sample counts.
    pub bins: Vec<u64>,
}

impl Histogram {
    /// Histogram units (2-byte `UNIT`s of address space) per bin, as gprof
    /// computes it to check that histograms agree.
    fn scale(&self) -> f64 {
        (self.high_pc.wrapping_sub(self.low_pc) / 2) as f64 / self.bins.len() as f64
    }
}

/// A call-graph arc: calls from the call site `from_pc` to the function at
/// `self_pc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arc {
    /// Address in the caller (the return address of the call).
    pub from_pc: u64,
    /// Address in the callee (where it called `mcount`).
    pub self_pc: u64,
    /// Times the arc was traversed.
    pub count: u64,
}

/// An execution count of a basic block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockCount {
    /// Address of the block.
    pub address: u64,
    /// Times it ran.
    pub count: u64,
}

/// The contents of a `gmon.out` file.
///
/// [`Gmon::parse`] keeps the records as the file holds them, in file order
/// (several histograms, repeated arcs and several basic-block records
/// included, the latter concatenated); [`Gmon::merge`] combines profiles
/// the way gprof combines the files it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gmon {
    /// The layout the file had.
    pub format: GmonFormat,
    /// Histogram records, in file order.
    pub histograms: Vec<Histogram>,
    /// Call-graph arcs, in file order.
    pub arcs: Vec<Arc>,
    /// Basic-block counts, in file order.
    pub blocks: Vec<BlockCount>,
    /// The file came from sampling (`tally record`, [`SAMPLED_MARK`] in
    /// the header): arc counts are sampled stacks, not calls.
    pub sampled: bool,
}

impl Default for Gmon {
    fn default() -> Self {
        Gmon {
            format: GmonFormat::Gnu {
                version: GMON_VERSION,
            },
            histograms: Vec::new(),
            arcs: Vec::new(),
            blocks: Vec::new(),
            sampled: false,
        }
    }
}

/// Reads numbers off the input, with errors naming the file and an offset.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
    layout: Layout,
    word: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, offset: usize, message: impl Into<String>) -> Error {
        Error::Binary {
            path: self.path.to_path_buf(),
            offset: offset as u64,
            message: message.into(),
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Fails unless `n` bytes remain for `what`, which started at `start`.
    fn need(&self, n: usize, what: &str, start: usize) -> Result<(), Error> {
        if self.remaining() < n {
            return Err(self.error(
                start,
                format!(
                    "truncated {what}: {n} byte(s) needed, only {} left",
                    self.remaining()
                ),
            ));
        }
        Ok(())
    }

    /// The next `n` bytes; callers check with [`Reader::need`] first.
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        s
    }

    fn u32(&mut self) -> u32 {
        let b = self.take(4);
        self.layout.get(b) as u32
    }

    fn word(&mut self) -> u64 {
        let b = self.take(self.word);
        self.layout.get(b)
    }

    /// Skips a NUL-terminated string (or the rest of the file, as gprof's
    /// reader does when the NUL is missing).
    fn skip_string(&mut self) {
        match memchr::memchr(0, &self.bytes[self.pos..]) {
            Some(i) => self.pos += i + 1,
            None => self.pos = self.bytes.len(),
        }
    }
}

/// Decodes the 15-byte dimension field: Latin-1 up to the first NUL.
fn decode_dimension(field: &[u8]) -> String {
    let end = memchr::memchr(0, field).unwrap_or(field.len());
    field[..end].iter().map(|&b| char::from(b)).collect()
}

/// Encodes a dimension for the 15-byte field.
fn encode_dimension(dimension: &str) -> io::Result<[u8; DIMENSION_LEN]> {
    let mut field = [0u8; DIMENSION_LEN];
    for (n, c) in dimension.chars().enumerate() {
        let byte = u8::try_from(u32::from(c))
            .ok()
            .filter(|&b| b != 0 && n < DIMENSION_LEN)
            .ok_or_else(|| {
                invalid(format!(
                    "histogram dimension `{dimension}` is not at most {DIMENSION_LEN} \
                     Latin-1 characters without NUL"
                ))
            })?;
        field[n] = byte;
    }
    Ok(field)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

impl Gmon {
    /// Reads a `gmon.out` from its bytes; `path` is only for error messages.
    ///
    /// A file that starts with [`GMON_MAGIC`] is read as GNU, any other as
    /// BSD, as gprof decides (gprof has no other test: a BSD file whose
    /// `low_pc` happens to spell `gmon` is misread by both). Like gprof,
    /// a file shorter than the 20-byte GNU header is rejected whatever its
    /// layout, and a BSD file's trailing bytes too few for an arc are
    /// ignored.
    ///
    /// Errors ([`Error::Binary`]) give the offset of the record or field at
    /// fault: a truncated record, an unknown tag, an unsupported version, a
    /// bin or block count larger than the rest of the file (checked before
    /// anything is allocated), a BSD header whose `high_pc` is below its
    /// `low_pc` or whose `ncnt` is smaller than the header. Bad input never
    /// panics.
    pub fn parse(bytes: &[u8], path: &Path, layout: Layout) -> Result<Gmon, Error> {
        let mut r = Reader {
            bytes,
            pos: 0,
            path,
            layout,
            word: 0,
        };
        r.word = layout.word().map_err(|m| r.error(0, m))?;
        if bytes.len() < GNU_HEADER_LEN {
            return Err(r.error(
                0,
                format!(
                    "file too short to be a gmon file ({} bytes, a header has {})",
                    bytes.len(),
                    GNU_HEADER_LEN
                ),
            ));
        }
        if bytes.starts_with(GMON_MAGIC) {
            read_gnu(&mut r)
        } else {
            read_bsd(&mut r).map_err(|e| match e {
                Error::Binary {
                    path,
                    offset,
                    message,
                } => Error::Binary {
                    path,
                    offset,
                    message: format!(
                        "{message} (the file has no `gmon` magic, so it was read as a \
                         BSD-layout gmon file)"
                    ),
                },
                e => e,
            })
        }
    }

    /// Reads gmon files (already opened: gzip'd or not, or standard input)
    /// and sums them as GNU gprof sums the files on its command line
    /// ([`Gmon::merge`], in the order given).
    pub fn sum(sources: &[crate::Source], layout: Layout) -> Result<Gmon, Error> {
        let mut sum: Option<Gmon> = None;
        for source in sources {
            let g = Gmon::parse(&source.bytes()?, source.name(), layout)?;
            match &mut sum {
                None => sum = Some(g),
                Some(s) => s.merge(g).map_err(|e| {
                    Error::Incompatible(format!(
                        "{}: cannot be added to {}: {e}",
                        source.name().display(),
                        sources[0].name().display()
                    ))
                })?,
            }
        }
        Ok(sum.unwrap_or_default())
    }

    /// Reads a `gmon.out` file.
    pub fn read_file(path: &Path, layout: Layout) -> Result<Gmon, Error> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Gmon::parse(&bytes, path, layout)
    }

    /// Adds another profile as GNU gprof does when it is given several gmon
    /// files (`gprof -s prog a.out b.out`); `self` plays the files read so
    /// far. On error `self` is unchanged.
    ///
    /// Histograms from a GNU file:
    /// - the first histogram ever (when `self` has none) is taken as is and
    ///   fixes the rate, dimension and bin size of all others;
    /// - a later one must have the same dimension, abbreviation and bin size
    ///   (address units per bin, equal within 10⁻⁶ as gprof checks), else
    ///   [`Error::Incompatible`];
    /// - one with the same range as an existing one is added to it bin by
    ///   bin (its bin count must match: gprof would misread the file
    ///   otherwise, so this is an error); its rate is not checked, since
    ///   gprof deliberately tolerates slightly different rates;
    /// - one overlapping an existing range without matching it is an error;
    /// - one over a new, disjoint range is appended, with the first
    ///   histogram's rate, the only one gprof keeps.
    ///
    /// A histogram from a BSD file must, as in gprof, match the first
    /// histogram's range and bin count exactly and is added to it; a 4.4BSD
    /// one must also have its rate.
    ///
    /// Arcs with the same `from_pc` and `self_pc`, and block counts with the
    /// same address, are summed (saturating); new ones are appended, so the
    /// order of first appearance is kept. gprof instead sums arcs per pair
    /// of *functions* (it knows the symbols) — see [`Gmon::write`].
    ///
    /// `self.format` is kept; the sum is [`Gmon::sampled`] when either
    /// part is, since some of its arc counts are then samples.
    pub fn merge(&mut self, other: Gmon) -> Result<(), Error> {
        let mut histograms = self.histograms.clone();
        for h in other.histograms {
            match other.format {
                GmonFormat::Gnu { .. } => fold_gnu_histogram(&mut histograms, h)?,
                GmonFormat::Bsd { bsd44 } => fold_bsd_histogram(&mut histograms, h, bsd44)?,
            }
        }
        self.histograms = histograms;
        self.sampled |= other.sampled;

        let mut arcs: FxHashMap<(u64, u64), usize> = FxHashMap::default();
        for (i, a) in self.arcs.iter().enumerate() {
            arcs.entry((a.from_pc, a.self_pc)).or_insert(i);
        }
        for a in other.arcs {
            match arcs.get(&(a.from_pc, a.self_pc)) {
                Some(&i) => {
                    let c = &mut self.arcs[i].count;
                    *c = c.saturating_add(a.count);
                }
                None => {
                    arcs.insert((a.from_pc, a.self_pc), self.arcs.len());
                    self.arcs.push(a);
                }
            }
        }

        let mut blocks: FxHashMap<u64, usize> = FxHashMap::default();
        for (i, b) in self.blocks.iter().enumerate() {
            blocks.entry(b.address).or_insert(i);
        }
        for b in other.blocks {
            match blocks.get(&b.address) {
                Some(&i) => {
                    let c = &mut self.blocks[i].count;
                    *c = c.saturating_add(b.count);
                }
                None => {
                    blocks.insert(b.address, self.blocks.len());
                    self.blocks.push(b);
                }
            }
        }
        Ok(())
    }

    /// Writes the profile in the GNU layout, version 1, as `gprof -s` writes
    /// `gmon.sum`: the header, every histogram record, one record per arc,
    /// then — if there are block counts — one basic-block record holding all
    /// of them. The header's spare bytes are zero, as glibc writes them
    /// (gprof leaves them uninitialised: whatever its stack held), or
    /// [`SAMPLED_MARK`] for a [`Gmon::sampled`] profile.
    ///
    /// A count the format cannot hold is an [`io::ErrorKind::InvalidInput`]
    /// error naming it (the arc's caller and callee addresses, the bin's
    /// histogram and address, the block's address) and its value, found
    /// before anything is written: a histogram bin over 2¹⁶−1, an arc count
    /// over 2³²−1, a block count over the word. GNU gprof `-s` keeps the
    /// low bits (a bin of 80000 becomes 14464), a silent wrong number that
    /// tally does not write. So are addresses that do not fit a 4-byte
    /// word, a dimension that is not at most 15 Latin-1 characters without
    /// NUL, a bin count above 2³²−1 and a word size other than 4 or 8.
    ///
    /// Each histogram is written with its own rate and dimension; gprof
    /// writes the first one's for all, which after [`Gmon::merge`] is the
    /// same thing (and gprof reads only the first anyway).
    ///
    /// Where the output differs from gprof's own `gmon.sum` for the same
    /// inputs: gprof maps every arc to the functions containing its two
    /// addresses, writes each function's entry address instead of the raw
    /// pcs, drops arcs outside any function and orders arcs by function;
    /// likewise it keeps basic-block counts only with `-l` and then by
    /// symbol. Without the program's symbols this writer keeps the raw
    /// addresses and the order of first appearance, which gprof reads back
    /// into the same report.
    pub fn write(&self, w: &mut dyn Write, layout: Layout) -> io::Result<()> {
        let word = layout.word().map_err(invalid)?;
        let put_addr = |out: &mut Vec<u8>, v: u64, what: &str| -> io::Result<()> {
            if word == 4 && v > u64::from(u32::MAX) {
                return Err(invalid(format!(
                    "{what} {v:#x} does not fit a 4-byte address"
                )));
            }
            layout.put(out, v, word);
            Ok(())
        };

        self.check_counts(word)?;
        let mut out = Vec::with_capacity(GNU_HEADER_LEN + 64);
        out.extend_from_slice(GMON_MAGIC);
        layout.put(&mut out, u64::from(GMON_VERSION), 4);
        out.extend_from_slice(if self.sampled { SAMPLED_MARK } else { &[0; 12] });
        w.write_all(&out)?;

        for h in &self.histograms {
            out.clear();
            let n = u32::try_from(h.bins.len()).map_err(|_| {
                invalid(format!("{} histogram bins (at most 2^32-1)", h.bins.len()))
            })?;
            let abbrev = u8::try_from(u32::from(h.dimension_abbrev)).map_err(|_| {
                invalid(format!(
                    "dimension abbreviation `{}` is not Latin-1",
                    h.dimension_abbrev
                ))
            })?;
            out.push(TAG_HISTOGRAM);
            put_addr(&mut out, h.low_pc, "histogram low_pc")?;
            put_addr(&mut out, h.high_pc, "histogram high_pc")?;
            layout.put(&mut out, u64::from(n), 4);
            layout.put(&mut out, u64::from(h.prof_rate), 4);
            out.extend_from_slice(&encode_dimension(&h.dimension)?);
            out.push(abbrev);
            out.reserve(h.bins.len() * 2);
            for &b in &h.bins {
                layout.put(&mut out, b, 2);
            }
            w.write_all(&out)?;
        }

        out.clear();
        for a in &self.arcs {
            out.push(TAG_ARC);
            put_addr(&mut out, a.from_pc, "arc from_pc")?;
            put_addr(&mut out, a.self_pc, "arc self_pc")?;
            layout.put(&mut out, a.count, 4);
            if out.len() >= 1 << 16 {
                w.write_all(&out)?;
                out.clear();
            }
        }
        w.write_all(&out)?;

        if !self.blocks.is_empty() {
            out.clear();
            let n = u32::try_from(self.blocks.len()).map_err(|_| {
                invalid(format!(
                    "{} basic-block counts (at most 2^32-1)",
                    self.blocks.len()
                ))
            })?;
            out.push(TAG_BLOCKS);
            layout.put(&mut out, u64::from(n), 4);
            for b in &self.blocks {
                put_addr(&mut out, b.address, "basic-block address")?;
                layout.put(&mut out, b.count, word);
                if out.len() >= 1 << 16 {
                    w.write_all(&out)?;
                    out.clear();
                }
            }
            w.write_all(&out)?;
        }
        Ok(())
    }

    /// Refuses a count its field cannot hold (see [`Gmon::write`]).
    fn check_counts(&self, word: usize) -> io::Result<()> {
        const NOT_WRAPPED: &str = "GNU gprof -s would keep its low bits, a wrong number";
        for (i, h) in self.histograms.iter().enumerate() {
            if let Some((k, &b)) = h.bins.iter().enumerate().find(|(_, b)| **b > 0xffff) {
                let span = u128::from(h.high_pc.saturating_sub(h.low_pc));
                let at = h.low_pc as u128 + span * k as u128 / h.bins.len() as u128;
                return Err(invalid(format!(
                    "histogram {} bin {k} (near {at:#x}) holds {b} samples, over the format's 16 bits (65535); {NOT_WRAPPED}",
                    i + 1
                )));
            }
        }
        if let Some(a) = self.arcs.iter().find(|a| a.count > u64::from(u32::MAX)) {
            return Err(invalid(format!(
                "the arc from {:#x} to {:#x} counts {} calls, over the format's 32 bits (4294967295); {NOT_WRAPPED}",
                a.from_pc, a.self_pc, a.count
            )));
        }
        if word == 4
            && let Some(b) = self.blocks.iter().find(|b| b.count > u64::from(u32::MAX))
        {
            return Err(invalid(format!(
                "the basic block at {:#x} counts {}, over the format's 32 bits (4294967295); {NOT_WRAPPED}",
                b.address, b.count
            )));
        }
        Ok(())
    }

    /// Writes the profile to `path` as [`Gmon::write`] does, through a
    /// temporary file renamed over `path` when complete (`-` is standard
    /// output).
    pub fn write_file(&self, path: &Path, layout: Layout) -> Result<(), Error> {
        crate::output::write_file(path, |w| self.write(w, layout))
    }
}

/// Reads the records of a GNU file after its magic.
fn read_gnu(r: &mut Reader<'_>) -> Result<Gmon, Error> {
    r.pos = 4;
    let version = r.u32();
    if version != GMON_VERSION && version != 0 {
        let hint = if version.swap_bytes() == GMON_VERSION {
            " (the file is in the other byte order: is the layout right?)"
        } else {
            ""
        };
        return Err(r.error(
            4,
            format!("unsupported gmon version {version} (gprof reads 0 and 1){hint}"),
        ));
    }
    r.pos = GNU_HEADER_LEN;
    let mut gmon = Gmon {
        format: GmonFormat::Gnu { version },
        sampled: r.bytes[8..GNU_HEADER_LEN] == SAMPLED_MARK[..],
        ..Gmon::default()
    };
    while r.remaining() > 0 {
        let start = r.pos;
        match r.take(1)[0] {
            TAG_HISTOGRAM => gmon.histograms.push(read_histogram(r, start)?),
            TAG_ARC => {
                r.need(2 * r.word + 4, "call-graph arc record", start)?;
                let from_pc = r.word();
                let self_pc = r.word();
                let count = u64::from(r.u32());
                gmon.arcs.push(Arc {
                    from_pc,
                    self_pc,
                    count,
                });
            }
            TAG_BLOCKS => read_blocks(r, start, version == 0, &mut gmon.blocks)?,
            tag => {
                return Err(r.error(
                    start,
                    format!("bad record tag {tag} (expected 0, 1 or 2: file corrupted?)"),
                ));
            }
        }
    }
    Ok(gmon)
}

/// Reads a histogram record whose tag was at `start`.
fn read_histogram(r: &mut Reader<'_>, start: usize) -> Result<Histogram, Error> {
    r.need(
        2 * r.word + 4 + 4 + DIMENSION_LEN + 1,
        "histogram record header",
        start,
    )?;
    let low_pc = r.word();
    let high_pc = r.word();
    let size_at = r.pos;
    let n = r.u32();
    let prof_rate = r.u32();
    let dimension = decode_dimension(r.take(DIMENSION_LEN));
    let dimension_abbrev = char::from(r.take(1)[0]);
    let bins = read_bins(r, u64::from(n), size_at)?;
    Ok(Histogram {
        low_pc,
        high_pc,
        prof_rate,
        dimension,
        dimension_abbrev,
        bins,
    })
}

/// Reads `n` 2-byte bins, checking first that the file holds them; the
/// count was read at `count_at`.
fn read_bins(r: &mut Reader<'_>, n: u64, count_at: usize) -> Result<Vec<u64>, Error> {
    let len = n.saturating_mul(2);
    if len > r.remaining() as u64 {
        return Err(r.error(
            count_at,
            format!(
                "histogram of {n} bins needs {len} bytes but only {} remain",
                r.remaining()
            ),
        ));
    }
    let bytes = r.take(len as usize);
    Ok(bytes.chunks_exact(2).map(|b| r.layout.get(b)).collect())
}

/// Reads a basic-block record whose tag was at `start`.
///
/// Version 1: a 4-byte count, then (address, count) word pairs. Version 0
/// (the first GNU gprof): the count, a NUL-terminated string, then per
/// block the count and the address (words), two NUL-terminated strings and a
/// 4-byte line number; gprof reads those with its own host's word size and
/// byte order, this reader with the layout's.
fn read_blocks(
    r: &mut Reader<'_>,
    start: usize,
    version0: bool,
    blocks: &mut Vec<BlockCount>,
) -> Result<(), Error> {
    r.need(4, "basic-block record", start)?;
    let count_at = r.pos;
    let n = u64::from(r.u32());
    if version0 {
        r.skip_string();
    }
    // Bytes per block at the least, to refuse absurd counts before
    // allocating.
    let min = if version0 {
        2 * r.word + 2 + 4
    } else {
        2 * r.word
    };
    if n.saturating_mul(min as u64) > r.remaining() as u64 {
        return Err(r.error(
            count_at,
            format!(
                "{n} basic blocks need at least {} bytes but only {} remain",
                n.saturating_mul(min as u64),
                r.remaining()
            ),
        ));
    }
    blocks.reserve(n as usize);
    for i in 0..n {
        let block_at = r.pos;
        let what = format!("basic-block record (block {i} of {n})");
        if version0 {
            r.need(2 * r.word, &what, block_at)?;
            let count = r.word();
            let address = r.word();
            r.skip_string();
            r.skip_string();
            r.need(4, &what, block_at)?;
            r.take(4);
            blocks.push(BlockCount { address, count });
        } else {
            r.need(2 * r.word, &what, block_at)?;
            let address = r.word();
            let count = r.word();
            blocks.push(BlockCount { address, count });
        }
    }
    Ok(())
}

/// Reads a BSD file: header, bins, arcs.
fn read_bsd(r: &mut Reader<'_>) -> Result<Gmon, Error> {
    let w = r.word;
    r.pos = 0;
    r.need(2 * w + 8, "BSD header", 0)?;
    let low_pc = r.word();
    let high_pc = r.word();
    let ncnt_at = r.pos;
    let ncnt = r.u32();
    let version = r.u32();
    let (bsd44, prof_rate, header_len) = if version == BSD44_VERSION {
        r.need(4, "4.4BSD header", 0)?;
        (true, r.u32(), 2 * w + 4 + 4 + 4 + 12)
    } else {
        (false, BSD_DEFAULT_RATE, 2 * w + 4)
    };
    // gprof keeps the sample size in a C `int`: a huge `ncnt` goes negative.
    let sample_bytes = ncnt.wrapping_sub(header_len as u32) as i32;
    if sample_bytes < 0 {
        return Err(r.error(
            ncnt_at,
            format!("not a gmon file: ncnt {ncnt} is smaller than the {header_len}-byte header"),
        ));
    }
    if high_pc < low_pc {
        return Err(r.error(
            0,
            format!("not a gmon file: high_pc {high_pc:#x} is below low_pc {low_pc:#x}"),
        ));
    }
    // The bins follow the header at once (its spare bytes may be missing
    // when there are no bins).
    r.pos = header_len.min(r.bytes.len());
    let bins = read_bins(r, sample_bytes as u64 / 2, ncnt_at)?;
    let mut arcs = Vec::with_capacity(r.remaining() / (3 * w));
    while r.remaining() >= 3 * w {
        let from_pc = r.word();
        let self_pc = r.word();
        let count = r.word();
        arcs.push(Arc {
            from_pc,
            self_pc,
            count,
        });
    }
    Ok(Gmon {
        format: GmonFormat::Bsd { bsd44 },
        histograms: vec![Histogram {
            low_pc,
            high_pc,
            prof_rate,
            dimension: DEFAULT_DIMENSION.to_string(),
            dimension_abbrev: DEFAULT_DIMENSION_ABBREV,
            bins,
        }],
        arcs,
        blocks: Vec::new(),
        sampled: false,
    })
}

/// Adds a histogram read from a GNU file as gprof's reader does.
fn fold_gnu_histogram(hists: &mut Vec<Histogram>, mut h: Histogram) -> Result<(), Error> {
    let Some(first) = hists.first() else {
        hists.push(h);
        return Ok(());
    };
    if h.dimension != first.dimension {
        return Err(Error::Incompatible(format!(
            "gmon: histogram dimension changed from `{}` to `{}`",
            first.dimension, h.dimension
        )));
    }
    if h.dimension_abbrev != first.dimension_abbrev {
        return Err(Error::Incompatible(format!(
            "gmon: histogram dimension abbreviation changed from `{}` to `{}`",
            first.dimension_abbrev, h.dimension_abbrev
        )));
    }
    if (first.scale() - h.scale()).abs() > 0.000_001 {
        return Err(Error::Incompatible(format!(
            "gmon: histograms with different bin sizes ({} and {} address units per bin)",
            first.scale(),
            h.scale()
        )));
    }
    let rate = first.prof_rate;
    if let Some(e) = hists
        .iter_mut()
        .find(|e| e.low_pc == h.low_pc && e.high_pc == h.high_pc)
    {
        return add_bins(e, &h);
    }
    if let Some(e) = hists
        .iter()
        .find(|e| e.low_pc.max(h.low_pc) < e.high_pc.min(h.high_pc))
    {
        return Err(Error::Incompatible(format!(
            "gmon: overlapping histogram records ({:#x}..{:#x} and {:#x}..{:#x})",
            e.low_pc, e.high_pc, h.low_pc, h.high_pc
        )));
    }
    h.prof_rate = rate;
    hists.push(h);
    Ok(())
}

/// Adds a histogram read from a BSD file as gprof's reader does.
fn fold_bsd_histogram(hists: &mut Vec<Histogram>, h: Histogram, bsd44: bool) -> Result<(), Error> {
    let Some(first) = hists.first_mut() else {
        hists.push(h);
        return Ok(());
    };
    if bsd44 && h.prof_rate != first.prof_rate {
        return Err(Error::Incompatible(format!(
            "gmon: profiling rate {} incompatible with the first profile's {}",
            h.prof_rate, first.prof_rate
        )));
    }
    if h.low_pc != first.low_pc || h.high_pc != first.high_pc || h.bins.len() != first.bins.len() {
        return Err(Error::Incompatible(format!(
            "gmon: BSD histogram {:#x}..{:#x} ({} bins) incompatible with the first \
             profile's {:#x}..{:#x} ({} bins)",
            h.low_pc,
            h.high_pc,
            h.bins.len(),
            first.low_pc,
            first.high_pc,
            first.bins.len()
        )));
    }
    add_bins(first, &h)
}

fn add_bins(into: &mut Histogram, h: &Histogram) -> Result<(), Error> {
    if into.bins.len() != h.bins.len() {
        return Err(Error::Incompatible(format!(
            "gmon: histograms of {:#x}..{:#x} with {} and {} bins",
            h.low_pc,
            h.high_pc,
            into.bins.len(),
            h.bins.len()
        )));
    }
    for (a, &b) in into.bins.iter_mut().zip(&h.bins) {
        *a = a.saturating_add(b);
    }
    Ok(())
}
