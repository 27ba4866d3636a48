//! Source lines from DWARF, through addr2line.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use object::read::elf::{ElfFile, FileHeader};
use object::{Endianness, Object, ObjectSection, elf};

/// Owned section data, so the context can live inside `ObjectFile` without
/// borrowing from it.
type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// A lazily parsed DWARF context. addr2line parses units on demand through
/// interior mutability, so it sits behind a mutex to keep `ObjectFile`
/// `Sync`.
pub(crate) struct LineTable {
    context: Mutex<addr2line::Context<Reader>>,
    /// The same sections (shared, not copied), for walking the DIEs.
    dwarf: gimli::Dwarf<Reader>,
}

impl std::fmt::Debug for LineTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineTable")
    }
}

impl LineTable {
    /// File and line of `addr`, as `addr2line -e` prints them.
    pub(crate) fn find(&self, addr: u64) -> Option<(String, u32)> {
        let context = self.context.lock().unwrap_or_else(|e| e.into_inner());
        let location = context.find_location(addr).ok()??;
        let line = location.line.filter(|&l| l != 0)?;
        Some((location.file?.to_owned(), line))
    }

    /// The line-table rows in `[start, end)` as `(address, length, file,
    /// line)`, in address order, rows with line 0 left out.
    pub(crate) fn ranges(&self, start: u64, end: u64) -> Vec<(u64, u64, String, u32)> {
        let context = self.context.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        let Ok(iter) = context.find_location_range(start, end) else {
            return out;
        };
        for (addr, len, loc) in iter {
            if let (Some(file), Some(line)) = (loc.file, loc.line.filter(|&l| l != 0)) {
                out.push((addr, len, file.to_owned(), line));
            }
        }
        out.sort_by_key(|r| r.0);
        out
    }

    /// Every start and end of the address ranges of functions and inlined
    /// calls, sorted: the only places inside a line-table row where the
    /// innermost function can change.
    pub(crate) fn function_boundaries(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut units = self.dwarf.units();
        while let Ok(Some(header)) = units.next() {
            let Ok(unit) = self.dwarf.unit(header) else {
                continue;
            };
            let mut entries = unit.entries();
            while let Ok(Some(entry)) = entries.next_dfs() {
                if entry.tag() != gimli::DW_TAG_subprogram
                    && entry.tag() != gimli::DW_TAG_inlined_subroutine
                {
                    continue;
                }
                let Ok(mut ranges) = self.dwarf.die_ranges(&unit, entry) else {
                    continue;
                };
                while let Ok(Some(r)) = ranges.next() {
                    out.push(r.begin);
                    out.push(r.end);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The raw name (linkage name where there is one) of the innermost
    /// function, inlined or not, whose code holds `addr`.
    pub(crate) fn function(&self, addr: u64) -> Option<String> {
        let context = self.context.lock().unwrap_or_else(|e| e.into_inner());
        let mut frames = context.find_frames(addr).skip_all_loads().ok()?;
        let frame = frames.next().ok()??;
        let name = frame.function?.raw_name().ok()?.into_owned();
        Some(name)
    }
}

/// Loads the DWARF of an ELF file's bytes; `None` when it has none or it
/// cannot be read (source lines are an extra, never a reason to fail).
pub(crate) fn load(data: &[u8]) -> Option<LineTable> {
    match *data.get(crate::EI_CLASS)? {
        crate::ELFCLASS32 => load_elf::<elf::FileHeader32<Endianness>>(data),
        crate::ELFCLASS64 => load_elf::<elf::FileHeader64<Endianness>>(data),
        _ => None,
    }
}

fn load_elf<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> Option<LineTable> {
    let file = ElfFile::<Elf>::parse(data).ok()?;
    // `section_by_name` also finds the old `.zdebug_info` spelling.
    file.section_by_name(".debug_info")?;
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut sections: Vec<(gimli::SectionId, Reader)> = Vec::new();
    let mut section = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        if let Some((_, r)) = sections.iter().find(|(i, _)| *i == id) {
            return Ok(r.clone());
        }
        let bytes: Cow<'_, [u8]> = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[]));
        let r = Reader::new(Arc::from(&*bytes), endian);
        sections.push((id, r.clone()));
        Ok(r)
    };
    let dwarf = gimli::Dwarf::load(&mut section).ok()?;
    let walk = gimli::Dwarf::load(&mut section).ok()?;
    let context = addr2line::Context::from_dwarf(dwarf).ok()?;
    Some(LineTable {
        context: Mutex::new(context),
        dwarf: walk,
    })
}

/// Where a separate debug file for `path` may be, in the order GDB looks:
/// by build ID under `/usr/lib/debug/.build-id`, then by `.gnu_debuglink`
/// name beside the file, in its `.debug` folder, and under
/// `/usr/lib/debug`. Distributions strip their libraries this way.
pub(crate) fn debug_file_candidates(
    path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<&str>,
) -> Vec<PathBuf> {
    const GLOBAL: &str = "/usr/lib/debug";
    let mut out = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        out.push(
            Path::new(GLOBAL)
                .join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..])),
        );
    }
    if let Some(link) = debuglink.filter(|l| !l.is_empty() && !l.contains('/')) {
        let dir = path.parent().unwrap_or(Path::new(""));
        let beside = dir.join(link);
        if beside != path {
            out.push(beside);
        }
        out.push(dir.join(".debug").join(link));
        if let Ok(abs) = std::path::absolute(dir) {
            let relative = abs.strip_prefix("/").unwrap_or(&abs);
            out.push(Path::new(GLOBAL).join(relative).join(link));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_gdb() {
        let c = debug_file_candidates(
            Path::new("/usr/lib/libfoo.so.1"),
            Some(&[0xab, 0xcd, 0xef]),
            Some("libfoo.so.1.debug"),
        );
        let c: Vec<_> = c.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            c,
            [
                "/usr/lib/debug/.build-id/ab/cdef.debug",
                "/usr/lib/libfoo.so.1.debug",
                "/usr/lib/.debug/libfoo.so.1.debug",
                "/usr/lib/debug/usr/lib/libfoo.so.1.debug",
            ]
        );
    }

    #[test]
    fn garbage_has_no_lines() {
        assert!(load(b"").is_none());
        assert!(load(b"\x7fELF\x02\x01\x01").is_none());
    }
}

/// A source file name as Valgrind 3.19 writes it, given the name DWARF
/// gives (`./stdlib/msort.c`). For a DWARF 5 line table, Valgrind joins
/// the unit's directory to every relative directory entry, entry 0
/// included, which DWARF 5 makes the unit's directory itself: a file of
/// entry 0 under a relative unit directory gets that directory twice
/// (`./stdlib/./stdlib/msort.c`). Names of that shape are the ones
/// under a relative directory (`./D/…`) with no `.` or `..` in `D`
/// (entries other than 0 are relative to the unit's directory, `../bits`
/// or `.`, and so come out as `./D/../bits/…` or `./D/./…`, which
/// Valgrind writes as DWARF does); absolute names, as gcc writes them by
/// default, are unchanged.
pub fn valgrind_file_name(name: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let Some((dir, file)) = name.rsplit_once('/') else {
        return Cow::Borrowed(name);
    };
    let mut parts = dir.split('/');
    let relative = parts.next() == Some(".");
    if !relative || file.is_empty() || parts.any(|c| c == ".." || c == "." || c.is_empty()) {
        return Cow::Borrowed(name);
    }
    Cow::Owned(format!("{dir}/{dir}/{file}"))
}

#[cfg(test)]
mod valgrind_names {
    use super::valgrind_file_name as v;

    #[test]
    fn doubled_as_valgrind_3_19_writes_them() {
        // Names from Valgrind's profiles of Debian's libc and ld.so.
        assert_eq!(v("./stdlib/msort.c"), "./stdlib/./stdlib/msort.c");
        assert_eq!(v("./elf/dl-audit.c"), "./elf/./elf/dl-audit.c");
        assert_eq!(
            v("./elf/../bits/stdlib-bsearch.h"),
            "./elf/../bits/stdlib-bsearch.h"
        );
        assert_eq!(v("./elf/./dl-find_object.h"), "./elf/./dl-find_object.h");
        assert_eq!(v("/tmp/x/prog.c"), "/tmp/x/prog.c");
        assert_eq!(v("???"), "???");
    }
}
