//! gprof's symbol and arc specifications (`-p NAME`, `-q FROM/TO`, …) and
//! what they select: a specification names routines by file, name or line;
//! a [`Selection`] marks the routines a report part includes, and
//! [`arc_filter`] the arcs the call graph keeps.

use super::{Routine, Selection, SymbolTable};

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

/// The routines that `include` names (all when it names none), less those
/// `exclude` names.
pub fn selection(table: &SymbolTable, include: &[SymSpec], exclude: &[SymSpec]) -> Selection {
    let mark = |specs: &[SymSpec]| -> Vec<bool> {
        table
            .routines
            .iter()
            .map(|r| specs.iter().any(|s| s.matches(r)))
            .collect()
    };
    Selection::new(mark(include), mark(exclude))
}

/// Which arcs the options keep, `keep(caller, callee)`: with `-q FROM/TO`
/// naming a caller that exists, only those arcs; else all but the `-k`
/// and `-Q FROM/TO` ones. The flag says whether any arc may be dropped.
pub fn arc_filter<'a>(
    table: &'a SymbolTable,
    specs: &'a Specs,
) -> (bool, impl Fn(usize, usize) -> bool + 'a) {
    let named = |specs: &[ArcSpec], p: usize, c: usize| {
        specs
            .iter()
            .any(|s| s.from.matches(&table.routines[p]) && s.to.matches(&table.routines[c]))
    };
    let any_include = specs
        .arcs_include
        .iter()
        .any(|s| table.routines.iter().any(|r| s.from.matches(r)));
    let filtering = any_include || !specs.arcs_exclude.is_empty();
    let keep = move |p: usize, c: usize| {
        if any_include {
            named(&specs.arcs_include, p, c)
        } else {
            !filtering || !named(&specs.arcs_exclude, p, c)
        }
    };
    (filtering, keep)
}
