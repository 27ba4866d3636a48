//! A named input whose format is known before it is read: a file, or
//! standard input read once into memory.
//!
//! A [`Source`] can be read any number of times ([`Source::input`],
//! [`Source::bytes`]): a file is reopened, standard input is served from
//! its buffer, so that a reader may start again (as signed after a negative
//! count) without losing what a first attempt consumed. Standard input is
//! read once per process, whoever opens `-`.

use crate::detect::{self, Detected, Format, HEAD_LEN};
use crate::error::Error;
use crate::input::Input;
use flate2::read::MultiGzDecoder;
use std::borrow::Cow;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The largest compression ratio [`Source::content_size_hint`] believes of
/// a gzip trailer: real profiles compress 3 to 10 times, files of one line
/// repeated hundreds of times.
pub const GZIP_MAX_RATIO: u64 = 20;

/// An input, opened and its format detected.
#[derive(Clone, Debug)]
pub struct Source {
    path: PathBuf,
    name: PathBuf,
    data: Option<Arc<[u8]>>,
    size: Option<u64>,
    detected: Detected,
}

/// Standard input's bytes, or how reading it failed (kept to be told to
/// every caller).
type StdinBytes = Result<Arc<[u8]>, (io::ErrorKind, String)>;

/// Standard input, read on first use.
static STDIN: OnceLock<StdinBytes> = OnceLock::new();

fn stdin_bytes() -> Result<Arc<[u8]>, Error> {
    let r = STDIN.get_or_init(|| {
        let mut v = Vec::new();
        io::stdin()
            .lock()
            .read_to_end(&mut v)
            .map(|_| Arc::from(v))
            .map_err(|e| (e.kind(), e.to_string()))
    });
    r.clone()
        .map_err(|(kind, msg)| Error::io(Path::new("<stdin>"), io::Error::new(kind, msg)))
}

impl Source {
    /// Opens a file, or standard input for `-` (read whole, once per
    /// process), and detects its format from its first bytes.
    pub fn open(path: &Path) -> Result<Source, Error> {
        if path.as_os_str() == "-" {
            crate::limits::opened(Path::new("<stdin>"));
            let data = stdin_bytes()?;
            return Ok(Source::memory(path, PathBuf::from("<stdin>"), data));
        }
        crate::limits::opened(path);
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().ok().map(|m| m.len());
        let mut head = Vec::with_capacity(HEAD_LEN.min(size.unwrap_or(0) as usize));
        file.take(HEAD_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(path, e))?;
        Ok(Source {
            path: path.to_path_buf(),
            name: path.to_path_buf(),
            data: None,
            size,
            detected: detect::detect(&head),
        })
    }

    /// An input held in memory, named `name` in messages (tests, data
    /// received otherwise).
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Source {
        let name = name.into();
        Source::memory(&name.clone(), name, Arc::from(bytes))
    }

    fn memory(path: &Path, name: PathBuf, data: Arc<[u8]>) -> Source {
        let detected = detect::detect(&data[..data.len().min(HEAD_LEN)]);
        Source {
            path: path.to_path_buf(),
            name,
            size: Some(data.len() as u64),
            data: Some(data),
            detected,
        }
    }

    /// The path as given (`-` for standard input).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name used in messages (`<stdin>` for standard input).
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// The size in bytes as stored (compressed, if gzip), when known.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// The size of the content, decompressed, when it can be told without
    /// reading it: the size as stored for a plain input; for gzip, the
    /// size its trailer states (ISIZE, the last four bytes), if that is
    /// between one and [`GZIP_MAX_RATIO`] times the compressed size. The
    /// trailer holds the size modulo 4 GiB and only of the last member,
    /// so a larger or stranger file is told as `None`, as is a file of
    /// repeated lines that gzip shrinks a hundredfold (whose records cost
    /// more than their text: see `limits::exact_limit`).
    pub fn content_size_hint(&self) -> Option<u64> {
        let stored = self.size?;
        if !self.detected.gzip {
            return Some(stored);
        }
        if stored < 18 {
            return None;
        }
        let mut trailer = [0u8; 4];
        match &self.data {
            Some(d) => trailer.copy_from_slice(&d[d.len() - 4..]),
            None => {
                use std::io::{Seek, SeekFrom};
                let mut f = std::fs::File::open(&self.path).ok()?;
                f.seek(SeekFrom::End(-4)).ok()?;
                f.read_exact(&mut trailer).ok()?;
            }
        }
        let isize = u64::from(u32::from_le_bytes(trailer));
        (stored..=stored.saturating_mul(GZIP_MAX_RATIO))
            .contains(&isize)
            .then_some(isize)
    }

    /// The format, and whether it is gzip-compressed.
    pub fn detected(&self) -> Detected {
        self.detected
    }

    /// The format of the (decompressed) content.
    pub fn format(&self) -> Format {
        self.detected.format
    }

    /// A fresh stream of the content, decompressed, for the text readers.
    pub fn input(&self) -> Result<Input, Error> {
        match &self.data {
            Some(d) => Input::from_reader(
                self.name.clone(),
                self.size,
                Box::new(io::Cursor::new(Arc::clone(d))),
            ),
            None => Input::open(&self.path),
        }
    }

    /// The whole content, decompressed, for the readers of binary and
    /// small formats (gmon, DCPI).
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>, Error> {
        let _place = crate::limits::reading(&self.name);
        let raw: Cow<'_, [u8]> = match &self.data {
            Some(d) => Cow::Borrowed(d),
            None => Cow::Owned(std::fs::read(&self.path).map_err(|e| Error::io(&self.path, e))?),
        };
        if !self.detected.gzip {
            return Ok(raw);
        }
        // A broken stream is told with how far its content went, as the
        // text readers tell the line.
        let mut out = Vec::new();
        MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| Error::Binary {
                path: self.name.clone(),
                offset: out.len() as u64,
                message: format!(
                    "the gzip stream breaks off here (in the decompressed content): {e}"
                ),
            })?;
        Ok(Cow::Owned(out))
    }

    /// Ok if the Callgrind reader takes this input (a Callgrind or
    /// Cachegrind profile, or unrecognised content, which the reader
    /// reports with its line); else an error saying what the file is and
    /// what reads it.
    pub fn expect_callgrind(&self) -> Result<(), Error> {
        if self.detected.is_callgrind_reader_input() {
            Ok(())
        } else {
            Err(self.wrong_format())
        }
    }

    /// The error for a file this command does not read.
    pub fn wrong_format(&self) -> Error {
        Error::WrongFormat {
            path: self.name.clone(),
            format: self.detected.format,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).expect("in memory");
        e.finish().expect("in memory")
    }

    #[test]
    fn content_sizes_are_told_where_plausible() {
        // A profile-like text of varied lines compresses a few times: its
        // trailer is believed, from memory and from a file.
        let mut text = b"events: Ir\nfn=a\n".to_vec();
        for i in 0..20_000u32 {
            text.extend_from_slice(format!("{} {}\n", i * 7 % 1000, i * 31 % 977).as_bytes());
        }
        let gz = gzip(&text);
        let s = Source::from_bytes("t.gz", gz.clone());
        assert!(s.detected().gzip);
        assert_eq!(s.content_size_hint(), Some(text.len() as u64));
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("t.gz");
        std::fs::write(&path, &gz).expect("write");
        let s = Source::open(&path).expect("open");
        assert_eq!(s.content_size_hint(), Some(text.len() as u64));
        // Plain: the size as stored.
        let plain = Source::from_bytes("t", text.clone());
        assert_eq!(plain.content_size_hint(), Some(text.len() as u64));
        // One line repeated shrinks past GZIP_MAX_RATIO: not believed.
        let mut repeated = b"events: Ir\nfn=a\n".to_vec();
        repeated.extend(b"1 1\n".repeat(200_000));
        let s = Source::from_bytes("r.gz", gzip(&repeated));
        assert_eq!(s.content_size_hint(), None);
    }

    #[test]
    fn memory_sources_read_again() {
        let s = Source::from_bytes("t", b"events: Ir\nfn=a\n1 2\n".to_vec());
        assert_eq!(s.format(), Format::Cachegrind);
        for _ in 0..2 {
            let mut l = s.input().unwrap().into_lines();
            let (data, len) = l.next_chunk().unwrap().unwrap();
            assert_eq!(&data[..len], b"events: Ir\nfn=a\n1 2\n");
        }
        assert_eq!(&s.bytes().unwrap()[..], b"events: Ir\nfn=a\n1 2\n");
    }

    #[test]
    fn other_formats_are_refused_with_their_command() {
        let s = Source::from_bytes("g.out", b"gmon\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0".to_vec());
        let e = s.expect_callgrind().unwrap_err().to_string();
        assert!(
            e.starts_with("g.out: a gprof gmon.out file: use `tally gprof PROG FILE`"),
            "{e}"
        );
    }
}
