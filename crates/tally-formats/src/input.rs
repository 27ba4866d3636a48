//! Opening inputs: files, gzip-compressed files and standard input, read in
//! chunks and split into lines without copying.

use crate::error::Error;
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// An opened input: a byte stream and what is known about it.
pub struct Input {
    /// The name used in messages (`-` shows as `<stdin>`).
    pub path: PathBuf,
    /// Size on disk, when known (for progress).
    pub size: Option<u64>,
    /// Whether the stream is gzip-compressed (detected from its magic bytes).
    pub gzip: bool,
    /// Whether `path` is a regular file that can be opened again at any
    /// offset (a split read, `callgrind::reader::split`).
    pub(crate) regular: bool,
    reader: Box<dyn Read + Send>,
}

impl Input {
    /// Opens a file, or standard input for `-`, decompressing gzip
    /// transparently.
    pub fn open(path: &Path) -> Result<Input, Error> {
        if path.as_os_str() == "-" {
            return Input::from_reader(PathBuf::from("<stdin>"), None, Box::new(io::stdin()));
        }
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let meta = file.metadata().ok();
        let size = meta.as_ref().map(|m| m.len());
        let mut input = Input::from_reader(path.to_path_buf(), size, Box::new(file))?;
        input.regular = meta.is_some_and(|m| m.is_file());
        Ok(input)
    }

    /// The bytes of a regular file from `offset` to `end`, as an
    /// uncompressed input.
    pub(crate) fn open_range(path: &Path, offset: u64, end: u64) -> Result<Input, Error> {
        use std::io::{Seek, SeekFrom};
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(path, e))?;
        let n = end.saturating_sub(offset);
        Ok(Input {
            path: path.to_path_buf(),
            size: Some(n),
            gzip: false,
            regular: true,
            reader: Box::new(file.take(n)),
        })
    }

    /// This input's first `n` bytes only.
    pub(crate) fn limited(self, n: u64) -> Input {
        Input {
            size: Some(n),
            reader: Box::new(self.reader.take(n)),
            ..self
        }
    }

    /// Wraps any reader, detecting gzip.
    pub fn from_reader(
        path: PathBuf,
        size: Option<u64>,
        reader: Box<dyn Read + Send>,
    ) -> Result<Input, Error> {
        let mut buf = BufReader::with_capacity(1 << 16, reader);
        let head = buf.fill_buf().map_err(|e| Error::io(&path, e))?;
        let gzip = head.starts_with(&[0x1f, 0x8b]);
        let reader: Box<dyn Read + Send> = if gzip {
            Box::new(MultiGzDecoder::new(buf))
        } else {
            Box::new(buf)
        };
        Ok(Input {
            path,
            size,
            gzip,
            regular: false,
            reader,
        })
    }

    /// Reads from memory (tests, benchmarks).
    pub fn from_bytes(path: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<Input, Error> {
        let size = Some(bytes.len() as u64);
        Input::from_reader(path.into(), size, Box::new(io::Cursor::new(bytes)))
    }

    pub(crate) fn into_lines(self) -> Lines {
        self.into_lines_sized(1 << 20)
    }

    /// Lines read `chunk` bytes at a time (the buffer still grows for a
    /// longer line).
    pub(crate) fn into_lines_sized(self, chunk: usize) -> Lines {
        Lines {
            path: self.path,
            reader: self.reader,
            buf: vec![0; chunk.max(1) + PAD],
            start: 0,
            end: 0,
            eof: false,
            consumed: 0,
        }
    }
}

/// Bytes after the data of a chunk that may always be read (zero past the
/// end of the input), so that parsers can load 8 bytes at a time.
pub(crate) const PAD: usize = 8;

/// Splits a stream into lines, reusing one buffer.
pub(crate) struct Lines {
    pub(crate) path: PathBuf,
    reader: Box<dyn Read + Send>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    consumed: u64,
}

impl Lines {
    /// Bytes of (decompressed) input consumed so far.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The next run of whole lines, as `(data, len)`: `data[..len]` are
    /// complete lines (the last one may lack its `\n` at the end of the
    /// input) and `data` extends at least [`PAD`] bytes further.
    pub(crate) fn next_chunk(&mut self) -> Result<Option<(&[u8], usize)>, Error> {
        loop {
            if let Some(k) = memchr::memrchr(b'\n', &self.buf[self.start..self.end]) {
                let s = self.start;
                let len = k + 1;
                self.start += len;
                self.consumed += len as u64;
                return Ok(Some((&self.buf[s..], len)));
            }
            if self.eof {
                if self.start < self.end {
                    let s = self.start;
                    let len = self.end - s;
                    self.start = self.end;
                    self.consumed += len as u64;
                    return Ok(Some((&self.buf[s..], len)));
                }
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// The next run of whole lines read straight into `buf` (the reading
    /// thread's own buffer), so that the text is not copied a second time:
    /// `buf[..len]` are complete lines (the last one may lack its `\n` at
    /// the end of the input) and `buf` extends at least [`PAD`] bytes
    /// further (zero past the end of the input). The partial line after
    /// them is kept for the next call. `buf` keeps its length between calls
    /// (it only grows, for a line longer than it), so it is zeroed once.
    pub(crate) fn next_chunk_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<usize>, Error> {
        let want = self.buf.len();
        if buf.len() < want {
            buf.resize(want, 0);
        }
        // The partial line left from the last call comes first.
        let carry = self.end - self.start;
        if carry + PAD >= buf.len() {
            buf.resize((carry + PAD) * 2, 0);
        }
        buf[..carry].copy_from_slice(&self.buf[self.start..self.end]);
        self.start = 0;
        self.end = 0;
        let mut filled = carry;
        loop {
            if self.eof {
                if filled == 0 {
                    return Ok(None);
                }
                buf[filled..filled + PAD].fill(0);
                self.consumed += filled as u64;
                return Ok(Some(filled));
            }
            if filled + PAD >= buf.len() {
                let n = buf.len() * 2;
                buf.resize(n, 0);
            }
            let limit = buf.len() - PAD;
            let n = match self.reader.read(&mut buf[filled..limit]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, e)),
            };
            if n == 0 {
                self.eof = true;
                continue;
            }
            let read = filled..filled + n;
            filled += n;
            if let Some(k) = memchr::memrchr(b'\n', &buf[read.clone()]) {
                let len = read.start + k + 1;
                let rest = &buf[len..filled];
                if self.buf.len() < rest.len() + PAD {
                    self.buf.resize(rest.len() + PAD, 0);
                }
                self.buf[..rest.len()].copy_from_slice(rest);
                self.end = rest.len();
                self.consumed += len as u64;
                return Ok(Some(len));
            }
        }
    }

    #[cold]
    fn fill(&mut self) -> Result<(), Error> {
        // Move the partial line to the front; grow if a line fills the buffer.
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end + PAD >= self.buf.len() {
            let n = self.buf.len() * 2;
            self.buf.resize(n, 0);
        }
        // The moved line is followed by stale bytes; if the next read finds
        // the end of the input, the padding after it must still be zero.
        self.buf[self.end..self.end + PAD].fill(0);
        let limit = self.buf.len() - PAD;
        loop {
            match self.reader.read(&mut self.buf[self.end..limit]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    self.buf[self.end..self.end + PAD].fill(0);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut l = Input::from_bytes("t", bytes.to_vec()).unwrap().into_lines();
        let mut all = Vec::new();
        while let Some((data, len)) = l.next_chunk().unwrap() {
            all.extend_from_slice(&data[..len]);
        }
        if all.is_empty() {
            return Vec::new();
        }
        let mut v: Vec<Vec<u8>> = all.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        if all.ends_with(b"\n") {
            v.pop();
        }
        v
    }

    #[test]
    fn splits_lines_with_and_without_final_newline() {
        assert_eq!(collect(b"a\nbb\n"), vec![b"a".to_vec(), b"bb".to_vec()]);
        assert_eq!(
            collect(b"a\n\nc"),
            vec![b"a".to_vec(), b"".to_vec(), b"c".to_vec()]
        );
        assert!(collect(b"").is_empty());
    }

    #[test]
    fn an_unterminated_last_line_is_padded_with_zeros() {
        // The last line moves to the front of the buffer, over longer
        // lines: the padding after it must not show their bytes.
        let mut l = Input::from_bytes("t", b"version: 1\n17 661 37".to_vec())
            .unwrap()
            .into_lines();
        let mut last = Vec::new();
        while let Some((data, len)) = l.next_chunk().unwrap() {
            last = data[..len + PAD].to_vec();
        }
        assert_eq!(&last[..], b"17 661 37\0\0\0\0\0\0\0\0");
    }

    #[test]
    fn long_lines_grow_the_buffer() {
        let mut s = vec![b'x'; 3 << 20];
        s.push(b'\n');
        s.extend_from_slice(b"y\n");
        let v = collect(&s);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].len(), 3 << 20);
    }

    #[test]
    fn chunks_are_whole_lines_with_padding() {
        let text = b"a 1\nbb 22\nccc".repeat(100_000);
        let mut l = Input::from_bytes("t", text.clone()).unwrap().into_lines();
        let mut all = Vec::new();
        while let Some((data, len)) = l.next_chunk().unwrap() {
            assert!(data.len() >= len + PAD);
            all.extend_from_slice(&data[..len]);
        }
        assert_eq!(all, text);
    }

    #[test]
    fn gzip_is_detected() {
        use flate2::{Compression, write::GzEncoder};
        use std::io::Write;
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(b"events: Ir\nfn=a\n1 2\n").unwrap();
        let gz = e.finish().unwrap();
        let input = Input::from_bytes("t.gz", gz).unwrap();
        assert!(input.gzip);
        let mut l = input.into_lines();
        let (data, len) = l.next_chunk().unwrap().unwrap();
        assert!(data[..len].starts_with(b"events: Ir\nfn=a\n"));
    }
}
