//! `-A`: source files annotated with the call count of every function at
//! the line where its code starts, as GNU gprof prints them, with its "Top
//! 10 lines" table and execution summary per file.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use tally_formats::gmon::Gmon;
use tally_symbols::ObjectFile;

use super::{Options, Report, selection};

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

/// What one source line carries: the routines starting on it.
#[derive(Debug, Clone, Copy)]
struct LineStat {
    is_func: bool,
    ncalls: u64,
}

/// The annotated sources, in GNU gprof's order of files (the reverse of
/// their first mention in the symbol table). `first` is true when nothing
/// was printed before (no form feed then). Files that cannot be read are
/// reported in the returned notices.
pub fn write(
    _obj: &ObjectFile,
    report: &Report,
    opts: &Options,
    _gmon: &Gmon,
    anno: &Annotate,
    first: bool,
) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut notices = Vec::new();
    let table = &report.table;
    let sel = selection(table, &opts.specs.anno_include, &opts.specs.anno_exclude);
    let min_count = anno.min_count.max(1);

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
                        ncalls: calls,
                    })
                }
                Some(s) => s.ncalls += calls,
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
        let mut executable = 0u64;
        let mut executed = 0u64;
        for (i, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
            let stat = lines.get(i).copied().flatten();
            out.push_str(&annotation(stat, min_count, &mut executable, &mut executed));
            out.push_str(&String::from_utf8_lossy(line));
        }

        let _ = write!(
            out,
            "\n\nTop {TOP_LINES} Lines:\n\n     Line      Count\n\n"
        );
        let mut ranked: Vec<(usize, u64)> = lines
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i + 1, s.ncalls)))
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

/// The 16-column annotation of one line: the call count of the functions
/// starting there (`#####` below the minimum), or blanks.
fn annotation(
    stat: Option<LineStat>,
    min_count: u64,
    executable: &mut u64,
    executed: &mut u64,
) -> String {
    let blank = " ".repeat(WIDTH);
    let Some(s) = stat else {
        return blank;
    };
    *executable += 1;
    if !s.is_func {
        return blank;
    }
    *executed += 1;
    let mut text = if s.ncalls < min_count {
        "#####".to_owned()
    } else {
        s.ncalls.to_string()
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
