//! Whether a program keeps frame pointers, which decides
//! `--call-graph auto`; the DWARF unwinder itself is tally-symbols'
//! ([`tally_symbols::unwind`]), shared with the perf.data reader.

use object::{Object, ObjectSection};
pub use tally_symbols::unwind::{CONTEXT_USER, Unwinders, UserStack};

/// Whether most functions of the program at `path` set up a frame pointer
/// (`push %rbp; mov %rsp,%rbp` first, after an `endbr64`): then the
/// kernel's frame-pointer call chains are whole.
pub fn keeps_frame_pointers(path: &std::path::Path) -> bool {
    use object::ObjectSymbol;
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*data) else {
        return false;
    };
    let Some(text) = file.section_by_name(".text") else {
        return false;
    };
    let Ok(code) = text.data() else {
        return false;
    };
    let (mut with, mut all) = (0usize, 0usize);
    for sym in file.symbols() {
        if sym.kind() != object::SymbolKind::Text
            || sym.section_index() != Some(text.index())
            || sym.size() < 8
        {
            continue;
        }
        let Some(at) = sym
            .address()
            .checked_sub(text.address())
            .and_then(|a| usize::try_from(a).ok())
        else {
            continue;
        };
        let Some(mut bytes) = code.get(at..) else {
            continue;
        };
        if bytes.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            bytes = &bytes[4..];
        }
        all += 1;
        if bytes.starts_with(&[0x55, 0x48, 0x89, 0xe5]) {
            with += 1;
        }
    }
    all > 0 && 2 * with > all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_elf_programs_keep_frame_pointers() {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        assert!(!keeps_frame_pointers(std::path::Path::new(manifest)));
        assert!(!keeps_frame_pointers(std::path::Path::new(
            "/nonexistent/prog"
        )));
    }
}
