//! Line-level routines (`-l`): one per run of code with the same function,
//! file and line, beside the function routines (kept for code without
//! debug information).
//!
//! GNU gprof asks the DWARF reader about every byte of `.text`, one by one;
//! here the line table is walked row by row, which gives the same runs.

use tally_symbols::ObjectFile;

use super::{Error, Options, Routine, SymbolTable, function_table_with_files};

/// The line routines and the function routines of `obj`, in one table.
pub fn line_table(
    obj: &ObjectFile,
    opts: &Options,
) -> Result<(SymbolTable, bool, Vec<String>), Error> {
    let (functions, discard, mut files) = function_table_with_files(obj, opts)?;
    let text = obj
        .section(".text")
        .ok_or_else(|| Error::Input(format!("{}: no .text section", obj.path().display())))?;
    let mut lines: Vec<Routine> = Vec::new();
    let mut prev: Option<(String, String, u32)> = None;
    // Every address where the (function, file, line) may change: each
    // row's start, and inside a row, each address where the function (an
    // inlined one, say) changes.
    // Code outside every DWARF function (gaps the compiler's ranges leave,
    // padding) takes the name of the nearest symbol before it, whatever its
    // size, as in BFD.
    let mut code_symbols: Vec<(u64, bool, &str)> = obj
        .symtab()
        .iter()
        .filter(|e| !e.is_debugging && matches!(e.class, 'T' | 't' | 'W' | 'i'))
        .map(|e| (e.address, e.is_local, e.name.as_str()))
        .collect();
    code_symbols.sort();
    let function = |a: u64| {
        obj.dwarf_function(a).or_else(|| {
            let i = code_symbols.partition_point(|s| s.0 <= a).checked_sub(1)?;
            // Of several names at one address, the first sorted (globals
            // sort before locals).
            let addr = code_symbols[i].0;
            let first = code_symbols.partition_point(|s| s.0 < addr);
            Some(code_symbols[first].2.to_owned())
        })
    };
    let boundaries = obj.function_boundaries();
    let mut points: Vec<(u64, String, u32, Option<String>)> = Vec::new();
    for (addr, len, file, line) in obj.line_rows(text.address, text.end()) {
        points.push((addr, file.clone(), line, function(addr)));
        let end = addr.saturating_add(len);
        let from = boundaries.partition_point(|&b| b <= addr);
        for &b in boundaries[from..].iter().take_while(|&&b| b < end) {
            points.push((b, file.clone(), line, function(b)));
        }
    }
    for (addr, file, line, name) in points {
        let Some(name) = name else {
            continue;
        };
        if let Some((pname, pfile, pline)) = &prev
            && *pline == line
            && *pname == name
            && *pfile == file
        {
            continue;
        }
        let is_static = match (&prev, lines.last()) {
            (Some((pname, pfile, _)), Some(last)) if *pfile == file && *pname == name => {
                last.is_static
            }
            _ => functions
                .lookup(addr)
                .is_some_and(|f| functions.routines[f].is_static),
        };
        if !files.contains(&file) {
            files.push(file.clone());
        }
        prev = Some((name.clone(), file.clone(), line));
        lines.push(Routine {
            name,
            display: String::new(),
            addr,
            end_addr: 0,
            is_static,
            is_func: false,
            file: Some(file.as_str().into()),
            line,
        });
    }
    // Function routines keep the ends their own table gave them, as in
    // gprof, where they are copied in after being finalized.
    lines.extend(functions.routines);
    Ok((SymbolTable::finalize(lines, text.end()), discard, files))
}
