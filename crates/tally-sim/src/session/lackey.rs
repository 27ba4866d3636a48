//! A Lackey trace as a source: Valgrind's own record of every
//! instruction and access (`valgrind --tool=lackey --trace-mem=yes`),
//! simulated one record at a time. With `-v -v` in the same file, the
//! trace names the objects Valgrind loaded and where; otherwise the
//! program given is placed where Valgrind loads it.

use super::{Ending, Run};
use crate::attrib::AddressSpace;
use crate::engine::{Engine, EngineOptions};
use crate::lackey::{Access, LackeyReader, Record};
use crate::{Error, Hierarchy};
use std::io::{BufReader, Read};
use std::path::Path;

/// Simulates the Lackey trace at `path` (`-` reads standard input);
/// `binary`, the program, when the trace does not name its objects.
pub fn lackey_trace(
    path: &Path,
    binary: Option<&Path>,
    machines: Vec<Hierarchy>,
    opts: EngineOptions,
) -> Result<Run, Error> {
    let mut engine = Engine::new(machines, opts);
    let mut space = AddressSpace::new();
    let input: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(path).map_err(|source| Error::Open {
            path: path.to_path_buf(),
            source,
        })?)
    };
    let mut r = LackeyReader::new(BufReader::with_capacity(1 << 20, input));
    let mut saw_objects = false;
    let mut fallback_added = false;
    let mut cmd = binary.map_or(String::new(), |b| b.display().to_string());
    loop {
        let rec = r.next_record().map_err(|error| Error::Lackey {
            path: path.to_path_buf(),
            error: Box::new(error),
        })?;
        match rec {
            None => break,
            Some(Record::Object(o)) => {
                if !saw_objects && cmd.is_empty() {
                    cmd = o.path.clone();
                }
                saw_objects = true;
                space.add_biased(Path::new(&o.path), o.bias);
            }
            Some(Record::Access(acc)) => {
                if !saw_objects && !fallback_added {
                    fallback_added = true;
                    if let Some(b) = binary {
                        add_binary_guess(&mut space, b);
                    }
                }
                match acc {
                    Access::Instr { addr, size } => {
                        let size = u8::try_from(size).map_err(|_| Error::LackeySize {
                            path: path.to_path_buf(),
                            line: r.line(),
                            size,
                        })?;
                        let i = engine.declare(addr, size, || space.classify(addr));
                        engine.exec(i);
                    }
                    Access::Load { addr, size } => engine.load(addr, clamp(size)),
                    Access::Store { addr, size } => engine.store(addr, clamp(size)),
                    Access::Modify { addr, size } => engine.modify(addr, clamp(size)),
                }
            }
        }
    }
    Ok(Run {
        output: engine.finish(),
        space,
        cmd,
        pid: std::process::id(),
        ending: Ending::Complete,
        status: None,
        unfollowed: super::Unfollowed::default(),
    })
}

fn clamp(size: u64) -> u8 {
    u8::try_from(size).unwrap_or(u8::MAX)
}

/// A trace without Valgrind's load addresses: the program alone, at its
/// own addresses, or where Valgrind loads position-independent programs.
fn add_binary_guess(space: &mut AddressSpace, b: &Path) {
    let pie = tally_symbols::ObjectFile::open(b)
        .map(|f| f.code_ranges().map(|r| r.0).min().unwrap_or(0) < 0x10_0000)
        .unwrap_or(false);
    space.add_biased(b, if pie { 0x10_8000 } else { 0 });
}
