//! `tally gprof`'s command line, parsed by GNU gprof's getopt rules:
//! `-pNAME` attaches an optional value, `-p NAME` does not; long options
//! map to the short ones.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use tally_analysis::gprof::{ArcSpec, Options, SymSpec};

/// `tally gprof --help`: gprof's options as tally takes them.
pub const USAGE: &str = include_str!("gprof_usage.txt");

/// A parsed `tally gprof` command line.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The analysis and report options.
    pub opts: Options,
    /// Program and gmon files, or one Callgrind profile.
    pub positional: Vec<String>,
    /// `-p` or `-P` was given.
    pub user_flat: bool,
    /// `-q` or `-Q` was given.
    pub user_graph: bool,
    /// `-A` or `-J` was given.
    pub user_anno: bool,
    /// The flat profile is asked for.
    pub flat: bool,
    /// The call graph is asked for.
    pub graph: bool,
    /// Annotated source is asked for.
    pub anno: bool,
    /// `-s`: write gmon.sum.
    pub sum: bool,
    /// `--json`.
    pub json: bool,
    /// `-m`: the smallest count annotated.
    pub min_count: u64,
    /// `-I`: where sources are looked for.
    pub source_dirs: Vec<PathBuf>,
    /// `-x`: annotate every line of a block.
    pub all_lines: bool,
    /// `--event`: the event of a Callgrind profile.
    pub event: Option<String>,
}

/// Options with a value that must follow (attached or as the next word).
const REQUIRED: &[char] = &['e', 'E', 'f', 'F', 'I', 'k', 'm', 't', 'w', 'O', 'R'];
/// Options whose value may only be attached (`-pNAME`, `--graph=NAME`).
const OPTIONAL: &[char] = &['A', 'C', 'J', 'p', 'P', 'q', 'Q', 'n', 'N', 'Z', 'd'];

fn long_to_short(name: &str) -> Option<char> {
    Some(match name {
        "line" => 'l',
        "no-static" => 'a',
        "ignore-non-functions" => 'D',
        "annotated-source" => 'A',
        "no-annotated-source" => 'J',
        "flat-profile" => 'p',
        "no-flat-profile" => 'P',
        "graph" => 'q',
        "no-graph" => 'Q',
        "exec-counts" => 'C',
        "no-exec-counts" => 'Z',
        "sum" => 's',
        "all-lines" => 'x',
        "directory-path" => 'I',
        "display-unused-functions" => 'z',
        "min-count" => 'm',
        "print-path" => 'L',
        "static-call-graph" => 'c',
        "table-length" => 't',
        "time" => 'n',
        "no-time" => 'N',
        "width" => 'w',
        "brief" => 'b',
        "traditional" => 'T',
        "file-format" => 'O',
        "help" => 'h',
        "version" => 'v',
        "debug" => 'd',
        _ => return None,
    })
}

/// Parses the arguments after `tally gprof` by GNU gprof's getopt rules.
pub fn parse(args: &[String]) -> Result<Parsed> {
    let mut p = Parsed {
        min_count: 0,
        ..Parsed::default()
    };
    let mut i = 0;
    let mut only_positional = false;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if only_positional || arg == "-" || !arg.starts_with('-') {
            p.positional.push(arg.clone());
            continue;
        }
        if arg == "--" {
            only_positional = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            match name {
                "json" => p.json = true,
                "gnu-compatible" => p.opts.gnu_compatible = true,
                "demangle" => p.opts.demangle = true,
                "no-demangle" => p.opts.demangle = false,
                "event" => {
                    let v = match value {
                        Some(v) => v,
                        None => next_value(args, &mut i, "--event")?,
                    };
                    p.event = Some(v);
                }
                _ => {
                    let Some(c) = long_to_short(name) else {
                        crate::usage_bail!("unknown option --{name}\n\n{USAGE}");
                    };
                    let value = if REQUIRED.contains(&c) && value.is_none() {
                        Some(next_value(args, &mut i, &format!("--{name}"))?)
                    } else {
                        value
                    };
                    apply(&mut p, c, value)?;
                }
            }
            continue;
        }
        // A cluster of short options: `-bz`, `-pmain`, `-k a/b`.
        let chars: Vec<char> = arg[1..].chars().collect();
        let mut k = 0;
        while k < chars.len() {
            let c = chars[k];
            k += 1;
            if REQUIRED.contains(&c) || OPTIONAL.contains(&c) {
                let rest: String = chars[k..].iter().collect();
                let value = if !rest.is_empty() {
                    Some(rest)
                } else if REQUIRED.contains(&c) {
                    Some(next_value(args, &mut i, &format!("-{c}"))?)
                } else {
                    None
                };
                apply(&mut p, c, value)?;
                break;
            }
            apply(&mut p, c, None)?;
        }
    }
    Ok(p)
}

fn next_value(args: &[String], i: &mut usize, name: &str) -> Result<String> {
    let v = args
        .get(*i)
        .ok_or_else(|| crate::usage!("option {name} needs a value"))?
        .clone();
    *i += 1;
    Ok(v)
}

fn apply(p: &mut Parsed, c: char, value: Option<String>) -> Result<()> {
    let specs = &mut p.opts.specs;
    let spec = |v: &Option<String>| v.as_deref().map(SymSpec::parse);
    match c {
        'a' => p.opts.no_static = true,
        'b' => p.opts.brief = true,
        'c' => p.opts.static_calls = true,
        'D' => p.opts.functions_only = true,
        'l' => p.opts.line = true,
        'L' => p.opts.print_path = true,
        's' => p.sum = true,
        'x' => p.all_lines = true,
        'z' => p.opts.zeros = true,
        'T' => crate::usage_bail!("-T (BSD-style output) is not supported"),
        'y' | 'i' | 'r' | 'R' | 'C' | 'Z' | 'd' | 'O' | 't' => {
            crate::usage_bail!("-{c} is not supported by tally gprof")
        }
        // A closed standard output (`| head`) is not an error here either.
        'h' => {
            let _ = write!(std::io::stdout(), "{USAGE}");
            std::process::exit(0);
        }
        'v' => {
            let version = env!("CARGO_PKG_VERSION");
            let _ = writeln!(std::io::stdout(), "tally gprof {version}");
            std::process::exit(0);
        }
        'e' => specs.graph_exclude.extend(spec(&value)),
        'E' => {
            specs.time_exclude.extend(spec(&value));
            specs.graph_exclude.extend(spec(&value));
        }
        'f' => specs.graph_include.extend(spec(&value)),
        'F' => {
            specs.time_include.extend(spec(&value));
            specs.graph_include.extend(spec(&value));
        }
        'n' => specs.time_include.extend(spec(&value)),
        'N' => specs.time_exclude.extend(spec(&value)),
        'k' => {
            let v = value.unwrap_or_default();
            let arc =
                ArcSpec::parse(&v).ok_or_else(|| crate::usage!("-k needs FROM/TO, not `{v}`"))?;
            specs.arcs_exclude.push(arc);
        }
        'p' => {
            specs.flat_include.extend(spec(&value));
            p.flat = true;
            p.user_flat = true;
        }
        'P' => {
            if let Some(s) = spec(&value) {
                specs.flat_exclude.push(s);
                p.flat = true;
            } else {
                p.flat = false;
            }
            p.user_flat = true;
        }
        'q' => {
            if let Some(v) = &value {
                match ArcSpec::parse(v) {
                    Some(arc) => specs.arcs_include.push(arc),
                    None => specs.graph_include.push(SymSpec::parse(v)),
                }
            }
            p.graph = true;
            p.user_graph = true;
        }
        'Q' => {
            if let Some(v) = &value {
                match ArcSpec::parse(v) {
                    Some(arc) => specs.arcs_exclude.push(arc),
                    None => specs.graph_exclude.push(SymSpec::parse(v)),
                }
                p.graph = true;
            } else {
                p.graph = false;
            }
            p.user_graph = true;
        }
        'A' => {
            specs.anno_include.extend(spec(&value));
            p.anno = true;
            p.user_anno = true;
        }
        'J' => {
            if let Some(s) = spec(&value) {
                specs.anno_exclude.push(s);
                p.anno = true;
            } else {
                p.anno = false;
            }
            p.user_anno = true;
        }
        'I' => p
            .source_dirs
            .extend(value.unwrap_or_default().split(':').map(PathBuf::from)),
        'm' => {
            let v = value.unwrap_or_default();
            p.min_count = v
                .parse()
                .map_err(|e| crate::usage!("-m needs a count of calls, not `{v}`: {e}"))?;
        }
        'w' => {
            let v = value.unwrap_or_default();
            let w: i64 = v
                .parse()
                .map_err(|e| crate::usage!("-w needs a width in characters, not `{v}`: {e}"))?;
            p.opts.width = w.max(1) as usize;
        }
        other => crate::usage_bail!("unknown option -{other}\n\n{USAGE}"),
    }
    Ok(())
}
