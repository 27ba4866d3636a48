//! gprof's analysis of gmon data: the routine table (`-l`: line routines
//! too), histogram samples assigned to routines, arcs mapped to routines
//! (`-c`: with the calls found in the code), warnings when the profile
//! looks like another program's, then gprof's propagation, into the one
//! [`Report`].

use tally_formats::gmon::{Gmon, Layout};
use tally_symbols::{InstrKind, ObjectFile};

use super::{
    AssembleOptions, Costs, DEFAULT_EXCLUDED, Error, Graph, Histogram, Notice, Options, Report,
    Samples, SymSpec, SymbolTable, arc_filter, assemble, assign_samples, display_name,
    function_table_with_files, lines, selection,
};

/// The layout of the gmon files of `obj`.
pub fn layout_of(obj: &ObjectFile) -> Layout {
    Layout::from_elf_class(obj.is_64_bit(), obj.is_little_endian())
}

/// Builds the report from a program and its (merged) gmon data.
pub fn analyse(obj: &ObjectFile, gmon: &Gmon, opts: &Options) -> Result<Report, Error> {
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

    let (_, keep_arc) = arc_filter(&table, specs);
    let mut graph = Graph::new(n);
    let mut dropped = 0u64;
    for arc in &gmon.arcs {
        let kept = graph.tally(&table, arc.from_pc, arc.self_pc, arc.count, &keep_arc);
        if !kept && table.lookup(arc.self_pc).is_none() {
            dropped += 1;
        }
    }
    drop(keep_arc);
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
                && let Some(file) = r.file.as_deref()
            {
                let f = if opts.print_path {
                    file
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
        table,
        display_names: Some(display),
        ncalls,
        graph: cg,
        flat_selection,
        source_files,
        notices,
        costs: Costs::Samples(Histogram {
            program: obj.path().to_path_buf(),
            times,
            hz,
            dimension,
            abbrev,
            sampled_arcs: gmon.sampled,
        }),
        measured: None,
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
/// call instruction must end there (not in a gmon.out made from sampled
/// stacks, `tally record`'s, whose callee addresses are sampled ones).
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
    if (obj.is_x86_64() || obj.machine() == "x86") && !gmon.sampled {
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
