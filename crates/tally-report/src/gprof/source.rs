//! `-A`: source files annotated with the call count of every function at
//! the line where its code starts, as GNU gprof prints them, with its "Top
//! 10 lines" table and execution summary per file.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use tally_formats::gmon::Gmon;

use tally_analysis::gprof::{Options, Report, selection};

/// Options of the annotated source.
#[derive(Debug, Clone, Default)]
pub struct Annotate {
    /// `-m`: lines run fewer times are marked `#####` (gprof's default 1).
    pub min_count: u64,
    /// `-I`: folders to look for sources in.
    pub dirs: Vec<PathBuf>,
    /// `-x`: annotate every line of a block (only matters with block
    /// counts).
    pub all_lines: bool,
}

const WIDTH: usize = 16;
const TOP_LINES: usize = 10;
/// Block counts kept per routine, as in gprof (`NBBS`).
const BLOCKS_PER_ROUTINE: usize = 10;

/// What one source line carries: the first routine starting on it (its
/// kind, address and block counts) and the calls of all of them.
#[derive(Debug, Clone)]
struct LineStat {
    is_func: bool,
    addr: u64,
    ncalls: u64,
    blocks: Vec<(u64, u64)>,
}

/// Block execution counts per routine, as gprof keeps them with `-l`: up to
/// ten distinct addresses per routine, counts of one address added.
fn routine_blocks(report: &Report, gmon: &Gmon) -> Vec<Vec<(u64, u64)>> {
    let mut out: Vec<Vec<(u64, u64)>> = vec![Vec::new(); report.table.len()];
    for b in &gmon.blocks {
        let Some(r) = report.table.lookup(b.address) else {
            continue;
        };
        let slots = &mut out[r];
        if let Some(slot) = slots.iter_mut().find(|s| s.0 == b.address) {
            slot.1 = slot.1.wrapping_add(b.count);
        } else if slots.len() < BLOCKS_PER_ROUTINE {
            slots.push((b.address, b.count));
        }
    }
    out
}

/// The state gprof carries from line to line (and file to file): the last
/// block count seen.
#[derive(Debug, Default)]
struct Counts {
    last_count: u64,
    executable: u64,
    executed: u64,
}

/// The annotated sources, in GNU gprof's order of files (the reverse of
/// their first mention in the symbol table). `first` is true when nothing
/// was printed before (no form feed then). Files that cannot be read are
/// reported in the returned notices.
pub fn write(
    report: &Report,
    opts: &Options,
    gmon: &Gmon,
    anno: &Annotate,
    first: bool,
) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut notices = Vec::new();
    let table = &report.table;
    let sel = selection(table, &opts.specs.anno_include, &opts.specs.anno_exclude);
    let min_count = anno.min_count.max(1);
    // Block counts mean something only per line (gprof reads them with -l
    // only).
    let blocks = if opts.line {
        routine_blocks(report, gmon)
    } else {
        if !gmon.blocks.is_empty() {
            notices.push("ignoring basic-block execution counts (use -l)".to_owned());
        }
        vec![Vec::new(); table.len()]
    };
    let mut counts = Counts::default();

    // Files in the order gprof keeps them: newest first.
    let mut files: Vec<&str> = report.source_files.iter().map(String::as_str).collect();
    files.reverse();

    let mut first_output = first;
    let mut first_file = true;
    for file in files {
        // Lines with routines, and the file's total calls.
        let mut num_lines = 0u32;
        for (i, r) in table.routines.iter().enumerate() {
            if r.file.as_deref() == Some(file) && r.line > num_lines && sel.selects(i) {
                num_lines = r.line;
            }
        }
        if num_lines == 0 {
            continue;
        }
        let mut lines: Vec<Option<LineStat>> = vec![None; num_lines as usize];
        let mut file_calls = 0u64;
        for (i, r) in table.routines.iter().enumerate() {
            if r.file.as_deref() != Some(file) || r.line == 0 || !sel.selects(i) {
                continue;
            }
            let calls = report.ncalls[i];
            file_calls += calls;
            let slot = &mut lines[r.line as usize - 1];
            match slot {
                None => {
                    *slot = Some(LineStat {
                        is_func: r.is_func,
                        addr: r.addr,
                        ncalls: calls,
                        blocks: blocks[i].clone(),
                    })
                }
                // gprof's summary of a line with several routines is a copy
                // of the first with its address zeroed, which `-x` then
                // takes for a line that starts inside a block.
                Some(s) => {
                    s.ncalls += calls;
                    s.addr = 0;
                }
            }
        }
        if !opts.zeros && file_calls == 0 {
            continue;
        }
        let Some(text) = read_source(file, &anno.dirs) else {
            notices.push(format!("could not locate `{file}'"));
            continue;
        };
        if first_file {
            first_file = false;
        } else {
            out.push('\n');
        }
        if first_output {
            first_output = false;
        } else {
            out.push_str("\x0c\n");
        }
        let _ = writeln!(out, "*** File {file}:");
        counts.executable = 0;
        counts.executed = 0;
        for (i, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
            let stat = lines.get(i).and_then(Option::as_ref);
            out.push_str(&annotation(stat, min_count, anno.all_lines, &mut counts));
            out.push_str(&String::from_utf8_lossy(line));
        }
        let (executable, executed) = (counts.executable, counts.executed);

        let _ = write!(
            out,
            "\n\nTop {TOP_LINES} Lines:\n\n     Line      Count\n\n"
        );
        let mut ranked: Vec<(usize, u64)> = lines
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i + 1, s.ncalls)))
            .collect();
        ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
        for &(line, calls) in ranked.iter().take(TOP_LINES) {
            if calls == 0 {
                break;
            }
            let _ = writeln!(out, "{line:9} {calls:10}");
        }
        out.push_str("\nExecution Summary:\n\n");
        let _ = writeln!(out, "{executable:9}   Executable lines in this file");
        let _ = writeln!(out, "{executed:9}   Lines executed");
        let pct = if executable > 0 {
            100.0 * executed as f64 / executable as f64
        } else {
            100.0
        };
        let _ = writeln!(out, "{pct:9.2}   Percent of the file executed");
        let _ = writeln!(out, "\n{file_calls:9}   Total number of line executions");
        let avg = if executable > 0 {
            file_calls as f64 / executable as f64
        } else {
            0.0
        };
        let _ = writeln!(out, "{avg:9.2}   Average executions per line");
    }
    (out, notices)
}

/// The 16-column annotation of one line, as gprof makes it: the call
/// count of a function starting there, then the counts of the blocks
/// starting there (`-x`: also the count of the block running into the line,
/// and equal counts in a row only once); `#####` below the minimum; blanks
/// for lines without code or counts.
fn annotation(stat: Option<&LineStat>, min_count: u64, all_lines: bool, c: &mut Counts) -> String {
    let blank = " ".repeat(WIDTH);
    let Some(s) = stat else {
        return blank;
    };
    c.executable += 1;
    let mut parts: Vec<String> = Vec::new();
    let mut last_print: Option<u64> = None;
    let mut ncalls: Option<u64> = None;
    if s.is_func {
        parts.push(s.ncalls.to_string());
        c.last_count = s.ncalls;
        last_print = Some(c.last_count);
        ncalls = Some(s.ncalls);
    } else if all_lines && s.blocks.first().is_some_and(|b| b.0 > s.addr) {
        parts.push(c.last_count.to_string());
        last_print = Some(c.last_count);
        ncalls = Some(c.last_count);
    }
    for &(_, count) in &s.blocks {
        c.last_count = count;
        ncalls = Some(ncalls.unwrap_or(0).wrapping_add(count));
        if all_lines && Some(count) == last_print {
            continue;
        }
        parts.push(count.to_string());
        last_print = Some(count);
    }
    if all_lines && parts.is_empty() {
        parts.push(c.last_count.to_string());
        ncalls = Some(c.last_count);
    }
    let Some(ncalls) = ncalls else {
        return blank;
    };
    c.executed += 1;
    let mut text = if ncalls < min_count {
        "#####".to_owned()
    } else {
        parts.join(",")
    };
    text.push_str(" -> ");
    if text.len() >= WIDTH {
        text.truncate(WIDTH);
        text
    } else {
        format!("{text:>WIDTH$}")
    }
}

/// The source text: the path as the debug information gives it, else in
/// each `-I` folder (with the path, then with its file name only).
fn read_source(name: &str, dirs: &[PathBuf]) -> Option<Vec<u8>> {
    if let Ok(t) = std::fs::read(name) {
        return Some(t);
    }
    if Path::new(name).is_absolute() {
        return None;
    }
    for d in dirs {
        if let Ok(t) = std::fs::read(d.join(name)) {
            return Some(t);
        }
    }
    let base = name.rsplit('/').next()?;
    for d in dirs {
        if let Ok(t) = std::fs::read(d.join(base)) {
            return Some(t);
        }
    }
    None
}
