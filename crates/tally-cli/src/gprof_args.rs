//! `tally gprof`'s command line, parsed by GNU gprof's getopt rules:
//! `-pNAME` attaches an optional value, `-p NAME` does not; long options
//! map to the short ones.

use std::path::PathBuf;

use anyhow::{Context, Result};
use tally_analysis::gprof::{ArcSpec, Options, SymSpec};

pub const USAGE: &str = "\
Usage: tally gprof [OPTIONS] [PROGRAM] [GMON...]
       tally gprof [OPTIONS] CALLGRIND-PROFILE

gprof's flat profile and call graph, from a program built with -pg and the
gmon.out files of its runs (default: a.out and gmon.out), or from a Callgrind
profile (costs in an event instead of seconds).

Output:
  -b, --brief                   no explanations of the columns
  -p[NAME], --flat-profile[=NAME]   the flat profile (only NAME's line)
  -P[NAME], --no-flat-profile[=NAME]  no flat profile (leave NAME out)
  -q[NAME], --graph[=NAME]      the call graph (only NAME and its descendants;
                                FROM/TO: only that arc)
  -Q[NAME], --no-graph[=NAME]   no call graph (leave NAME out; FROM/TO: that arc)
  -A[NAME], --annotated-source[=NAME]  source annotated with call counts
  -J[NAME], --no-annotated-source[=NAME]
  -l, --line                    one entry per source line
  -s, --sum                     write gmon.sum, the sum of the gmon files
      --json                    the same content as JSON
Analysis:
  -a, --no-static               leave static functions out
  -c, --static-call-graph       add calls found in the code (count 0)
      --gnu-compatible          reproduce GNU gprof 2.40's errors, to compare
                                outputs (see docs/gprof.md)
  -z, --display-unused-functions  also show functions never called or sampled
  -e NAME / -E NAME             leave NAME out of the graph (-E: and its time)
  -f NAME / -F NAME             only NAME in the graph (-F: only its time)
  -n[NAME] / -N[NAME]           only NAME's time / not NAME's time propagates
  -k FROM/TO                    delete the arc FROM -> TO
  -m N, --min-count=N           annotate only lines run at least N times
  -D, --ignore-non-functions    only symbols marked as functions
  -L, --print-path              full source paths
  -I DIRS, --directory-path=DIRS  where to look for sources (colon-separated)
  -w N, --width=N               width of the index (default 80)
      --demangle / --no-demangle  C++ and Rust names (demangled by default)
  -x, --all-lines               annotate every line of a block
Callgrind input:
      --event=NAME              the event to analyse (default: the first)
";

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
        .with_context(|| format!("option {name} needs a value"))?
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
        'h' => {
            print!("{USAGE}");
            std::process::exit(0);
        }
        'v' => {
            println!("tally gprof {}", env!("CARGO_PKG_VERSION"));
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
            let arc = ArcSpec::parse(&v).with_context(|| format!("-k needs FROM/TO, not `{v}`"))?;
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
                .with_context(|| format!("-m needs a number, not `{v}`"))?;
        }
        'w' => {
            let v = value.unwrap_or_default();
            let w: i64 = v
                .parse()
                .with_context(|| format!("-w needs a number, not `{v}`"))?;
            p.opts.width = w.max(1) as usize;
        }
        other => crate::usage_bail!("unknown option -{other}\n\n{USAGE}"),
    }
    Ok(())
}
