//! The routine table of a program by GNU gprof's rules: which `.symtab`
//! entries count as routines (code and weak symbols; statics with plausible
//! names), with their source positions from DWARF, and the names gprof
//! prints for them.

use std::path::Path;

use tally_symbols::ObjectFile;

use super::{Error, Options, Routine, SymbolTable};

/// Why the routine table could not be built.
fn no_symbols(program: &Path) -> Error {
    Error::Input(format!(
        "{}: no symbols (is it stripped?); gprof needs the symbol table to map addresses to functions",
        program.display()
    ))
}

/// gprof's test for a symbol that may be a routine: code or weak symbols,
/// statics only with plausible names (no `$`, and only numeric or
/// `.clone.N`/`.constprop.N` suffixes after a dot). Returns whether the
/// routine is static.
///
/// GNU gprof's scan of a name ending in such a suffix runs past the name's
/// end into the next names of the string table, and rejects the symbol if
/// one of those fails the test (so `fill.constprop.0` disappears when the
/// next string is `crtstuff.c`). `strings` is that table in GNU-compatible
/// mode; otherwise only the name is looked at.
fn routine_class(
    e: &tally_symbols::SymtabEntry,
    strings: Option<&[u8]>,
    opts: &Options,
) -> Option<bool> {
    if e.is_debugging {
        return None;
    }
    if opts.no_static && e.is_local {
        return None;
    }
    match e.class {
        'T' | 'W' => return Some(false),
        't' => {}
        _ => return None,
    }
    if e.name.is_empty() {
        return None;
    }
    let name: &[u8] = match strings {
        Some(table) => table.get(e.name_offset as usize..).unwrap_or(b""),
        None => e.name.as_bytes(),
    };
    // A byte past the end reads as NUL, like the terminator.
    let at = |i: usize| name.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while at(i) != 0 {
        if at(i) == b'$' {
            return None;
        }
        while at(i) == b'.' {
            let rest = &name[i..];
            let rest = &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())];
            if rest.len() > b".clone.".len() && rest.starts_with(b".clone.") {
                i += b".clone.".len() - 1;
            } else if rest.len() > b".constprop.".len() && rest.starts_with(b".constprop.") {
                i += b".constprop.".len() - 1;
            }
            let mut digit_seen = false;
            i += 1;
            while at(i) != 0 {
                if digit_seen && at(i) == b'.' {
                    break;
                }
                if at(i).is_ascii_digit() {
                    digit_seen = true;
                } else {
                    return None;
                }
                i += 1;
            }
        }
        i += 1;
        if strings.is_none() && i >= name.len() {
            break;
        }
    }
    if e.name.starts_with("__gnu_compiled") || e.name.starts_with("___gnu_compiled") {
        return None;
    }
    if opts.functions_only && !e.is_function {
        return None;
    }
    Some(true)
}

/// The routines of `obj` by gprof's rules, with their source positions.
/// Returns the table and whether leading underscores are to be dropped
/// from printed names (only where no plain `main` exists).
pub fn function_table(obj: &ObjectFile, opts: &Options) -> Result<(SymbolTable, bool), Error> {
    function_table_with_files(obj, opts).map(|(t, d, _)| (t, d))
}

/// [`function_table`], with the source files in the order the symbol table
/// first names them (gprof lists annotated sources in reverse of it).
pub fn function_table_with_files(
    obj: &ObjectFile,
    opts: &Options,
) -> Result<(SymbolTable, bool, Vec<String>), Error> {
    let mut files: Vec<String> = Vec::new();
    let text = obj
        .section(".text")
        .ok_or_else(|| Error::Input(format!("{}: no .text section", obj.path().display())))?;
    let mut raw = Vec::new();
    let mut discard_underscores = true;
    let strings = opts.gnu_compatible.then(|| obj.symtab_strings());
    for e in obj.symtab() {
        let Some(is_static) = routine_class(e, strings, opts) else {
            continue;
        };
        if e.name == "main" {
            discard_underscores = false;
        }
        let (file, line) = match obj.source_line(e.address) {
            Some((f, l)) => {
                if !files.contains(&f) {
                    files.push(f.clone());
                }
                (Some(f), l)
            }
            None => (None, 0),
        };
        raw.push(Routine {
            name: e.name.clone(),
            display: String::new(),
            addr: e.address,
            end_addr: 0,
            is_static,
            is_func: e.is_function,
            file: file.map(|f| f.as_str().into()),
            line,
        });
    }
    if raw.is_empty() {
        return Err(no_symbols(obj.path()));
    }
    Ok((
        SymbolTable::finalize(raw, text.end()),
        discard_underscores,
        files,
    ))
}

/// The name gprof prints for a routine: one leading underscore dropped on
/// systems that prefix names, demangled if asked.
pub fn display_name(name: &str, discard_underscores: bool, demangle: bool) -> String {
    let mut n = name;
    if discard_underscores && n.len() > 1 && n.starts_with('_') {
        n = &n[1..];
    }
    if demangle && let Some(d) = ObjectFile::demangle(n) {
        return d;
    }
    n.to_owned()
}
