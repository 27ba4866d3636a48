//! The annotate report as aligned text: header, program totals, the
//! function tables (with call trees) and jumps. The source and assembly
//! sections follow, written by `source` and `asm`.

use super::Analysis;
use super::table::{Page, RULE, Table, cells, shown_labels};
use crate::format::{Style, cell};
use std::io::{self, Write};
use tally_analysis::RowKey;
use tally_model::{Cost, FunctionId};

/// Writes the sections before the source and assembly annotations.
pub(super) fn write<C: Cost>(a: &Analysis<'_, C>, page: &mut Page<'_>) -> io::Result<()> {
    let (out, style, warnings) = (&mut *page.out, page.style, &mut *page.warnings);
    header(a, out)?;
    totals(a, out, style)?;
    if a.opts.grouping.files() {
        file_function_table(a, out, style)?;
    }
    if a.opts.grouping.functions() {
        function_file_table(a, out, style)?;
    }
    cycles(a, out, style)?;
    if let Some(n) = a.opts.jumps {
        jumps(a, out, n, style, warnings)?;
    }
    Ok(())
}

fn header<C: Cost>(a: &Analysis<'_, C>, out: &mut dyn Write) -> io::Result<()> {
    let p = a.profile;
    let o = a.opts;
    writeln!(out, "{RULE}")?;
    let inputs: Vec<String> = o.inputs.iter().map(|p| p.display().to_string()).collect();
    let creator = p
        .creator
        .as_ref()
        .map(|c| format!(" (creator: {})", String::from_utf8_lossy(c)))
        .unwrap_or_default();
    writeln!(out, "Profile data:     {}{creator}", inputs.join(", "))?;
    writeln!(out, "{RULE}")?;
    let mut cmds: Vec<String> = Vec::new();
    let mut descs: Vec<String> = Vec::new();
    for (i, part) in p.parts.iter().enumerate() {
        if !a.chosen[i] {
            continue;
        }
        if let Some(c) = &part.info.cmd {
            let c = String::from_utf8_lossy(c).trim().to_string();
            if !cmds.contains(&c) {
                cmds.push(c);
            }
        }
        for (k, v) in &part.info.desc {
            let d = format!(
                "{}: {}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v).trim()
            );
            if !descs.contains(&d) {
                descs.push(d);
            }
        }
    }
    for c in &cmds {
        writeln!(out, "Command:          {c}")?;
    }
    for d in &descs {
        writeln!(out, "Description:      {d}")?;
    }
    writeln!(out, "Parts:            {}", parts_text(a))?;
    let rec: Vec<&str> = p
        .events
        .recorded()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    writeln!(out, "Events recorded:  {}", rec.join(" "))?;
    for d in p.events.derived() {
        writeln!(out, "Event derived:    {} = {}", d.name, d.formula())?;
    }
    let shown: Vec<&str> = a
        .shown
        .iter()
        .map(|&e| a.events.names()[e].as_str())
        .collect();
    writeln!(out, "Events shown:     {}", shown.join(" "))?;
    let sort: Vec<&str> = a
        .sort
        .iter()
        .map(|&(e, _)| a.events.names()[e].as_str())
        .collect();
    writeln!(out, "Event sort order: {}", sort.join(" "))?;
    let th: Vec<String> = a.sort.iter().map(|s| format!("{}", s.1)).collect();
    writeln!(out, "Thresholds:       {}", th.join(" "))?;
    writeln!(
        out,
        "Inclusive:        {}",
        if o.inclusive { "yes" } else { "no" }
    )?;
    let inc: Vec<String> = o.include.iter().map(|p| p.display().to_string()).collect();
    writeln!(out, "Include dirs:     {}", inc.join(" "))?;
    let user: Vec<String> = o.files.iter().map(|p| p.display().to_string()).collect();
    writeln!(out, "User annotated:   {}", user.join(" "))?;
    writeln!(
        out,
        "Auto-annotation:  {}",
        if o.auto { "on" } else { "off" }
    )?;
    writeln!(out)
}

/// Which parts were summed, in words.
pub(super) fn parts_text<C: Cost>(a: &Analysis<'_, C>) -> String {
    let parts = &a.profile.parts;
    let n = parts.len();
    let chosen: Vec<usize> = (0..n).filter(|&i| a.chosen[i]).collect();
    let describe = |i: usize| {
        let p = &parts[i].info;
        let mut s = format!("{}", p.number.unwrap_or(i as u64 + 1));
        let mut extra = Vec::new();
        if let Some(t) = p.thread {
            extra.push(format!("thread {t}"));
        }
        if let Some(pid) = p.pid {
            extra.push(format!("pid {pid}"));
        }
        if !extra.is_empty() {
            s.push_str(&format!(" ({})", extra.join(", ")));
        }
        s
    };
    let list: Vec<String> = chosen.iter().map(|&i| describe(i)).collect();
    if chosen.len() == n && n > 1 {
        format!("all {n} summed: {}", list.join("; "))
    } else if n == 1 {
        list.join("")
    } else {
        format!("{} of {n}: {}", chosen.len(), list.join("; "))
    }
}

fn totals<C: Cost>(a: &Analysis<'_, C>, out: &mut dyn Write, style: Style) -> io::Result<()> {
    let mut t = Table::new(shown_labels(a));
    let cells = a
        .shown
        .iter()
        .map(|&e| {
            if a.events.is_ratio(e) {
                return super::table::ratio_cell(a, Some(&a.totals), e, false);
            }
            let v = a.value(&a.totals, e);
            cell(Some(v), v, a.opts.show_percs, false)
        })
        .collect();
    t.row(cells, "PROGRAM TOTALS".to_string());
    t.print(out, "", style)?;
    writeln!(out)
}

fn labels<C: Cost>(a: &Analysis<'_, C>) -> Vec<String> {
    let names = shown_labels(a);
    if a.opts.inclusive {
        names
            .iter()
            .map(|n| format!("{n} incl"))
            .chain(names.iter().map(|n| format!("{n} self")))
            .collect()
    } else {
        names
    }
}

fn suffix<C: Cost>(a: &Analysis<'_, C>, f: FunctionId, with_object: bool, style: Style) -> String {
    let mut s = String::new();
    if let Some(c) = a.cycle_of(f) {
        s.push_str(&style.hot(&format!(" <cycle {c}>")));
    }
    if with_object && let Some(o) = a.object(f) {
        s.push_str(&style.dim(&format!(" [{o}]")));
    }
    s
}

fn file_function_table<C: Cost>(
    a: &Analysis<'_, C>,
    out: &mut dyn Write,
    style: Style,
) -> io::Result<()> {
    let mut t = Table::new(labels(a));
    let tree = a.opts.tree;
    let mut cycles_done = vec![false; a.incl.as_ref().map_or(0, |i| i.cycles.len())];
    let primary = a.sort.first().map(|s| s.0).unwrap_or(0);
    for &r in &a.rows {
        let key = a.agg.rows[r];
        let own = a.row_incl.get(r);
        let rank = if a.opts.inclusive {
            own.unwrap_or(a.agg.row_self.get(r))
        } else {
            a.agg.row_self.get(r)
        };
        // Cycle entries stand where their inclusive cost sorts them.
        if a.opts.inclusive
            && let Some(incl) = &a.incl
        {
            for cy in &incl.cycles {
                let done = &mut cycles_done[cy.number as usize - 1];
                if !*done && a.value(&cy.inclusive, primary) >= a.value(rank, primary) {
                    *done = true;
                    cycle_entry(a, &mut t, cy, style);
                }
            }
        }
        if tree.callers() || tree.callees() {
            t.text(String::new());
        }
        if tree.callers() && a.callee_row(key.function) == key {
            for arc in a.callers(key.function) {
                let name = a.row_name(RowKey {
                    function: arc.caller,
                    file: arc.site_file,
                });
                t.row(
                    arc_cells(a, arc),
                    format!(
                        "<  {name} ({}x){}{}",
                        crate::format::thousands(arc.count.to_i128()),
                        suffix(a, arc.caller, true, style),
                        super::inside_mark(a.call_kind(arc.caller, arc.callee))
                    ),
                );
            }
        }
        let mut c = Vec::new();
        if a.opts.inclusive {
            c.extend(cells(a, own, false));
        }
        c.extend(cells(a, Some(a.agg.row_self.get(r)), false));
        let mark = if tree != super::Tree::None { "*  " } else { "" };
        t.row(
            c,
            format!(
                "{mark}{}{}",
                a.row_name(key),
                suffix(a, key.function, true, style)
            ),
        );
        if tree.callees() {
            for arc in a.callees(key) {
                t.row(
                    arc_cells(a, arc),
                    format!(
                        ">    {} ({}x){}{}",
                        a.row_name(a.callee_row(arc.callee)),
                        crate::format::thousands(arc.count.to_i128()),
                        suffix(a, arc.callee, true, style),
                        super::inside_mark(a.call_kind(arc.caller, arc.callee))
                    ),
                );
            }
        }
    }
    // With every row shown, cycles cheaper than the last row come last.
    if a.show_all
        && let Some(incl) = &a.incl
        && a.opts.inclusive
    {
        for cy in &incl.cycles {
            if !cycles_done[cy.number as usize - 1] {
                cycle_entry(a, &mut t, cy, style);
            }
        }
    }
    t.print(out, "file:function", style)?;
    writeln!(out)
}

/// Members listed by name in a cycle's entry and in the cycle section;
/// the JSON output has them all.
const MEMBERS_LISTED: usize = 20;

/// Width the member lists are wrapped to.
const WRAP: usize = 80;

fn cycle_entry<C: Cost>(
    a: &Analysis<'_, C>,
    t: &mut Table,
    cy: &tally_analysis::Cycle<C>,
    style: Style,
) {
    let mut c = cells(a, Some(&cy.inclusive), false);
    c.extend(cells(a, Some(&cy.self_cost), false));
    t.row(
        c,
        style.hot(&format!(
            "<cycle {}> as a whole ({} calls in, {} within), {} members:",
            cy.number,
            crate::format::thousands(cy.calls_in.to_i128()),
            crate::format::thousands(cy.calls_within.to_i128()),
            cy.members.len()
        )),
    );
    let names: Vec<String> = cy
        .members
        .iter()
        .map(|&f| String::from_utf8_lossy(a.profile.names.function_name(f)).into_owned())
        .collect();
    for line in member_lines(&names, cy.number) {
        t.text(style.hot(&line));
    }
}

/// Member names wrapped to [`WRAP`] columns, indented, the first
/// [`MEMBERS_LISTED`] only, then how many more there are.
fn member_lines(names: &[String], cycle: u32) -> Vec<String> {
    const INDENT: &str = "    ";
    let mut lines = Vec::new();
    let mut line = String::from(INDENT);
    for n in names.iter().take(MEMBERS_LISTED) {
        if line.len() > INDENT.len() && line.len() + 1 + n.len() > WRAP {
            lines.push(std::mem::replace(&mut line, String::from(INDENT)));
        }
        if line.len() > INDENT.len() {
            line.push(' ');
        }
        line.push_str(n);
    }
    if names.len() > MEMBERS_LISTED {
        let more = format!(
            "... and {} more (all in --json, under cycles[{}])",
            names.len() - MEMBERS_LISTED,
            cycle - 1
        );
        if line.len() > INDENT.len() && line.len() + 1 + more.len() > WRAP {
            lines.push(std::mem::replace(&mut line, String::from(INDENT)));
        }
        if line.len() > INDENT.len() {
            line.push(' ');
        }
        line.push_str(&more);
    }
    if line.len() > INDENT.len() {
        lines.push(line);
    }
    lines
}

/// One table per cycle: its members with what the profile measures for
/// them, the cost of their calls from outside the cycle (outermost
/// activations, so exact), and their self costs.
fn cycles<C: Cost>(a: &Analysis<'_, C>, out: &mut dyn Write, style: Style) -> io::Result<()> {
    let Some(incl) = &a.incl else { return Ok(()) };
    if !a.opts.inclusive {
        return Ok(());
    }
    let names = shown_labels(a);
    let primary = a.sort.first().map(|s| s.0).unwrap_or(0);
    for cy in &incl.cycles {
        let mut labels: Vec<String> = names.iter().map(|n| format!("{n} entered")).collect();
        labels.extend(names.iter().map(|n| format!("{n} self")));
        let mut t = Table::new(labels);
        let mut members: Vec<(FunctionId, &[C], C)> = cy
            .members
            .iter()
            .filter_map(|&f| incl.entered(f).map(|(v, n)| (f, v, n)))
            .collect();
        members.sort_by(|x, y| {
            a.value(y.1, primary)
                .cmp(&a.value(x.1, primary))
                .then(y.2.cmp(&x.2))
                .then(x.0.cmp(&y.0))
        });
        for &(f, entered, n) in members.iter().take(MEMBERS_LISTED) {
            let mut c = cells(a, Some(entered), false);
            c.extend(cells(a, Some(a.agg.function_self.get(f.index())), false));
            t.row(
                c,
                format!(
                    "{} ({}x from outside){}",
                    a.function_name(f),
                    crate::format::thousands(n.to_i128()),
                    suffix(a, f, true, style)
                ),
            );
        }
        if members.len() > MEMBERS_LISTED {
            t.text(format!(
                "  ... and {} more members (all in --json)",
                members.len() - MEMBERS_LISTED
            ));
        }
        writeln!(
            out,
            "{}",
            style.bold(&format!(
                "-- <cycle {}>: its members, with the cost of their calls from outside the cycle",
                cy.number
            ))
        )?;
        writeln!(
            out,
            "-- (outermost activations, exact; calls between members have no cost of their own)"
        )?;
        t.print(out, "function:file", style)?;
        writeln!(out)?;
    }
    Ok(())
}

/// Cells for an arc: its cost (none inside a recursion or cycle), in both
/// column groups when the table has inclusive and self columns (the self
/// column stays empty).
fn arc_cells<C: Cost>(a: &Analysis<'_, C>, arc: &tally_analysis::Arc<C>) -> Vec<String> {
    let mut c = cells(
        a,
        a.call_cost(arc.caller, arc.callee, &arc.inclusive),
        false,
    );
    if a.opts.inclusive {
        c.extend(a.shown.iter().map(|_| String::new()));
    }
    c
}

fn function_file_table<C: Cost>(
    a: &Analysis<'_, C>,
    out: &mut dyn Write,
    style: Style,
) -> io::Result<()> {
    let mut t = Table::new(labels(a));
    for &f in &a.functions {
        let mut c = Vec::new();
        if a.opts.inclusive {
            let incl = a.incl.as_ref().and_then(|i| i.of(f));
            c.extend(cells(a, incl, false));
        }
        c.extend(cells(a, Some(a.agg.function_self.get(f.index())), false));
        t.row(
            c,
            format!("{}{}", a.function_name(f), suffix(a, f, true, style)),
        );
    }
    t.print(out, "function:file", style)?;
    writeln!(out)
}

fn jumps<C: Cost>(
    a: &Analysis<'_, C>,
    out: &mut dyn Write,
    n: usize,
    style: Style,
    warnings: &mut Vec<String>,
) -> io::Result<()> {
    let rows = a.hot_jumps(n);
    if rows.is_empty() {
        warnings.push(
            "the profile has no jumps (Callgrind records them with --collect-jumps=yes)".into(),
        );
        return Ok(());
    }
    let mut t = Table::new(vec!["executed".into(), "taken".into()]);
    for j in rows {
        let kind = if j.conditional { "jcnd" } else { "jump" };
        let from = a.position_text(j.file, &j.source);
        let to = a.position_text(j.target_file, &j.target);
        let fname = String::from_utf8_lossy(a.profile.names.function_name(j.function));
        let target = if j.target_function != j.function {
            format!(
                " in {}",
                String::from_utf8_lossy(a.profile.names.function_name(j.target_function))
            )
        } else {
            String::new()
        };
        t.row(
            vec![
                crate::format::thousands(j.executed.to_i128()),
                crate::format::thousands(j.taken.to_i128()),
            ],
            format!("{kind} {fname}: {from} -> {to}{target}"),
        );
    }
    t.print(out, "jump", style)?;
    writeln!(out)
}
