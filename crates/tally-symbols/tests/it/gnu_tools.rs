//! `tally-symbols` against the GNU tools on programs compiled at test time:
//! `nm` for symbols, `objdump -d` for disassembly, `addr2line` for source
//! lines, on a position-independent and a fixed-address executable.
//!
//! Without gcc or binutils these tests print a note and pass, except when
//! `CI` is set: there a missing tool is a failure, so CI cannot go green by
//! testing nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use tally_symbols::{InstrKind, ObjectFile, SymbolsError};
use tally_testutil::{path_str, require};

/// Functions of every kind the crate must see: global, static, weak, an
/// ifunc, a jump table, a call through the PLT.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>

static int counter;

__attribute__((noinline)) static int square(int x) { return x * x + counter; }

__attribute__((noinline)) int sum_squares(int n) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        total += square(i);
        if (total > 100000) break;
    }
    return total;
}

__attribute__((noinline, weak)) int weak_helper(int x) { return x + 1; }

static int twice_impl(int x) { return 2 * x; }
static int (*resolve_twice(void))(int) { return twice_impl; }
int twice(int x) __attribute__((ifunc("resolve_twice")));

__attribute__((noinline)) int classify(int r) {
    switch (r % 7) {
    case 0: return weak_helper(r);
    case 1: return r - 3;
    case 2: return r * 7;
    case 3: return r ^ 0x55;
    case 4: return twice(r);
    case 5: return r / 3;
    default: return -r;
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    counter = n & 3;
    int r = classify(sum_squares(n));
    printf("%d\n", r);
    return 0;
}
"#;

// ---------------------------------------------------------------- helpers

/// Runs a command and returns its standard output, failing the test with
/// its standard error when it fails.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The test program compiled twice, `-g -O1`, as PIE and as `-no-pie`.
struct Programs {
    _dir: tempfile::TempDir,
    builds: Vec<PathBuf>,
}

fn compile() -> Option<Programs> {
    if !require(&["gcc", "nm", "objdump", "addr2line"]) {
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("prog.c");
    std::fs::write(&source, PROGRAM).expect("write source");
    let mut builds = Vec::new();
    for (name, flags) in [
        ("pie", &["-fPIE", "-pie"]),
        ("nopie", &["-fno-PIE", "-no-pie"]),
    ] {
        let out = dir.path().join(name);
        let mut args = vec!["-g", "-O1"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["-o", path_str(&out), path_str(&source)]);
        run("gcc", &args);
        builds.push(out);
    }
    Some(Programs { _dir: dir, builds })
}

/// `nm --defined-only` function symbols: name → (address, size).
fn nm_functions(bin: &Path) -> BTreeSet<(String, u64, u64)> {
    let out = run("nm", &["--defined-only", "-f", "sysv", path_str(bin)]);
    let mut set = BTreeSet::new();
    for line in out.lines() {
        let fields: Vec<&str> = line.split('|').map(str::trim).collect();
        if fields.len() < 7 {
            continue;
        }
        let (name, value, class, kind, size) =
            (fields[0], fields[1], fields[2], fields[3], fields[4]);
        // sysv format calls an ifunc's type `<OS specific>: 10`.
        let function = kind == "FUNC" || class == "i";
        if !["T", "t", "W", "i"].contains(&class) || !function {
            continue;
        }
        let address = u64::from_str_radix(value, 16).expect("nm address");
        let size = if size.is_empty() {
            0
        } else {
            u64::from_str_radix(size, 16).expect("nm size")
        };
        set.insert((name.to_owned(), address, size));
    }
    set
}

/// Every name of every symbol, with the address and that name's size.
fn our_functions(obj: &ObjectFile) -> BTreeSet<(String, u64, u64)> {
    let mut set = BTreeSet::new();
    for s in obj.symbols() {
        set.insert((s.name.clone(), s.address, s.size));
        for a in &s.aliases {
            set.insert((a.name.clone(), s.address, a.size));
        }
    }
    set
}

/// One line of `objdump -d -w`: address, bytes, text.
struct DumpLine {
    address: u64,
    bytes: Vec<u8>,
    text: String,
}

fn objdump_function(bin: &Path, function: &str) -> Vec<DumpLine> {
    let arg = format!("--disassemble={function}");
    let out = run("objdump", &["-d", "-w", &arg, path_str(bin)]);
    let mut lines = Vec::new();
    for line in out.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(addr), Some(bytes), Some(text)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Some(addr) = addr.trim().strip_suffix(':') else {
            continue;
        };
        let Ok(address) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let bytes = bytes
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).expect("objdump byte"))
            .collect();
        lines.push(DumpLine {
            address,
            bytes,
            text: text.trim().to_owned(),
        });
    }
    assert!(
        !lines.is_empty(),
        "objdump shows no {function} in {}",
        bin.display()
    );
    lines
}

/// The instruction without objdump's notes (`<f+0x4>`, `# 4024 <x>`), its
/// white space collapsed: the notes name symbols by objdump's own rules
/// (PLT entries, the nearest label), which this crate does not copy.
fn without_notes(text: &str) -> String {
    let text = text.split(" #").next().unwrap_or(text);
    let text = match text.find(" <") {
        Some(i) if text.ends_with('>') => &text[..i],
        _ => text,
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

const PREFIXES: [&str; 10] = [
    "rep", "repz", "repnz", "lock", "bnd", "notrack", "data16", "cs", "ds", "addr32",
];

/// The mnemonic proper, after any prefixes.
fn mnemonic(text: &str) -> &str {
    text.split_whitespace()
        .find(|w| !PREFIXES.contains(w))
        .unwrap_or("")
}

fn expected_kind(mnemonic: &str) -> InstrKind {
    match mnemonic {
        m if m.starts_with("call") => InstrKind::Call,
        m if m.starts_with("ret") => InstrKind::Return,
        m if m.starts_with("jmp") => InstrKind::Jump,
        m if m.starts_with('j') || m.starts_with("loop") => InstrKind::ConditionalJump,
        _ => InstrKind::Other,
    }
}

// ------------------------------------------------------------------ tests

#[test]
fn symbols_match_nm() {
    let Some(programs) = compile() else { return };
    for bin in &programs.builds {
        let obj = ObjectFile::open(bin).expect("open");
        assert!(obj.is_x86_64());
        assert_eq!(obj.path(), bin.as_path());
        let expected = nm_functions(bin);
        for name in [
            "main",
            "sum_squares",
            "square",
            "weak_helper",
            "twice",
            "_start",
        ] {
            assert!(
                expected.iter().any(|(n, _, _)| n == name),
                "nm lists no {name} in {}",
                bin.display()
            );
        }
        assert_eq!(our_functions(&obj), expected, "{}", bin.display());

        let addresses: Vec<u64> = obj.symbols().iter().map(|s| s.address).collect();
        assert!(
            addresses.windows(2).all(|w| w[0] < w[1]),
            "sorted, one per address"
        );
    }
}

#[test]
fn lookups_agree_with_nm() {
    let Some(programs) = compile() else { return };
    for bin in &programs.builds {
        let obj = ObjectFile::open(bin).expect("open");
        for (name, address, size) in nm_functions(bin) {
            let by_name = obj
                .find_function(&name)
                .unwrap_or_else(|| panic!("no {name} in {}", bin.display()));
            assert_eq!(by_name.address, address, "{name}");
            let by_address = obj.symbol_at(address).expect("symbol at its address");
            assert_eq!(by_address.address, address, "{name}");
            if size > 0 {
                assert_eq!(obj.symbol_at(address + size - 1).unwrap().address, address);
            }
        }
        let main = obj.find_function("main").unwrap();
        assert_eq!(main.name, "main");
        assert_eq!(main.demangled, None);
        assert_eq!(main.display_name(), "main");
        // Valgrind's recursion mark and a version suffix on a file without
        // versions of its own functions.
        assert_eq!(obj.find_function("main'2").unwrap().address, main.address);
        assert_eq!(obj.find_function("main@@V1").unwrap().address, main.address);
        assert!(obj.find_function("no_such_function").is_none());
        // `_fini` has no size: it runs to the end of `.fini`, not beyond.
        let fini = obj.find_function("_fini").unwrap();
        assert_eq!(fini.size, 0);
        assert!(fini.end > fini.address);
        assert!(
            obj.symbol_at(fini.end)
                .is_none_or(|s| s.address >= fini.end)
        );
        assert!(obj.symbol_at(0).is_none());
    }
}

#[test]
fn disassembly_matches_objdump() {
    let Some(programs) = compile() else { return };
    for bin in &programs.builds {
        let obj = ObjectFile::open(bin).expect("open");
        for function in ["main", "sum_squares", "square", "classify"] {
            let symbol = obj.find_function(function).unwrap();
            let ours = obj
                .disassemble(symbol.address, symbol.end)
                .expect("disassemble");
            assert_eq!(ours, obj.disassemble_function(symbol).unwrap());
            let theirs = objdump_function(bin, function);
            let context = format!("{function} in {}", bin.display());
            assert_eq!(
                ours.iter().map(|i| i.address).collect::<Vec<_>>(),
                theirs.iter().map(|l| l.address).collect::<Vec<_>>(),
                "addresses of {context}"
            );
            for (o, t) in ours.iter().zip(&theirs) {
                let at = format!(
                    "{:#x} in {context}: ours `{}`, objdump `{}`",
                    o.address, o.text, t.text
                );
                assert_eq!(o.bytes, t.bytes, "bytes at {at}");
                assert_eq!(o.len(), t.bytes.len(), "length at {at}");
                assert_eq!(mnemonic(&o.text), mnemonic(&t.text), "mnemonic at {at}");
                assert_eq!(
                    without_notes(&o.text),
                    without_notes(&t.text),
                    "text at {at}"
                );
                assert_eq!(o.kind, expected_kind(mnemonic(&t.text)), "kind at {at}");
                // objdump: `call   1155 <sum_squares>`; a direct branch's
                // operand is its target in hex.
                let operand = t.text.split_whitespace().nth(1).unwrap_or("");
                if matches!(
                    o.kind,
                    InstrKind::Call | InstrKind::Jump | InstrKind::ConditionalJump
                ) && !operand.starts_with('*')
                {
                    let target = u64::from_str_radix(operand, 16).expect("branch target");
                    assert_eq!(o.branch_target, Some(target), "target at {at}");
                } else {
                    assert_eq!(o.branch_target, None, "target at {at}");
                }
            }
            // Direct calls are named after the function they reach.
            let calls: Vec<_> = ours.iter().filter(|i| i.kind == InstrKind::Call).collect();
            if function == "sum_squares" {
                let square = obj.find_function("square").unwrap().address;
                assert!(calls.iter().any(|c| c.branch_target == Some(square)));
                assert!(
                    calls.iter().any(|c| c.text.ends_with(" <square>")),
                    "{calls:?}"
                );
            }
            assert_eq!(
                ours.last().unwrap().kind,
                expected_kind(mnemonic(&theirs.last().unwrap().text))
            );
        }
        // A RIP-relative store to `counter` is named after it.
        let main = obj.find_function("main").unwrap();
        let code = obj.disassemble_function(main).unwrap();
        assert!(
            code.iter()
                .any(|i| i.memory_target.is_some() && i.text.ends_with("<counter>")),
            "{code:#?}"
        );
    }
}

#[test]
fn source_lines_match_addr2line() {
    let Some(programs) = compile() else { return };
    for bin in &programs.builds {
        let obj = ObjectFile::open(bin).expect("open");
        let main = obj.find_function("main").unwrap();
        let addresses: Vec<u64> = obj
            .disassemble_function(main)
            .unwrap()
            .iter()
            .map(|i| i.address)
            .collect();
        let mut args = vec!["-e".to_owned(), path_str(bin).to_owned()];
        args.extend(addresses.iter().map(|a| format!("{a:#x}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run("addr2line", &args);
        let expected: Vec<&str> = out.lines().collect();
        assert_eq!(expected.len(), addresses.len());
        let mut compared = 0;
        for (i, (&addr, line)) in addresses.iter().zip(&expected).enumerate() {
            let line = line.split(" (discriminator").next().unwrap();
            let (file, number) = line.rsplit_once(':').unwrap();
            let Ok(number) = number.parse::<u32>() else {
                continue; // `??:?`
            };
            if number == 0 {
                continue;
            }
            let ours = obj.source_line(addr);
            assert_eq!(
                ours,
                Some((file.to_owned(), number)),
                "line of {addr:#x} in {}",
                bin.display()
            );
            if i == 0 {
                assert!(file.ends_with("prog.c"), "{file}");
            }
            compared += 1;
        }
        assert_eq!(
            expected[0].split(':').next().map(|f| f.ends_with("prog.c")),
            Some(true)
        );
        assert!(compared > addresses.len() / 2, "too few lines to compare");
        assert_eq!(obj.source_line(0), None);

        // Without debug information there are no lines, and no error.
        let stripped = bin.with_extension("stripped");
        run(
            "strip",
            &["--strip-debug", "-o", path_str(&stripped), path_str(bin)],
        );
        let obj = ObjectFile::open(&stripped).expect("open stripped");
        assert_eq!(obj.source_line(main.address), None);
        assert_eq!(obj.find_function("main").unwrap().address, main.address);
    }
}

#[test]
fn versioned_symbols_of_a_shared_library() {
    if !require(&["gcc", "nm", "strip"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("lib.c");
    std::fs::write(
        &source,
        r#"
        int foo_v1(int x) { return x + 1; }
        int foo_v2(int x) { return x + 2; }
        __asm__(".symver foo_v1,foo@V1");
        __asm__(".symver foo_v2,foo@@V2");
        int bar(int x) { return foo_v2(x) * 3; }
        "#,
    )
    .unwrap();
    let map = dir.path().join("lib.map");
    std::fs::write(
        &map,
        "V1 { global: foo; bar; local: *; };\nV2 { global: foo; } V1;\n",
    )
    .unwrap();
    let lib = dir.path().join("libfoo.so");
    let version_script = format!("-Wl,--version-script={}", path_str(&map));
    run(
        "gcc",
        &[
            "-shared",
            "-fPIC",
            "-O1",
            &version_script,
            "-o",
            path_str(&lib),
            path_str(&source),
        ],
    );
    // `nm -D` prints `foo@V1` and `foo@@V2` (binutils 2.35 and later).
    let dynamic = run("nm", &["-D", "--defined-only", path_str(&lib)]);
    let address_of = |name: &str| {
        dynamic
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
            })
            .unwrap_or_else(|| panic!("nm -D shows no {name}:\n{dynamic}"))
    };
    let (v1, v2) = (address_of("foo@V1"), address_of("foo@@V2"));
    assert_ne!(v1, v2);

    let stripped = dir.path().join("libfoo-stripped.so");
    run(
        "strip",
        &["--strip-all", "-o", path_str(&stripped), path_str(&lib)],
    );
    for file in [&lib, &stripped] {
        let obj = ObjectFile::open(file).unwrap();
        let context = file.display();
        assert_eq!(
            obj.find_function("foo@@V2").unwrap().address,
            v2,
            "{context}"
        );
        assert_eq!(
            obj.find_function("foo@V1").unwrap().address,
            v1,
            "{context}"
        );
        // Without a version, the default one.
        assert_eq!(obj.find_function("foo").unwrap().address, v2, "{context}");
        assert!(obj.find_function("foo@@V9").is_none(), "{context}");
        assert_eq!(
            obj.find_function("bar@@V1").unwrap().address,
            address_of("bar@@V1"),
            "{context}"
        );
        let at_v1 = obj.symbol_at(v1).unwrap();
        let names: Vec<&str> = at_v1.names().collect();
        assert!(names.iter().any(|n| n.starts_with("foo")), "{names:?}");
        assert!(
            std::iter::once(&at_v1.version)
                .chain(at_v1.aliases.iter().map(|a| &a.version))
                .any(|v| v.as_ref().is_some_and(|v| v.name == "V1" && v.hidden)),
            "{at_v1:?}"
        );
    }
    // The stripped library has `.dynsym` only: no local `foo_v1`.
    let stripped = ObjectFile::open(&stripped).unwrap();
    assert!(stripped.find_function("foo_v1").is_none());
    assert!(
        ObjectFile::open(&lib)
            .unwrap()
            .find_function("foo_v1")
            .is_some()
    );
}

#[test]
fn cpp_functions_are_found_by_their_demangled_names() {
    if !require(&["g++", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("prog.cc");
    std::fs::write(
        &source,
        r#"
        #include <vector>
        namespace geo {
        struct Point { int x, y; };
        __attribute__((noinline)) int area(const Point& a, const Point& b) {
            return (b.x - a.x) * (b.y - a.y);
        }
        template <typename T> __attribute__((noinline)) T total(const std::vector<T>& v) {
            T t{};
            for (const T& e : v) t += e;
            return t;
        }
        }
        int main() {
            std::vector<int> v{1, 2, 3};
            return geo::area({0, 0}, {2, 3}) + geo::total(v);
        }
        "#,
    )
    .unwrap();
    let bin = dir.path().join("prog");
    run("g++", &["-O1", "-o", path_str(&bin), path_str(&source)]);
    let obj = ObjectFile::open(&bin).unwrap();
    // The names as `nm -C` (and Valgrind) print them.
    let demangled = run("nm", &["-C", "--defined-only", path_str(&bin)]);
    let raw = run("nm", &["--defined-only", path_str(&bin)]);
    let mut checked = 0;
    for (d, r) in demangled.lines().zip(raw.lines()) {
        let (Some((addr, rest)), Some((_, raw_rest))) = (d.split_once(' '), r.split_once(' '))
        else {
            continue;
        };
        let (class, name) = rest.split_once(' ').unwrap();
        let raw_name = raw_rest.split_once(' ').unwrap().1;
        if !["T", "t", "W"].contains(&class) || !raw_name.starts_with("_Z") {
            continue;
        }
        let address = u64::from_str_radix(addr, 16).unwrap();
        let symbol = obj
            .find_function(name)
            .unwrap_or_else(|| panic!("no `{name}` ({raw_name})"));
        assert_eq!(symbol.address, address, "{name}");
        assert_eq!(
            obj.find_function(raw_name).unwrap().address,
            address,
            "{raw_name}"
        );
        checked += 1;
    }
    assert!(checked >= 2, "{demangled}");
    let area = obj
        .find_function("geo::area(geo::Point const&, geo::Point const&)")
        .unwrap();
    assert_eq!(area.name, "_ZN3geo4areaERKNS_5PointES2_");
    assert_eq!(
        area.display_name(),
        "geo::area(geo::Point const&, geo::Point const&)"
    );
    let total = obj
        .find_function("int geo::total<int>(std::vector<int, std::allocator<int> > const&)")
        .unwrap();
    // Other spacing of the same name, as other demanglers print it.
    assert_eq!(
        obj.find_function("int geo::total<int>(std::vector<int, std::allocator<int>> const&)")
            .unwrap()
            .address,
        total.address
    );
}

#[test]
fn addresses_outside_code_are_errors() {
    let Some(programs) = compile() else { return };
    let bin = &programs.builds[0];
    let obj = ObjectFile::open(bin).unwrap();
    let counter = nm_address(bin, "counter");
    for address in [0, counter, u64::MAX - 1] {
        let err = obj.disassemble(address, address + 1).unwrap_err();
        assert!(
            matches!(err, SymbolsError::AddressNotExecutable { address: a, .. } if a == address),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(&format!("{address:#x}")), "{message}");
        assert!(message.contains(path_str(bin)), "{message}");
    }
    let main = obj.find_function("main").unwrap();
    let err = obj.disassemble(main.end, main.address).unwrap_err();
    assert!(matches!(err, SymbolsError::InvalidRange { .. }), "{err:?}");
    // A range past the end of `.text` stops there.
    let square = obj.find_function("square").unwrap();
    let whole = obj.disassemble_function(square).unwrap();
    let long = obj
        .disassemble(square.address, square.address + 0x10_0000)
        .unwrap();
    assert!(long.len() > whole.len());
    assert_eq!(long[..whole.len()], whole[..]);
    let text_end = long.last().unwrap().end();
    assert!(text_end < square.address + 0x10_0000);
    assert!(text_end >= main.end);
    assert_eq!(obj.disassemble(square.address, u64::MAX).unwrap(), long);
    assert_eq!(obj.disassemble(main.address, main.address).unwrap(), []);
    // A range ending inside an instruction ends with the bytes it has.
    let first = &obj.disassemble_function(main).unwrap()[0];
    let cut = obj.disassemble(main.address, main.address + 1).unwrap();
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0].address, main.address);
    if first.len() > 1 {
        assert_eq!(cut[0].text, "(bad)");
    }
}

fn nm_address(bin: &Path, name: &str) -> u64 {
    let out = run("nm", &[path_str(bin)]);
    out.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("nm shows no {name}"))
}

#[test]
fn bad_files_are_errors_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8]); 4] = [
        ("empty", b""),
        ("text.txt", b"events: Ir\nfn=main\n1 2\n"),
        ("short", b"\x7fEL"),
        ("script.sh", b"#!/bin/sh\necho hello\n"),
    ];
    for (name, data) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, data).unwrap();
        let err = ObjectFile::open(&path).unwrap_err();
        assert!(
            matches!(err, SymbolsError::NotElf { .. }),
            "{name}: {err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(path_str(&path)), "{message}");
        assert!(message.contains("not an ELF file"), "{message}");
    }
    let missing = dir.path().join("missing");
    let err = ObjectFile::open(&missing).unwrap_err();
    assert!(matches!(err, SymbolsError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains(path_str(&missing)), "{err}");
    let err = ObjectFile::open(dir.path()).unwrap_err();
    assert!(matches!(err, SymbolsError::Io { .. }), "{err:?}");
}

#[test]
fn truncated_elf_is_an_error() {
    let Some(programs) = compile() else { return };
    let bin = &programs.builds[0];
    let data = std::fs::read(bin).unwrap();
    let name = path_str(bin);
    // The section headers sit at the end: any cut loses some of them.
    for len in [
        4,
        5,
        16,
        63,
        64,
        65,
        200,
        data.len() / 2,
        data.len() - 64,
        data.len() - 1,
    ] {
        let err = ObjectFile::from_bytes(name, data[..len].to_vec()).unwrap_err();
        assert!(
            matches!(err, SymbolsError::Malformed { .. }),
            "{len}: {err:?}"
        );
        assert!(err.to_string().contains(name), "{err}");
    }
    let whole = ObjectFile::from_bytes(name, data).unwrap();
    assert_eq!(whole.symbols(), ObjectFile::open(bin).unwrap().symbols());
}

/// Every cut and many damaged bytes: a result or an error, never a panic,
/// from every call.
#[test]
fn damaged_elf_never_panics() {
    let Some(programs) = compile() else { return };
    let bin = &programs.builds[0];
    let data = std::fs::read(bin).unwrap();
    let main = ObjectFile::open(bin)
        .unwrap()
        .find_function("main")
        .unwrap()
        .clone();
    let exercise = |bytes: Vec<u8>| {
        if let Ok(obj) = ObjectFile::from_bytes("damaged", bytes) {
            for s in obj.symbols() {
                let _ = obj.disassemble_function(s);
                let _ = obj.symbol_at(s.address);
            }
            let _ = obj.find_function("main");
            let _ = obj.disassemble(main.address, main.end);
            let _ = obj.source_line(main.address);
        }
    };
    for len in (0..data.len()).step_by(61) {
        exercise(data[..len].to_vec());
    }
    // A fixed xorshift sequence, so a failure can be replayed.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..300 {
        let mut bytes = data.clone();
        for _ in 0..1 + next() % 8 {
            // Mostly the headers and tables (the ELF and program headers at
            // the start, the section headers at the end), where damage
            // matters most.
            let len = bytes.len() as u64;
            let at = match next() % 3 {
                0 => next() % 4096.min(len),
                1 => len - 1 - next() % 4096.min(len),
                _ => next() % len,
            } as usize;
            bytes[at] = next() as u8;
        }
        exercise(bytes);
    }
}

#[test]
fn other_machines_have_symbols_but_no_disassembly() {
    let Some(programs) = compile() else { return };
    let bin = &programs.builds[0];
    let mut data = std::fs::read(bin).unwrap();
    // e_machine, at offset 18, little-endian: EM_AARCH64.
    data[18..20].copy_from_slice(&183u16.to_le_bytes());
    let obj = ObjectFile::from_bytes("arm-ish", data).unwrap();
    assert!(!obj.is_x86_64());
    assert_eq!(obj.machine(), "aarch64");
    let main = obj.find_function("main").unwrap();
    let err = obj.disassemble_function(main).unwrap_err();
    assert!(
        matches!(err, SymbolsError::UnsupportedArchitecture { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("arm-ish"), "{err}");
    assert!(err.to_string().contains("aarch64"), "{err}");
}

/// Guards the helper: the notes objdump adds are all that is dropped.
#[test]
fn notes_are_stripped_from_objdump_text() {
    assert_eq!(without_notes("call   1155 <sum_squares>"), "call 1155");
    assert_eq!(
        without_notes("mov    %eax,0x2e77(%rip)        # 4024 <counter>"),
        "mov %eax,0x2e77(%rip)"
    );
    assert_eq!(
        without_notes("lea    (%rdx,%rdx,4),%eax"),
        "lea (%rdx,%rdx,4),%eax"
    );
    assert_eq!(mnemonic("notrack jmp *%rax"), "jmp");
}

/// Hand-written code after an untyped label (as the loader's
/// `_dl_start_user`) belongs to no function, as Valgrind sees it, but is
/// named after the label, as perf names it; a label never hides a function.
#[test]
fn untyped_labels_name_code_outside_functions() {
    if !require(&["gcc", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("labels.c");
    std::fs::write(
        &source,
        r#"
        __asm__(".text\n"
                "entry_label:\n nop\n nop\n"
                "second_label:\n nop\n ret\n"
                ".L.hidden:\n nop\n");
        __attribute__((noinline)) int after(int x) { return x * 3; }
        int main(int argc, char **argv) { (void)argv; return after(argc); }
        "#,
    )
    .unwrap();
    let bin = dir.path().join("labels");
    run("gcc", &["-O1", "-o", path_str(&bin), path_str(&source)]);
    let nm = run("nm", &["--defined-only", path_str(&bin)]);
    let address_of = |name: &str| {
        nm.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
            })
            .unwrap_or_else(|| panic!("nm shows no {name}:\n{nm}"))
    };
    let (entry, second, after) = (
        address_of("entry_label"),
        address_of("second_label"),
        address_of("after"),
    );
    let obj = ObjectFile::open(&bin).unwrap();
    // gcc's `frame_dummy` (unsized) comes just before: to Valgrind's
    // rules it runs on to `after`; perf ends it at the label.
    assert!(
        obj.symbol_at(entry).is_none_or(|s| !s.is_sized()),
        "a label is not a function"
    );
    assert_eq!(obj.code_label_at(entry), Some((entry, "entry_label")));
    assert_eq!(obj.code_label_at(entry + 1), Some((entry, "entry_label")));
    assert_eq!(
        obj.code_label_at(second + 1),
        Some((second, "second_label"))
    );
    // An assembler-local name is no label, so the code after it still
    // counts as `second_label`'s.
    assert_eq!(
        obj.code_label_at(second + 2),
        Some((second, "second_label"))
    );
    // Inside a function, the function wins.
    assert!(obj.symbol_at(after).is_some());
    assert_eq!(obj.code_label_at(after), None);
}

/// Of several names for one function, Valgrind prints the shortest and
/// perf the longest (glibc's `fstatat` and `fstatat64`); a non-weak name
/// beats a weak one for both.
#[test]
fn aliases_are_named_as_valgrind_and_as_perf_name_them() {
    if !require(&["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("alias.c");
    std::fs::write(
        &source,
        r#"
        int stat_impl(int x) { return x + 1; }
        extern int stat_at(int) __attribute__((weak, alias("stat_impl")));
        extern int stat_at64(int) __attribute__((weak, alias("stat_impl")));
        int weak_pair(int x) __attribute__((weak));
        int weak_pair(int x) { return x * 2; }
        extern int weak_pair_longer(int) __attribute__((weak, alias("weak_pair")));
        "#,
    )
    .unwrap();
    let lib = dir.path().join("libalias.so");
    run(
        "gcc",
        &[
            "-shared",
            "-fPIC",
            "-O1",
            "-o",
            path_str(&lib),
            path_str(&source),
        ],
    );
    let obj = ObjectFile::open(&lib).unwrap();
    let f = obj.find_function("stat_at64").unwrap();
    assert_eq!(f.valgrind_name(), "stat_at");
    // The global name wins over longer weak ones.
    assert_eq!(f.perf_name(), "stat_impl");
    let g = obj.find_function("weak_pair").unwrap();
    assert_eq!(g.valgrind_name(), "weak_pair");
    assert_eq!(g.perf_name(), "weak_pair_longer");
}
