//! The seeds: every real fixture under `tests/data` that a reader of
//! tally takes (found by the same detection the commands use, or by its
//! name for the bad inputs detection does not recognise), decompressed
//! when gzip'd, with the program each gmon or DCPI file was made from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tally_formats::FileFormat as Format;
use tally_symbols::ObjectFile;

/// The reader a seed is for; one fuzz target each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Callgrind profiles (and other writers of the format).
    Callgrind,
    /// Cachegrind profiles.
    Cachegrind,
    /// gprof's `gmon.out`, read with its program.
    Gmon,
    /// DCPI profiles.
    Dcpi,
    /// `perf record` output (perf.data).
    PerfData,
    /// `perf script` text.
    PerfScript,
    /// Folded stacks.
    Folded,
    /// pprof profiles (profile.proto, gzip'd or not).
    Pprof,
}

impl Kind {
    /// Every kind, in the order runs report them.
    /// (New kinds go at the end: a kind's index is part of its cases'
    /// random streams.)
    pub const ALL: [Kind; 8] = [
        Kind::Callgrind,
        Kind::Cachegrind,
        Kind::Gmon,
        Kind::Dcpi,
        Kind::PerfData,
        Kind::PerfScript,
        Kind::Folded,
        Kind::Pprof,
    ];

    /// The target's name on the command line and in case files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Callgrind => "callgrind",
            Kind::Cachegrind => "cachegrind",
            Kind::Gmon => "gmon",
            Kind::Dcpi => "dcpi",
            Kind::PerfData => "perf-data",
            Kind::PerfScript => "perf-script",
            Kind::Folded => "folded",
            Kind::Pprof => "pprof",
        }
    }

    /// The kind a name gives.
    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether the format is binary (mutations then ignore lines).
    pub fn binary(self) -> bool {
        matches!(self, Kind::Gmon | Kind::PerfData | Kind::Pprof)
    }

    /// Whether the reader keeps whole stacks (perf, folded, pprof).
    pub fn stacks(self) -> bool {
        matches!(
            self,
            Kind::PerfData | Kind::PerfScript | Kind::Folded | Kind::Pprof
        )
    }
}

/// One fixture.
#[derive(Clone, Debug)]
pub struct Seed {
    /// Path relative to the data directory (how case files name it).
    pub path: String,
    /// The reader it is for.
    pub kind: Kind,
    /// Content, decompressed.
    pub bytes: Vec<u8>,
    /// Whether the fixture is gzip'd (cases are then often gzip'd too).
    pub gzip: bool,
    /// The program (gmon) or image (DCPI), relative to the data directory.
    pub image: Option<String>,
}

/// All seeds, the programs they need, and lines of every text format to
/// splice into other formats.
pub struct Corpus {
    /// The data directory.
    pub dir: PathBuf,
    /// The seeds, in path order.
    pub seeds: Vec<Seed>,
    /// Programs and images by relative path, opened once.
    pub images: BTreeMap<String, ObjectFile>,
    /// Lines of the text seeds (Callgrind, Cachegrind, DCPI, `perf
    /// script`, folded), for splices.
    pub lines: Vec<Vec<u8>>,
}

/// Why the corpus could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A program could not be opened.
    #[error("{0}")]
    Image(String),
}

/// The repository's `tests/data`, as this crate was built from it.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), CorpusError> {
    let io = |e| CorpusError::Io {
        path: dir.to_path_buf(),
        source: e,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let ty = e.file_type().map_err(io)?;
        if ty.is_dir() {
            // Built binaries (ignored by git) and C sources hold no seeds.
            if e.file_name() != "bin" {
                walk(&p, out)?;
            }
        } else if ty.is_file() {
            out.push(p);
        }
    }
    Ok(())
}

fn kind_of(path: &Path, format: Format) -> Option<Kind> {
    match format {
        Format::Callgrind => return Some(Kind::Callgrind),
        Format::Cachegrind => return Some(Kind::Cachegrind),
        Format::Gmon => return Some(Kind::Gmon),
        Format::Dcpi => return Some(Kind::Dcpi),
        Format::PerfData => return Some(Kind::PerfData),
        Format::PerfScript => return Some(Kind::PerfScript),
        // Detection takes any lines ending in numbers (reports, expected
        // outputs) for folded stacks: only files named so are seeds.
        Format::Folded => {
            let name = path.to_string_lossy();
            return (name.ends_with(".folded") || name.ends_with(".folded.gz"))
                .then_some(Kind::Folded);
        }
        Format::Pprof => return Some(Kind::Pprof),
        _ => {}
    }
    // Bad inputs that detection does not recognise, by their names.
    let name = path.file_name()?.to_str()?;
    let name = name.strip_suffix(".gz").unwrap_or(name);
    let ext = Path::new(name).extension()?.to_str()?;
    match ext {
        "callgrind" => Some(Kind::Callgrind),
        "cachegrind" => Some(Kind::Cachegrind),
        "gmon" => Some(Kind::Gmon),
        "dcpi" => Some(Kind::Dcpi),
        _ => None,
    }
}

impl Corpus {
    /// Loads every seed under `dir`.
    pub fn load(dir: &Path) -> Result<Corpus, CorpusError> {
        let mut files = Vec::new();
        walk(dir, &mut files)?;
        let rel = |p: &Path| {
            p.strip_prefix(dir)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned()
        };
        let mut elves = Vec::new();
        let mut seeds = Vec::new();
        for p in &files {
            let source = match tally_formats::Source::open(p) {
                Ok(s) => s,
                Err(_) => continue,
            };
            if source.format() == Format::Elf {
                elves.push(rel(p));
                continue;
            }
            let Some(kind) = kind_of(p, source.format()) else {
                continue;
            };
            // A broken gzip stream (a bad input) is a seed as it is.
            let gzip = source.detected().gzip;
            let bytes = match source.bytes() {
                Ok(b) => b.into_owned(),
                Err(_) => std::fs::read(p).map_err(|e| CorpusError::Io {
                    path: p.clone(),
                    source: e,
                })?,
            };
            seeds.push(Seed {
                path: rel(p),
                kind,
                bytes,
                gzip,
                image: None,
            });
        }
        for s in &mut seeds {
            s.image = match s.kind {
                Kind::Gmon => image_for(&s.path, &elves),
                Kind::Dcpi => dcpi_image(&s.bytes, &s.path, &elves),
                _ => None,
            };
        }
        let mut images = BTreeMap::new();
        for s in &seeds {
            if let Some(i) = &s.image
                && !images.contains_key(i)
            {
                let obj = ObjectFile::open(&dir.join(i))
                    .map_err(|e| CorpusError::Image(e.to_string()))?;
                images.insert(i.clone(), obj);
            }
        }
        let mut lines = Vec::new();
        for s in seeds.iter().filter(|s| !s.kind.binary()) {
            for l in s.bytes.split_inclusive(|&b| b == b'\n').take(400) {
                if l.len() <= 200 {
                    lines.push(l.to_vec());
                }
            }
        }
        Ok(Corpus {
            dir: dir.to_path_buf(),
            seeds,
            images,
            lines,
        })
    }

    /// The seeds of one target.
    pub fn of(&self, kind: Kind) -> Vec<&Seed> {
        self.seeds.iter().filter(|s| s.kind == kind).collect()
    }

    /// A seed by its relative path.
    pub fn seed(&self, path: &str) -> Option<&Seed> {
        self.seeds.iter().find(|s| s.path == path)
    }
}

/// The program a gmon file was written by: the longest ELF name of its
/// directory that starts its name (`cycles.O0` for `cycles.O0.run2.gmon`);
/// for files without one (bad inputs), the first program of `gprof/`.
fn image_for(gmon: &str, elves: &[String]) -> Option<String> {
    let (dir, name) = gmon.rsplit_once('/').unwrap_or(("", gmon));
    elves
        .iter()
        .filter(|e| {
            let (d, n) = e.rsplit_once('/').unwrap_or(("", e));
            d == dir && name.starts_with(&format!("{n}."))
        })
        .max_by_key(|e| e.len())
        .or_else(|| {
            elves
                .iter()
                .find(|e| e.starts_with("gprof/") && !e.starts_with("gprof/bad/"))
        })
        .cloned()
}

/// The image a DCPI profile samples: the ELF of its directory named by
/// its `path` header line, if any.
fn dcpi_image(bytes: &[u8], path: &str, elves: &[String]) -> Option<String> {
    let dir = path.rsplit_once('/').map_or("", |d| d.0);
    let named = bytes
        .split(|&b| b == b'\n')
        .take(64)
        .find_map(|l| l.strip_prefix(b"path"))?;
    let named = String::from_utf8_lossy(named.trim_ascii()).into_owned();
    let base = named.rsplit('/').next()?;
    let want = format!("{dir}/{base}");
    elves.iter().find(|e| **e == want).cloned()
}
