//! Files tally writes, read by the other tools that read Callgrind files:
//! KCachegrind (its loader's rules, encoded in [`kcachegrind`]) and
//! callgrind_annotate (run live) read the same numbers as tally.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_analysis::combine::{RecordKey, records};
use tally_testutil::{path_str as s, text};

type Records = BTreeMap<RecordKey, Vec<i128>>;

/// KCachegrind's reading of a Callgrind file, after the rules of its
/// loader, `CachegrindLoader` in KCachegrind's
/// `libviews/../libcore/cachegrindloader.cpp` (KCachegrind 22.12):
///
/// - `parsePosition`: a subposition `*`, `+n` or `-n` is relative to the
///   position of the last line that starts with a position, whatever its
///   kind (plain cost line, call cost line, jump source line); the target
///   on a `jump=`/`jcnd=` line is relative to it too and moves nothing; a
///   line number below zero is the error "Negative line number" (and reads
///   as 0);
/// - `loadInternal`, `calls=`: only the count is read (an unsigned
///   number; the target positions are skipped), and the next position line
///   is the call's cost line; `jump=`/`jcnd=` counts are unsigned numbers;
///   `fn=`, `fl=`, `fi=`, `fe=` leave the position as it is; `fn=` returns
///   to the `fl=` file, `ob=` forgets the function; `cob=`/`cfi=` hold
///   until the next call cost line, `jfi=`/`jfn=` until the next jump;
///   unknown keys are "Invalid line"; costs are unsigned numbers
///   (`TraceCost::addCost`), anything left is "Garbage at end of … line";
/// - `prepareNewPart`, `clearCompression`, `clearPosition`: `pid:`,
///   `part:`, `thread:`, `positions:` and `events:` after a part's
///   `events:` start a new part, which forgets every name id, the position
///   and the context;
/// - `compressedObject`, `compressedFile`, `compressedFunction`: `(id)`
///   must be defined in the part; an id names a *function* (object, file
///   and name, those current where it is defined: for `cfn=` the call's
///   `cob=`/`cfi=` or the current ones, for `jfn=` the `jfi=` file or the
///   current one), so a later `(id)` means that function whatever the
///   current object and file.
///
/// Negative costs are read here as numbers (KCachegrind has no signed
/// costs) and counted in `negative_costs`, so that a difference's other
/// numbers can still be compared.
mod kcachegrind {
    use super::Records;
    use std::collections::HashMap;
    use tally_analysis::combine::RecordKey;

    type Func = [Vec<u8>; 3];

    /// What KCachegrind reads from a file.
    pub struct Read {
        /// Its loader's errors and warnings, with line numbers.
        pub warnings: Vec<String>,
        /// The records, keyed as tally's (call targets empty: not read).
        pub records: Records,
        /// Cost lines with a negative cost (a difference's).
        pub negative_costs: usize,
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Next {
        SelfCost,
        Call,
        Jump(bool),
    }

    #[derive(Default)]
    struct State {
        has_addr: bool,
        has_line: bool,
        mapping: Option<usize>,
        pos: (u64, u64),
        target: (u64, u64),
        objects: HashMap<u64, Vec<u8>>,
        files: HashMap<u64, Vec<u8>>,
        functions: HashMap<u64, Func>,
        object: Option<Vec<u8>>,
        file: Option<Vec<u8>>,
        function_file: Option<Vec<u8>>,
        function: Option<Func>,
        called_object: Option<Vec<u8>>,
        called_file: Option<Vec<u8>>,
        called_function: Option<Func>,
        call_count: u64,
        jump_file: Option<Vec<u8>>,
        jump_function: Option<Func>,
        followed: u64,
        executed: u64,
    }

    /// Splits `(id) name` / `(id)` / `name`.
    fn compressed(v: &[u8]) -> Option<(u64, Option<Vec<u8>>)> {
        if v.len() < 2 || v[0] != b'(' || !v[1].is_ascii_digit() {
            return None;
        }
        let close = v.iter().position(|&b| b == b')')?;
        let id = std::str::from_utf8(&v[1..close]).ok()?.parse().ok()?;
        let rest = v[close + 1..].trim_ascii_start();
        Some((id, (!rest.is_empty()).then(|| rest.to_vec())))
    }

    /// An unsigned number (decimal or `0x` hex) at the start of `s`, and
    /// the rest.
    fn number(s: &[u8]) -> Option<(u64, &[u8])> {
        if let Some(h) = s.strip_prefix(b"0x") {
            let n = h.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            let v = u64::from_str_radix(std::str::from_utf8(&h[..n]).ok()?, 16).ok()?;
            return Some((v, &h[n..]));
        }
        let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let v = std::str::from_utf8(&s[..n]).ok()?.parse().ok()?;
        Some((v, &s[n..]))
    }

    impl State {
        fn new_part(&mut self) {
            if self.mapping.is_none() {
                return;
            }
            let (has_addr, has_line) = (self.has_addr, self.has_line);
            *self = State {
                has_addr,
                has_line,
                ..State::default()
            };
        }

        fn name(
            space: &mut HashMap<u64, Vec<u8>>,
            v: &[u8],
            warn: &mut dyn FnMut(String),
        ) -> Vec<u8> {
            match compressed(v) {
                None => v.to_vec(),
                Some((id, Some(name))) => {
                    space.insert(id, name.clone());
                    name
                }
                Some((id, None)) => space.get(&id).cloned().unwrap_or_else(|| {
                    warn(format!("Undefined compressed index {id}"));
                    Vec::new()
                }),
            }
        }

        fn function(
            &mut self,
            v: &[u8],
            object: Vec<u8>,
            file: Vec<u8>,
            warn: &mut dyn FnMut(String),
        ) -> Func {
            match compressed(v) {
                None => [object, file, v.to_vec()],
                Some((id, Some(name))) => {
                    let f = [object, file, name];
                    self.functions.insert(id, f.clone());
                    f
                }
                Some((id, None)) => self.functions.get(&id).cloned().unwrap_or_else(|| {
                    warn(format!("Undefined compressed function index {id}"));
                    Default::default()
                }),
            }
        }

        /// `parsePosition` into `(addr, line)`, relative to `self.pos`.
        fn position<'a>(
            &self,
            mut s: &'a [u8],
            warn: &mut dyn FnMut(String),
        ) -> Option<((u64, u64), &'a [u8])> {
            let mut p = self.pos;
            let mut one = |s: &'a [u8], base: u64, line: bool| -> Option<(u64, &'a [u8])> {
                let (v, rest) = match s.first()? {
                    b'*' => (base, &s[1..]),
                    b'+' => {
                        let (d, r) = number(&s[1..])?;
                        (base.wrapping_add(d), r)
                    }
                    b'-' => {
                        let (mut d, r) = number(&s[1..])?;
                        if line && base < d {
                            warn(format!("Negative line number {}", base as i128 - d as i128));
                            d = base;
                        }
                        (base.wrapping_sub(d), r)
                    }
                    b'0'..=b'9' => number(s)?,
                    _ => return None,
                };
                Some((v, rest.trim_ascii_start()))
            };
            if self.has_addr {
                let (v, r) = one(s, self.pos.0, false)?;
                p.0 = v;
                s = r;
            }
            if self.has_line {
                let (v, r) = one(s, self.pos.1, true)?;
                p.1 = v;
                s = r;
            }
            Some((p, s))
        }

        fn positions(&self, p: (u64, u64)) -> Vec<u64> {
            let mut v = Vec::new();
            if self.has_addr {
                v.push(p.0);
            }
            if self.has_line {
                v.push(p.1);
            }
            v
        }
    }

    /// Reads `text` as KCachegrind's loader does.
    pub fn read(text: &[u8]) -> Read {
        let mut warnings = Vec::new();
        let mut records = Records::new();
        let mut negative_costs = 0;
        let mut st = State {
            has_line: true,
            ..State::default()
        };
        let mut next = Next::SelfCost;
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let line_no = i + 1;
            let mut warn = |m: String| {
                let m = format!("line {line_no}: {m}");
                warnings.push(m);
            };
            let Some(&c) = line.first() else { continue };
            if c == b'#' {
                continue;
            }
            if c > b'9' {
                let key_value = |k: &[u8]| line.strip_prefix(k);
                if let Some(v) = key_value(b"fl=") {
                    let f = State::name(&mut st.files, v, &mut warn);
                    st.file = Some(f.clone());
                    st.function_file = Some(f);
                } else if let Some(v) = key_value(b"fi=").or_else(|| key_value(b"fe=")) {
                    st.file = Some(State::name(&mut st.files, v, &mut warn));
                } else if let Some(v) = key_value(b"fn=") {
                    st.file = st.function_file.clone();
                    let (o, f) = (
                        st.object.clone().unwrap_or_default(),
                        st.file.clone().unwrap_or_default(),
                    );
                    st.function = Some(st.function(v, o, f, &mut warn));
                } else if let Some(v) = key_value(b"ob=") {
                    st.object = Some(State::name(&mut st.objects, v, &mut warn));
                    st.function = None;
                } else if let Some(v) = key_value(b"cob=") {
                    st.called_object = Some(State::name(&mut st.objects, v, &mut warn));
                } else if let Some(v) = key_value(b"cfi=").or_else(|| key_value(b"cfl=")) {
                    st.called_file = Some(State::name(&mut st.files, v, &mut warn));
                } else if let Some(v) = key_value(b"cfn=") {
                    let o = st.called_object.clone().or(st.object.clone());
                    let f = st.called_file.clone().or(st.file.clone());
                    st.called_function = Some(st.function(
                        v,
                        o.unwrap_or_default(),
                        f.unwrap_or_default(),
                        &mut warn,
                    ));
                } else if let Some(v) = key_value(b"calls=") {
                    // `stripUInt64`: no number reads as 0, silently.
                    match number(v) {
                        Some((n, _)) => st.call_count = n,
                        None => {
                            warn("call count is not an unsigned number (read as 0)".into());
                            st.call_count = 0;
                        }
                    }
                    next = Next::Call;
                } else if let Some(v) = key_value(b"jcnd=").or_else(|| key_value(b"jump=")) {
                    let cond = line.starts_with(b"jcnd=");
                    let counts = if cond {
                        number(v).and_then(|(f, r)| {
                            let (e, r) = number(r.strip_prefix(b"/")?)?;
                            Some(((f, e), r))
                        })
                    } else {
                        // tally keeps an unconditional jump as taken
                        // every time; KCachegrind has no taken count for it.
                        number(v).map(|(e, r)| ((e, e), r))
                    };
                    let target = counts.and_then(|(c, r)| {
                        Some((c, st.position(r.trim_ascii_start(), &mut warn)?))
                    });
                    match target {
                        Some(((f, e), (t, _))) => {
                            (st.followed, st.executed, st.target) = (f, e, t);
                            next = Next::Jump(cond);
                        }
                        None => warn("Invalid line after 'jcnd'/'jump'".into()),
                    }
                } else if let Some(v) = key_value(b"jfi=") {
                    st.jump_file = Some(State::name(&mut st.files, v, &mut warn));
                } else if let Some(v) = key_value(b"jfn=") {
                    let f = st.jump_file.clone().or(st.file.clone()).unwrap_or_default();
                    let o = st.object.clone().unwrap_or_default();
                    st.jump_function = Some(st.function(v, o, f, &mut warn));
                } else if key_value(b"events:").is_some() {
                    st.new_part();
                    let n = line[7..].split(|b| b.is_ascii_whitespace());
                    st.mapping = Some(n.filter(|e| !e.is_empty()).count());
                } else if let Some(v) = key_value(b"positions:") {
                    st.new_part();
                    let v = String::from_utf8_lossy(v);
                    st.has_line = v.contains("line");
                    st.has_addr = v.contains("instr");
                } else if [&b"part:"[..], b"pid:", b"thread:"]
                    .iter()
                    .any(|k| line.starts_with(k))
                {
                    st.new_part();
                } else if [
                    &b"cmd:"[..],
                    b"creator:",
                    b"totals:",
                    b"summary:",
                    b"desc:",
                    b"event:",
                    b"version:",
                    b"timeframe (BB):",
                ]
                .iter()
                .any(|k| line.starts_with(k))
                {
                } else {
                    warn(format!("Invalid line '{}'", String::from_utf8_lossy(line)));
                }
                continue;
            }
            let Some((pos, rest)) = st.position(line, &mut warn) else {
                warn("Invalid position specification".into());
                continue;
            };
            st.pos = pos;
            let Some(n_events) = st.mapping else {
                warn("data found before 'events' line".into());
                continue;
            };
            let Some(function) = st.function.clone() else {
                warn("Function not specified".into());
                continue;
            };
            let file = st.file.clone().unwrap_or_default();
            let here = st.positions(pos);
            let mut costs = vec![0i128; n_events];
            let mut garbage = false;
            let mut negative = false;
            for (k, tok) in rest
                .split(|b| b.is_ascii_whitespace())
                .filter(|t| !t.is_empty())
                .enumerate()
            {
                let v = std::str::from_utf8(tok)
                    .ok()
                    .and_then(|t| t.parse::<i128>().ok());
                match (costs.get_mut(k), v) {
                    (Some(c), Some(v)) => {
                        negative |= v < 0;
                        *c = v;
                    }
                    _ => garbage = true,
                }
            }
            if garbage {
                warn("Garbage at end of cost line".into());
            }
            negative_costs += usize::from(negative);
            let mut add = |k: RecordKey, v: Vec<i128>| {
                let e = records.entry(k).or_insert_with(|| vec![0; v.len()]);
                e.iter_mut().zip(v).for_each(|(a, b)| *a += b);
            };
            match std::mem::replace(&mut next, Next::SelfCost) {
                Next::SelfCost => add(RecordKey::Line(function, file, here), costs),
                Next::Call => {
                    let callee = st.called_function.clone().unwrap_or_default();
                    let mut v = vec![i128::from(st.call_count)];
                    v.extend(costs);
                    add(RecordKey::Call(function, file, callee, here, Vec::new()), v);
                    st.called_file = None;
                    st.called_object = None;
                    st.call_count = 0;
                }
                Next::Jump(cond) => {
                    let to = st.jump_function.take().unwrap_or_else(|| function.clone());
                    let to_file = st.jump_file.take().unwrap_or_else(|| file.clone());
                    let target = st.positions(st.target);
                    let v = vec![i128::from(st.executed), i128::from(st.followed)];
                    add(
                        RecordKey::Jump(function, file, to, to_file, cond, here, target),
                        v,
                    );
                }
            }
        }
        records.retain(|_, v| v.iter().any(|&x| x != 0));
        Read {
            warnings,
            records,
            negative_costs,
        }
    }
}

/// tally's records of `path`, with call targets left out (KCachegrind
/// does not read them).
fn tally_records(path: &Path) -> Records {
    let (p, _) = tally_formats::read_file::<i64>(path, None)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut m = Records::new();
    for (k, v) in records(&p) {
        let k = match k {
            RecordKey::Call(a, b, c, d, _) => RecordKey::Call(a, b, c, d, Vec::new()),
            k => k,
        };
        let e = m.entry(k).or_insert_with(|| vec![0; v.len()]);
        e.iter_mut().zip(v).for_each(|(a, b)| *a += b);
    }
    m.retain(|_, v| v.iter().any(|&x| x != 0));
    m
}

/// KCachegrind's loader gives no warning on `path` (a file tally wrote)
/// and reads tally's numbers, but for a difference's calls and jumps that
/// tally hides from it (see the writer); returns how many cost lines hold a
/// negative cost, which KCachegrind cannot show.
fn kcachegrind_reads(path: &Path, diff: bool) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let k = kcachegrind::read(&bytes);
    assert!(
        k.warnings.is_empty(),
        "{}: KCachegrind's loader would warn {} times: {:#?}",
        path.display(),
        k.warnings.len(),
        &k.warnings[..k.warnings.len().min(10)]
    );
    let mut ours = tally_records(path);
    assert!(!ours.is_empty(), "{}: no records", path.display());
    if diff {
        let before = ours.len();
        ours.retain(|k, v| match k {
            RecordKey::Call(..) => v[0] > 0,
            RecordKey::Jump(..) => v[0] >= 0 && v[1] >= 0,
            RecordKey::Line(..) => true,
        });
        assert!(ours.len() < before, "{}: nothing hidden", path.display());
    }
    if k.records != ours {
        let show = |a: &Records, b: &Records| -> Vec<String> {
            a.iter()
                .filter(|(r, v)| b.get(r) != Some(v))
                .take(5)
                .map(|(r, v)| format!("{}: {v:?}", show_key(r)))
                .collect()
        };
        let (only_k, only_t) = (show(&k.records, &ours), show(&ours, &k.records));
        panic!(
            "{}: KCachegrind reads other numbers than tally:\nKCachegrind: {only_k:?}\ntally: {only_t:?}",
            path.display()
        );
    }
    k.negative_costs
}

/// A record key in words, for failure messages.
fn show_key(k: &RecordKey) -> String {
    let t = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let f = |f: &[Vec<u8>; 3]| format!("{}:{}:{}", t(&f[0]), t(&f[1]), t(&f[2]));
    match k {
        RecordKey::Line(func, file, p) => format!("line {} in {} at {p:x?}", f(func), t(file)),
        RecordKey::Call(a, file, b, site, _) => {
            format!("call {} -> {} in {} at {site:x?}", f(a), f(b), t(file))
        }
        RecordKey::Jump(a, file, b, tf, c, src, dst) => format!(
            "jump{} {} in {} at {src:x?} -> {} in {} at {dst:x?}",
            if *c { " (cond)" } else { "" },
            f(a),
            t(file),
            f(b),
            t(tf)
        ),
    }
}

fn tally_ok(args: &[&str]) {
    tally_testutil::tally!().ok(args);
}

#[test]
fn kcachegrind_rules_read_valgrind_files_as_tally_does() {
    // The check itself: Valgrind's own files, read by both.
    for f in [
        "workload.jumps.out",
        "mutual.combined.out",
        "inline.instr.out",
    ] {
        kcachegrind_reads(&tally_testutil::data("callgrind").join(f), false);
    }
}

#[test]
fn kcachegrind_reads_every_converted_fixture() {
    let d = tally_testutil::temp_dir();
    let mut n = 0;
    for e in std::fs::read_dir(tally_testutil::data("callgrind")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.contains(".annotate") {
            continue;
        }
        for compress in [true, false] {
            let out = d.path().join(format!("{name}.{compress}"));
            let mut args = vec!["convert", s(&p), "--to", "callgrind", "-o", s(&out)];
            if !compress {
                args.push("--no-compress");
            }
            tally_ok(&args);
            kcachegrind_reads(&out, false);
            n += 1;
        }
    }
    assert!(n > 40, "{n} fixtures");
}

#[test]
fn kcachegrind_reads_parts_with_names_defined_again() {
    // Four threads as the parts of one profile: KCachegrind forgets the
    // name ids at each part.
    let d = tally_testutil::temp_dir();
    let dir = tally_testutil::data("callgrind");
    let files: Vec<PathBuf> = (1..=4)
        .map(|i| dir.join(format!("threads.threads.out-0{i}")))
        .collect();
    let out = d.path().join("parts.out");
    let mut args = vec!["convert", "--to", "callgrind", "-o", s(&out)];
    args.extend(files.iter().map(|p| s(p)));
    tally_ok(&args);
    let t = std::fs::read_to_string(&out).unwrap();
    assert_eq!(t.matches("\npart: ").count(), 4);
    kcachegrind_reads(&out, false);
}

#[test]
fn kcachegrind_reads_converted_gmon_files() {
    let dir = tally_testutil::data("gprof");
    let d = tally_testutil::temp_dir();
    for bin in ["cycles.O0", "cycles.O2", "deep.O2", "multi.O0", "multi.O2"] {
        let out = d.path().join(format!("{bin}.callgrind"));
        let (b, g) = (dir.join(bin), dir.join(format!("{bin}.gmon")));
        tally_ok(&[
            "convert",
            s(&g),
            "--binary",
            s(&b),
            "--to",
            "callgrind",
            "-o",
            s(&out),
        ]);
        kcachegrind_reads(&out, false);
    }
}

/// A program whose calls change with its argument: with `0`, `only_a` is
/// called and `shrinks` loops long; with `1`, `only_b` is called instead
/// and `shrinks` loops short (the same one call, less inside); `leaf` is
/// called from all three, fewer times in all.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static int leaf(int x) { return x * 3 + (x >> 2); }
__attribute__((noinline)) static int only_a(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += leaf(i);
    return s;
}
__attribute__((noinline)) static int only_b(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s ^= leaf(i);
    return s;
}
__attribute__((noinline)) static int shrinks(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += leaf(i) % 7;
    return s;
}
int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 0;
    int s = mode == 0 ? only_a(900) : only_b(400);
    s += shrinks(mode == 0 ? 2000 : 300);
    printf("%d\n", s);
    return 0;
}
"#;

/// Compiles [`PROGRAM`] and profiles it with `0` and `1` at the
/// instruction level with jumps; `None` when a tool is missing (skipped).
fn two_profiles(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    if !tally_testutil::require(&["gcc", "valgrind"]) {
        return None;
    }
    let src = dir.join("calls.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin = dir.join("calls");
    let ok = Command::new("gcc")
        .args(["-g", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success(), "gcc failed");
    let mut outs = Vec::new();
    for mode in ["0", "1"] {
        let out = dir.join(format!("callgrind.out.{mode}"));
        let o = Command::new("valgrind")
            .args([
                "-q",
                "--tool=callgrind",
                "--dump-instr=yes",
                "--collect-jumps=yes",
            ])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&bin)
            .arg(mode)
            .output()
            .unwrap();
        assert!(o.status.success(), "valgrind: {}", text(&o.stderr));
        outs.push(out);
    }
    let b = outs.pop().unwrap();
    Some((outs.pop().unwrap(), b))
}

#[test]
fn kcachegrind_reads_merges_and_diffs_of_instruction_level_profiles() {
    let d = tally_testutil::temp_dir();
    let Some((a, b)) = two_profiles(d.path()) else {
        return;
    };
    for (name, args) in [
        ("aa", ["merge", s(&a), s(&a)]),
        ("ab", ["merge", s(&a), s(&b)]),
        ("diff", ["diff", s(&a), s(&b)]),
    ] {
        let out = d.path().join(name);
        let mut args = args.to_vec();
        args.extend(["-o", s(&out)]);
        tally_ok(&args);
        let negative = kcachegrind_reads(&out, name == "diff");
        assert_eq!(negative > 0, name == "diff", "{name}: {negative}");
    }
}

/// Per function (`file:function`), callgrind_annotate's numbers for
/// `path` with `extra` options, run where no file name is relative to.
fn callgrind_annotate(path: &Path, extra: &[&str]) -> (BTreeMap<String, i128>, String) {
    let cwd = tally_testutil::temp_dir();
    let o = Command::new("callgrind_annotate")
        .current_dir(cwd.path())
        .args(["--auto=no", "--threshold=100"])
        .args(extra)
        .arg(path)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "callgrind_annotate: {}",
        text(&o.stderr)
    );
    let out = text(&o.stdout);
    let mut m = BTreeMap::new();
    let mut table = false;
    for l in out.lines() {
        if l.starts_with("Ir") && l.contains("file:function") {
            table = true;
            continue;
        }
        if !table || l.starts_with("---") || l.trim().is_empty() {
            continue;
        }
        let l = l.trim_start();
        let (num, rest) = l.split_once(' ').unwrap();
        let name = rest.trim_start();
        // `(12.34%)  name [object]`
        let name = name.split_once(")  ").map_or(name, |x| x.1);
        let name = name.rsplit_once(" [").map_or(name, |x| x.0);
        if num == "." {
            continue;
        }
        let v: i128 = num
            .replace(',', "")
            .parse()
            .unwrap_or_else(|e| panic!("{l}: {e}"));
        *m.entry(name.to_string()).or_insert(0) += v;
    }
    m.retain(|_, v| *v != 0);
    (m, text(&o.stderr))
}

#[test]
fn callgrind_annotate_reads_a_diff_with_calls_that_disappear_appear_and_shrink() {
    let d = tally_testutil::temp_dir();
    let Some((a, b)) = two_profiles(d.path()) else {
        return;
    };
    if !tally_testutil::require(&["callgrind_annotate"]) {
        return;
    }
    let out = d.path().join("diff.out");
    tally_ok(&["diff", s(&a), s(&b), "-o", s(&out)]);
    let (p, _) = tally_formats::read_file::<i64>(&out, None).unwrap();
    // The file reads back as B − A, record by record, hidden arcs too.
    let read = |f: &Path| records(&tally_formats::read_file::<i64>(f, None).unwrap().0);
    let mut want = read(&b);
    for (k, v) in read(&a) {
        let e = want.entry(k).or_insert_with(|| vec![0; v.len()]);
        e.iter_mut().zip(v).for_each(|(x, y)| *x -= y);
    }
    want.retain(|_, v| v.iter().any(|&x| x != 0));
    assert!(records(&p) == want, "the diff does not read back as B - A");
    // The arcs the program exercises: gone, new, and fewer.
    let names = &p.names;
    let arc = |caller: &str, callee: &str| -> i64 {
        p.parts
            .iter()
            .flat_map(|part| part.calls.iter())
            .filter(|c| {
                names.function_name(c.info.caller) == caller.as_bytes()
                    && names.function_name(c.info.callee) == callee.as_bytes()
            })
            .map(|c| c.info.count)
            .sum()
    };
    assert_eq!(arc("main", "only_a"), -1);
    assert_eq!(arc("main", "only_b"), 1);
    assert_eq!(arc("main", "shrinks"), 0);
    assert_eq!(arc("only_a", "leaf"), -900);
    assert_eq!(arc("shrinks", "leaf"), -1700);
    let text_out = std::fs::read_to_string(&out).unwrap();
    assert!(text_out.contains("\n# tally: calls=-900 "), "hidden arcs");
    // Self costs per function: callgrind_annotate's equal tally's.
    let mut self_costs: BTreeMap<String, i128> = BTreeMap::new();
    let mut inclusive_out: BTreeMap<String, i128> = BTreeMap::new();
    let mut called: BTreeMap<String, i128> = BTreeMap::new();
    // callgrind_annotate's "function" is the current (possibly inlined)
    // file and the function's name.
    let label = |file, f| {
        format!(
            "{}:{}",
            String::from_utf8_lossy(names.file_name(file)),
            String::from_utf8_lossy(names.function_name(f))
        )
    };
    for part in &p.parts {
        part.lines.for_each(|l| {
            let v = i128::from(l.costs.first().copied().unwrap_or(0));
            *self_costs.entry(label(l.file, l.function)).or_insert(0) += v;
        });
        for c in part.calls.iter() {
            // What callgrind_annotate can express: calls it reads, those
            // with a positive count.
            if c.info.count > 0 {
                let v = i128::from(c.inclusive.first().copied().unwrap_or(0));
                let caller = label(c.info.site_file, c.info.caller);
                *inclusive_out.entry(caller).or_insert(0) += v;
                let callee = label(names.key(c.info.callee).file, c.info.callee);
                *called.entry(callee).or_insert(0) += v;
            }
        }
    }
    self_costs.retain(|_, v| *v != 0);
    let (cga, warnings) = callgrind_annotate(&out, &[]);
    assert_eq!(warnings, "", "callgrind_annotate warned");
    assert_eq!(cga, self_costs);
    // Inclusive: callgrind_annotate's rule (a called function's inclusive
    // cost is the sum of its calls' costs, another's its self cost and its
    // calls'), from tally's numbers.
    let mut inclusive = BTreeMap::new();
    for (f, v) in &self_costs {
        inclusive.insert(f.clone(), v + inclusive_out.get(f).copied().unwrap_or(0));
    }
    for (f, v) in &inclusive_out {
        inclusive.entry(f.clone()).or_insert(*v);
    }
    for (f, v) in &called {
        inclusive.insert(f.clone(), *v);
    }
    inclusive.retain(|_, v| *v != 0);
    let (cga, warnings) = callgrind_annotate(&out, &["--inclusive=yes"]);
    assert_eq!(warnings, "", "callgrind_annotate warned");
    assert_eq!(cga, inclusive);
    // KCachegrind accepts the hidden arcs (negative costs aside).
    kcachegrind_reads(&out, true);
}

/// `tally ARGS`: its exit code and standard error.
fn tally_fails(args: &[&str], stdin: Option<&Path>) -> (i32, String) {
    let mut c = tally_testutil::tally!().command();
    c.args(args);
    if let Some(p) = stdin {
        c.stdin(std::fs::File::open(p).unwrap());
    }
    let o = c.output().unwrap();
    (o.status.code().unwrap_or(-1), text(&o.stderr))
}

#[test]
fn an_overflow_summed_for_cachegrind_names_the_input_once() {
    let d = tally_testutil::temp_dir();
    let big = d.path().join("big.out");
    let max = u64::MAX;
    std::fs::write(&big, format!("events: Ir\nfl=a.c\nfn=main\n5 {max}\n")).unwrap();
    let out = d.path().join("out.cg");
    // Two parts, summed per line by the Cachegrind writer.
    let (code, err) = tally_fails(
        &[
            "convert",
            s(&big),
            s(&big),
            "--to",
            "cachegrind",
            "-o",
            s(&out),
        ],
        None,
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(s(&big)), "{err}");
    assert!(!err.contains("out.cg"), "names the output: {err}");
    // The reader's checked sums stop it first, once, at the line.
    assert!(err.contains("2^64"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn io_errors_say_their_cause_once() {
    let d = tally_testutil::temp_dir();
    let input = tally_testutil::data("callgrind/mutual.default.out");
    let out = d.path().join("no/such/dir/out");
    for cmd in [
        vec!["convert", s(&input), "--to", "callgrind", "-o", s(&out)],
        vec!["merge", s(&input), "-o", s(&out)],
    ] {
        let (code, err) = tally_fails(&cmd, None);
        assert_eq!(code, 1, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
        assert_eq!(err.matches(s(&out)).count(), 1, "{err}");
    }
}

#[test]
fn gprof_names_a_bad_callgrind_file_once() {
    let bad = tally_testutil::data("bad/garbage-line.callgrind");
    let (code, err) = tally_fails(&["gprof", s(&bad)], None);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("garbage-line.callgrind").count(), 1, "{err}");
    assert!(err.contains("garbage-line.callgrind:6:"), "{err}");
}

#[test]
fn standard_input_named_twice_is_a_usage_error() {
    let input = tally_testutil::data("callgrind/mutual.default.out");
    for cmd in [
        vec!["merge", "-", "-"],
        vec!["diff", "-", "-"],
        vec!["convert", "-", "-", "--to", "callgrind", "-o", "-"],
    ] {
        let (code, err) = tally_fails(&cmd, Some(&input));
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(err.contains("more than once"), "{err}");
    }
    // Once is fine.
    let (code, err) = tally_fails(&["merge", "-", s(&input), "-o", "/dev/null"], Some(&input));
    assert_eq!(code, 0, "{err}");
}
