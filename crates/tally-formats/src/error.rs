//! Errors and warnings of the readers and writers.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong on a line of a text profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// An error on the last line of a file that ends without a newline:
    /// most likely a file cut short while it was written.
    #[error("the file ends inside this line, so it looks truncated: {0}")]
    CutShort(Box<ParseErrorKind>),
    /// A number too large for a 64-bit counter.
    #[error("number `{0}` does not fit in 64 bits")]
    Overflow(String),
    /// A negative count in a profile of unsigned counts.
    #[error("negative count `{0}` (only difference profiles may hold negative counts)")]
    Negative(String),
    /// Something that should be a number is not.
    #[error("expected a number, found `{0}`")]
    BadNumber(String),
    /// A cost line with more counts than there are events.
    #[error("{found} counts but only {events} events")]
    TooManyCosts {
        /// Counts on the line.
        found: usize,
        /// Events declared.
        events: usize,
    },
    /// A cost line with fewer positions than `positions:` declares.
    #[error("expected {expected} position(s) ({names}), found {found}")]
    MissingPosition {
        /// Positions declared.
        expected: usize,
        /// Their names.
        names: String,
        /// Positions found.
        found: usize,
    },
    /// A relative position before any absolute one could be known.
    #[error("relative position `{0}` goes below zero")]
    PositionUnderflow(String),
    /// `(id)` used before `(id) name` defined it.
    #[error("`{key}=({id})` refers to an id that was never defined")]
    UndefinedId {
        /// The key (`fn`, `fl`, …).
        key: String,
        /// The id.
        id: u64,
    },
    /// A malformed `(id)` prefix.
    #[error("malformed compressed name `{0}`")]
    BadCompressedName(String),
    /// A `calls=` line not followed by its cost line.
    #[error("`calls=` on line {0} is not followed by a cost line")]
    CallWithoutCost(u64),
    /// `calls=` without a `cfn=` naming the callee.
    #[error("`calls=` without a preceding `cfn=`")]
    CallWithoutCallee,
    /// Costs before any `fn=`.
    #[error("cost line before any `fn=` line")]
    CostBeforeFunction,
    /// Body lines without an `events:` header.
    #[error("no `events:` line before the first cost line")]
    MissingEvents,
    /// A second part whose events differ from the first part's.
    #[error("`events:` of this part ({found}) differ from the profile's ({expected})")]
    EventsDiffer {
        /// The profile's events.
        expected: String,
        /// This part's events.
        found: String,
    },
    /// An `events:` line that is empty or repeats a name.
    #[error("bad `events:` line: {0}")]
    BadEvents(String),
    /// A bad `event:` definition.
    #[error("bad `event:` line: {0}")]
    BadEventDef(String),
    /// A bad `positions:` line.
    #[error("bad `positions:` line `{0}` (expected any of `instr bb line`, in that order)")]
    BadPositions(String),
    /// A `positions:` line after the body began, with other positions.
    #[error("`positions:` of this part differ from the profile's")]
    PositionsDiffer,
    /// A summary or totals line with more values than events.
    #[error("`{key}:` has {found} values but only {events} events")]
    TooManyTotals {
        /// `summary` or `totals`.
        key: &'static str,
        /// Values found.
        found: usize,
        /// Events declared.
        events: usize,
    },
    /// A line that is no known kind of line.
    #[error("unrecognised line `{0}`")]
    Unrecognised(String),
    /// Counts whose sum does not fit the cost type: tally sums costs,
    /// call counts and inclusive costs in 64 bits and refuses an input
    /// whose sums would not fit rather than report a wrong number.
    #[error(
        "in function `{function}`: {what} sum to more than {limit}, which tally's 64-bit sums cannot hold"
    )]
    SumOverflow {
        /// What is summed: "the self and call costs of event `Ir`".
        what: String,
        /// The function of the line.
        function: String,
        /// The largest sum: `2^64-1`, or `2^63-1` for signed counts.
        limit: &'static str,
    },
    /// The records kept in memory passed the memory ceiling.
    #[error(
        "the profile read so far holds more than {} MiB in memory, the ceiling \
         (set it with --memory-limit or TALLY_MAX_MEMORY, e.g. --memory-limit 16G)",
        limit >> 20
    )]
    MemoryLimit {
        /// The ceiling, in bytes.
        limit: u64,
    },
    /// A `version:` other than 0 or 1.
    #[error("unsupported format version `{0}`")]
    Version(String),
    /// More than 4 GiB of names or 2^32 functions.
    #[error("more names than tally can hold (4 GiB of names or 2^32 functions)")]
    TooManyNames,
    /// The input is empty.
    #[error("empty input")]
    Empty,
    /// The input is empty and per-thread files of it exist: Callgrind
    /// with `--separate-threads=yes` leaves its output file empty and
    /// writes each thread to `FILE-01`, `FILE-02`, ….
    #[error(
        "empty input; Callgrind with --separate-threads=yes writes each thread to a file of its own: {first} to {last} ({count} files): name those instead"
    )]
    EmptyThreads {
        /// The first thread's file.
        first: String,
        /// The last one's.
        last: String,
        /// How many there are.
        count: usize,
    },
    /// The input is not text (e.g. a binary file given by mistake).
    #[error("binary data (byte 0x{0:02x}) in a text profile")]
    Binary(u8),
    /// A line of a stack format (folded stacks, `perf script` text) that
    /// does not have its shape; the text says what was expected.
    #[error("{0}")]
    Malformed(String),
}

/// An error of a reader or writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Bad content at a line.
    #[error("{}:{line}: {kind}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        kind: ParseErrorKind,
    },
    /// Reading failed part way (a broken gzip stream, an I/O error):
    /// `line` is the first line not read.
    #[error("{}:{line}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The first line that could not be read.
        line: u64,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Profiles that cannot be combined or written as asked.
    #[error("{0}")]
    Incompatible(String),
    /// An output that could not be created where it is to go (found
    /// before the work that makes it).
    #[error("{}: {why}", path.display())]
    Unwritable {
        /// The output.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// Bad content in a binary profile (such as gprof's `gmon.out`).
    #[error("{}: byte {offset}: {message}", path.display())]
    Binary {
        /// The file.
        path: PathBuf,
        /// Offset in the file of the record or field at fault.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// A file of a format this command does not read (a gmon file given
    /// to `tally check`): what it is, and what reads it.
    #[error("{}: {}: {}", path.display(), format.describe(), format.misuse())]
    WrongFormat {
        /// The file.
        path: PathBuf,
        /// What it is.
        format: crate::detect::Format,
    },
    /// A count the Cachegrind writer sums per file, function and line
    /// (or a total) does not fit: the profile's fault, not the output's.
    /// [`crate::cachegrind::write`] returns it inside an [`std::io::Error`]
    /// (found by downcasting its inner error to [`Error`]), so that
    /// callers can name the inputs.
    #[error("a count summed per file, function and line does not fit in 64 bits")]
    CachegrindSumOverflow,
    /// A name the output format has no way to hold (a line break in a
    /// Callgrind name): written, the file would read back with another
    /// name. The writers return it inside an [`std::io::Error`], as
    /// [`Error::CachegrindSumOverflow`], and write nothing in place of
    /// the output.
    #[error("the {format} format cannot hold the {what} name `{name}`: {why}")]
    NameNotWritable {
        /// The output format.
        format: &'static str,
        /// `function`, `file` or `object`.
        what: &'static str,
        /// The name, as messages show it (control bytes escaped, cut if long).
        name: String,
        /// What in the name the format cannot hold.
        why: &'static str,
    },
    /// Samples could not become a profile
    /// ([`crate::perf::samples::SampledStacks`]): more distinct names than
    /// the model's tables hold.
    #[error("more names than tally can hold")]
    StacksFull,
    /// Samples could not become a profile: the periods of a stack or
    /// event sum past 64 bits.
    #[error("the periods sum to more than 64 bits hold")]
    StacksOverflow,
    /// Samples could not become a profile: the event names are not valid.
    #[error("{0}")]
    StacksEvents(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The line number for parse and read errors.
    pub fn line(&self) -> Option<u64> {
        match self {
            Error::Parse { line, .. } | Error::Read { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// Kinds of leniency: input the reader accepts, as the reference tools do,
/// but reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum WarningKind {
    /// `summary:` smaller than the sum of the cost lines (the format allows
    /// larger).
    SummaryBelowTotal,
    /// `summary:` larger than the sum of the cost lines.
    SummaryAboveTotal,
    /// `totals:` (or Cachegrind's trailing `summary:`) differs from the sum.
    TotalsMismatch,
    /// `(id) name` redefining an id with another name; the new name wins.
    IdRedefined,
    /// A body line `key=value` of an unknown key, skipped.
    UnknownBodyLine,
    /// Extra numbers after the target position of `calls=`, ignored.
    ExtraCallNumbers,
    /// A jump line not followed by its source-position line.
    JumpWithoutSource,
    /// Costs on the source-position line of a jump, ignored.
    JumpLineCosts,
    /// A Windows line ending.
    CarriageReturn,
    /// The file looks cut short: the closing line its writer always
    /// writes is missing, or its costs fall short of its stated summary.
    Truncated,
}

/// One kind of warning with how often it occurred and where first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The kind.
    pub kind: WarningKind,
    /// Occurrences.
    pub count: u64,
    /// Line of the first occurrence.
    pub first_line: u64,
    /// Message for the first occurrence.
    pub message: String,
}

/// Warnings of one read, each kind once with a count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Warnings {
    items: Vec<Warning>,
}

impl Warnings {
    /// Records a warning; the message is built only for the first of a kind.
    pub fn add(&mut self, kind: WarningKind, line: u64, message: impl FnOnce() -> String) {
        if let Some(w) = self.items.iter_mut().find(|w| w.kind == kind) {
            w.count += 1;
        } else {
            self.items.push(Warning {
                kind,
                count: 1,
                first_line: line,
                message: message(),
            });
        }
    }

    /// Takes the warnings of a later region of the same input, read apart
    /// (its lines numbered from 0; `lines` came before it): counts add, and
    /// a kind first seen there keeps its first occurrence.
    pub(crate) fn absorb(&mut self, later: Warnings, lines: u64) {
        for w in later.items {
            if let Some(mine) = self.items.iter_mut().find(|m| m.kind == w.kind) {
                mine.count += w.count;
            } else {
                self.items.push(Warning {
                    first_line: w.first_line + lines,
                    ..w
                });
            }
        }
    }

    /// All warnings, in order of first occurrence.
    pub fn iter(&self) -> impl Iterator<Item = &Warning> {
        self.items.iter()
    }

    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of kinds reported.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether a kind was reported.
    pub fn contains(&self, kind: WarningKind) -> bool {
        self.items.iter().any(|w| w.kind == kind)
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.first_line, self.message)?;
        if self.count > 1 {
            write!(f, " ({} times)", self.count)?;
        }
        Ok(())
    }
}

/// Shortens a line for an error message.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    const MAX: usize = 60;
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]).into_owned();
    if bytes.len() > MAX { s + "…" } else { s }
}
