//! The annotate report as aligned text: header, program totals, the
//! function tables (with call trees) and jumps. The source and assembly
//! sections follow, written by `source` and `asm`.

use super::table::{Page, RULE, Table, cells, shown_labels};
use super::view::{Call, CycleView, Func, Row, View};
use crate::format::{Style, cell};
use std::io::{self, Write};
use tally_model::Cost;

/// Writes the sections before the source and assembly annotations.
pub(super) fn write<C: Cost>(a: &View<C>, page: &mut Page<'_>) -> io::Result<()> {
    let (out, style, warnings) = (&mut *page.out, page.style, &mut *page.warnings);
    header(a, out)?;
    totals(a, out, style)?;
    if a.options.grouping.files() {
        file_function_table(a, out, style)?;
    }
    if a.options.grouping.functions() {
        function_file_table(a, out, style)?;
    }
    cycles(a, out, style)?;
    if let Some(rows) = &a.jumps {
        jumps(rows, out, style, warnings)?;
    }
    Ok(())
}

fn header<C: Cost>(a: &View<C>, out: &mut dyn Write) -> io::Result<()> {
    let h = &a.header;
    let o = &a.options;
    writeln!(out, "{RULE}")?;
    let inputs: Vec<String> = o.inputs.iter().map(|p| p.display().to_string()).collect();
    let creator = h
        .creator
        .as_ref()
        .map(|c| format!(" (creator: {c})"))
        .unwrap_or_default();
    writeln!(out, "Profile data:     {}{creator}", inputs.join(", "))?;
    writeln!(out, "{RULE}")?;
    let mut cmds: Vec<String> = Vec::new();
    let mut descs: Vec<String> = Vec::new();
    for c in &h.commands {
        let c = c.trim().to_string();
        if !cmds.contains(&c) {
            cmds.push(c);
        }
    }
    for (k, v) in &h.descriptions {
        let d = format!("{k}: {}", v.trim());
        if !descs.contains(&d) {
            descs.push(d);
        }
    }
    for c in &cmds {
        writeln!(out, "Command:          {c}")?;
    }
    for d in &descs {
        writeln!(out, "Description:      {d}")?;
    }
    writeln!(out, "Parts:            {}", parts_text(a))?;
    writeln!(out, "Events recorded:  {}", h.recorded.join(" "))?;
    for (name, formula) in &h.derived {
        writeln!(out, "Event derived:    {name} = {formula}")?;
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
    if !o.transforms.is_empty() {
        writeln!(out, "Transforms:       {}", o.transforms.join(" "))?;
    }
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
pub(super) fn parts_text<C>(a: &View<C>) -> String {
    let n = a.header.part_count;
    let describe = |p: &super::view::PartRef| {
        let mut s = format!("{}", p.number);
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
    let list: Vec<String> = a.header.parts.iter().map(describe).collect();
    if list.len() == n && n > 1 {
        format!("all {n} summed: {}", list.join("; "))
    } else if n == 1 {
        list.join("")
    } else {
        format!("{} of {n}: {}", list.len(), list.join("; "))
    }
}

fn totals<C: Cost>(a: &View<C>, out: &mut dyn Write, style: Style) -> io::Result<()> {
    let mut t = Table::new(shown_labels(a));
    let cells = a
        .shown
        .iter()
        .map(|&e| {
            if a.events.is_ratio(e) {
                return super::table::ratio_cell(a, Some(&a.totals), e, false);
            }
            let v = a.events.value(&a.totals, e);
            cell(Some(v), v, a.options.show_percs, false)
        })
        .collect();
    t.row(cells, "PROGRAM TOTALS".to_string());
    t.print(out, "", style)?;
    writeln!(out)
}

fn labels<C>(a: &View<C>) -> Vec<String> {
    let names = shown_labels(a);
    if a.options.inclusive {
        names
            .iter()
            .map(|n| format!("{n} incl"))
            .chain(names.iter().map(|n| format!("{n} self")))
            .collect()
    } else {
        names
    }
}

/// A function's cycle and object, after its name.
fn suffix(f: &Func, style: Style) -> String {
    let mut s = String::new();
    if let Some(c) = f.cycle {
        s.push_str(&style.hot(&format!(" <cycle {c}>")));
    }
    if !f.object.is_empty() {
        s.push_str(&style.dim(&format!(" [{}]", f.object)));
    }
    s
}

fn file_function_table<C: Cost>(a: &View<C>, out: &mut dyn Write, style: Style) -> io::Result<()> {
    let mut t = Table::new(labels(a));
    let tree = a.options.tree;
    for row in &a.rows {
        // Cycle entries stand where their inclusive cost sorts them.
        for &cy in &row.cycles_before {
            cycle_entry(a, &mut t, &a.cycles[cy], style);
        }
        if tree.callers() || tree.callees() {
            t.text(String::new());
        }
        for call in row.callers.iter().flatten() {
            call_line(a, &mut t, "<  ", &call.caller, call, style);
        }
        let mut c = Vec::new();
        if a.options.inclusive {
            c.extend(inclusive_cells(a, row));
        }
        c.extend(cells(a, Some(&row.self_cost), false));
        let mark = if tree != super::Tree::None { "*  " } else { "" };
        t.row(
            c,
            format!(
                "{mark}{}{}",
                row.func.file_function(),
                suffix(&row.func, style)
            ),
        );
        for call in row.callees.iter().flatten() {
            call_line(a, &mut t, ">    ", &call.callee, call, style);
        }
    }
    // With every row shown, cycles cheaper than the last row come last.
    for &cy in &a.cycles_after {
        cycle_entry(a, &mut t, &a.cycles[cy], style);
    }
    t.print(out, "file:function", style)?;
    derived_legend(a.rows.iter(), out)?;
    writeln!(out)
}

/// What marks a derived inclusive cost (a cycle member's) in the tables.
const DERIVED_MARK: &str = "~";

/// A row's inclusive cells, each marked when the cost is derived.
fn inclusive_cells<C: Cost>(a: &View<C>, row: &Row<C>) -> Vec<String> {
    let c = cells(a, row.inclusive.as_deref(), false);
    if row.derived && row.inclusive.is_some() {
        c.into_iter()
            .map(|x| format!("{DERIVED_MARK}{x}"))
            .collect()
    } else {
        c
    }
}

/// The line under a table that says what the mark means, when a row has it.
fn derived_legend<'a, C: Cost + 'a>(
    mut rows: impl Iterator<Item = &'a Row<C>>,
    out: &mut dyn Write,
) -> io::Result<()> {
    if rows.any(|r| r.derived && r.inclusive.is_some()) {
        writeln!(
            out,
            "{DERIVED_MARK} derived: a cycle member's inclusive cost, from the calls into it, at most its cycle's (docs/annotate.md)"
        )?;
    }
    Ok(())
}

/// Members listed by name in a cycle's entry and in the cycle section;
/// the JSON output has them all.
const MEMBERS_LISTED: usize = 20;

/// Width the member lists are wrapped to.
const WRAP: usize = 80;

fn cycle_entry<C: Cost>(a: &View<C>, t: &mut Table, cy: &CycleView<C>, style: Style) {
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
    let names: Vec<String> = cy.members.iter().map(|m| m.func.function.clone()).collect();
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
fn cycles<C: Cost>(a: &View<C>, out: &mut dyn Write, style: Style) -> io::Result<()> {
    if !a.options.inclusive {
        return Ok(());
    }
    let names = shown_labels(a);
    for cy in &a.cycles {
        let mut labels: Vec<String> = names.iter().map(|n| format!("{n} entered")).collect();
        labels.extend(names.iter().map(|n| format!("{n} self")));
        let mut t = Table::new(labels);
        for &i in cy.by_entered.iter().take(MEMBERS_LISTED) {
            let m: &Row<C> = &cy.members[i];
            let Some((entered, n)) = &m.entered else {
                continue;
            };
            let mut c = cells(a, Some(entered), false);
            c.extend(cells(a, Some(&m.self_cost), false));
            t.row(
                c,
                format!(
                    "{} ({}x from outside){}",
                    m.func.function_file(),
                    crate::format::thousands(n.to_i128()),
                    suffix(&m.func, style)
                ),
            );
        }
        if cy.by_entered.len() > MEMBERS_LISTED {
            t.text(format!(
                "  ... and {} more members (all in --json)",
                cy.by_entered.len() - MEMBERS_LISTED
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

/// A call under its row: the function at its other `end` (a caller or a
/// callee), its count, and whose activation counts its cost.
fn call_line<C: Cost>(
    a: &View<C>,
    t: &mut Table,
    mark: &str,
    end: &Func,
    call: &Call<C>,
    style: Style,
) {
    t.row(
        arc_cells(a, call),
        format!(
            "{mark}{} ({}x){}{}",
            end.file_function(),
            crate::format::thousands(call.count.to_i128()),
            suffix(end, style),
            super::inside_mark(call.kind)
        ),
    );
}

/// Cells for a call: its cost (none inside a recursion or cycle), in both
/// column groups when the table has inclusive and self columns (the self
/// column stays empty).
fn arc_cells<C: Cost>(a: &View<C>, call: &Call<C>) -> Vec<String> {
    let mut c = cells(a, call.cost.as_deref(), false);
    if a.options.inclusive {
        c.extend(a.shown.iter().map(|_| String::new()));
    }
    c
}

fn function_file_table<C: Cost>(a: &View<C>, out: &mut dyn Write, style: Style) -> io::Result<()> {
    let mut t = Table::new(labels(a));
    for row in &a.functions {
        let mut c = Vec::new();
        if a.options.inclusive {
            c.extend(inclusive_cells(a, row));
        }
        c.extend(cells(a, Some(&row.self_cost), false));
        t.row(
            c,
            format!("{}{}", row.func.function_file(), suffix(&row.func, style)),
        );
    }
    t.print(out, "function:file", style)?;
    derived_legend(a.functions.iter(), out)?;
    writeln!(out)
}

fn jumps<C: Cost>(
    rows: &[super::view::Jump<C>],
    out: &mut dyn Write,
    style: Style,
    warnings: &mut Vec<String>,
) -> io::Result<()> {
    if rows.is_empty() {
        warnings.push(
            "the profile has no jumps (Callgrind records them with --collect-jumps=yes)".into(),
        );
        return Ok(());
    }
    let mut t = Table::new(vec!["executed".into(), "taken".into()]);
    for j in rows {
        let kind = if j.conditional { "jcnd" } else { "jump" };
        let target = if j.leaves {
            format!(" in {}", j.target_function)
        } else {
            String::new()
        };
        t.row(
            vec![
                crate::format::thousands(j.executed.to_i128()),
                crate::format::thousands(j.taken.to_i128()),
            ],
            format!("{kind} {}: {} -> {}{target}", j.function, j.from, j.to),
        );
    }
    t.print(out, "jump", style)?;
    writeln!(out)
}
