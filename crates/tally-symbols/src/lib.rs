//! ELF symbols, DWARF source lines and x86-64 disassembly for tally.
//!
//! Profiles name code by address and function name only. To show where the
//! cost of a function went instruction by instruction, `tally annotate --asm`
//! has to go back to the object file a Callgrind profile names in its `ob=`
//! lines: find the function (by the demangled name Valgrind printed), decode
//! its instructions, and line them up with the profile's instruction
//! addresses. A gprof reader needs the same file for the other direction:
//! which function holds a sampled address, and which calls the code makes.
//!
//! [`ObjectFile`] is that view of one ELF file:
//!
//! - [`ObjectFile::symbols`]: the functions, sorted by address, one entry
//!   per address with its other names as aliases;
//! - [`ObjectFile::symbol_at`] and [`ObjectFile::find_function`]: lookup by
//!   address and by name as Valgrind prints it;
//! - [`ObjectFile::disassemble`]: decoded x86 and x86-64 instructions,
//!   formatted like GNU objdump's AT&T output, with branch targets;
//! - [`ObjectFile::source_line`]: file and line from DWARF, in the file or in
//!   a separate debug file.
//!
//! Addresses are always ELF virtual addresses of the file (the `st_value`s,
//! what `nm` and `objdump` print). Valgrind writes the same addresses for
//! position-independent executables and shared libraries, so no load bias is
//! ever applied here.
//!
//! Files come from users, so nothing here panics on a damaged or truncated
//! file: every failure is a [`SymbolsError`] that names the file.
//!
//! Inside, one module per question, each behind [`ObjectFile`]: `symbols`
//! builds the sorted function table, `demangle` gives names the form
//! Valgrind prints, `disasm` decodes with iced-x86 and formats like
//! objdump, `dwarf` reads the line tables on the first request only, and
//! `symtab` hands out the raw `.symtab` for readers such as gprof's that
//! pick functions by rules of their own.
//!
//! ```no_run
//! use std::path::Path;
//! use tally_symbols::ObjectFile;
//!
//! let obj = ObjectFile::open(Path::new("/usr/bin/true"))?;
//! if let Some(main) = obj.find_function("main") {
//!     for insn in obj.disassemble_function(main)? {
//!         println!("{:x}: {}", insn.address, insn.text);
//!     }
//! }
//! # Ok::<(), tally_symbols::SymbolsError>(())
//! ```

#![deny(missing_docs)]

pub mod address_space;
mod demangle;
mod disasm;
mod dwarf;
mod error;
mod symbols;
mod symtab;
pub mod unwind;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use object::read::elf::{
    ElfFile, FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym, VersionTable,
};
use object::{Endianness, Object, elf};

pub use address_space::{AddressSpace, Image, Location, Mapping, Placement};
pub use disasm::{InstrKind, Instruction};
pub use dwarf::valgrind_file_name;
pub use error::SymbolsError;
pub use symbols::{Alias, Binding, Symbol, SymbolVersion};
pub use symtab::{Section, SymtabEntry};

use dwarf::LineTable;
use symbols::{CodeLabels, DataLabels, RawSymbol, SymbolTable, label, version_in_name};

/// Offset of the class byte (32 or 64 bits) in the ELF identification.
pub(crate) const EI_CLASS: usize = 4;
/// The class byte of 32-bit files.
pub(crate) const ELFCLASS32: u8 = elf::ELFCLASS32.0;
/// The class byte of 64-bit files.
pub(crate) const ELFCLASS64: u8 = elf::ELFCLASS64.0;

/// One ELF file, read whole into memory and indexed.
#[derive(Debug)]
pub struct ObjectFile {
    path: PathBuf,
    data: Vec<u8>,
    machine: u16,
    symbols: SymbolTable,
    data_labels: DataLabels,
    code_labels: CodeLabels,
    code: Vec<CodeRange>,
    symtab: Vec<SymtabEntry>,
    symtab_strings: Vec<u8>,
    sections: Vec<Section>,
    little_endian: bool,
    is_64: bool,
    build_id: Option<Vec<u8>>,
    debuglink: Option<String>,
    /// Parsed on the first [`ObjectFile::source_line`] call: most uses never
    /// need it, and DWARF can be far larger than the code.
    lines: OnceLock<Option<LineTable>>,
}

/// An executable part of the file: a section, or a loadable segment when
/// the section headers are gone.
#[derive(Debug, Clone)]
struct CodeRange {
    start: u64,
    end: u64,
    /// File offset of `start`.
    offset: u64,
    name: String,
}

/// What parsing yields, before it is moved into an [`ObjectFile`].
struct Parsed {
    machine: u16,
    symbols: Vec<RawSymbol>,
    objects: Vec<RawSymbol>,
    /// Untyped labels in executable sections.
    labels: Vec<RawSymbol>,
    code: Vec<CodeRange>,
    symtab: Vec<SymtabEntry>,
    symtab_strings: Vec<u8>,
    sections: Vec<Section>,
    little_endian: bool,
    build_id: Option<Vec<u8>>,
    debuglink: Option<String>,
    /// Whether the file has a `.symtab`.
    has_symtab: bool,
}

impl ObjectFile {
    /// Reads and parses the ELF file at `path`.
    pub fn open(path: &Path) -> Result<ObjectFile, SymbolsError> {
        let data = std::fs::read(path).map_err(|source| SymbolsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path.to_path_buf(), data)
    }

    /// Parses ELF bytes already in memory; `name` stands for the path in
    /// messages (and is where a separate debug file would be looked for).
    pub fn from_bytes(name: &str, data: Vec<u8>) -> Result<ObjectFile, SymbolsError> {
        Self::parse(PathBuf::from(name), data)
    }

    fn parse(path: PathBuf, data: Vec<u8>) -> Result<ObjectFile, SymbolsError> {
        let not_elf = |reason: &str| SymbolsError::NotElf {
            path: path.clone(),
            reason: reason.to_owned(),
        };
        if data.is_empty() {
            return Err(not_elf("the file is empty"));
        }
        if !data.starts_with(&elf::ELFMAG) {
            return Err(not_elf("no ELF magic number at its start"));
        }
        let parsed = match data.get(EI_CLASS) {
            Some(&ELFCLASS32) => parse_elf::<elf::FileHeader32<Endianness>>(&data),
            Some(&ELFCLASS64) => parse_elf::<elf::FileHeader64<Endianness>>(&data),
            _ => return Err(SymbolsError::malformed(&path, "unknown ELF class")),
        }
        .map_err(|e| SymbolsError::malformed(&path, e))?;
        let mut parsed = parsed;
        if !parsed.has_symtab {
            // A stripped file (Debian's libraries): its full symbol table,
            // local functions included, is in the separate debug file, where
            // Valgrind and gdb read it too.
            if let Some(debug) = debug_symbols(&path, &parsed) {
                let dynsym = std::mem::take(&mut parsed.symbols);
                parsed.symbols = merge(debug.symbols, dynsym);
                let dyn_objects = std::mem::take(&mut parsed.objects);
                parsed.objects = merge(debug.objects, dyn_objects);
                parsed.labels.extend(debug.labels);
            }
        }
        let is_64 = data.get(EI_CLASS) == Some(&ELFCLASS64);
        let symbols = SymbolTable::new(parsed.symbols);
        let code_labels = CodeLabels::new(parsed.labels, symbols.symbols());
        Ok(ObjectFile {
            path,
            data,
            machine: parsed.machine,
            symbols,
            data_labels: DataLabels::new(parsed.objects),
            code_labels,
            code: parsed.code,
            symtab: parsed.symtab,
            symtab_strings: parsed.symtab_strings,
            sections: parsed.sections,
            little_endian: parsed.little_endian,
            is_64,
            build_id: parsed.build_id,
            debuglink: parsed.debuglink,
            lines: OnceLock::new(),
        })
    }

    /// The path given to [`ObjectFile::open`] (or the name given to
    /// [`ObjectFile::from_bytes`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry point (`e_entry` of the ELF header): where a program
    /// starts, a function even when no symbol says so.
    pub fn entry(&self) -> u64 {
        let (at, n) = if self.is_64 { (24, 8) } else { (24, 4) };
        let Some(b) = self.data.get(at..at + n) else {
            return 0;
        };
        let mut v = [0u8; 8];
        if self.little_endian {
            v[..n].copy_from_slice(b);
            u64::from_le_bytes(v)
        } else {
            v[8 - n..].copy_from_slice(b);
            u64::from_be_bytes(v)
        }
    }

    /// Whether the code is x86-64 (including the x32 ABI).
    pub fn is_x86_64(&self) -> bool {
        self.machine == elf::EM_X86_64.0
    }

    /// The ELF machine, by name where known (`x86-64`, `aarch64`, …).
    pub fn machine(&self) -> String {
        machine_name(self.machine)
    }

    /// The function symbols (`STT_FUNC` and `STT_GNU_IFUNC`) from `.symtab`
    /// and `.dynsym`, sorted by address, one per address: the global name is
    /// preferred over weak and local ones, and the others are kept as
    /// [`Symbol::aliases`].
    pub fn symbols(&self) -> &[Symbol] {
        self.symbols.symbols()
    }

    /// Every named entry of `.symtab` (not `.dynsym`), in table order, with
    /// the class letter `nm` prints for it. gprof builds its own function
    /// table from this list by rules of its own (static functions, weak
    /// symbols, data symbols in code), so it needs the raw entries rather
    /// than [`ObjectFile::symbols`]. Empty for a stripped file.
    pub fn symtab(&self) -> &[SymtabEntry] {
        &self.symtab
    }

    /// The raw string table of `.symtab` (names are NUL-terminated at
    /// [`SymtabEntry::name_offset`]).
    pub fn symtab_strings(&self) -> &[u8] {
        &self.symtab_strings
    }

    /// The file's sections, in header order.
    pub fn sections(&self) -> &[Section] {
        &self.sections
    }

    /// The section named `name` (the first, if several are).
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// Whether the file is little-endian.
    pub fn is_little_endian(&self) -> bool {
        self.little_endian
    }

    /// Whether the file is a 64-bit (ELFCLASS64) file.
    pub fn is_64_bit(&self) -> bool {
        self.is_64
    }

    /// Demangles a C++ or Rust name as Valgrind and GNU tools print it;
    /// `None` for a name that is not mangled.
    pub fn demangle(name: &str) -> Option<String> {
        demangle::demangle(name)
    }

    /// The function containing `addr` (`address <= addr < end`), the
    /// innermost one if symbols nest. Padding after a function belongs to
    /// none.
    pub fn symbol_at(&self, addr: u64) -> Option<&Symbol> {
        self.symbols.symbol_at(addr)
    }

    /// The untyped label (`STT_NOTYPE`, e.g. the loader's `_dl_start_user`)
    /// that names the code at `addr` the way perf names it, as
    /// `(address, name)`: code outside any function, or past the label
    /// inside a function without a size (perf ends an unsized symbol at the
    /// next symbol of any kind). Valgrind ignores such labels, so
    /// [`ObjectFile::symbol_at`] does too; perf's readers ask here first.
    pub fn code_label_at(&self, addr: u64) -> Option<(u64, &str)> {
        let (start, name) = self.code_labels.find(addr)?;
        match self.symbol_at(addr) {
            None => Some((start, name)),
            Some(f) if f.address < start && !f.is_sized() => Some((start, name)),
            Some(_) => None,
        }
    }

    /// The last function starting at or before `addr`, whether or not it
    /// reaches `addr`. In a stripped file (no `.symtab`, no debug file)
    /// the functions are the exported ones of `.dynsym`, and most code
    /// lies between them: a profiler names such code relative to the
    /// nearest one before it, so that hot places stay apart.
    pub fn symbol_before(&self, addr: u64) -> Option<&Symbol> {
        let symbols = self.symbols.symbols();
        let i = symbols.partition_point(|s| s.address <= addr);
        symbols.get(i.checked_sub(1)?)
    }

    /// Finds a function by the name Valgrind prints for it: demangled C++
    /// or Rust (`ns::f(int)`, `std::rt::lang_start`), a plain C name, or
    /// the raw mangled name. A version suffix (`__libc_start_main@@GLIBC_2.34`)
    /// selects that version where the file has version information and is
    /// ignored where it has none; Callgrind's recursion mark (`fib'2`) is
    /// ignored too. Of two local functions with one name, the first by
    /// address is returned.
    pub fn find_function(&self, name: &str) -> Option<&Symbol> {
        self.symbols.find_function(name)
    }

    /// Decodes the instructions in `[start, end)`. `start` must be in an
    /// executable section; a range running past the end of that section is
    /// cut there, so callers may ask for a little slack. Bytes that do not
    /// decode become `(bad)` instructions; an instruction cut off at `end` is
    /// one of them.
    pub fn disassemble(&self, start: u64, end: u64) -> Result<Vec<Instruction>, SymbolsError> {
        let bitness = match self.machine {
            m if m == elf::EM_X86_64.0 => 64,
            m if m == elf::EM_386.0 => 32,
            _ => {
                return Err(SymbolsError::UnsupportedArchitecture {
                    path: self.path.clone(),
                    machine: self.machine(),
                });
            }
        };
        if end < start {
            return Err(SymbolsError::InvalidRange {
                start,
                end,
                path: self.path.clone(),
            });
        }
        let Some(code) = self.code.iter().find(|c| c.start <= start && start < c.end) else {
            return Err(SymbolsError::AddressNotExecutable {
                address: start,
                path: self.path.clone(),
            });
        };
        let end = end.min(code.end);
        let bytes = code
            .offset
            .checked_add(start - code.start)
            .and_then(|from| usize::try_from(from).ok())
            .zip(usize::try_from(end - start).ok())
            .and_then(|(from, len)| self.data.get(from..from.checked_add(len)?))
            .ok_or_else(|| {
                SymbolsError::malformed(
                    &self.path,
                    format!("{} lies past the end of the file", code.name),
                )
            })?;
        Ok(disasm::decode(bitness, bytes, start, |target| {
            match self.symbol_at(target) {
                Some(s) => Some(label(&s.name, s.version.as_ref(), target - s.address)),
                None => self.data_labels.find(target),
            }
        }))
    }

    /// The executable parts of the file as `(start, end, file offset)`:
    /// what relates a mapping of the file (offset and address, as in
    /// `/proc/PID/maps`) to the file's own addresses.
    pub fn code_ranges(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.code.iter().map(|c| (c.start, c.end, c.offset))
    }

    /// The bytes of `[start, end)` in an executable section (cut at the
    /// section's end); `None` if `start` is in none.
    pub fn code_bytes(&self, start: u64, end: u64) -> Option<&[u8]> {
        let code = self
            .code
            .iter()
            .find(|c| c.start <= start && start < c.end)?;
        let end = end.min(code.end).max(start);
        let from = usize::try_from(code.offset.checked_add(start - code.start)?).ok()?;
        let len = usize::try_from(end - start).ok()?;
        self.data.get(from..from.checked_add(len)?)
    }

    /// Decodes a whole function, from its address to its [`Symbol::end`].
    pub fn disassemble_function(&self, symbol: &Symbol) -> Result<Vec<Instruction>, SymbolsError> {
        self.disassemble(symbol.address, symbol.end)
    }

    /// The source file and line of `addr` from DWARF line tables, as
    /// `addr2line -e FILE ADDR` prints them; `None` without debug
    /// information. Debug information is looked for in the file itself, then
    /// in a separate debug file found by build ID or `.gnu_debuglink`.
    pub fn source_line(&self, addr: u64) -> Option<(String, u32)> {
        self.lines
            .get_or_init(|| self.load_lines())
            .as_ref()?
            .find(addr)
    }

    /// The DWARF line-table rows in `[start, end)`: `(address, length,
    /// file, line)` in address order. Empty without debug information.
    pub fn line_rows(&self, start: u64, end: u64) -> Vec<(u64, u64, String, u32)> {
        match self.lines.get_or_init(|| self.load_lines()).as_ref() {
            Some(lines) => lines.ranges(start, end),
            None => Vec::new(),
        }
    }

    /// Sorted starts and ends of the DWARF ranges of functions and inlined
    /// calls: where, inside a line-table row, the function may change.
    pub fn function_boundaries(&self) -> Vec<u64> {
        match self.lines.get_or_init(|| self.load_lines()).as_ref() {
            Some(lines) => lines.function_boundaries(),
            None => Vec::new(),
        }
    }

    /// Loads the debug information for [`ObjectFile::source_line`] now
    /// rather than at the first lookup: from another thread, while the
    /// caller does other work (decompressing and indexing a library's
    /// DWARF takes tens of milliseconds).
    pub fn load_lines_now(&self) {
        self.lines.get_or_init(|| self.load_lines());
    }

    /// The raw name of the innermost function (an inlined one if the
    /// address is in inlined code) holding `addr`, from DWARF.
    pub fn dwarf_function(&self, addr: u64) -> Option<String> {
        self.lines
            .get_or_init(|| self.load_lines())
            .as_ref()?
            .function(addr)
    }

    fn load_lines(&self) -> Option<LineTable> {
        if let Some(lines) = dwarf::load(&self.data) {
            return Some(lines);
        }
        let candidates = dwarf::debug_file_candidates(
            &self.path,
            self.build_id.as_deref(),
            self.debuglink.as_deref(),
        );
        for candidate in candidates {
            let Ok(data) = std::fs::read(&candidate) else {
                continue;
            };
            // A debug file of another build would give wrong lines.
            if let Some(id) = &self.build_id
                && build_id_of(&data).is_some_and(|other| &other != id)
            {
                continue;
            }
            if let Some(lines) = dwarf::load(&data) {
                return Some(lines);
            }
        }
        None
    }
}

/// The symbols of the separate debug file of a stripped file, if one of
/// the same build is installed.
fn debug_symbols(path: &Path, parsed: &Parsed) -> Option<Parsed> {
    let id = parsed.build_id.as_deref()?;
    for candidate in dwarf::debug_file_candidates(path, Some(id), parsed.debuglink.as_deref()) {
        let Ok(data) = std::fs::read(&candidate) else {
            continue;
        };
        if build_id_of(&data).as_deref() != Some(id) {
            continue;
        }
        let p = match data.get(EI_CLASS) {
            Some(&ELFCLASS32) => parse_elf::<elf::FileHeader32<Endianness>>(&data),
            Some(&ELFCLASS64) => parse_elf::<elf::FileHeader64<Endianness>>(&data),
            _ => continue,
        };
        if let Ok(p) = p
            && p.has_symtab
        {
            return Some(p);
        }
    }
    None
}

fn build_id_of(data: &[u8]) -> Option<Vec<u8>> {
    fn of<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> Option<Vec<u8>> {
        let file = ElfFile::<Elf>::parse(data).ok()?;
        file.build_id().ok()?.map(<[u8]>::to_vec)
    }
    match *data.get(EI_CLASS)? {
        ELFCLASS32 => of::<elf::FileHeader32<Endianness>>(data),
        ELFCLASS64 => of::<elf::FileHeader64<Endianness>>(data),
        _ => None,
    }
}

fn parse_elf<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> object::Result<Parsed> {
    let file = ElfFile::<Elf>::parse(data)?;
    let endian = file.endian();
    let sections = file.elf_section_table();

    let mut code = Vec::new();
    for (_, section) in sections.enumerate() {
        let flags = section.sh_flags(endian);
        if !flags.contains(elf::SHF_EXECINSTR)
            || !flags.contains(elf::SHF_ALLOC)
            || section.sh_type(endian) == elf::SHT_NOBITS
        {
            continue;
        }
        let start: u64 = section.sh_addr(endian).into();
        let size: u64 = section.sh_size(endian).into();
        let name = sections
            .section_name(endian, section)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_else(|_| "an unnamed section".to_owned());
        code.push(CodeRange {
            start,
            end: start.saturating_add(size),
            offset: section.sh_offset(endian).into(),
            name: format!("section {name}"),
        });
    }
    if sections.is_empty() {
        for segment in file.elf_program_headers() {
            if segment.p_type(endian) == elf::PT_LOAD && segment.p_flags(endian).contains(elf::PF_X)
            {
                let start: u64 = segment.p_vaddr(endian).into();
                let size: u64 = segment.p_filesz(endian).into();
                code.push(CodeRange {
                    start,
                    end: start.saturating_add(size),
                    offset: segment.p_offset(endian).into(),
                    name: format!("the segment at {start:#x}"),
                });
            }
        }
    }

    // Versions live with `.dynsym`; a `.symtab` entry gets the version of
    // the `.dynsym` entry with its name and address.
    let versions = sections.versions(endian, data).ok().flatten();
    let (dyn_functions, dyn_objects, _) =
        read_symbols(&file, file.elf_dynamic_symbol_table(), versions.as_ref())?;
    let (functions, objects, labels) = read_symbols(&file, file.elf_symbol_table(), None)?;
    let has_symtab = !functions.is_empty();
    let symtab = symtab::read(&file, file.elf_symbol_table())?;
    let symtab_strings = symtab::strings(&file, file.elf_symbol_table());
    let section_list = symtab::sections(&file)?;

    Ok(Parsed {
        machine: file.elf_header().e_machine(endian).0,
        symbols: merge(functions, dyn_functions),
        objects: merge(objects, dyn_objects),
        labels,
        code,
        symtab,
        symtab_strings,
        sections: section_list,
        little_endian: file.is_little_endian(),
        build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
        debuglink: file
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned()),
        has_symtab,
    })
}

/// Adds the `.dynsym` entries to the `.symtab` ones: those `.symtab` lacks
/// (a stripped file, or a partial `.symtab`), and the versions, which only
/// `.dynsym` has.
fn merge(mut symtab: Vec<RawSymbol>, dynsym: Vec<RawSymbol>) -> Vec<RawSymbol> {
    let mut versions = Vec::new();
    let mut extra = Vec::new();
    {
        let seen: HashMap<(&str, u64), usize> = symtab
            .iter()
            .enumerate()
            .map(|(i, s)| ((base_name(&s.name), s.address), i))
            .collect();
        for d in dynsym {
            match seen.get(&(d.name.as_str(), d.address)) {
                Some(&i) => versions.push((i, d.version)),
                None => extra.push(d),
            }
        }
    }
    for (i, version) in versions {
        if symtab[i].version.is_none() {
            symtab[i].version = version;
        }
    }
    symtab.extend(extra);
    symtab
}

/// The defined functions (`STT_FUNC`, `STT_GNU_IFUNC`), data objects
/// (`STT_OBJECT`) and code labels (`STT_NOTYPE` of default visibility in
/// an executable section, as perf takes them) of one symbol table.
type SymbolKinds = (Vec<RawSymbol>, Vec<RawSymbol>, Vec<RawSymbol>);

fn read_symbols<Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile<'_, Elf>,
    table: &object::read::elf::SymbolTable<'_, Elf>,
    versions: Option<&VersionTable<'_, Elf>>,
) -> object::Result<SymbolKinds> {
    let endian = file.endian();
    let sections: &SectionTable<'_, Elf> = file.elf_section_table();
    let mut functions = Vec::new();
    let mut objects = Vec::new();
    let mut labels = Vec::new();
    for (index, sym) in table.enumerate() {
        let kind = sym.st_type();
        let out = if kind == elf::STT_FUNC || kind == elf::STT_GNU_IFUNC {
            &mut functions
        } else if kind == elf::STT_OBJECT {
            &mut objects
        } else if kind == elf::STT_NOTYPE && sym.st_visibility() == elf::STV_DEFAULT {
            &mut labels
        } else {
            continue;
        };
        let Some(section) = table.symbol_section(endian, sym, index)? else {
            continue; // undefined, absolute or common
        };
        let name = table.symbol_name(endian, sym)?;
        if name.is_empty() {
            continue;
        }
        if kind == elf::STT_NOTYPE {
            // Assembler-local names and ARM/AArch64 mapping symbols
            // (`$x`, `$d`) mark no code of their own.
            let executable = sections
                .section(section)
                .is_ok_and(|s| s.sh_flags(endian).contains(elf::SHF_EXECINSTR));
            if !executable || name.starts_with(b".L") || name.starts_with(b"$") {
                continue;
            }
        }
        let name = String::from_utf8_lossy(name).into_owned();
        let binding = match sym.st_bind() {
            elf::STB_LOCAL => Binding::Local,
            elf::STB_WEAK => Binding::Weak,
            _ => Binding::Global,
        };
        let version = version_in_name(&name).or_else(|| {
            let versions = versions?;
            let index = versions.version_index(endian, index);
            let version = versions.version(index.index()).ok()??;
            Some(SymbolVersion {
                name: String::from_utf8_lossy(version.name()).into_owned(),
                hidden: index.is_hidden(),
            })
        });
        let section_end = sections.section(section).ok().and_then(|s| {
            s.sh_flags(endian).contains(elf::SHF_ALLOC).then(|| {
                let start: u64 = s.sh_addr(endian).into();
                start.saturating_add(s.sh_size(endian).into())
            })
        });
        out.push(RawSymbol {
            name,
            address: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            binding,
            version,
            section_end,
        });
    }
    Ok((functions, objects, labels))
}

fn base_name(name: &str) -> &str {
    match name.split_once('@') {
        Some((base, _)) if !base.is_empty() => base,
        _ => name,
    }
}

fn machine_name(machine: u16) -> String {
    let known = match machine {
        m if m == elf::EM_X86_64.0 => "x86-64",
        m if m == elf::EM_386.0 => "x86",
        m if m == elf::EM_AARCH64.0 => "aarch64",
        m if m == elf::EM_ARM.0 => "arm",
        m if m == elf::EM_RISCV.0 => "risc-v",
        m if m == elf::EM_PPC64.0 => "powerpc64",
        m if m == elf::EM_PPC.0 => "powerpc",
        m if m == elf::EM_S390.0 => "s390",
        m if m == elf::EM_MIPS.0 => "mips",
        m if m == elf::EM_LOONGARCH.0 => "loongarch",
        m if m == elf::EM_SPARCV9.0 => "sparc64",
        _ => return format!("ELF machine {machine}"),
    };
    known.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn object_file_can_be_shared_between_threads() {
        assert_send_sync::<ObjectFile>();
    }

    #[test]
    fn garbage_is_not_elf() {
        for data in [&b""[..], b"hello\n", b"\x7fEL"] {
            let err = ObjectFile::from_bytes("x", data.to_vec()).unwrap_err();
            assert!(matches!(err, SymbolsError::NotElf { .. }), "{err}");
        }
        let err = ObjectFile::from_bytes("x", b"\x7fELF\x09".to_vec()).unwrap_err();
        assert!(matches!(err, SymbolsError::Malformed { .. }), "{err}");
        assert!(
            err.to_string().starts_with("x: malformed ELF file"),
            "{err}"
        );
    }
}
