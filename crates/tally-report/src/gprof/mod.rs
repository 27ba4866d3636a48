//! `tally gprof`: gprof's flat profile and call graph from a program and its
//! gmon files, in GNU gprof's layout (text) or as JSON.
//!
//! The symbol table is built from the program's `.symtab` by GNU gprof's
//! rules (which symbols count as routines, which of several names at one
//! address wins), because every number in the report depends on it: a
//! histogram bin belongs to the routine whose range holds it, and a call
//! from an address outside every routine makes its callee `<spontaneous>`.

pub mod callgrind;
pub mod convert;
pub mod json;
pub mod lines;
pub mod source;
pub mod text;

use std::path::{Path, PathBuf};

use tally_analysis::gprof::{
    AssembleOptions, CallGraph, Graph, Routine, Samples, Selection, SelfTimes, SymbolTable,
    assemble, assign_samples,
};
use tally_formats::gmon::{Gmon, Layout};
use tally_symbols::{InstrKind, ObjectFile};

use crate::ReportError;

/// Routines excluded from time propagation and from the call graph by
/// default, as GNU gprof does: the profiling runtime's own functions.
pub const DEFAULT_EXCLUDED: &[&str] = &[
    "_gprof_mcount",
    "mcount",
    "_mcount",
    "__mcount",
    "__mcount_internal",
    "__mcleanup",
    "<locore>",
    "<hicore>",
];

/// A symbol specification, `FILE:FUNCTION`, `FILE:LINE`, `FUNCTION`, `FILE`
/// (with a dot) or `LINE` (digits), as gprof's options take them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymSpec {
    /// Source file, compared with the routine's file name without folders.
    pub file: Option<String>,
    /// Raw symbol name.
    pub name: Option<String>,
    /// Source line.
    pub line: Option<u32>,
}

impl SymSpec {
    /// Parses one specification.
    pub fn parse(spec: &str) -> SymSpec {
        let mut out = SymSpec::default();
        let name_or_line = |s: &str, out: &mut SymSpec| {
            if s.starts_with(|c: char| c.is_ascii_digit()) {
                let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
                out.line = digits.parse().ok();
            } else if !s.is_empty() {
                out.name = Some(s.to_owned());
            }
        };
        if let Some((file, rest)) = spec.rsplit_once(':') {
            if !file.is_empty() {
                out.file = Some(file.to_owned());
            }
            name_or_line(rest, &mut out);
        } else if spec.contains('.') {
            out.file = Some(spec.to_owned());
        } else {
            name_or_line(spec, &mut out);
        }
        out
    }

    /// Whether the specification names routine `r`.
    pub fn matches(&self, r: &Routine) -> bool {
        if let Some(file) = &self.file {
            let base = r.file.as_deref().map(|f| f.rsplit('/').next().unwrap_or(f));
            if base != Some(file.as_str()) {
                return false;
            }
        }
        if let Some(line) = self.line
            && line != r.line
        {
            return false;
        }
        if let Some(name) = &self.name
            && *name != r.name
        {
            return false;
        }
        true
    }
}

/// An arc specification `FROM/TO` (`-k`, `-q FROM/TO`, `-Q FROM/TO`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArcSpec {
    /// The callers.
    pub from: SymSpec,
    /// The callees.
    pub to: SymSpec,
}

impl ArcSpec {
    /// Parses `FROM/TO`; `None` without a slash.
    pub fn parse(spec: &str) -> Option<ArcSpec> {
        let (from, to) = spec.split_once('/')?;
        Some(ArcSpec {
            from: SymSpec::parse(from),
            to: SymSpec::parse(to),
        })
    }
}

/// Symbol selections, as gprof's options build them.
#[derive(Debug, Clone, Default)]
pub struct Specs {
    /// `-p NAME`: only these in the flat profile.
    pub flat_include: Vec<SymSpec>,
    /// `-P NAME`: not these in the flat profile.
    pub flat_exclude: Vec<SymSpec>,
    /// `-q NAME`, `-f`, `-F`: only these (and their descendants) in the call
    /// graph.
    pub graph_include: Vec<SymSpec>,
    /// `-Q NAME`, `-e`, `-E`: not these in the call graph.
    pub graph_exclude: Vec<SymSpec>,
    /// `-n NAME`, `-F`: only these pass time to their callers.
    pub time_include: Vec<SymSpec>,
    /// `-N NAME`, `-E`: these pass no time to their callers.
    pub time_exclude: Vec<SymSpec>,
    /// `-q FROM/TO`: only these arcs.
    pub arcs_include: Vec<ArcSpec>,
    /// `-k FROM/TO`, `-Q FROM/TO`: not these arcs.
    pub arcs_exclude: Vec<ArcSpec>,
    /// `-A NAME`: only these in the annotated source.
    pub anno_include: Vec<SymSpec>,
    /// `-J NAME`: not these in the annotated source.
    pub anno_exclude: Vec<SymSpec>,
}

/// Report options.
#[derive(Debug, Clone)]
pub struct Options {
    /// `-b`: no explanations.
    pub brief: bool,
    /// Print the flat profile.
    pub flat: bool,
    /// Print the call graph (and its index).
    pub graph: bool,
    /// `-a`: leave static functions out.
    pub no_static: bool,
    /// `-z`: show routines that were never called and took no time.
    pub zeros: bool,
    /// `-c`: add the calls found in the code (count 0).
    pub static_calls: bool,
    /// Reproduce GNU gprof 2.40's results where they are wrong, to compare
    /// with its output: `-c` finds calls by scanning for the call opcode
    /// byte by byte with the displacement read unsigned (so on 64-bit
    /// programs only forward calls are found), and static names with a
    /// numeric suffix are checked on into the string table (see
    /// `routine_class`).
    pub gnu_compatible: bool,
    /// Demangle C++ and Rust names (gprof's default).
    pub demangle: bool,
    /// `-l`: one routine per source line.
    pub line: bool,
    /// `-L`: full source paths.
    pub print_path: bool,
    /// `-D`: only symbols marked as functions.
    pub functions_only: bool,
    /// `-w`: width of the index.
    pub width: usize,
    /// The selections.
    pub specs: Specs,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            brief: false,
            flat: true,
            graph: true,
            no_static: false,
            zeros: false,
            static_calls: false,
            gnu_compatible: false,
            demangle: true,
            line: false,
            print_path: false,
            functions_only: false,
            width: 80,
            specs: Specs::default(),
        }
    }
}

/// A warning about the input, printed to standard error by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice(pub String);

/// Everything the text and JSON writers print.
#[derive(Debug, Clone)]
pub struct Report {
    /// The program.
    pub program: PathBuf,
    /// The routines.
    pub table: SymbolTable,
    /// Self times.
    pub times: SelfTimes,
    /// Calls into every routine (self calls taken out when there is a
    /// call graph).
    pub ncalls: Vec<u64>,
    /// The call graph, if the profile has arcs.
    pub graph: Option<CallGraph>,
    /// Samples per second.
    pub hz: f64,
    /// The unit of the histogram (`seconds`).
    pub dimension: String,
    /// Its abbreviation (`s`).
    pub abbrev: char,
    /// Which routines the flat profile shows.
    pub flat_selection: Selection,
    /// Names as printed, per routine.
    pub display: Vec<String>,
    /// Source files in the order the symbol table first names them.
    pub source_files: Vec<String>,
    /// Warnings.
    pub notices: Vec<Notice>,
}

/// Why the routine table could not be built.
fn no_symbols(program: &Path) -> ReportError {
    ReportError::Input(format!(
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
pub fn function_table(
    obj: &ObjectFile,
    opts: &Options,
) -> Result<(SymbolTable, bool), ReportError> {
    function_table_with_files(obj, opts).map(|(t, d, _)| (t, d))
}

/// [`function_table`], with the source files in the order the symbol table
/// first names them (gprof lists annotated sources in reverse of it).
pub fn function_table_with_files(
    obj: &ObjectFile,
    opts: &Options,
) -> Result<(SymbolTable, bool, Vec<String>), ReportError> {
    let mut files: Vec<String> = Vec::new();
    let text = obj
        .section(".text")
        .ok_or_else(|| ReportError::Input(format!("{}: no .text section", obj.path().display())))?;
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
            file,
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

pub(crate) fn selection(
    table: &SymbolTable,
    include: &[SymSpec],
    exclude: &[SymSpec],
) -> Selection {
    let mark = |specs: &[SymSpec]| -> Vec<bool> {
        table
            .routines
            .iter()
            .map(|r| specs.iter().any(|s| s.matches(r)))
            .collect()
    };
    Selection::new(mark(include), mark(exclude))
}

/// The layout of the gmon files of `obj`.
pub fn layout_of(obj: &ObjectFile) -> Layout {
    Layout::from_elf_class(obj.is_64_bit(), obj.is_little_endian())
}

/// Builds the report from a program and its (merged) gmon data.
pub fn analyse(obj: &ObjectFile, gmon: &Gmon, opts: &Options) -> Result<Report, ReportError> {
    let (table, discard, source_files) = if opts.line {
        lines::line_table(obj, opts)?
    } else {
        function_table_with_files(obj, opts)?
    };
    let n = table.len();
    let specs = &opts.specs;

    let default_excluded: Vec<SymSpec> = DEFAULT_EXCLUDED
        .iter()
        .map(|s| SymSpec {
            name: Some((*s).to_owned()),
            ..SymSpec::default()
        })
        .collect();
    let mut flat_exclude = specs.flat_exclude.clone();
    if opts.line {
        flat_exclude.extend(default_excluded.iter().cloned());
    }
    let flat_selection = selection(&table, &specs.flat_include, &flat_exclude);
    let mut graph_exclude = specs.graph_exclude.clone();
    graph_exclude.extend(default_excluded.iter().cloned());
    let mut time_exclude = specs.time_exclude.clone();
    time_exclude.extend(default_excluded.iter().cloned());
    let graph_selection = selection(&table, &specs.graph_include, &graph_exclude);
    let time_selection = selection(&table, &specs.time_include, &time_exclude);

    let mut notices = Vec::new();
    let hists: Vec<Samples<'_>> = gmon
        .histograms
        .iter()
        .map(|h| Samples {
            low_pc: h.low_pc,
            high_pc: h.high_pc,
            bins: &h.bins,
        })
        .collect();
    let times = assign_samples(&table, &hists, |i| flat_selection.selects(i));
    let (hz, dimension, abbrev) = match gmon.histograms.first() {
        Some(h) => (
            f64::from(h.prof_rate.max(1)),
            h.dimension.clone(),
            h.dimension_abbrev,
        ),
        None => (100.0, "seconds".to_owned(), 's'),
    };

    let arc_selected = |specs: &[ArcSpec], p: usize, c: usize| {
        specs
            .iter()
            .any(|s| s.from.matches(&table.routines[p]) && s.to.matches(&table.routines[c]))
    };
    let any_include = specs
        .arcs_include
        .iter()
        .any(|s| table.routines.iter().any(|r| s.from.matches(r)));
    let mut graph = Graph::new(n);
    let mut dropped = 0u64;
    for arc in &gmon.arcs {
        let kept = graph.tally(&table, arc.from_pc, arc.self_pc, arc.count, |p, c| {
            if any_include {
                arc_selected(&specs.arcs_include, p, c)
            } else {
                !arc_selected(&specs.arcs_exclude, p, c)
            }
        });
        if !kept && table.lookup(arc.self_pc).is_none() {
            dropped += 1;
        }
    }
    notices.extend(foreign_profile(obj, gmon));
    if dropped > 0 {
        notices.push(Notice(format!(
            "{dropped} call arc(s) of the profile call addresses outside every function of {} (is the profile from another program?)",
            obj.path().display()
        )));
    }

    let display: Vec<String> = table
        .routines
        .iter()
        .map(|r| {
            let mut d = display_name(&r.name, discard, opts.demangle);
            if opts.line
                && let Some(file) = &r.file
            {
                let f = if opts.print_path {
                    file.as_str()
                } else {
                    file.rsplit('/').next().unwrap_or(file)
                };
                d.push_str(&format!(" ({f}:{} @ {:x})", r.line, r.addr));
            }
            d
        })
        .collect();

    let has_cg = !gmon.arcs.is_empty();
    let mut ncalls = graph.ncalls.clone();
    let cg = if has_cg {
        let static_arcs = if opts.static_calls {
            static_arcs(obj, &table, &hists, opts.gnu_compatible, &mut notices)
        } else {
            Vec::new()
        };
        let names: Vec<&str> = table.routines.iter().map(|r| r.name.as_str()).collect();
        let cg = assemble(
            graph,
            &times.time,
            &names,
            &AssembleOptions {
                graph: graph_selection,
                time: time_selection,
                static_arcs,
            },
        );
        ncalls = cg.ncalls[..n].to_vec();
        Some(cg)
    } else {
        None
    };

    Ok(Report {
        program: obj.path().to_path_buf(),
        table,
        times,
        ncalls,
        graph: cg,
        hz,
        dimension,
        abbrev,
        flat_selection,
        display,
        source_files,
        notices,
    })
}

/// The direct calls in the code of every routine (`-c`), in address order.
/// Instructions are decoded (GNU gprof scans for call opcodes byte by byte,
/// which can also match inside other instructions); only calls to the
/// first address of a routine inside a histogram's range count, as in gprof.
fn static_arcs(
    obj: &ObjectFile,
    table: &SymbolTable,
    hists: &[Samples<'_>],
    gnu: bool,
    notices: &mut Vec<Notice>,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    if !obj.is_x86_64() && obj.machine() != "x86" {
        notices.push(Notice(format!(
            "-c is not supported for {} code",
            obj.machine()
        )));
        return out;
    }
    let in_hist = |a: u64| hists.iter().any(|h| h.low_pc <= a && a < h.high_pc);
    for (p, r) in table.routines.iter().enumerate() {
        let high = table
            .routines
            .get(p + 1)
            .map(|n| n.addr)
            .unwrap_or(r.end_addr.wrapping_add(1));
        // Clip to the histogram that covers the routine.
        let Some(h) = hists
            .iter()
            .find(|h| h.low_pc.max(r.addr) < h.high_pc.min(high))
        else {
            continue;
        };
        let (lo, hi) = (h.low_pc.max(r.addr), h.high_pc.min(high));
        if gnu {
            gnu_scan(obj, table, hists, p, lo, hi, &mut out);
            continue;
        }
        let Ok(insns) = obj.disassemble(lo, hi) else {
            continue;
        };
        for insn in insns {
            if insn.kind != InstrKind::Call || insn.bytes.first() != Some(&0xe8) {
                continue;
            }
            let Some(target) = insn.branch_target else {
                continue;
            };
            if !in_hist(target) {
                continue;
            }
            if let Some(c) = table.lookup(target)
                && table.routines[c].addr == target
            {
                out.push((p, c));
            }
        }
    }
    out
}

/// GNU gprof's x86 scan: every `0xe8` byte starts a call whose 32-bit
/// displacement is read unsigned; a target inside the histogram that starts
/// a routine makes an arc, and the scan skips the call's operand.
fn gnu_scan(
    obj: &ObjectFile,
    table: &SymbolTable,
    hists: &[Samples<'_>],
    parent: usize,
    lo: u64,
    hi: u64,
    out: &mut Vec<(usize, usize)>,
) {
    let (Some(s_low), Some(s_high)) = (
        hists.iter().map(|h| h.low_pc).min(),
        hists.iter().map(|h| h.high_pc).max(),
    ) else {
        return;
    };
    // The operand may run past `hi`: read up to 4 bytes further.
    let Some(bytes) = obj.code_bytes(lo, hi.saturating_add(4)) else {
        return;
    };
    let len = (hi - lo) as usize;
    let mut i = 0;
    while i < len.min(bytes.len()) {
        if bytes[i] == 0xe8
            && let Some(d) = bytes.get(i + 1..i + 5)
        {
            let disp = u64::from(u32::from_le_bytes([d[0], d[1], d[2], d[3]]));
            let pc = lo + i as u64;
            let dest = disp.wrapping_add(pc).wrapping_add(5);
            if dest >= s_low
                && dest <= s_high
                && let Some(c) = table.lookup(dest)
                && table.routines[c].addr == dest
            {
                out.push((parent, c));
                i += 5;
                continue;
            }
        }
        i += 1;
    }
}

/// Signs that a gmon file belongs to another program. gprof never checks
/// and prints a report of nonsense; tally warns. Two checks: the histogram
/// of a glibc profile ends at `etext` rounded up to 4 bytes, and on x86 each
/// arc's callee address is the return address of the `mcount` call, so a
/// call instruction must end there.
fn foreign_profile(obj: &ObjectFile, gmon: &Gmon) -> Vec<Notice> {
    let mut out = Vec::new();
    let program = obj.path().display();
    if let (Some(h), Some(etext)) = (
        gmon.histograms.first(),
        obj.symtab().iter().find(|e| e.name == "etext"),
    ) {
        let expected = etext.address.div_ceil(4) * 4;
        if h.high_pc.abs_diff(expected) > 16 {
            out.push(Notice(format!(
                "the histogram covers {:#x}..{:#x} but the code of {program} ends at {:#x}: is the profile from another program?",
                h.low_pc, h.high_pc, etext.address
            )));
        }
    }
    if obj.is_x86_64() || obj.machine() == "x86" {
        let returns_from_call = |pc: u64| {
            let direct = pc
                .checked_sub(5)
                .and_then(|a| obj.code_bytes(a, pc))
                .is_some_and(|b| b.first() == Some(&0xe8));
            let indirect = pc
                .checked_sub(6)
                .and_then(|a| obj.code_bytes(a, pc))
                .is_some_and(|b| b.starts_with(&[0xff, 0x15]));
            direct || indirect
        };
        let bad = gmon
            .arcs
            .iter()
            .filter(|a| !returns_from_call(a.self_pc))
            .count();
        if bad > 0 {
            out.push(Notice(format!(
                "{bad} of {} call arcs do not come back to a call instruction in {program}: is the profile from another program?",
                gmon.arcs.len()
            )));
        }
    }
    out
}
