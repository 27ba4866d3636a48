//! Telling the formats tally meets apart by their first bytes.
//!
//! One rule set for every command: [`detect`] looks at the head of a file
//! (decompressed first when it is gzip) and names its [`Format`]. Commands
//! then read what they take and refuse the rest with a message that says
//! what the file is and which command reads it ([`Format::misuse`]).
//!
//! The Callgrind/Cachegrind distinction made here is a hint from the head
//! only; the reader decides it from the whole content.
//!
//! Blank and `#` comment lines before a profile's first line are skipped,
//! within the head: a file whose first [`HEAD_LEN`] bytes are nothing but
//! comment lines is [`Format::OnlyComments`], which the readers read (they
//! decide by content) but which a command that must tell a profile from a
//! source file or a program refuses with an error rather than guess.

use flate2::read::MultiGzDecoder;
use std::io::Read;

/// How many bytes of a file detection looks at (a DCPI header may be
/// long; a profile's leading comment lines must end within them).
pub const HEAD_LEN: usize = 64 << 10;

/// What a file holds, as far as its head shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// A Callgrind profile (text).
    Callgrind,
    /// A Cachegrind profile (text; the subset of Callgrind's format).
    Cachegrind,
    /// gprof's `gmon.out` with the GNU magic. BSD-layout files have no
    /// magic and show as [`Format::Unknown`].
    Gmon,
    /// A DCPI profile.
    Dcpi,
    /// tally's JSON form of a profile (`"tally_json"`, docs/json.md).
    TallyJson,
    /// Firefox Profiler's processed format (`"preprocessedProfileVersion"`
    /// in its `meta`), as `tally convert --to firefox` writes it.
    FirefoxProfile,
    /// Other JSON, such as tally's reports written with `--json`.
    Json,
    /// Linux `perf record` output (`PERFILE2`).
    PerfData,
    /// The text `perf script` prints (sample headers and frame lines).
    PerfScript,
    /// Folded stacks (`main;f;g 12` lines), as stackcollapse writes them.
    Folded,
    /// A pprof profile: gzip'd protocol buffers.
    Pprof,
    /// An ELF program or library.
    Elf,
    /// Nothing recognised: text that starts like no profile, or binary data.
    Unknown,
    /// Comment lines to the end of the head ([`HEAD_LEN`] bytes) and more
    /// after them: a profile or a source file, the head cannot tell.
    OnlyComments,
}

/// The format of a file and whether it is gzip-compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Detected {
    /// The format of the (decompressed) content.
    pub format: Format,
    /// Whether the file is gzip-compressed.
    pub gzip: bool,
}

impl Detected {
    /// Whether the file is for the Callgrind reader: a Callgrind or
    /// Cachegrind profile, or nothing recognised (the reader then says
    /// what is wrong, with its line).
    pub fn is_callgrind_reader_input(&self) -> bool {
        matches!(
            self.format,
            Format::Callgrind | Format::Cachegrind | Format::Unknown | Format::OnlyComments
        )
    }

    /// Whether the head starts like a Callgrind, Cachegrind, pprof or
    /// tally JSON profile, or is gzip'd and not recognised as anything else
    /// (`tally annotate` tells profiles from source files by this).
    pub fn looks_like_profile(&self) -> bool {
        matches!(
            self.format,
            Format::Callgrind | Format::Cachegrind | Format::Pprof | Format::TallyJson
        ) || (self.gzip && self.format == Format::Unknown)
    }

    /// Whether the head is comment lines only and the file goes on, so
    /// that a command telling profiles from other files must not guess.
    pub fn undecided(&self) -> bool {
        self.format == Format::OnlyComments
    }
}

impl Format {
    /// What the file is, for messages: "a gprof gmon.out file".
    pub fn describe(self) -> &'static str {
        match self {
            Format::Callgrind => "a Callgrind profile",
            Format::Cachegrind => "a Cachegrind profile",
            Format::Gmon => "a gprof gmon.out file",
            Format::Dcpi => "a DCPI profile",
            Format::TallyJson => "tally's JSON form of a profile (docs/json.md)",
            Format::FirefoxProfile => "a Firefox Profiler profile (processed format)",
            Format::Json => "a JSON document",
            Format::PerfData => "a Linux perf.data file",
            Format::PerfScript => "`perf script` text",
            Format::Folded => "folded stacks",
            Format::Pprof => "a pprof profile (gzip'd protocol buffers)",
            Format::Elf => "an ELF program or library, not a profile",
            Format::Unknown => "not a profile tally recognises",
            Format::OnlyComments => {
                "only comment lines in its first 64 KiB: tally does not look further to tell \
                 a profile from a source file or a program"
            }
        }
    }

    /// What to do with a file of this format given to a command that reads
    /// Callgrind and Cachegrind profiles only: the command that reads it,
    /// or that tally does not.
    pub fn misuse(self) -> &'static str {
        match self {
            Format::Gmon => {
                "use `tally gprof PROG FILE` (or `tally convert FILE --binary PROG -o OUT` \
                 for a Callgrind profile)"
            }
            Format::Dcpi => {
                "use `tally dcpi prof IMAGE FILE` (or `tally convert FILE --binary IMAGE -o OUT` \
                 for a Callgrind profile)"
            }
            Format::FirefoxProfile => {
                "tally writes this format for profiler.firefox.com and does not read it back: \
                 give the profile it was converted from"
            }
            Format::Json => "tally reads Callgrind and Cachegrind profiles, not JSON",
            Format::PerfData
            | Format::PerfScript
            | Format::Folded
            | Format::Pprof
            | Format::TallyJson => {
                "read it with `tally annotate`, `tally convert` or `tally check`"
            }
            Format::Elf => "give the profile the program wrote",
            Format::Callgrind | Format::Cachegrind | Format::Unknown | Format::OnlyComments => {
                "read it with `tally annotate` or `tally check`"
            }
        }
    }
}

/// Names the format of a file from its first bytes (up to [`HEAD_LEN`]).
pub fn detect(head: &[u8]) -> Detected {
    if head.starts_with(&[0x1f, 0x8b]) {
        let (inner, cut) = gunzip_head(head);
        let format = match detect_plain(&inner, cut) {
            Format::Unknown if is_protobuf(&inner) => Format::Pprof,
            f => f,
        };
        return Detected { format, gzip: true };
    }
    Detected {
        format: detect_plain(head, head.len() >= HEAD_LEN),
        gzip: false,
    }
}

/// As much of a gzip stream's content as the head holds (a head cut from a
/// larger file ends in the middle of the stream), and whether the content
/// may go on past it (the stream does not end within the head).
fn gunzip_head(head: &[u8]) -> (Vec<u8>, bool) {
    let mut d = MultiGzDecoder::new(head);
    let mut out = vec![0u8; HEAD_LEN];
    let mut n = 0;
    let mut cut = true;
    while n < out.len() {
        match d.read(&mut out[n..]) {
            Ok(0) => {
                cut = false;
                break;
            }
            Err(_) => break,
            Ok(k) => n += k,
        }
    }
    out.truncate(n);
    (out, cut)
}

/// Keys a Callgrind or Cachegrind profile may start with (after blank and
/// comment lines).
const PROFILE_START: &[&[u8]] = &[
    b"# callgrind format",
    b"version:",
    b"creator:",
    b"pid:",
    b"cmd:",
    b"part:",
    b"thread:",
    b"desc:",
    b"positions:",
    b"events:",
    b"event:",
    b"summary:",
    b"totals:",
    b"ob=",
    b"fl=",
    b"fn=",
];

/// The key of [`PROFILE_START`] that `line` starts with, if any: such a
/// line starts a Callgrind or Cachegrind profile.
pub(crate) fn profile_key(line: &[u8]) -> Option<&'static [u8]> {
    PROFILE_START.iter().find(|k| line.starts_with(k)).copied()
}

/// Lines that only Callgrind's format has: any of them in the head makes
/// the profile a Callgrind one.
const CALLGRIND_ONLY: &[&[u8]] = &[
    b"# callgrind format",
    b"version:",
    b"creator:",
    b"pid:",
    b"part:",
    b"thread:",
    b"positions:",
    b"totals:",
    b"event:",
    b"ob=",
    b"fi=",
    b"fe=",
    b"cob=",
    b"cfi=",
    b"cfl=",
    b"cfn=",
    b"calls=",
    b"jump=",
    b"jcnd=",
    b"jfi=",
    b"jfn=",
];

/// The format of plain (decompressed) content from its `head`, which is
/// `cut` where the content may go on past it.
fn detect_plain(head: &[u8], cut: bool) -> Format {
    if head.starts_with(b"\x7fELF") {
        return Format::Elf;
    }
    if head.starts_with(crate::gmon::GMON_MAGIC) {
        return Format::Gmon;
    }
    // Before the other text formats: a line of folded stacks may start
    // like any of them (`[unknown];main 3`, a function named `events: x`),
    // while their files always hold a line that ends in no count.
    if crate::folded::head_looks_folded(head, cut) {
        return Format::Folded;
    }
    if head.starts_with(b"PERFILE2") || head.starts_with(b"PERFFILE") {
        return Format::PerfData;
    }
    if crate::dcpi::is_dcpi(head) {
        return Format::Dcpi;
    }
    let text = head.trim_ascii_start();
    if text.starts_with(b"{") || text.starts_with(b"[") {
        let window = &text[..text.len().min(256)];
        return if memchr::memmem::find(window, b"\"tally_json\"").is_some() {
            Format::TallyJson
        } else if memchr::memmem::find(window, b"\"meta\"").is_some()
            && memchr::memmem::find(text, b"\"preprocessedProfileVersion\"").is_some()
        {
            Format::FirefoxProfile
        } else {
            Format::Json
        };
    }
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(<[u8]>::trim_ascii)
        .filter(|l| !l.is_empty() && (!l.starts_with(b"#") || l.starts_with(b"# callgrind")));
    let Some(first) = lines.next() else {
        // A head that is full (the file goes on) holds only comments.
        return if head.len() >= HEAD_LEN && text.starts_with(b"#") {
            Format::OnlyComments
        } else {
            Format::Unknown
        };
    };
    if profile_key(first).is_none() {
        return if crate::perf::script::looks_like(head) {
            Format::PerfScript
        } else {
            Format::Unknown
        };
    }
    let callgrind = std::iter::once(first)
        .chain(lines)
        .any(|l| CALLGRIND_ONLY.iter().any(|k| l.starts_with(k)) || is_compressed_name(l));
    if callgrind {
        Format::Callgrind
    } else {
        Format::Cachegrind
    }
}

/// Whether a line names a file or function by a compressed id, `fn=(12)`
/// (Cachegrind writes names such as `fn=(below main)` in full).
fn is_compressed_name(line: &[u8]) -> bool {
    (line.starts_with(b"fn=(") || line.starts_with(b"fl=("))
        && line.get(4).is_some_and(u8::is_ascii_digit)
}

/// Whether decompressed bytes start like a pprof message
/// ([`crate::pprof::looks_like_pprof`]) and are not text.
fn is_protobuf(bytes: &[u8]) -> bool {
    crate::pprof::looks_like_pprof(bytes)
        && bytes
            .iter()
            .take(256)
            .any(|&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gz(bytes: &[u8]) -> Vec<u8> {
        use flate2::{Compression, write::GzEncoder};
        use std::io::Write;
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn text_profiles_by_their_first_line() {
        let f = |b: &[u8]| detect(b).format;
        assert_eq!(f(b"# callgrind format\nversion: 1\n"), Format::Callgrind);
        assert_eq!(
            f(b"desc: x\ncmd: y\nevents: Ir\nfl=a\nfn=b\n1 2\n"),
            Format::Cachegrind
        );
        assert_eq!(
            f(b"events: Ir\nfn=a\ncfn=b\ncalls=1 2\n3 4\n"),
            Format::Callgrind
        );
        assert_eq!(f(b"\n# a comment\nevents: Ir\n"), Format::Cachegrind);
        assert_eq!(f(b"int main(void) { return 0; }\n"), Format::Unknown);
        assert_eq!(f(b""), Format::Unknown);
        // Comments before the first line are skipped to the end of the head.
        let mut long = b"#".repeat(10_000);
        long.extend_from_slice(b"\n# more\n\nversion: 1\nevents: Ir\n");
        assert_eq!(f(&long), Format::Callgrind);
        let mut only = Vec::new();
        while only.len() < HEAD_LEN {
            only.extend_from_slice(b"# a long comment block\n");
        }
        assert_eq!(f(&only[..HEAD_LEN]), Format::OnlyComments);
        assert_eq!(f(b"# a short file of comments\n"), Format::Unknown);
        assert_eq!(f(b"main;a;b 12\nmain 3\n"), Format::Folded);
        assert_eq!(f(b"[unknown];main;a 12\nmain 3\n"), Format::Folded);
        // A frame may be named like a profile's first line.
        assert_eq!(f(b"events: x 12\nevents: x;b 3\n"), Format::Folded);
        assert_eq!(f(b"fn=main 12\n{x} 3\n"), Format::Folded);
        assert_eq!(f(b"PERFILE2;a 1\n"), Format::Folded);
        assert_eq!(
            f(b"prog 12 1.5: 250000 cpu-clock: \n\t  1152 leaf+0x19 (/tmp/prog)\n"),
            Format::PerfScript
        );
    }

    #[test]
    fn binary_formats_by_their_magic() {
        let f = |b: &[u8]| detect(b).format;
        assert_eq!(f(b"gmon\x01\0\0\0"), Format::Gmon);
        assert_eq!(f(b"\x7fELF\x02\x01"), Format::Elf);
        assert_eq!(f(b"PERFILE2\x68\0\0\0"), Format::PerfData);
        assert_eq!(
            f(b"{\"tally_json\":1,\"format\":\"callgrind\"}"),
            Format::TallyJson
        );
        assert_eq!(f(b"{\n  \"events\": []\n}"), Format::Json);
        assert_eq!(
            f(b"{\"meta\":{\"interval\":1.0,\"preprocessedProfileVersion\":55}}"),
            Format::FirefoxProfile
        );
    }

    #[test]
    fn gzip_around_any_format() {
        let d = detect(&gz(b"# callgrind format\nevents: Ir\n"));
        assert_eq!(
            d,
            Detected {
                format: Format::Callgrind,
                gzip: true
            }
        );
        assert_eq!(detect(&gz(b"gmon\x01\0\0\0")).format, Format::Gmon);
        let pprof = gz(b"\x0a\x04\x08\x01\x10\x02\x12\x03");
        assert_eq!(detect(&pprof).format, Format::Pprof);
        // Go writes the time first.
        let go = gz(b"\x48\x84\xc0\xd5\xb7\x81\xa2\xe1\xf5\x18\x0a\x04\x08\x01\x10\x02");
        assert_eq!(detect(&go).format, Format::Pprof);
        assert_eq!(detect(&gz(b"\x48\x65llo")).format, Format::Unknown);
        // A head cut inside the stream still shows its start.
        let mut big = b"events: Ir\n".to_vec();
        big.extend((0..200_000).map(|i| b'0' + (i % 10) as u8));
        let z = gz(&big);
        assert_eq!(detect(&z[..z.len() / 2]).format, Format::Cachegrind);
        // A head cut inside the first line of folded stacks, short of
        // HEAD_LEN once decompressed.
        let mut x = 1u32;
        let mut line: Vec<u8> = (0..200_000)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                b'a' + (x >> 16) as u8 % 26
            })
            .collect();
        line.extend_from_slice(b" 5\n");
        let z = gz(&line);
        assert_eq!(detect(&z[..4096]).format, Format::Folded);
        assert_eq!(detect(&gz(&line[..5000])).format, Format::Unknown);
    }
}
