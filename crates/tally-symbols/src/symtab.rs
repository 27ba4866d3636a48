//! The raw `.symtab` entries and the section list, for tools (gprof) that
//! choose their functions by rules of their own.

use object::read::elf::{ElfFile, FileHeader, SectionHeader, SectionTable, Sym};
use object::{Endianness, elf};

/// One named entry of `.symtab`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymtabEntry {
    /// The raw (mangled) name.
    pub name: String,
    /// `st_value`: the address for defined symbols of executables.
    pub address: u64,
    /// `st_size`.
    pub size: u64,
    /// The class letter `nm` prints: `T`/`t` code, `D`/`d` data, `B`/`b`
    /// zero-filled data, `R`/`r` read-only data, `W`/`V` weak, `U`/`w`/`v`
    /// undefined, `A`/`a` absolute, `C` common, `i` indirect function,
    /// `u` unique global, `N`/`n` other. Lower case is local.
    pub class: char,
    /// `STT_FUNC` or `STT_GNU_IFUNC`: marked as a function by the compiler.
    pub is_function: bool,
    /// `STB_LOCAL`.
    pub is_local: bool,
    /// `STT_FILE` or `STT_SECTION`: names of files and sections, never code.
    pub is_debugging: bool,
    /// Offset of the name in the string table ([`crate::ObjectFile::symtab_strings`]).
    pub name_offset: u32,
}

/// A section of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Its name, e.g. `.text`.
    pub name: String,
    /// Its address when loaded (0 if not loaded).
    pub address: u64,
    /// Its size in bytes.
    pub size: u64,
    /// `SHF_EXECINSTR`.
    pub executable: bool,
}

impl Section {
    /// The first address past the section.
    pub fn end(&self) -> u64 {
        self.address.saturating_add(self.size)
    }
}

pub(crate) fn sections<Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile<'_, Elf>,
) -> object::Result<Vec<Section>> {
    let endian = file.endian();
    let table = file.elf_section_table();
    let mut out = Vec::new();
    for (_, section) in table.enumerate() {
        let name = table
            .section_name(endian, section)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        out.push(Section {
            name,
            address: section.sh_addr(endian).into(),
            size: section.sh_size(endian).into(),
            executable: section.sh_flags(endian).contains(elf::SHF_EXECINSTR),
        });
    }
    Ok(out)
}

/// The bytes of the string table of `.symtab`.
pub(crate) fn strings<Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile<'_, Elf>,
    table: &object::read::elf::SymbolTable<'_, Elf>,
) -> Vec<u8> {
    let endian = file.endian();
    file.elf_section_table()
        .section(table.string_section())
        .ok()
        .and_then(|s| s.data(endian, file.data()).ok())
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

pub(crate) fn read<Elf: FileHeader<Endian = Endianness>>(
    file: &ElfFile<'_, Elf>,
    table: &object::read::elf::SymbolTable<'_, Elf>,
) -> object::Result<Vec<SymtabEntry>> {
    let endian = file.endian();
    let sections: &SectionTable<'_, Elf> = file.elf_section_table();
    let mut out = Vec::new();
    for (index, sym) in table.enumerate() {
        let name = table.symbol_name(endian, sym)?;
        if name.is_empty() {
            continue;
        }
        let kind = sym.st_type();
        let bind = sym.st_bind();
        let local = bind == elf::STB_LOCAL;
        let shndx = sym.st_shndx(endian);
        let case = |c: char| if local { c.to_ascii_lowercase() } else { c };
        let class = if shndx == elf::SHN_UNDEF {
            match (bind == elf::STB_WEAK, kind == elf::STT_OBJECT) {
                (true, true) => 'v',
                (true, false) => 'w',
                _ => 'U',
            }
        } else if shndx == elf::SHN_COMMON {
            'C'
        } else if bind == elf::STB_GNU_UNIQUE {
            'u'
        } else if kind == elf::STT_GNU_IFUNC {
            'i'
        } else if bind == elf::STB_WEAK {
            if kind == elf::STT_OBJECT { 'V' } else { 'W' }
        } else if shndx == elf::SHN_ABS {
            case('A')
        } else {
            match table
                .symbol_section(endian, sym, index)
                .ok()
                .flatten()
                .and_then(|i| sections.section(i).ok())
            {
                Some(s) => {
                    let flags = s.sh_flags(endian);
                    if flags.contains(elf::SHF_EXECINSTR) {
                        case('T')
                    } else if !flags.contains(elf::SHF_ALLOC) {
                        case('N')
                    } else if s.sh_type(endian) == elf::SHT_NOBITS {
                        case('B')
                    } else if flags.contains(elf::SHF_WRITE) {
                        case('D')
                    } else {
                        case('R')
                    }
                }
                None => case('N'),
            }
        };
        out.push(SymtabEntry {
            name: String::from_utf8_lossy(name).into_owned(),
            address: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            class,
            is_function: kind == elf::STT_FUNC || kind == elf::STT_GNU_IFUNC,
            is_local: local,
            is_debugging: kind == elf::STT_FILE || kind == elf::STT_SECTION,
            name_offset: sym.st_name(endian),
        });
    }
    Ok(out)
}
