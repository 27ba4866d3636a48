//! The line mix of a Callgrind file: how many lines of each kind, how
//! long its names are, where names are first defined, how many are
//! context names (`a'b'c`, from `--separate-callers`), and how dense
//! calls and jumps are. `tally-gen --measure` prints it for real and
//! generated files side by side, which is how the generator's defaults
//! are checked against real profiles: a reader's speed depends on this
//! mix, not only on the file's size.
//!
//! The measure is a plain scan of lines (no model, no name tables beyond
//! the definitions seen), so it also works on files the reader refuses.

use std::io::{self, Write};

/// Line kinds, in the order of the report.
const KINDS: &[&str] = &[
    "cost",
    "calls=",
    "jump=/jcnd=",
    "fn=",
    "cfn=",
    "fl=",
    "fi=/fe=",
    "cfi=/cfl=",
    "jfi=",
    "ob=",
    "cob=",
    "jfn=",
    "header",
    "blank",
];

/// What [`measure`] finds in one file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mix {
    /// Bytes read.
    pub bytes: u64,
    /// Lines read.
    pub lines: u64,
    /// Lines per kind, in the order of `KINDS` (the cost line after a
    /// `calls=` line counts with the call, as neither).
    pub kinds: [u64; 14],
    /// Bytes of the lines of each kind (newlines included).
    pub kind_bytes: [u64; 14],
    /// Name definitions (`(N) name`) per key, in the order of `KINDS`.
    pub definitions: [u64; 14],
    /// Function names defined (by `fn=`, `cfn=` or `jfn=`) and their bytes.
    pub function_names: u64,
    /// Total bytes of those names.
    pub function_name_bytes: u64,
    /// The longest function name.
    pub longest_name: u64,
    /// Function names with a context (`a'b`): `--separate-callers`.
    pub context_names: u64,
    /// Parts of context names in all (`a'b'c` has 3).
    pub context_parts: u64,
    /// Cost lines whose first position is relative (`+N`, `-N`, `*`).
    pub relative_positions: u64,
}

fn kind_of(line: &[u8]) -> usize {
    let starts = |p: &[u8]| line.starts_with(p);
    match line.first() {
        None => 13,
        Some(b'0'..=b'9' | b'+' | b'-' | b'*') => 0,
        _ if starts(b"calls=") => 1,
        _ if starts(b"jump=") || starts(b"jcnd=") => 2,
        _ if starts(b"fn=") => 3,
        _ if starts(b"cfn=") => 4,
        _ if starts(b"fl=") => 5,
        _ if starts(b"fi=") || starts(b"fe=") => 6,
        _ if starts(b"cfi=") || starts(b"cfl=") => 7,
        _ if starts(b"jfi=") => 8,
        _ if starts(b"ob=") => 9,
        _ if starts(b"cob=") => 10,
        _ if starts(b"jfn=") => 11,
        _ => 12,
    }
}

/// The name a `key=(N) name` line defines, if it defines one (a plain
/// `key=name` without compression counts too).
fn defined_name(value: &[u8]) -> Option<&[u8]> {
    if value.first() == Some(&b'(') {
        let close = value.iter().position(|&b| b == b')')?;
        let rest = &value[close + 1..];
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        (!rest.is_empty()).then_some(rest)
    } else {
        (!value.is_empty()).then_some(value)
    }
}

/// Measures the line mix of Callgrind text.
pub fn measure(text: &[u8]) -> Mix {
    let mut m = Mix {
        bytes: text.len() as u64,
        ..Default::default()
    };
    let mut after: Option<usize> = None;
    for line in text.split_inclusive(|&b| b == b'\n') {
        let len = line.len() as u64;
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        m.lines += 1;
        let k = kind_of(line);
        // The line after `calls=` (the call's cost) or `jump=`/`jcnd=` (the
        // jump's source) belongs to that line: its bytes count with it, and
        // it is no self-cost line.
        if let Some(arc) = std::mem::replace(&mut after, matches!(k, 1 | 2).then_some(k))
            && k == 0
        {
            m.kind_bytes[arc] += len;
            continue;
        }
        m.kinds[k] += 1;
        m.kind_bytes[k] += len;
        match k {
            0 => {
                if matches!(line[0], b'+' | b'-' | b'*') {
                    m.relative_positions += 1;
                }
            }
            3..=11 => {
                let eq = line.iter().position(|&b| b == b'=').unwrap_or(0);
                if let Some(name) = defined_name(&line[eq + 1..]) {
                    m.definitions[k] += 1;
                    if matches!(k, 3 | 4 | 11) {
                        let n = name.len() as u64;
                        m.function_names += 1;
                        m.function_name_bytes += n;
                        m.longest_name = m.longest_name.max(n);
                        let quotes = name.iter().filter(|&&b| b == b'\'').count() as u64;
                        if quotes > 0 {
                            m.context_names += 1;
                            m.context_parts += quotes + 1;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    m
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Writes the mixes of several files as one Markdown table, a column per
/// file: the share of lines and bytes of each kind, then the names.
pub fn report(out: &mut dyn Write, names: &[String], mixes: &[Mix]) -> io::Result<()> {
    write!(out, "| measure |")?;
    for n in names {
        write!(out, " {n} |")?;
    }
    write!(out, "\n|---|")?;
    for _ in names {
        write!(out, "---:|")?;
    }
    writeln!(out)?;
    let row = |out: &mut dyn Write, what: &str, f: &dyn Fn(&Mix) -> String| -> io::Result<()> {
        write!(out, "| {what} |")?;
        for m in mixes {
            write!(out, " {} |", f(m))?;
        }
        writeln!(out)
    };
    row(out, "size (MB)", &|m| {
        format!("{:.1}", m.bytes as f64 / 1e6)
    })?;
    row(out, "lines", &|m| m.lines.to_string())?;
    row(out, "bytes per line", &|m| {
        format!("{:.1}", ratio(m.bytes, m.lines))
    })?;
    for (k, name) in KINDS.iter().enumerate() {
        row(out, &format!("`{name}` lines, % (of bytes)"), &|m| {
            format!(
                "{:.2} ({:.1})",
                100.0 * ratio(m.kinds[k], m.lines),
                100.0 * ratio(m.kind_bytes[k], m.bytes)
            )
        })?;
    }
    row(out, "calls per 100 cost lines", &|m| {
        format!("{:.2}", 100.0 * ratio(m.kinds[1], m.kinds[0]))
    })?;
    row(out, "jumps per 100 cost lines", &|m| {
        format!("{:.2}", 100.0 * ratio(m.kinds[2], m.kinds[0]))
    })?;
    row(out, "cost lines with a relative position, %", &|m| {
        format!("{:.1}", 100.0 * ratio(m.relative_positions, m.kinds[0]))
    })?;
    for (k, name) in [(3, "fn="), (4, "cfn="), (11, "jfn=")] {
        row(
            out,
            &format!("function names first defined in `{name}`, %"),
            &|m| format!("{:.1}", 100.0 * ratio(m.definitions[k], m.function_names)),
        )?;
    }
    row(out, "function names defined", &|m| {
        m.function_names.to_string()
    })?;
    row(out, "mean function name (bytes)", &|m| {
        format!("{:.1}", ratio(m.function_name_bytes, m.function_names))
    })?;
    row(out, "longest function name (bytes)", &|m| {
        m.longest_name.to_string()
    })?;
    row(out, "context names `a'b`, % of function names", &|m| {
        format!("{:.1}", 100.0 * ratio(m.context_names, m.function_names))
    })?;
    row(out, "parts per context name", &|m| {
        format!("{:.2}", ratio(m.context_parts, m.context_names))
    })?;
    row(
        out,
        "file names defined (`fl=`, `fi=`/`fe=`, `cfi=`, `jfi=`)",
        &|m| {
            (m.definitions[5] + m.definitions[6] + m.definitions[7] + m.definitions[8]).to_string()
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_names() {
        let text = b"# callgrind format\nevents: Ir\nfl=(1) a.c\nfn=(1) main'start'_start\n0x10 3 4\n+2 1 1\ncfn=(2) f\ncalls=1 0x20 9\n* * 5\njump=2 +3 *\nfn=(2)\n";
        let m = measure(text);
        assert_eq!(m.lines, 11);
        assert_eq!(m.kinds[0], 2);
        assert_eq!(m.kinds[1], 1);
        assert_eq!(m.kinds[2], 1);
        assert_eq!(m.kinds[3], 2);
        assert_eq!(m.definitions[3], 1);
        assert_eq!(m.definitions[4], 1);
        assert_eq!(m.function_names, 2);
        assert_eq!(m.context_names, 1);
        assert_eq!(m.context_parts, 3);
        assert_eq!(m.relative_positions, 1);
    }
}
