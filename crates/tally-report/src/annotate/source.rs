//! Source annotation: each chosen file printed with the cost of every line
//! and the calls made there, with context around costly lines.

use super::Options;
use super::table::{Page, RULE, Table, cells, shown_labels};
use super::view::{Positions, View};
use crate::ReportError;
use rustc_hash::FxHashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use tally_analysis::add_into;
use tally_analysis::annotate::Analysis;
use tally_model::{Cost, FileId};

/// A source file to annotate.
pub(super) struct SourceFile<C> {
    pub name: String,
    pub path: Option<PathBuf>,
    pub text: Vec<String>,
    pub costs: Positions<C>,
    pub newer_than_profile: bool,
    pub user: bool,
}

/// What source annotation will show.
pub(super) struct Plan<C> {
    pub files: Vec<SourceFile<C>>,
    /// Cost of the files annotated.
    pub annotated: Vec<C>,
    /// Cost of the files whose source was not found (or not readable).
    pub not_found_cost: Vec<C>,
    /// Cost in files the profile does not name (`???` or empty).
    pub unknown: Vec<C>,
    /// Cost in files no row above the threshold has, and not named.
    pub below_threshold: Vec<C>,
    /// Cost on line 0 (no line information) within annotated files.
    pub no_line: Vec<C>,
    /// Cost on lines past the end of their file.
    pub past_end: Vec<C>,
    /// Files not found, with their costs, for the summary.
    pub not_found: Vec<(String, Vec<C>)>,
    /// Those of `not_found` found outside the source directories.
    pub left_out: Vec<String>,
}

/// A wanted source file found: its path and bytes, or why it could not
/// be read.
type Looked = Result<(PathBuf, Vec<u8>), String>;

pub(super) fn is_unknown(name: &[u8]) -> bool {
    name.is_empty() || name == b"???"
}

/// The kernel's and devices' files, never read as sources when a report
/// keeps to source directories, whatever those are: `/proc/self/environ`
/// holds the environment, and a device may never end.
const NEVER: [&str; 3] = ["/proc", "/sys", "/dev"];

/// The directories a report made to be published (`tally report --html`,
/// `tally serve`) reads sources from. Such a report may be made from a
/// profile from elsewhere, which can name any file (`fl=/etc/shadow`):
/// only files under these directories, once symlinks and `..` are
/// resolved, and never under `/proc`, `/sys` or `/dev`, are read.
#[derive(Clone, Debug)]
pub struct SourceDirs {
    /// Canonical, as the paths checked against them are.
    dirs: Vec<PathBuf>,
    /// Whether the directories were named: then they are searched as
    /// `tally annotate -I` searches its directories.
    named: bool,
}

impl SourceDirs {
    /// The directories `named`, or without any, those of the `inputs`
    /// (the profile files; `-` is standard input) and the current
    /// directory, leaving out `/`, which would allow every file. A named
    /// directory that cannot be resolved is an error naming it.
    pub fn new(named: &[PathBuf], inputs: &[PathBuf]) -> Result<SourceDirs, ReportError> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for d in named {
            let c = d.canonicalize().map_err(|e| {
                ReportError::Input(format!("source directory {}: {e}", d.display()))
            })?;
            if !c.is_dir() {
                return Err(ReportError::Input(format!(
                    "source directory {}: not a directory",
                    d.display()
                )));
            }
            dirs.push(c);
        }
        if named.is_empty() {
            let own = inputs
                .iter()
                .filter(|i| i.as_os_str() != "-")
                .filter_map(|i| i.parent());
            for d in own.chain([Path::new(".")]) {
                let d = if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                };
                if let Ok(c) = d.canonicalize()
                    && c.parent().is_some()
                    && c.is_dir()
                {
                    dirs.push(c);
                }
            }
        }
        dirs.sort();
        dirs.dedup();
        Ok(SourceDirs {
            dirs,
            named: !named.is_empty(),
        })
    }

    /// The directories, canonical.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The directories to search for sources besides the profile's
    /// names and the inputs' directories (`tally annotate -I`): the
    /// directories named, if any.
    pub fn search(&self) -> Vec<PathBuf> {
        if self.named {
            self.dirs.clone()
        } else {
            Vec::new()
        }
    }

    /// The canonical path of `path` if it may be read: under one of the
    /// directories and not under `/proc`, `/sys` or `/dev`.
    pub fn admit(&self, path: &Path) -> Option<PathBuf> {
        let c = path.canonicalize().ok()?;
        let never = NEVER.iter().any(|n| c.starts_with(n));
        (!never && self.dirs.iter().any(|d| c.starts_with(d))).then_some(c)
    }

    /// Whether the object file at `path` may be disassembled: object
    /// files are not kept to the directories (a program's libraries are
    /// elsewhere), but only a regular file is read, never one under
    /// `/proc`, `/sys` or `/dev` (`/dev/zero` would never end).
    pub fn admit_object(&self, path: &Path) -> Result<(), String> {
        let c = path
            .canonicalize()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if NEVER.iter().any(|n| c.starts_with(n)) {
            return Err(format!(
                "{}: under /proc, /sys or /dev, never read for a report",
                path.display()
            ));
        }
        if !c.is_file() {
            return Err(format!("{}: not a regular file", path.display()));
        }
        Ok(())
    }

    /// Where the source the profile names `name` is, searched as
    /// `tally annotate` searches (as named, under each `include`
    /// directory, next to each of the `inputs`), keeping to these
    /// directories.
    pub fn find(&self, name: &str, include: &[PathBuf], inputs: &[PathBuf]) -> Located {
        Locator::default().find(name, include, inputs, Some(self))
    }
}

/// A source file looked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Located {
    /// Found: the path as found (shown), and the one to read (canonical
    /// when checked against [`SourceDirs`]).
    Found {
        /// The path as found.
        path: PathBuf,
        /// The path read.
        read: PathBuf,
    },
    /// Found only outside the source directories: the first path found.
    LeftOut(PathBuf),
    /// Not found.
    Missing,
}

/// Finds sources as the profile names them, remembering which folders
/// are missing: a profile names hundreds of sources under a few build
/// folders that are not on this machine, and one look at a folder then
/// answers for all its files.
#[derive(Default)]
pub(super) struct Locator {
    /// Folder (its bytes: hashing a `Path` walks its components) →
    /// whether it is one.
    dirs: FxHashMap<Vec<u8>, bool>,
}

impl Locator {
    /// Finds the source of `name` as the profile gives it: as is, then
    /// under each include directory, then next to each input file.
    pub(super) fn locate(
        &mut self,
        name: &str,
        include: &[PathBuf],
        inputs: &[PathBuf],
    ) -> Option<PathBuf> {
        self.search(name, include, inputs, |_| true)
    }

    /// [`Locator::locate`], taking only files `dirs` admits (all without
    /// `dirs`): a file left out does not hide one found further on, under
    /// a source directory.
    pub(super) fn find(
        &mut self,
        name: &str,
        include: &[PathBuf],
        inputs: &[PathBuf],
        dirs: Option<&SourceDirs>,
    ) -> Located {
        let mut read = None;
        let mut refused = None;
        let found = self.search(name, include, inputs, |c| {
            let admitted = match dirs {
                Some(d) => d.admit(c),
                None => Some(c.to_path_buf()),
            };
            match admitted {
                Some(r) => {
                    read = Some(r);
                    true
                }
                None => {
                    refused.get_or_insert_with(|| c.to_path_buf());
                    false
                }
            }
        });
        match (found, read, refused) {
            (Some(path), Some(read), _) => Located::Found { path, read },
            (_, _, Some(p)) => Located::LeftOut(p),
            _ => Located::Missing,
        }
    }

    /// The first file `take` takes among the places `name` may be: as
    /// is, then under each include directory, then next to each input.
    fn search(
        &mut self,
        name: &str,
        include: &[PathBuf],
        inputs: &[PathBuf],
        mut take: impl FnMut(&Path) -> bool,
    ) -> Option<PathBuf> {
        let p = Path::new(name);
        if self.is_file(p) && take(p) {
            return Some(p.to_path_buf());
        }
        let rel = p.strip_prefix("/").unwrap_or(p);
        let dirs = include
            .iter()
            .map(PathBuf::as_path)
            .chain(inputs.iter().filter_map(|i| i.parent()));
        for d in dirs {
            let c = d.join(rel);
            // An input in the working folder gives `name` again (compared
            // as bytes: a `Path` compares component by component).
            if c.as_os_str() != p.as_os_str() && self.is_file(&c) && take(&c) {
                return Some(c);
            }
        }
        None
    }

    /// Whether `p` is a file; false without asking when its folder is
    /// known to be missing.
    fn is_file(&mut self, p: &Path) -> bool {
        if let Some(dir) = p.parent()
            && !dir.as_os_str().is_empty()
        {
            let key = dir.as_os_str().as_encoded_bytes();
            let is_dir = match self.dirs.get(key) {
                Some(&d) => d,
                None => {
                    let d = dir.is_dir();
                    self.dirs.insert(key.to_vec(), d);
                    d
                }
            };
            if !is_dir {
                return false;
            }
        }
        p.is_file()
    }
}

/// The bytes of the regular file at `path`: opened once, then checked,
/// so that what is read is the file found (a device swapped in would
/// never end).
fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Finds and reads the sources the report shows (the files the user
/// named, then with `auto` those of the rows shown), only under `dirs`
/// when given, and asks the analysis for the costs of their lines.
pub(super) fn plan<C: Cost>(
    a: &Analysis<'_, C>,
    dirs: Option<&SourceDirs>,
    warnings: &mut Vec<String>,
) -> Plan<C> {
    let o = a.opts;
    let sources = a.source_files();
    let events = sources.events;
    let file_cost: FxHashMap<FileId, &super::view::FileCost<C>> =
        sources.files.iter().map(|f| (f.id, f)).collect();
    let mut wanted: Vec<(FileId, bool)> = Vec::new();
    for p in &o.files {
        let found = sources
            .files
            .iter()
            .find(|f| same_file(&f.name, p, o))
            .map(|f| f.id);
        match found {
            Some(f) => {
                if !wanted.iter().any(|w| w.0 == f) {
                    wanted.push((f, true))
                }
            }
            None => warnings.push(format!(
                "{}: the profile has no costs for this file",
                p.display()
            )),
        }
    }
    if o.auto {
        for &f in &sources.of_rows {
            if !is_unknown(file_cost[&f].name.as_bytes()) && !wanted.iter().any(|w| w.0 == f) {
                wanted.push((f, false));
            }
        }
    }
    let ids: Vec<FileId> = wanted.iter().map(|w| w.0).collect();
    // Each file is looked for first, so that the lines of the profile are
    // summed for the files found only (a profile names many sources that
    // are not on this machine).
    let mut locator = Locator::default();
    let mut left_out = Vec::new();
    let looked: Vec<Option<Looked>> = wanted
        .iter()
        .map(|&(f, _)| {
            let name = &file_cost[&f].name;
            match locator.find(name, &o.include, &o.inputs, dirs) {
                Located::Found { path, read } => Some(match read_regular(&read) {
                    Ok(b) => Ok((path, b)),
                    Err(e) => Err(format!("{}: {e}", path.display())),
                }),
                Located::LeftOut(path) => {
                    warnings.push(format!(
                        "{}: left out: outside the source directories (name its directory with --source-dir DIR)",
                        path.display()
                    ));
                    left_out.push(name.clone());
                    None
                }
                Located::Missing => None,
            }
        })
        .collect();
    // Asked per block, call and jump: a lookup by index, not a search.
    let mut found = vec![false; sources.ids];
    for (&f, l) in ids.iter().zip(&looked) {
        if matches!(l, Some(Ok(_))) {
            found[f.index()] = true;
        }
    }
    let mut by_file = a.lines(|f| found.get(f.index()).copied().unwrap_or(false));
    let profile_time = o
        .inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .max();

    let mut files = Vec::new();
    let mut annotated = vec![C::ZERO; events];
    let mut not_found_cost = vec![C::ZERO; events];
    let mut unknown = vec![C::ZERO; events];
    let mut below_threshold = vec![C::ZERO; events];
    let mut not_found = Vec::new();
    let mut no_line = vec![C::ZERO; events];
    let mut past_end = vec![C::ZERO; events];
    for f in &sources.files {
        if is_unknown(f.name.as_bytes()) {
            add_into(&mut unknown, &f.cost);
        } else if !ids.contains(&f.id) {
            add_into(&mut below_threshold, &f.cost);
        }
    }
    for ((f, user), looked) in wanted.into_iter().zip(looked) {
        let name = file_cost[&f].name.clone();
        let costs = by_file.remove(&f).unwrap_or_default();
        // A file that cannot be found or read counts as not found.
        let found = looked.and_then(|l| match l {
            Ok(found) => Some(found),
            Err(e) => {
                warnings.push(e);
                None
            }
        });
        let Some((path, bytes)) = found else {
            let c = file_cost[&f].cost.clone();
            add_into(&mut not_found_cost, &c);
            not_found.push((name, c));
            continue;
        };
        let text: Vec<String> = String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| l.replace('\t', "    "))
            .collect();
        let newer = match (
            profile_time,
            std::fs::metadata(&path).and_then(|m| m.modified()).ok(),
        ) {
            (Some(p), Some(s)) => s > p,
            _ => false,
        };
        if newer {
            warnings.push(format!(
                "{}: the source is newer than the profile; its annotation may be wrong",
                path.display()
            ));
        }
        for (&line, c) in &costs.costs {
            if line == 0 {
                add_into(&mut no_line, c);
            } else if line as usize > text.len() {
                add_into(&mut past_end, c);
            }
        }
        if costs
            .costs
            .keys()
            .chain(costs.calls.keys())
            .any(|&l| l as usize > text.len())
        {
            warnings.push(format!(
                "{}: the profile has counts for lines past the end of the file ({} lines); they are shown at the end, marked",
                path.display(),
                text.len()
            ));
        }
        add_into(&mut annotated, &file_cost[&f].cost);
        files.push(SourceFile {
            name,
            path: Some(path),
            text,
            costs,
            newer_than_profile: newer,
            user,
        });
    }
    Plan {
        files,
        annotated,
        not_found_cost,
        unknown,
        below_threshold,
        no_line,
        past_end,
        not_found,
        left_out,
    }
}

/// Whether the profile's file name `name` is the file the user named.
fn same_file(name: &str, user: &Path, o: &Options) -> bool {
    if Path::new(name) == user {
        return true;
    }
    match (
        Locator::default()
            .locate(name, &o.include, &o.inputs)
            .and_then(|p| p.canonicalize().ok()),
        user.canonicalize().ok(),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Which lines to print: those with costs or calls, with `context` lines
/// around them, as sorted, merged ranges (1-based, inclusive).
pub(super) fn ranges<C: Cost>(
    costs: &Positions<C>,
    len: usize,
    context: usize,
) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let hot = costs
        .costs
        .iter()
        .filter(|(_, v)| v.iter().any(|c| !c.is_zero()))
        .map(|(&l, _)| l)
        .chain(costs.calls.keys().copied())
        .filter(|&l| l > 0 && (l as usize) <= len);
    let mut hot: Vec<u64> = hot.collect();
    hot.sort_unstable();
    hot.dedup();
    for l in hot {
        let l = l as usize;
        let lo = l.saturating_sub(context).max(1);
        let hi = (l + context).min(len);
        match out.last_mut() {
            Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// Writes each source file's annotation, then what could not be annotated.
pub(super) fn write_text<C: Cost>(
    a: &View<C>,
    plan: &Plan<C>,
    page: &mut Page<'_>,
) -> io::Result<()> {
    let (out, style) = (&mut *page.out, page.style);
    let zero = vec![C::ZERO; a.totals.len()];
    let labels = shown_labels(a);
    for f in &plan.files {
        let mut t = Table::new(labels.clone());
        let kind = if f.user { "User" } else { "Auto" };
        let path = f
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let title = if path == f.name {
            format!("-- {kind}-annotated source: {}", f.name)
        } else {
            format!("-- {kind}-annotated source: {} ({path})", f.name)
        };
        if f.newer_than_profile {
            t.text(style.hot("@@ WARNING: the source is newer than the profile; the counts may not match its lines"));
        }
        let len = f.text.len();
        let ranges = ranges(&f.costs, len, a.options.context);
        if ranges.is_empty() {
            t.text("  (no costs on any line of this file)".into());
        }
        let mut prev_end = 0usize;
        for (lo, hi) in ranges {
            if lo > prev_end + 1 || prev_end == 0 {
                t.text(style.dim(&format!("-- line {lo} {}", "-".repeat(40))));
            }
            for l in lo..=hi {
                let c = f.costs.costs.get(&(l as u64));
                t.row(
                    cells(a, Some(c.map(|v| v.as_slice()).unwrap_or(&zero)), true),
                    f.text[l - 1].clone(),
                );
                call_lines(a, &mut t, &f.costs, l as u64);
            }
            prev_end = hi;
        }
        if prev_end > 0 && prev_end < len {
            t.text(style.dim(&format!("-- line {} {}", prev_end + 1, "-".repeat(40))));
        }
        // Lines the file does not have.
        let past: Vec<u64> = f
            .costs
            .costs
            .keys()
            .chain(f.costs.calls.keys())
            .copied()
            .filter(|&l| l as usize > len)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !past.is_empty() {
            t.text(style.hot(&format!(
                "@@ counts on lines past the end of the file ({len} lines):"
            )));
            for l in past {
                let c = f.costs.costs.get(&l);
                t.row(
                    cells(a, Some(c.map(|v| v.as_slice()).unwrap_or(&zero)), true),
                    format!("<line {l} past the end>"),
                );
                call_lines(a, &mut t, &f.costs, l);
            }
        }
        writeln!(out, "{RULE}")?;
        writeln!(out, "{}", style.bold(&title))?;
        t.print(out, "", style)?;
        writeln!(out)?;
    }
    // What could not be annotated.
    let mut t = Table::new(labels.clone());
    let mut left_out = vec![C::ZERO; a.totals.len()];
    for (name, cost) in &plan.not_found {
        if plan.left_out.contains(name) {
            add_into(&mut left_out, cost);
        }
    }
    let mut words = vec![
        (
            &plan.annotated,
            "annotated: files known, found and annotated",
        ),
        (&plan.not_found_cost, "unannotated: files known, not found"),
    ];
    if !plan.left_out.is_empty() {
        words.push((
            &left_out,
            "  of which left out: outside the source directories (--source-dir DIR)",
        ));
    }
    words.extend([
        (&plan.unknown, "unannotated: unknown file (???)"),
        (
            &plan.below_threshold,
            "unannotated: files below the threshold and not named",
        ),
    ]);
    for (c, text) in words {
        t.row(cells(a, Some(c), false), text.to_string());
    }
    if plan.no_line.iter().any(|c| !c.is_zero()) {
        t.row(
            cells(a, Some(&plan.no_line), false),
            "  of which on line 0 (no line information)".into(),
        );
    }
    if plan.past_end.iter().any(|c| !c.is_zero()) {
        t.row(
            cells(a, Some(&plan.past_end), false),
            "  of which past the end of their file".into(),
        );
    }
    let primary = a.primary();
    let mut missing: Vec<&(String, Vec<C>)> = plan.not_found.iter().collect();
    missing.sort_by(|x, y| {
        a.events
            .value(&y.1, primary)
            .cmp(&a.events.value(&x.1, primary))
            .then(x.0.cmp(&y.0))
    });
    const LISTED: usize = 15;
    for (name, c) in missing.iter().take(LISTED) {
        let why = if plan.left_out.contains(name) {
            "left out"
        } else {
            "not found"
        };
        t.row(cells(a, Some(c), false), format!("  {why}: {name}"));
    }
    if missing.len() > LISTED {
        t.text(format!(
            "  ... and {} more files not found (use -I DIR to say where sources are)",
            missing.len() - LISTED
        ));
    }
    writeln!(out, "{RULE}")?;
    writeln!(out, "{}", style.bold("-- Annotation summary"))?;
    t.print(out, "", style)?;
    writeln!(out)
}

/// The calls made from a line, one line per callee (summed over the
/// functions that call it from there), costliest first. Calls inside a
/// recursion or cycle get their own line, with their count and no cost.
fn call_lines<C: Cost>(a: &View<C>, t: &mut Table, costs: &Positions<C>, at: u64) {
    let primary = a.primary();
    for call in costs.calls_by_callee(at, |v| a.events.value(v, primary)) {
        let mut name = call.callee.file_function();
        if !call.callee.object.is_empty() {
            name.push_str(&format!(" [{}]", call.callee.object));
        }
        t.row(
            cells(a, call.cost.as_deref(), true),
            format!(
                "  => {name} ({}x){}",
                crate::format::thousands(call.count.to_i128()),
                super::inside_mark(call.kind)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{Located, Locator, SourceDirs};
    use std::fs;
    use std::path::PathBuf;

    /// Only files under the directories are admitted, once symlinks and
    /// `..` are resolved; never the kernel's or devices' files, even under
    /// `/`; a file left out does not hide one found further on.
    #[test]
    fn source_dirs_admit_only_what_is_under_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        fs::create_dir_all(d.join("src")).unwrap();
        fs::create_dir_all(d.join("outside")).unwrap();
        fs::write(d.join("src/a.c"), "a\n").unwrap();
        fs::write(d.join("outside/secret.c"), "s\n").unwrap();
        std::os::unix::fs::symlink(d.join("outside/secret.c"), d.join("src/link.c")).unwrap();
        std::os::unix::fs::symlink("/proc/self/environ", d.join("src/env")).unwrap();
        let dirs = SourceDirs::new(&[d.join("src")], &[]).unwrap();
        assert_eq!(dirs.dirs(), [d.join("src")]);
        assert_eq!(dirs.admit(&d.join("src/a.c")), Some(d.join("src/a.c")));
        assert_eq!(dirs.admit(&d.join("src/../outside/secret.c")), None);
        assert_eq!(dirs.admit(&d.join("src/link.c")), None);
        assert_eq!(dirs.admit(&d.join("src/env")), None);
        let everything = SourceDirs::new(&[PathBuf::from("/")], &[]).unwrap();
        assert_eq!(
            everything.admit(&d.join("outside/secret.c")),
            Some(d.join("outside/secret.c"))
        );
        assert_eq!(everything.admit("/proc/self/environ".as_ref()), None);
        // Found as named outside, then under the source directory.
        let named = d.join("outside/secret.c");
        let named = named.to_str().unwrap();
        let mine = d.join("src").join(named.trim_start_matches('/'));
        fs::create_dir_all(mine.parent().unwrap()).unwrap();
        fs::write(&mine, "mine\n").unwrap();
        assert_eq!(
            dirs.find(named, &dirs.search(), &[]),
            Located::Found {
                path: mine.clone(),
                read: mine.clone(),
            }
        );
        assert_eq!(
            dirs.find(named, &[], &[]),
            Located::LeftOut(d.join("outside/secret.c"))
        );
        assert_eq!(dirs.find("/nonexistent/x.c", &[], &[]), Located::Missing);
        // Without directories named: the inputs' own and the current one.
        let inputs = [d.join("outside/callgrind.out")];
        let own = SourceDirs::new(&[], &inputs).unwrap();
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert!(own.dirs().contains(&d.join("outside")));
        assert!(own.dirs().contains(&cwd) || cwd.parent().is_none());
        assert!(own.search().is_empty());
        let Err(e) = SourceDirs::new(&[d.join("missing")], &[]) else {
            panic!("a missing directory is accepted");
        };
        assert!(e.to_string().contains("missing"), "{e}");
    }

    /// A missing folder answers for its files, and the search still finds
    /// a file as named, under an include folder and next to the input.
    #[test]
    fn the_locator_finds_what_the_filesystem_has() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("src/sub")).unwrap();
        fs::create_dir_all(d.join("inc/build/x")).unwrap();
        fs::write(d.join("src/a.c"), "a\n").unwrap();
        fs::write(d.join("inc/build/x/b.c"), "b\n").unwrap();
        fs::write(d.join("c.c"), "c\n").unwrap();
        let inputs = [d.join("callgrind.out")];
        let include = [d.join("inc")];
        let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
        let mut l = Locator::default();
        let missing = s(&d.join("gone/a.c"));
        for _ in 0..2 {
            assert_eq!(l.locate(&missing, &include, &inputs), None);
        }
        let a = s(&d.join("src/a.c"));
        assert_eq!(l.locate(&a, &include, &inputs), Some(d.join("src/a.c")));
        assert_eq!(l.locate(&s(&d.join("src/sub/none.c")), &include, &[]), None);
        // Not under its own name: under the include folder, then next to
        // the input.
        assert_eq!(
            l.locate("/build/x/b.c", &include, &inputs),
            Some(d.join("inc/build/x/b.c"))
        );
        assert_eq!(l.locate("c.c", &include, &inputs), Some(d.join("c.c")));
        assert_eq!(l.locate("build/y/b.c", &include, &inputs), None);
    }
}
