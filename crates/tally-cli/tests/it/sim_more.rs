//! `tally sim` beyond Cachegrind's three caches and one process: levels
//! between L1 and LL reported (against a replay of a Lackey trace through
//! a model written here), functions of stripped programs named as
//! Valgrind names them, file names written as Valgrind writes them,
//! children followed, and where the QEMU plugin is looked for.
//!
//! Programs are compiled here with gcc; the tools compared with are run
//! live (missing: skipped locally, a failure under `CI`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tally_testutil::{path_str as s, qemu, require, temp_dir, text};

fn tally_path() -> &'static str {
    env!("CARGO_BIN_EXE_tally")
}

/// Runs `cmd` with a fixed environment (the environment strings sit on
/// the stack, so another one moves addresses) plus `env`.
fn clean_env(cmd: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("env");
    c.args(["-i", "PATH=/usr/bin:/bin", "LC_ALL=C"]);
    for (k, v) in env {
        c.arg(format!("{k}={v}"));
    }
    c.arg(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

fn clean(cmd: &str, args: &[&str]) -> Output {
    clean_env(cmd, args, &[])
}

fn tally(args: &[&str]) -> Output {
    clean(tally_path(), args)
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", text(&o.stderr));
    o
}

/// Compiles C `src` into `dir/name` with `flags`.
fn gcc(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let o = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&c)
        .output()
        .unwrap();
    assert!(o.status.success(), "gcc: {}", text(&o.stderr));
    out
}

/// The events and `summary:` of a Cachegrind or Callgrind file, by name.
fn summary(p: &Path) -> BTreeMap<String, u64> {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let ev = t.lines().find_map(|l| l.strip_prefix("events:")).unwrap();
    let sum = t
        .lines()
        .find_map(|l| l.strip_prefix("summary:").or(l.strip_prefix("totals:")))
        .unwrap();
    ev.split_whitespace()
        .zip(sum.split_whitespace().map(|v| v.parse().unwrap()))
        .map(|(e, v)| (e.to_string(), v))
        .collect()
}

/// A program whose data does not fit a small L2: it walks an array of
/// 64 KiB again and again.
const WALK: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static long walk(const long *a, long n, int rounds) {
    long s = 0;
    for (int r = 0; r < rounds; r++)
        for (long i = 0; i < n; i += 8) s += a[i] ^ r;
    return s;
}
int main(int argc, char **argv) {
    long n = (argc > 1 ? atol(argv[1]) : 64) * 1024 / sizeof(long);
    long *a = malloc(n * sizeof(long));
    for (long i = 0; i < n; i++) a[i] = i * 7;
    printf("%ld\n", walk(a, n, 20));
    free(a);
    return 0;
}
"#;

/// Cachegrind's cache, written here as Cachegrind's `cg_sim.c` describes
/// it: LRU sets, an access spanning two lines looks both up and misses if
/// either misses.
struct Model {
    sets: Vec<Vec<u64>>,
    assoc: usize,
    line_bits: u32,
}

impl Model {
    fn new(geo: &str) -> Model {
        let v: Vec<u64> = geo.split(',').map(|x| x.parse().unwrap()).collect();
        let (size, assoc, line) = (v[0], v[1] as usize, v[2]);
        let sets = (size / line) as usize / assoc;
        Model {
            sets: vec![Vec::new(); sets],
            assoc,
            line_bits: line.trailing_zeros(),
        }
    }

    fn line(&mut self, block: u64) -> bool {
        let n = self.sets.len();
        let set = &mut self.sets[block as usize % n];
        if let Some(i) = set.iter().position(|&b| b == block) {
            set.remove(i);
            set.insert(0, block);
            return false;
        }
        set.insert(0, block);
        set.truncate(self.assoc);
        true
    }

    /// `true` on a miss.
    fn access(&mut self, addr: u64, size: u64) -> bool {
        let (a, b) = (
            addr >> self.line_bits,
            (addr + size.max(1) - 1) >> self.line_bits,
        );
        if a == b {
            self.line(a)
        } else {
            let x = self.line(a);
            let y = self.line(b);
            x || y
        }
    }
}

/// Replays a Lackey trace through I1, D1, the `middle` levels and LL;
/// returns the events by name as `tally sim` names them.
fn replay(trace: &Path, i1: &str, d1: &str, middle: &[&str], ll: &str) -> HashMap<String, u64> {
    let (mut i1, mut d1, mut ll) = (Model::new(i1), Model::new(d1), Model::new(ll));
    let mut mid: Vec<Model> = middle.iter().map(|g| Model::new(g)).collect();
    let mut ev: HashMap<String, u64> = HashMap::new();
    let data = std::fs::read_to_string(trace).unwrap();
    for l in data.lines() {
        let (kind, rest) = if let Some(r) = l.strip_prefix("I  ") {
            ('I', r)
        } else if let Some(r) = l.strip_prefix(" L ").or(l.strip_prefix(" M ")) {
            ('r', r)
        } else if let Some(r) = l.strip_prefix(" S ") {
            ('w', r)
        } else {
            continue;
        };
        let Some((a, n)) = rest.split_once(',') else {
            continue;
        };
        let (addr, size) = (
            u64::from_str_radix(a.trim(), 16).unwrap(),
            n.trim().parse::<u64>().unwrap(),
        );
        let (l1, first, name) = match kind {
            'I' => (&mut i1, "I1mr", ('I', "mr", "ILmr")),
            'r' => (&mut d1, "D1mr", ('D', "mr", "DLmr")),
            _ => (&mut d1, "D1mw", ('D', "mw", "DLmw")),
        };
        if !l1.access(addr, size) {
            continue;
        }
        *ev.entry(first.into()).or_default() += 1;
        let mut missed_all = true;
        for (k, m) in mid.iter_mut().enumerate() {
            if !m.access(addr, size) {
                missed_all = false;
                break;
            }
            *ev.entry(format!("{}{}{}", name.0, k + 2, name.1))
                .or_default() += 1;
        }
        if missed_all && ll.access(addr, size) {
            *ev.entry(name.2.into()).or_default() += 1;
        }
    }
    ev
}

#[test]
fn middle_levels_are_reported_as_a_lackey_replay_counts_them() {
    if !require(&["gcc", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let prog = gcc(dir.path(), "walk", WALK, &["-O1", "-g"]);
    let trace = dir.path().join("trace");
    let log = format!("--log-file={}", trace.display());
    ok(clean(
        "valgrind",
        &[
            "-v",
            "-v",
            "--tool=lackey",
            "--trace-mem=yes",
            &log,
            s(&prog),
        ],
    ));
    let (i1, d1, ll) = ("32768,8,64", "32768,8,64", "8388608,16,64");
    let run = |middle: &[&str], callgrind: bool, name: &str| {
        let out = dir.path().join(name);
        let (gi, gd, gl) = (
            format!("--I1={i1}"),
            format!("--D1={d1}"),
            format!("--LL={ll}"),
        );
        let mut a = vec!["sim", "--lackey", s(&trace), &gi, &gd, &gl];
        let caches: Vec<String> = middle.iter().map(|m| format!("L2={m}")).collect();
        for c in &caches {
            a.push("--cache");
            a.push(c);
        }
        if callgrind {
            a.push("--callgrind");
        }
        a.extend(["--out-file", s(&out)]);
        let o = ok(tally(&a));
        (summary(&out), text(&o.stderr), out)
    };
    let (plain, _, _) = run(&[], false, "plain");
    for l2 in ["262144,8,64", "4096,2,64"] {
        let (got, stderr, _) = run(&[l2], false, &format!("l2.{l2}"));
        let want = replay(&trace, i1, d1, &[l2], ll);
        for e in [
            "I2mr", "D2mr", "D2mw", "ILmr", "DLmr", "DLmw", "I1mr", "D1mr",
        ] {
            assert_eq!(
                got.get(e).copied().unwrap_or(0),
                want.get(e).copied().unwrap_or(0),
                "{e} with L2={l2}"
            );
        }
        // The first level does not see the second.
        for e in ["Ir", "I1mr", "D1mr", "D1mw", "Dr", "Dw"] {
            assert_eq!(got[e], plain[e], "{e}");
        }
        let events: Vec<&String> = got.keys().collect();
        assert!(events.len() == 12, "{events:?}");
        // The summary names the level.
        assert!(stderr.contains("L2d misses:"), "{stderr}");
        assert!(stderr.contains("L2 refs:"), "{stderr}");
    }
    // The level's size shows: a 4 KiB L2 misses the 64 KiB walk.
    let (big, _, _) = run(&["262144,8,64"], false, "big");
    let (small, _, _) = run(&["4096,2,64"], false, "small");
    assert!(small["D2mr"] > 2 * big["D2mr"], "{small:?} {big:?}");
    // The event order is Cachegrind's with each level after the one
    // above it; the Callgrind profile has the same events and totals.
    let (cg, _, file) = run(&["262144,8,64"], true, "callgrind");
    let t = std::fs::read_to_string(&file).unwrap();
    assert!(
        t.contains("events: Ir I1mr I2mr ILmr Dr D1mr D2mr DLmr Dw D1mw D2mw DLmw\n"),
        "{t}"
    );
    assert_eq!(cg, big);
}

#[test]
fn middle_levels_of_a_native_run_change_with_their_size() {
    if !qemu::require_beside(tally_path(), &["gcc"]) {
        return;
    }
    let dir = temp_dir();
    let prog = gcc(dir.path(), "walk", WALK, &["-O1", "-g"]);
    let run = |l2: &str| {
        let out = dir.path().join(format!("cg.{l2}"));
        let c = format!("L2={l2}");
        ok(tally(&[
            "sim",
            "--cache",
            &c,
            "--LL=8388608,16,64",
            "--out-file",
            s(&out),
            "--",
            s(&prog),
        ]));
        summary(&out)
    };
    let (big, small) = (run("262144,8,64"), run("1024,2,64"));
    assert!(small["D2mr"] > 2 * big["D2mr"], "{small:?} {big:?}");
    for m in [&big, &small] {
        // Each level misses no more than the one above it.
        assert!(m["D1mr"] >= m["D2mr"] && m["D2mr"] >= m["DLmr"], "{m:?}");
        assert!(m["I1mr"] >= m["I2mr"] && m["I2mr"] >= m["ILmr"], "{m:?}");
    }
    assert_eq!(big["Ir"], small["Ir"]);
    assert_eq!(big["D1mr"], small["D1mr"]);
}

/// A stand-in for QEMU that prints the `-plugin` argument it was given,
/// so a test sees which plugin tally chose.
fn fake_qemu(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("fake-qemu");
    std::fs::write(&p, "#!/bin/sh\necho \"plugin: $2\" >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The plugin tally hands to QEMU, or its error.
fn chosen(tally: &Path, qemu: &Path, env: &[(&str, &str)]) -> String {
    let o = clean_env(
        s(tally),
        &["sim", "--qemu", s(qemu), "--", "/bin/true"],
        env,
    );
    assert!(!o.status.success());
    let e = text(&o.stderr);
    match e.lines().find_map(|l| l.strip_prefix("plugin: ")) {
        Some(p) => p.split(',').next().unwrap().to_string(),
        None => e,
    }
}

#[test]
fn the_plugin_is_found_in_order_and_installed_where_tally_looks() {
    let dir = temp_dir();
    let bin = dir.path().join("bin");
    let data = dir.path().join("data");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&bin).unwrap();
    // tally where no plugin is beside it.
    let t = bin.join("tally");
    std::fs::copy(tally_path(), &t).unwrap();
    let qemu = fake_qemu(dir.path());
    let env = [("XDG_DATA_HOME", s(&data)), ("HOME", s(&home))];

    // Nowhere: every place is named, in order.
    let e = chosen(&t, &qemu, &env);
    let beside = bin.join("libtally_qemu_plugin.so");
    let installed = data.join("tally/libtally_qemu_plugin.so");
    let places = [
        "$TALLY_QEMU_PLUGIN: not set".to_string(),
        format!("{} (next to tally): not found", beside.display()),
        format!("{} (the data directory): not found", installed.display()),
    ];
    let at: Vec<usize> = places
        .iter()
        .map(|p| e.find(p.as_str()).unwrap_or_else(|| panic!("{p} in {e}")))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{e}");
    assert!(
        e.contains("--install-plugin") && !e.contains("not built"),
        "{e}"
    );
    // Without XDG_DATA_HOME the data directory is ~/.local/share.
    let e = chosen(&t, &qemu, &[("HOME", s(&home))]);
    assert!(
        e.contains(s(&home.join(".local/share/tally/libtally_qemu_plugin.so"))),
        "{e}"
    );

    // Installing: a file that is not a shared library is refused; the
    // built plugin (or, where it is not built, any ELF file) is copied.
    let e = text(&clean_env(s(&t), &["sim", "--install-plugin", s(&qemu)], &env).stderr);
    assert!(e.contains("not a shared library"), "{e}");
    let plugin = qemu::plugin(tally_path()).unwrap_or_else(|| PathBuf::from("/bin/true"));
    let o = ok(clean_env(
        s(&t),
        &["sim", "--install-plugin", s(&plugin)],
        &env,
    ));
    assert!(text(&o.stderr).contains(s(&installed)));
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(&plugin).unwrap()
    );
    assert_eq!(chosen(&t, &qemu, &env), s(&installed));
    // Next to tally comes before the data directory, the variable before both.
    std::fs::copy(&plugin, &beside).unwrap();
    assert_eq!(chosen(&t, &qemu, &env), s(&beside));
    let other = dir.path().join("other.so");
    std::fs::copy(&plugin, &other).unwrap();
    let with_var = [env[0], env[1], ("TALLY_QEMU_PLUGIN", s(&other))];
    assert_eq!(chosen(&t, &qemu, &with_var), s(&other));
    std::fs::remove_file(&beside).unwrap();

    // The installed plugin runs a program (found in the data directory:
    // this run clears the environment).
    if qemu::require(tally_path(), &[]) {
        let out = dir.path().join("cg.out");
        ok(clean_env(
            s(&t),
            &["sim", "--out-file", s(&out), "--", "/bin/true"],
            &env,
        ));
        assert!(summary(&out)["Ir"] > 0);
    }
}

/// Self cost of the first event per (object, function) of a Callgrind
/// file, whatever its positions; call lines' costs are left out.
fn callgrind_self(p: &Path) -> BTreeMap<(String, String), u64> {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut npos = 1;
    let mut names: HashMap<(bool, String), String> = HashMap::new();
    let (mut ob, mut f) = (String::new(), String::new());
    let mut call = false;
    let mut out = BTreeMap::new();
    for l in t.lines() {
        if let Some(p) = l.strip_prefix("positions:") {
            npos = p.split_whitespace().count();
            continue;
        }
        let Some((key, rest)) = l.split_once('=') else {
            if call {
                call = false;
                continue;
            }
            if l.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
                let v: Vec<&str> = l.split_whitespace().collect();
                if let Some(x) = v.get(npos) {
                    *out.entry((ob.clone(), f.clone())).or_insert(0) += x.parse::<u64>().unwrap();
                }
            }
            continue;
        };
        let is_ob = matches!(key, "ob" | "cob");
        if !is_ob && !matches!(key, "fn" | "cfn") {
            call |= key == "calls";
            continue;
        }
        // `(id) name`, `(id)`, or a name without compression.
        let name = match rest.strip_prefix('(').and_then(|r| r.split_once(')')) {
            Some((id, n)) => {
                let k = (is_ob, id.to_string());
                if !n.is_empty() {
                    names.insert(k.clone(), n.trim_start().to_string());
                }
                names.get(&k).cloned().unwrap_or_default()
            }
            None => rest.to_string(),
        };
        match key {
            "ob" => ob = name,
            "fn" => f = name,
            _ => {}
        }
    }
    out
}

/// A program whose functions the compiler keeps apart.
const THREE: &str = r#"
#include <stdio.h>
__attribute__((noinline)) static int work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += i * i % 7;
    return s;
}
__attribute__((noinline)) int helper(int n) { return work(n) + work(n / 2); }
int main(void) { printf("%d\n", helper(100000)); return 0; }
"#;

#[test]
fn functions_of_a_stripped_program_are_named_as_callgrind_names_them() {
    if !qemu::require_beside(tally_path(), &["gcc", "valgrind", "strip"]) {
        return;
    }
    let dir = temp_dir();
    let prog = gcc(dir.path(), "three", THREE, &["-O1"]);
    ok(Command::new("strip").arg(&prog).output().unwrap());
    let vg = dir.path().join("vg.out");
    let of = format!("--callgrind-out-file={}", vg.display());
    ok(clean(
        "valgrind",
        &["-q", "--tool=callgrind", &of, s(&prog)],
    ));
    let ours = dir.path().join("sim.out");
    ok(tally(&[
        "sim",
        "--callgrind",
        "--out-file",
        s(&ours),
        "--",
        s(&prog),
    ]));
    let own = |m: BTreeMap<(String, String), u64>| -> BTreeMap<String, u64> {
        m.into_iter()
            .filter(|((o, _), _)| o == s(&prog))
            .map(|((_, f), v)| (f, v))
            .collect()
    };
    let (want, got) = (own(callgrind_self(&vg)), own(callgrind_self(&ours)));
    // Valgrind names every function of the program by its address.
    assert!(want.len() >= 4, "{want:?}");
    assert!(want.keys().all(|f| f.starts_with("0x")), "{want:?}");
    for (f, w) in &want {
        let g = got.get(f).unwrap_or_else(|| panic!("{f} missing: {got:?}"));
        // work, helper and main: exactly; the start-up code within what
        // a tail jump moves (docs/sim.md).
        if *w > 1000 {
            assert_eq!(g, w, "{f}");
        } else {
            assert!(g.abs_diff(*w) <= 12, "{f}: {g} vs {w}");
        }
    }
    assert!(!got.contains_key("???"), "{got:?}");
    // Cachegrind's profile has no names for them, and neither has ours.
    let cg = dir.path().join("cg.out");
    ok(tally(&["sim", "--out-file", s(&cg), "--", s(&prog)]));
    let t = std::fs::read_to_string(&cg).unwrap();
    assert!(!t.contains("fn=0x"), "{t}");
}

/// The file of each function of a Cachegrind profile.
fn function_files(p: &Path) -> BTreeMap<String, String> {
    let t = std::fs::read_to_string(p).unwrap();
    let mut fl = String::new();
    let mut out = BTreeMap::new();
    for l in t.lines() {
        if let Some(f) = l.strip_prefix("fl=") {
            fl = f.to_string();
        } else if let Some(f) = l.strip_prefix("fn=") {
            out.insert(f.to_string(), fl.clone());
        }
    }
    out
}

#[test]
fn valgrind_names_give_valgrinds_file_names() {
    if !qemu::require_beside(tally_path(), &["gcc", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let prog = gcc(dir.path(), "three", THREE, &["-O1", "-g"]);
    let vg = dir.path().join("cachegrind.vg");
    let of = format!("--cachegrind-out-file={}", vg.display());
    ok(clean(
        "valgrind",
        &["-q", "--tool=cachegrind", &of, s(&prog)],
    ));
    let run = |extra: &[&str], name: &str| {
        let out = dir.path().join(name);
        let mut a = vec!["sim", "--out-file", s(&out)];
        a.extend_from_slice(extra);
        a.extend(["--", s(&prog)]);
        ok(tally(&a));
        out
    };
    let want = function_files(&vg);
    let plain = function_files(&run(&[], "plain"));
    let named_path = run(&["--valgrind-names"], "named");
    let named = function_files(&named_path);
    // Functions whose file is the same file, by its last component (for
    // a few, the two pick another file of the function's first lines).
    let base = |p: &str| p.rsplit('/').next().unwrap_or("").to_string();
    let differ = |got: &BTreeMap<String, String>| {
        want.iter()
            .filter(|(f, fl)| got.get(*f).is_some_and(|g| g != *fl && base(g) == base(fl)))
            .map(|(f, fl)| format!("{f}: {fl} vs {}", got[f]))
            .collect::<Vec<_>>()
    };
    // Without the option the libraries' DWARF 5 names differ (Debian's
    // libc is built with relative directories); with it, none does.
    assert!(!differ(&plain).is_empty(), "nothing to test: {plain:?}");
    assert_eq!(differ(&named), Vec::<String>::new());
    let common = want.keys().filter(|f| named.contains_key(*f)).count();
    assert!(common > 20, "{common}");
}
