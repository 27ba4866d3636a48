//! `tally flame` on real programs run under Callgrind: the SVG opens in
//! headless Chromium without script errors, its frames' widths add up
//! (the root is the program total callgrind_annotate prints, children never
//! exceed their parent), search counts matches, a differential graph of two
//! runs colours the function that did more work as grown, and bad input
//! exits with 1. Screenshots go to `target/test-artefacts/flame/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use tally_testutil::{browser, require, tally, temp_dir};

/// `work` runs `n` rounds of `grow` (the argument) and a fixed `steady`;
/// `leaf` is reached through two callers.
const PROGRAM: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void leaf(int n) { for (int i = 0; i < n; i++) sink += i; }
__attribute__((noinline)) void grow(int n) { for (int i = 0; i < n * 20000; i++) sink += i * 3; leaf(100); }
__attribute__((noinline)) void steady(void) { for (int i = 0; i < 30000; i++) sink ^= i; leaf(300); }
__attribute__((noinline)) void work(int n) { grow(n); steady(); }
int main(int argc, char **argv) { work(argc > 1 ? atoi(argv[1]) : 1); return 0; }
"#;

fn build(dir: &Path) -> PathBuf {
    let src = dir.join("flame.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("flame");
    let ok = Command::new("gcc")
        .args(["-O1", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap()
        .success();
    assert!(ok, "gcc failed");
    exe
}

/// Runs the program under Callgrind with argument `n`.
fn profile(dir: &Path, exe: &Path, n: u32, name: &str) -> PathBuf {
    let out = dir.join(name);
    let o = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .arg(n.to_string())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "valgrind: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// A drawn frame: its start and width in cost units, depth, name, and
/// its rectangle's width and fill.
#[derive(Debug)]
struct Frame {
    v: u64,
    w: u64,
    d: u32,
    name: String,
    px: f64,
    y: f64,
    fill: String,
}

fn attr<'a>(s: &'a str, name: &str) -> &'a str {
    let key = format!(" {name}=\"");
    let i = s.find(&key).unwrap_or_else(|| panic!("{name} in {s}")) + key.len();
    &s[i..i + s[i..].find('"').unwrap()]
}

fn frames(svg: &str) -> Vec<Frame> {
    svg.split("<g data-v=")
        .skip(1)
        .map(|g| {
            let g = format!(" data-v={g}");
            let rect = &g[g.find("<rect").unwrap()..];
            Frame {
                v: attr(&g, "data-v").parse().unwrap(),
                w: attr(&g, "data-w").parse().unwrap(),
                d: attr(&g, "data-d").parse().unwrap(),
                name: attr(&g, "data-n").to_string(),
                px: attr(rect, "width").parse().unwrap(),
                y: attr(rect, "y").parse().unwrap(),
                fill: attr(rect, "fill").to_string(),
            }
        })
        .collect()
}

/// callgrind_annotate's PROGRAM TOTALS of the first event.
fn annotate_total(file: &Path) -> u64 {
    let o = Command::new("callgrind_annotate")
        .arg(file)
        .output()
        .unwrap();
    tally_testutil::program_total(&String::from_utf8_lossy(&o.stdout))
}

/// Every level: a frame's children lie inside it and their widths add up
/// to at most its own; the root is `total` wide and spans the image.
fn check_widths(f: &[Frame], total: u64, image_px: f64) {
    let root = &f[0];
    assert_eq!((root.name.as_str(), root.d, root.v), ("all", 0, 0));
    assert_eq!(root.w, total);
    assert!((root.px - (image_px - 20.0)).abs() < 0.01, "{}", root.px);
    for p in f {
        let kids: Vec<&Frame> = f
            .iter()
            .filter(|c| c.d == p.d + 1 && c.v >= p.v && c.v < p.v + p.w.max(1))
            .collect();
        let sum: u64 = kids.iter().map(|c| c.w).sum();
        assert!(sum <= p.w, "{}: children {sum} > {}", p.name, p.w);
        let px: f64 = kids.iter().map(|c| c.px).sum();
        assert!(
            px <= p.px + 0.05,
            "{}: children {px} px > {} px",
            p.name,
            p.px
        );
        for c in kids {
            assert!(
                c.v + c.w <= p.v + p.w,
                "{} sticks out of {}",
                c.name,
                p.name
            );
        }
    }
}

#[test]
fn flame_graph_opens_in_chromium_and_adds_up() {
    if !browser::require(&["gcc", "valgrind", "callgrind_annotate"]) {
        return;
    }
    let dir = temp_dir();
    let exe = build(dir.path());
    let out = profile(dir.path(), &exe, 2, "callgrind.out");
    let svg = dir.path().join("flame.svg");
    tally!().ok(&["flame", out.to_str().unwrap(), "-o", svg.to_str().unwrap()]);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("(stacks estimated from call arcs)"), "title");
    assert!(text.contains("id=\"legend\""), "legend");
    assert!(
        !text.contains("href") && !text.contains(" src="),
        "no external resources"
    );

    let f = frames(&text);
    check_widths(&f, annotate_total(&out), 1200.0);
    // The leaf is reached through both of its callers.
    for (parent, child) in [("grow", "leaf"), ("steady", "leaf"), ("work", "grow")] {
        let p = f.iter().find(|x| x.name == parent).expect(parent);
        assert!(
            f.iter()
                .any(|c| c.name == child && c.d == p.d + 1 && c.v >= p.v && c.v < p.v + p.w),
            "{child} above {parent}"
        );
    }

    // Loaded with its script run: no error, and a search counted.
    let url = format!("file://{}?s=^leaf$", svg.display());
    let browser::Run { stdout: dom, log } = browser::dump_dom(&url);
    assert!(
        dom.contains("data-ready=\"1\""),
        "script did not finish:\n{log}"
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    assert!(dom.contains("data-count=\"2\""), "two leaf frames match");
    assert!(dom.contains("Matched: 2 frames"), "match count shown");

    let shot = browser::artefacts("flame").join("flame.png");
    let _ = std::fs::remove_file(&shot);
    browser::screenshot(&format!("file://{}", svg.display()), &shot, (1200, 800));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 5000,
        "screenshot"
    );
}

#[test]
fn icicle_puts_the_root_on_top() {
    if !require(&["gcc", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let exe = build(dir.path());
    let out = profile(dir.path(), &exe, 1, "callgrind.out");
    let svg = dir.path().join("icicle.svg");
    let o = out.to_str().unwrap();
    tally!().ok(&["flame", "--icicle", o, "-o", svg.to_str().unwrap()]);
    let f = frames(&std::fs::read_to_string(&svg).unwrap());
    let main = f.iter().find(|x| x.name == "main").unwrap();
    let work = f.iter().find(|x| x.name == "work").unwrap();
    assert!(f[0].y < main.y && main.y < work.y);
    let flame = dir.path().join("flame.svg");
    tally!().ok(&["flame", o, "-o", flame.to_str().unwrap()]);
    let f = frames(&std::fs::read_to_string(&flame).unwrap());
    assert!(f[0].y > f.iter().find(|x| x.name == "main").unwrap().y);
}

fn red_blue(fill: &str) -> (u32, u32, u32) {
    let v: Vec<u32> = fill
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

#[test]
fn differential_graph_colours_growth() {
    if !browser::require(&["gcc", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let exe = build(dir.path());
    let a = profile(dir.path(), &exe, 1, "a.out");
    let b = profile(dir.path(), &exe, 4, "b.out");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let svg = dir.path().join("diff.svg");
    tally!().ok(&["flame", "--diff", a, b, "-o", svg.to_str().unwrap()]);
    let text = std::fs::read_to_string(&svg).unwrap();
    let f = frames(&text);
    // B's shape: the root is B's total.
    assert_eq!(f[0].w, annotate_total(Path::new(b)));
    let grow = f.iter().find(|x| x.name == "grow").unwrap();
    let (r, g, bl) = red_blue(&grow.fill);
    assert!(r == 255 && g < 60 && bl < 60, "grow is red: {}", grow.fill);
    let steady = f.iter().find(|x| x.name == "steady").unwrap();
    let (r, g, bl) = red_blue(&steady.fill);
    assert!(
        r >= 245 && g >= 200 && bl >= 200,
        "steady is pale: {}",
        steady.fill
    );

    // The other way round, grow shrank: blue.
    let back = dir.path().join("back.svg");
    tally!().ok(&["flame", "--diff", b, a, "-o", back.to_str().unwrap()]);
    let f = frames(&std::fs::read_to_string(&back).unwrap());
    let grow = f.iter().find(|x| x.name == "grow").unwrap();
    let (r, g, bl) = red_blue(&grow.fill);
    assert!(bl == 255 && r < 60 && g < 60, "grow is blue: {}", grow.fill);

    let browser::Run { stdout: dom, log } = browser::dump_dom(&format!("file://{}", svg.display()));
    assert!(
        dom.contains("data-ready=\"1\""),
        "script did not finish:\n{log}"
    );
    assert!(!log.contains("Uncaught"), "script error:\n{log}");
    let shot = browser::artefacts("flame").join("diff.png");
    browser::screenshot(&format!("file://{}", svg.display()), &shot, (1200, 800));
    assert!(shot.exists(), "screenshot written");
}

#[test]
fn bad_input_exits_1() {
    let data = tally_testutil::data("callgrind/workload.combo.out");
    let d = data.to_str().unwrap();
    let dir = temp_dir();
    let out = dir.path().join("x.svg");
    let o = out.to_str().unwrap();
    let e = tally!().fails(&["flame", d, "--event", "Nope", "-o", o]);
    assert!(e.contains("unknown event `Nope`") && e.contains(d), "{e}");
    // Cut in the middle of the file: inside a cost line, the half line is
    // itself the error (file and line), and nothing is written; between
    // lines, the file is drawn with the truncation warning every command
    // gives.
    let bytes = std::fs::read(&data).unwrap();
    let cut = dir.path().join("cut.out");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let r = tally!().run(&["flame", cut.to_str().unwrap(), "-o", o]);
    let e = String::from_utf8_lossy(&r.stderr);
    let line = bytes[..bytes.len() / 2]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    if r.status.success() {
        assert!(
            e.contains("cut.out: warning: line ") && e.contains("looks truncated"),
            "{e}"
        );
        assert!(out.exists(), "drawn");
        std::fs::remove_file(&out).unwrap();
    } else {
        assert!(e.contains(&format!("cut.out:{line}: ")), "{e}");
        assert!(!out.exists(), "nothing written");
    }
    let e = tally!().fails(&["flame", "no-such-file", "-o", o]);
    assert!(e.contains("no-such-file"), "{e}");
    // A usage error is 2.
    let r = tally!().run(&["flame", "--diff", d, "-o", o]);
    assert_eq!(r.status.code(), Some(2));
}

/// One folded file is drawn straight from its lines, with no profile
/// built; standard input goes through the profile. The SVGs are the same
/// byte for byte, on the stacks of a real program (the estimate of a real
/// Callgrind run written as folded: sorted, and the same lines reversed),
/// and a bad line is named as the profile reader names it.
#[test]
fn folded_file_drawn_straight_as_through_the_profile() {
    let dir = temp_dir();
    let t = tally!().in_dir(dir.path());
    let data = tally_testutil::data("callgrind/workload.combo.out");
    t.ok(&["convert", data.to_str().unwrap(), "-o", "est.folded"]);
    let text = std::fs::read(dir.path().join("est.folded")).unwrap();
    let mut lines: Vec<&[u8]> = text.split(|&c| c == b'\n').collect();
    assert!(lines.len() > 20, "{} lines", lines.len());
    lines.reverse();
    std::fs::write(dir.path().join("rev.folded"), lines.join(&b'\n')).unwrap();
    for name in ["est.folded", "rev.folded"] {
        for extra in [&[][..], &["--icicle", "--minwidth", "0"]] {
            let common = ["-o", "x.svg", "--subtitle", "s"];
            t.ok(&[&["flame", name][..], &common, extra].concat());
            let straight = std::fs::read(dir.path().join("x.svg")).unwrap();
            let o = t
                .command()
                .args([&["flame", "-"][..], &common, extra].concat())
                .stdin(std::fs::File::open(dir.path().join(name)).unwrap())
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let through = std::fs::read(dir.path().join("x.svg")).unwrap();
            assert!(straight == through, "{name} {extra:?}");
        }
    }
    std::fs::write(dir.path().join("bad.folded"), "main;a 1\nmain;;b 2\n").unwrap();
    let e = t.fails(&["flame", "bad.folded", "-o", "y.svg"]);
    assert!(e.contains("bad.folded:2: an empty frame"), "{e}");
    assert!(!dir.path().join("y.svg").exists());
}

/// A Callgrind profile of a chain `depth` calls deep: `f0` calls `f1`,
/// which calls `f2`, …; `fI` costs `self_cost(I)` itself, and each call
/// costs what the rest of the chain does. Returns the file and the
/// inclusive cost of each function.
fn chain(dir: &Path, depth: usize) -> (PathBuf, Vec<u64>) {
    let self_cost = |i: usize| 1 + (i as u64 * 7919) % 13;
    let mut inclusive = vec![0u64; depth + 1];
    for i in (0..depth).rev() {
        inclusive[i] = inclusive[i + 1] + self_cost(i);
    }
    inclusive.pop();
    let total = inclusive[0];
    let mut text = format!(
        "# callgrind format\nversion: 1\ncreator: chain\npositions: line\nevents: Ir\nsummary: {total}\n\nfl=(1) chain.c\n"
    );
    for i in 0..depth {
        text.push_str(&format!("fn=({}) f{i}\n1 {}\n", i + 1, self_cost(i)));
        if i + 1 < depth {
            text.push_str(&format!(
                "cfn=({}) f{}\ncalls=1 1\n2 {}\n",
                i + 2,
                i + 1,
                inclusive[i + 1]
            ));
        }
    }
    text.push_str(&format!("\ntotals: {total}\n"));
    let file = dir.join(format!("chain{depth}.out"));
    std::fs::write(&file, text).unwrap();
    (file, inclusive)
}

/// A chain 100,000 calls deep, whose stacks are estimated from its arcs
/// (each function has one caller, so the estimate is the true stack): each
/// frame `fI` sits on `fI-1` at its inclusive cost, and the top frame drawn
/// is the last one at least `--minwidth` pixels wide; with `--minwidth 0`
/// every function of the chain is drawn.
#[test]
fn a_chain_100000_calls_deep_is_drawn_whole() {
    let dir = temp_dir();
    let depth = 100_000;
    let (file, inclusive) = chain(dir.path(), depth);
    let total = inclusive[0];
    let svg = dir.path().join("chain.svg");
    for minwidth in [0.1, 0.0] {
        tally!().ok(&[
            "flame",
            file.to_str().unwrap(),
            "--minwidth",
            &minwidth.to_string(),
            "-o",
            svg.to_str().unwrap(),
        ]);
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("stacks estimated from call arcs"));
        let f = frames(&text);
        // The image is 1200 pixels wide, 10 of padding on each side.
        let scale = 1180.0 / total as f64;
        let drawn = inclusive
            .iter()
            .take_while(|&&w| w as f64 * scale >= minwidth)
            .count();
        assert!(drawn > depth - 20, "{drawn}");
        if minwidth == 0.0 {
            assert_eq!(drawn, depth);
        } else {
            assert!(drawn < depth);
        }
        assert_eq!(f.len(), drawn + 1, "the root and one frame per level");
        assert_eq!((f[0].name.as_str(), f[0].w), ("all", total));
        for (i, frame) in f[1..].iter().enumerate() {
            let want = (format!("f{i}"), i as u32 + 1, 0, inclusive[i]);
            assert_eq!((frame.name.clone(), frame.d, frame.v, frame.w), want);
            assert!((frame.px - inclusive[i] as f64 * scale).abs() < 0.01);
        }
        let top = f.last().unwrap();
        assert_eq!(top.name, format!("f{}", drawn - 1));
        // Bottom-up: each level one frame height (16) above the one below.
        assert!((f[1].y - top.y - 16.0 * (drawn - 1) as f64).abs() < 0.5);
    }
}
