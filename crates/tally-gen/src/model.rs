//! The synthetic program: objects, source files, functions and their
//! layout, and the order in which function blocks are written.
//!
//! Everything is derived from the seed before any output is produced, so
//! both generation passes (see `emit`) and every block see the same program.
//! Names follow what Valgrind shows for a C++ program on Debian: demangled
//! C++ names (Valgrind demangles by default) mixed with mangled and C names,
//! `./src/...` paths for the program, glibc's odd `./string/../sysdeps/...`
//! paths, libraries without debug information (`fl=???`, line 0) and
//! unknown code (`ob=???`, names like `0x0000000004838000`).

use crate::Shape;
use crate::rng::{Rng, hash2, mix};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// A fast hasher for the generator's own tables: the keys are names it
/// made itself, so SipHash's protection against chosen keys buys nothing
/// and costs a noticeable part of building a large program.
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

const HASH_K: u64 = 0x517c_c1b7_2722_0a95;

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(HASH_K);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(HASH_K);
    }
    fn finish(&self) -> u64 {
        mix(self.0)
    }
}

type Fast = BuildHasherDefault<FastHasher>;

/// "No file" for [`Func::inline`].
pub(crate) const NO_FILE: u32 = u32::MAX;

/// One function of the synthetic program.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Func {
    pub object: u32,
    pub file: u32,
    /// Index into the symbol table.
    pub name: u32,
    /// A header whose code is inlined into this function (`fi=`), or
    /// [`NO_FILE`].
    pub inline: u32,
    /// Where the inlined code sits in that header.
    pub inline_line: u32,
    /// Entry address (object-relative, as Valgrind prints for shared
    /// objects).
    pub addr: u64,
    /// First line; 0 when the object has no debug information.
    pub line: u32,
    /// Executed instructions, spread over `segments` blocks.
    pub instrs: u32,
    pub segments: u32,
    /// Multiplier of execution counts: a few functions are hot.
    pub hot: u32,
    /// Inclusive instructions per call, for the costs of call arcs.
    pub per_call: u64,
}

impl Func {
    /// First instruction index and count of segment `seg`.
    pub(crate) fn segment(&self, seg: u32) -> (u32, u32) {
        let n = u64::from(self.instrs);
        let s = u64::from(self.segments);
        let a = n * u64::from(seg) / s;
        let b = n * (u64::from(seg) + 1) / s;
        (a as u32, (b - a) as u32)
    }
}

/// An interned list of names of one kind. Each name is stored once, shared
/// by the list and the index.
#[derive(Default, Debug)]
pub(crate) struct Table {
    pub names: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u32, Fast>,
}

impl Table {
    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        let name: Arc<str> = Arc::from(s);
        self.names.push(name.clone());
        self.index.insert(name, i);
        i
    }

    pub(crate) fn get(&self, i: u32) -> &[u8] {
        self.names[i as usize].as_bytes()
    }
}

/// The program and the block order.
pub(crate) struct Model {
    pub objects: Table,
    pub files: Table,
    pub symbols: Table,
    pub funcs: Vec<Func>,
    /// Function index range of each object, for picking callees nearby.
    pub object_funcs: Vec<(u32, u32)>,
    /// Library functions many callers use (malloc, memcpy, operator new…).
    pub popular: Vec<u32>,
    /// (function, segment) in the order the blocks are written.
    pub order: Vec<(u32, u32)>,
    /// Seeds of the per-block streams.
    pub layout_seed: u64,
    pub cost_seed: u64,
    /// Chance (per mille) that a basic block of a function with inlined
    /// code starts a stretch of it.
    pub inline_rate: u64,
    /// Chance (per mille) that a basic block which would fall through
    /// calls instead: the denser calls of a C program.
    pub extra_calls: u64,
    /// Chance (per mille) that it branches instead (when it does not call).
    pub extra_jumps: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// The program and its own libraries: C++ with debug information.
    Project,
    Libc,
    Ld,
    Libstdcxx,
    /// C with debug information (libm).
    CDebug,
    /// A system library without debug information: `fl=???`, line 0.
    NoDebug,
    /// `ob=???`: code Valgrind cannot attribute.
    Unknown,
}

struct ObjectSpec {
    name: String,
    kind: Kind,
    /// Percent of the functions (before rounding).
    weight: u64,
    base: u64,
    /// Name prefix for generated C names.
    prefix: String,
}

/// Functions never exceed this; larger sizes repeat blocks in new rounds
/// (as `--separate-threads` or several contexts would), which keeps memory
/// of the generator small.
const MAX_FUNCTIONS: usize = 250_000;
const MIN_FUNCTIONS: usize = 24;

impl Model {
    /// Builds the program for about `lines` cost lines.
    pub(crate) fn build(seed: u64, lines: u64, shape: Shape) -> Model {
        let mut rng = Rng::new(hash2(seed, 0x006d_6f64_656c));
        let knobs = Knobs::of(shape);
        // Function sizes first: their sum decides how many functions there are.
        let mut sizes = Vec::new();
        let mut total = 0u64;
        while (total < lines + lines / 16 || sizes.len() < MIN_FUNCTIONS)
            && sizes.len() < MAX_FUNCTIONS
        {
            let mut n = if rng.chance(700) {
                rng.log_range(3, 120)
            } else {
                rng.log_range(120, 2500)
            };
            if knobs.small_functions {
                n = (n / 4).max(3);
            }
            sizes.push(n as u32);
            total += n;
        }
        let mut specs = object_specs(&mut rng, sizes.len());
        if shape.c_program {
            specs.retain(|s| s.kind != Kind::Libstdcxx);
        }
        let mut m = Model {
            objects: Table::default(),
            files: Table::default(),
            symbols: Table::default(),
            funcs: Vec::with_capacity(sizes.len()),
            object_funcs: Vec::new(),
            popular: Vec::new(),
            order: Vec::new(),
            layout_seed: hash2(seed, 0x6c61_796f_7574),
            cost_seed: hash2(seed, 0x636f_7374),
            inline_rate: knobs.inline_rate,
            extra_calls: knobs.extra_calls,
            extra_jumps: knobs.extra_jumps,
        };
        // Split the functions over the objects by weight; the program takes
        // the rest.
        let f = sizes.len() as u64;
        let mut counts: Vec<u64> = specs
            .iter()
            .map(|s| match s.kind {
                Kind::Unknown => (f * s.weight / 100).max(2),
                _ => (f * s.weight / 100).max(1),
            })
            .collect();
        let others: u64 = counts[1..].iter().sum();
        counts[0] = f.saturating_sub(others).max(1);
        let mut next = 0usize;
        let mut keys: HashSet<(u32, u32, u32), Fast> =
            HashSet::with_capacity_and_hasher(sizes.len() + 64, Fast::default());
        m.symbols.index.reserve(sizes.len() + 64);
        m.symbols.names.reserve(sizes.len() + 64);
        let mut namer = Namer {
            c_program: shape.c_program,
            ..Namer::default()
        };
        let mut contexts = Contexts::new(hash2(seed, 0x0063_7478), shape.separate_callers);
        for (oi, (spec, &count)) in specs.iter().zip(&counts).enumerate() {
            let object = m.objects.intern(&spec.name);
            let first = m.funcs.len() as u32;
            contexts.left = 0;
            // A recursive function whose second level gets its own name
            // (`f'2`), made next as a copy of it.
            let mut recursive: Option<String> = None;
            let mut addr = spec.base;
            let mut file = NO_FILE;
            let mut file_left = 0u32;
            let mut line = 0u32;
            let mut module = 0u32;
            let mut file_no = 0u32;
            for k in 0..count {
                if let (Some(name), Some(&last)) = (recursive.take(), m.funcs.last()) {
                    let sym = m.symbols.intern(&format!("{name}'2"));
                    if keys.insert((object, last.file, sym)) {
                        m.funcs.push(Func {
                            name: sym,
                            hot: hotness(&mut rng),
                            ..last
                        });
                        continue;
                    }
                }
                // Another context of the function made last: its code, a
                // new name.
                if let Some(variant) = contexts.another(m.funcs.last()) {
                    let sym = contexts.intern(&mut m.symbols, &mut keys, object, variant.file);
                    m.funcs.push(Func {
                        name: sym,
                        hot: hotness(&mut rng),
                        ..variant
                    });
                    if contexts.popular {
                        m.popular.push(m.funcs.len() as u32 - 1);
                    }
                    continue;
                }
                let instrs = match sizes.get(next) {
                    Some(&n) => n,
                    // Rounding gave this object more functions than sizes
                    // were drawn for: small ones.
                    None => rng.range(3, 40) as u32,
                };
                next += 1;
                let stripped = shape.no_debug_info && spec.kind == Kind::Project;
                let debug = !(stripped || matches!(spec.kind, Kind::NoDebug | Kind::Unknown));
                if file_left == 0 {
                    file_left = rng.range(knobs.file_span.0, knobs.file_span.1) as u32;
                    file_no += 1;
                    if file_no.is_multiple_of(12) {
                        module += 1;
                    }
                    file = if debug {
                        m.files.intern(&file_name(
                            &mut rng,
                            spec,
                            oi as u32,
                            module,
                            file_no,
                            shape.c_program,
                        ))
                    } else {
                        m.files.intern("???")
                    };
                    line = rng.range(10, 70) as u32;
                }
                file_left -= 1;
                let (name, fixed) = namer.name(&mut rng, spec, k, addr, instrs);
                // The special names of the program have no debug info.
                let (ffile, fline) = if name == "(below main)" || name.starts_with("_start") {
                    (m.files.intern("???"), 0)
                } else if debug {
                    (file, line)
                } else {
                    (file, 0)
                };
                let popular = fixed && matches!(spec.kind, Kind::Libc | Kind::Ld | Kind::Libstdcxx);
                let sym = if contexts.on() {
                    contexts.begin(&name, spec, popular);
                    contexts.intern(&mut m.symbols, &mut keys, object, ffile)
                } else {
                    let mut sym = m.symbols.intern(&name);
                    // A function is (object, file, name): make the key
                    // unique, as a compiler's local symbols would be
                    // (`.constprop.N`).
                    let mut suffix = 0;
                    while !keys.insert((object, ffile, sym)) {
                        sym = m.symbols.intern(&format!("{name}.constprop.{suffix}"));
                        suffix += 1;
                    }
                    sym
                };
                let share = match (spec.kind, knobs.project_inlines) {
                    (Kind::Project, Some(share)) => share,
                    (kind, _) => inline_share(kind),
                };
                let (inline, inline_line) = if fline > 0 && rng.chance(share) {
                    let h = header_name(&mut rng, spec, module, shape.c_program);
                    (m.files.intern(&h), rng.range(20, 2400) as u32)
                } else {
                    (NO_FILE, 0)
                };
                let max_seg = (instrs / 16).clamp(1, 6);
                let hot = hotness(&mut rng);
                m.funcs.push(Func {
                    object,
                    file: ffile,
                    name: sym,
                    inline,
                    inline_line,
                    addr,
                    line: fline,
                    instrs,
                    segments: 1 + rng.below(u64::from(max_seg)) as u32,
                    hot,
                    per_call: u64::from(instrs) * rng.range(1, 40) + 5,
                });
                if popular {
                    m.popular.push(m.funcs.len() as u32 - 1);
                }
                if knobs.recursive > 0 && !contexts.on() && rng.chance(knobs.recursive) {
                    recursive = Some(name);
                }
                // 16 bytes of address space per instruction: executed
                // instructions take 1-15 bytes, the rest is code that never
                // ran; then a gap and 16-byte alignment, as compilers do.
                addr = (addr + u64::from(instrs) * 16 + rng.range(0, 96) + 15) & !15;
                line += instrs / 3 + rng.range(3, 40) as u32;
            }
            m.object_funcs.push((first, m.funcs.len() as u32));
        }
        if m.popular.is_empty() {
            m.popular.push(0);
        }
        m.order = block_order(&mut rng, &m.funcs, &m.object_funcs, knobs.run);
        m
    }
}

/// The numbers a [`Shape`] sets, in one place. A C program's are
/// calibrated on CPython's profile (BENCHMARKS.md, "tally-gen against
/// real files"); the default's keep the bytes the generator always wrote.
struct Knobs {
    /// Functions a quarter of the default size: a context runs a part of
    /// its function's code (cc1's, 60 cost lines each, against 270 for a
    /// whole function here), and a C program's functions are small
    /// (CPython's, 70).
    small_functions: bool,
    /// How many functions a source file holds (a uniform range).
    file_span: (u64, u64),
    /// Chance (per mille) that a function of the program inlines a
    /// header's code; `None`: as for any C++ object.
    project_inlines: Option<u64>,
    /// Chance (per mille) that a function gets an `f'2` twin.
    recursive: u64,
    /// Blocks of one object written in a row (a uniform range): a C
    /// program keeps to one object for long, CPython's interpreter being
    /// one, and its calls into libc go by `cob=`.
    run: (u64, u64),
    /// See [`Model::inline_rate`], [`Model::extra_calls`],
    /// [`Model::extra_jumps`].
    inline_rate: u64,
    extra_calls: u64,
    extra_jumps: u64,
}

impl Knobs {
    fn of(shape: Shape) -> Knobs {
        let small_functions = shape.separate_callers > 0 || shape.c_program;
        if shape.c_program {
            Knobs {
                small_functions,
                file_span: (4, 40),
                project_inlines: Some(900),
                recursive: 45,
                run: (40, 400),
                inline_rate: 650,
                extra_calls: 420,
                extra_jumps: 80,
            }
        } else {
            Knobs {
                small_functions,
                file_span: (1, 11),
                project_inlines: None,
                recursive: 0,
                run: (1, 8),
                inline_rate: 80,
                extra_calls: 0,
                extra_jumps: 0,
            }
        }
    }
}

/// The context names of `--separate-callers=N`: each function the model
/// draws becomes one or more contexts of it, consecutive functions that
/// share its code and differ in the callers named after it.
struct Contexts {
    rng: Rng,
    callers: u32,
    /// The function whose contexts are being made: its name, the contexts
    /// still to make, whether it is a popular callee.
    base: String,
    left: u32,
    popular: bool,
    /// Names of the functions met so far, the callers that contexts name.
    met: Vec<Arc<str>>,
    /// Address range of the current object, for callers without a symbol.
    addrs: (u64, u64),
    buf: String,
}

impl Contexts {
    fn new(seed: u64, callers: u32) -> Contexts {
        Contexts {
            rng: Rng::new(seed),
            callers,
            base: String::new(),
            left: 0,
            popular: false,
            met: Vec::new(),
            addrs: (0, 1),
            buf: String::new(),
        }
    }

    fn on(&self) -> bool {
        self.callers > 0
    }

    /// Starts the contexts of a new function `name`: how many is drawn as
    /// cc1's are spread (median 2, mean 12, a few functions in thousands
    /// of contexts: `xmalloc`, the tree walkers).
    fn begin(&mut self, name: &str, spec: &ObjectSpec, popular: bool) {
        let r = &mut self.rng;
        let n = match r.below(1000) {
            0..390 => 1,
            390..990 => r.log_range(2, 40),
            _ => r.log_range(100, 2300),
        };
        self.left = n as u32;
        self.popular = popular;
        self.base.clear();
        self.base.push_str(name);
        self.addrs = (spec.base, spec.base + (1 << 24));
        self.met.push(Arc::from(name));
    }

    /// The function made last (`last`), to copy as its next context, if
    /// it has contexts left.
    fn another(&self, last: Option<&Func>) -> Option<Func> {
        if self.left == 0 {
            return None;
        }
        last.copied()
    }

    /// Interns the next context name of the function begun last, for a
    /// function in `object` and `file`: unique as a function key, as
    /// Callgrind's contexts are.
    fn intern(
        &mut self,
        symbols: &mut Table,
        keys: &mut HashSet<(u32, u32, u32), Fast>,
        object: u32,
        file: u32,
    ) -> u32 {
        self.left = self.left.saturating_sub(1);
        loop {
            self.buf.clear();
            self.buf.push_str(&self.base);
            for _ in 0..self.callers {
                self.buf.push('\'');
                // A caller without a symbol, named by its address, three
                // times in ten.
                if self.rng.chance(290) || self.met.is_empty() {
                    let a = self.rng.range(self.addrs.0, self.addrs.1);
                    let _ = write!(self.buf, "0x{a:016x}");
                } else {
                    let i = self.rng.below(self.met.len() as u64) as usize;
                    self.buf.push_str(&self.met[i]);
                }
            }
            let sym = symbols.intern(&self.buf);
            if keys.insert((object, file, sym)) {
                return sym;
            }
        }
    }
}

/// A function's multiplier of execution counts: most are cold, a few hot.
fn hotness(rng: &mut Rng) -> u32 {
    match rng.below(100) {
        0..80 => 1,
        80..95 => 4,
        _ => 40,
    }
}

fn inline_share(kind: Kind) -> u64 {
    match kind {
        Kind::Project | Kind::Libstdcxx => 350,
        Kind::Libc | Kind::Ld | Kind::CDebug => 120,
        Kind::NoDebug | Kind::Unknown => 0,
    }
}

/// All (function, segment) pairs in the order the blocks are written.
///
/// Valgrind's output shows runs of one object interrupted by others, and a
/// function's blocks separated by other functions. So each object's pairs
/// are taken in function order, shuffled within small windows, and the
/// objects are interleaved in short runs, picked by how much each has left.
/// Walking the function table nearly in order also keeps the generator in
/// the processor's caches.
fn block_order(
    rng: &mut Rng,
    funcs: &[Func],
    object_funcs: &[(u32, u32)],
    run: (u64, u64),
) -> Vec<(u32, u32)> {
    let mut queues: Vec<Vec<(u32, u32)>> = object_funcs
        .iter()
        .map(|&(lo, hi)| {
            let mut q: Vec<(u32, u32)> = (lo..hi)
                .flat_map(|i| (0..funcs[i as usize].segments).map(move |s| (i, s)))
                .collect();
            for w in q.chunks_mut(48) {
                rng.shuffle(w);
            }
            q.reverse();
            q
        })
        .collect();
    let mut remaining: u64 = queues.iter().map(|q| q.len() as u64).sum();
    let mut order = Vec::with_capacity(remaining as usize);
    while remaining > 0 {
        let mut x = rng.below(remaining);
        let o = queues
            .iter()
            .position(|q| {
                let n = q.len() as u64;
                if x < n {
                    true
                } else {
                    x -= n;
                    false
                }
            })
            .unwrap_or(0);
        for _ in 0..rng.range(run.0, run.1) {
            match queues[o].pop() {
                Some(p) => {
                    order.push(p);
                    remaining -= 1;
                }
                None => break,
            }
        }
    }
    // Two blocks of one function in a row would be one block in Valgrind's
    // output.
    for i in 1..order.len() {
        if order[i].0 == order[i - 1].0
            && let Some(j) = (i + 1..order.len()).find(|&j| order[j].0 != order[i].0)
        {
            order.swap(i, j);
        }
    }
    order
}

const LIB_WORDS: &[&str] = &[
    "z",
    "ssl",
    "crypto",
    "xml2",
    "png16",
    "sqlite3",
    "ffi",
    "expat",
    "pcre2-8",
    "lzma",
    "bz2",
    "zstd",
    "icuuc",
    "icui18n",
    "freetype",
    "fontconfig",
    "harfbuzz",
    "jpeg",
    "tiff",
    "curl",
    "nghttp2",
    "idn2",
    "gmp",
    "mpfr",
    "uuid",
    "systemd",
    "dbus-1",
    "glib-2.0",
    "gobject-2.0",
    "yaml-0",
];

fn object_specs(rng: &mut Rng, functions: usize) -> Vec<ObjectSpec> {
    let spec = |name: &str, kind, weight, base, prefix: &str| ObjectSpec {
        name: name.to_string(),
        kind,
        weight,
        base,
        prefix: prefix.to_string(),
    };
    let mut v = vec![
        spec(
            "/home/dev/project/build/generated",
            Kind::Project,
            40,
            0x109000,
            "app",
        ),
        spec(
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            Kind::Libc,
            6,
            0x28000,
            "",
        ),
        spec(
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            Kind::Ld,
            2,
            0x1000,
            "_dl",
        ),
        spec(
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30",
            Kind::Libstdcxx,
            8,
            0x9a000,
            "",
        ),
        spec(
            "/usr/lib/x86_64-linux-gnu/libm.so.6",
            Kind::CDebug,
            2,
            0xe000,
            "__ieee754",
        ),
        spec(
            "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
            Kind::NoDebug,
            1,
            0x3000,
            "__gcc",
        ),
        spec(
            "/usr/libexec/valgrind/vgpreload_core-amd64-linux.so",
            Kind::NoDebug,
            0,
            0x1000,
            "_vgnU",
        ),
        spec("???", Kind::Unknown, 1, 0x483_8000, ""),
    ];
    let extra = (1 + functions.ilog2() / 2).min(30) as usize;
    let weight = (40 / extra.max(1)) as u64;
    let mut words: Vec<&str> = LIB_WORDS.to_vec();
    rng.shuffle(&mut words);
    for i in 0..extra {
        let base = 0x2000 + (rng.below(0x40) << 12);
        if i % 2 == 0 {
            let name = format!("/home/dev/project/build/lib/libmodule{i}.so");
            v.push(spec(&name, Kind::Project, weight, base, &format!("mod{i}")));
        } else {
            let w = words[(i / 2) % words.len()];
            let name = format!("/usr/lib/x86_64-linux-gnu/lib{w}.so.{}", rng.range(0, 16));
            let prefix = w.split(['-', '.']).next().unwrap_or(w).to_string();
            v.push(spec(&name, Kind::NoDebug, weight, base, &prefix));
        }
    }
    v
}

const MODULE_WORDS: &[&str] = &[
    "core", "util", "net", "io", "render", "gfx", "db", "sql", "json", "http", "codec", "audio",
    "math", "geom", "mem", "sched", "task", "ui", "text", "parse", "script", "vm", "physics",
    "anim", "asset", "config", "log", "crypto", "compress", "image",
];

const CLASS_WORDS: &[&str] = &[
    "Buffer",
    "Parser",
    "Widget",
    "Node",
    "Tree",
    "HashMap",
    "Cache",
    "Session",
    "Request",
    "Handler",
    "Stream",
    "Reader",
    "Writer",
    "Table",
    "Index",
    "Vector",
    "Matrix",
    "Allocator",
    "Pool",
    "Queue",
    "Task",
    "Engine",
    "Context",
    "Frame",
    "Scene",
    "Mesh",
    "Texture",
    "Shader",
    "Socket",
    "Codec",
    "Token",
    "Lexer",
    "Interpreter",
    "Value",
    "Object",
    "Array",
    "Layout",
    "Glyph",
    "Font",
    "Image",
    "Decoder",
    "Encoder",
    "Channel",
    "Timer",
    "Event",
    "Signal",
];

const METHOD_WORDS: &[&str] = &[
    "run",
    "process",
    "update",
    "get",
    "set",
    "find",
    "insert",
    "erase",
    "resize",
    "reserve",
    "parse",
    "emit",
    "flush",
    "read",
    "write",
    "open",
    "close",
    "compute",
    "visit",
    "apply",
    "merge",
    "split",
    "hash",
    "compare",
    "init",
    "reset",
    "step",
    "tick",
    "dispatch",
    "lookup",
    "encode",
    "decode",
    "append",
    "grow",
    "shrink",
    "clear",
    "size",
    "begin",
    "end",
    "at",
    "push_back",
    "pop_front",
    "contains",
    "evaluate",
    "render",
    "layout",
    "measure",
    "schedule",
];

const TYPES: &[&str] = &[
    "int",
    "unsigned long",
    "double",
    "char const*",
    "bool",
    "void*",
    "float",
    "unsigned int",
    "long",
    "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&",
    "std::vector<int, std::allocator<int> > const&",
    "std::basic_string_view<char, std::char_traits<char> >",
    "std::shared_ptr<{ns}::{cls}> const&",
    "{ns}::{cls}&",
    "{ns}::{cls} const*",
    "std::function<void ({ns}::{cls}&)>",
];

/// Mangled spellings of some of `TYPES`.
const MANGLED_TYPES: &[&str] = &[
    "i",
    "m",
    "d",
    "PKc",
    "b",
    "Pv",
    "f",
    "j",
    "l",
    "RKSt6vectorIiSaIiEE",
];

const C_WORDS: &[&str] = &[
    "read", "write", "init", "fini", "alloc", "free", "copy", "find", "hash", "table", "list",
    "node", "buf", "str", "fill", "scan", "next", "prev", "get", "put", "open", "close", "flush",
    "lock", "unlock", "wait", "signal", "update", "inflate", "deflate", "block", "row", "chunk",
    "header", "decode", "encode", "cmp", "check", "parse", "emit", "grow",
];

const LIBC_NAMES: &[&str] = &[
    "malloc",
    "free",
    "_int_malloc",
    "_int_free",
    "__memcpy_avx_unaligned_erms",
    "__memset_avx2_unaligned_erms",
    "__strlen_avx2",
    "__strcmp_avx2",
    "__memcmp_avx2_movbe",
    "__strchr_avx2",
    "calloc",
    "realloc",
    "printf",
    "__vfprintf_internal",
    "_IO_file_xsputn@@GLIBC_2.2.5",
    "__libc_start_main@@GLIBC_2.34",
    "__libc_start_call_main",
    "exit",
    "__cxa_finalize",
    "malloc_consolidate",
    "unlink_chunk.constprop.0",
    "msort_with_tmp.part.0",
    "qsort_r",
    "getenv",
    "__GI___tunables_init",
];

const LIBC_FILES: &[&str] = &[
    "./malloc/./malloc/malloc.c",
    "./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S",
    "./string/../sysdeps/x86_64/multiarch/memset-vec-unaligned-erms.S",
    "./string/../sysdeps/x86_64/multiarch/strlen-avx2.S",
    "./string/../sysdeps/x86_64/multiarch/strcmp-avx2.S",
    "./stdio-common/./stdio-common/vfprintf-internal.c",
    "./libio/./libio/fileops.c",
    "./csu/../csu/libc-start.c",
    "./csu/../sysdeps/nptl/libc_start_call_main.h",
    "./stdlib/./stdlib/msort.c",
    "./stdlib/./stdlib/cxa_finalize.c",
    "./elf/../sysdeps/x86/dl-cacheinfo.h",
];

const LD_NAMES: &[&str] = &[
    "_dl_runtime_resolve_xsave",
    "_dl_fixup",
    "_dl_lookup_symbol_x",
    "do_lookup_x",
    "check_match",
    "_dl_relocate_object",
    "strcmp",
    "_dl_start",
    "_dl_map_object",
    "__minimal_calloc",
    "_dl_name_match_p",
    "strlen",
    "memcpy",
];

const LD_FILES: &[&str] = &[
    "./elf/../sysdeps/x86_64/dl-trampoline.h",
    "./elf/./elf/dl-runtime.c",
    "./elf/./elf/dl-lookup.c",
    "./elf/./elf/dl-reloc.c",
    "./string/../sysdeps/x86_64/strcmp.S",
    "./elf/./elf/rtld.c",
    "./elf/./elf/dl-load.c",
    "./elf/./elf/dl-minimal-malloc.c",
    "./elf/./elf/dl-misc.c",
];

const STDCXX_NAMES: &[&str] = &[
    "operator new(unsigned long)",
    "operator delete(void*, unsigned long)",
    "operator delete(void*)",
    "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_mutate(unsigned long, unsigned long, char const*, unsigned long)",
    "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_append(char const*, unsigned long)",
    "std::ostream::_M_insert<long>(long)",
    "std::basic_ostream<char, std::char_traits<char> >& std::__ostream_insert<char, std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*, long)",
    "std::_Rb_tree_insert_and_rebalance(bool, std::_Rb_tree_node_base*, std::_Rb_tree_node_base*, std::_Rb_tree_node_base&)",
    "std::_Hash_bytes(void const*, unsigned long, unsigned long)",
    "__dynamic_cast",
    "std::locale::locale()",
    "__cxa_guard_acquire",
];

const STD_HEADERS: &[&str] = &[
    "/usr/include/c++/12/bits/stl_vector.h",
    "/usr/include/c++/12/bits/stl_algobase.h",
    "/usr/include/c++/12/bits/basic_string.h",
    "/usr/include/c++/12/bits/stl_iterator.h",
    "/usr/include/c++/12/bits/hashtable.h",
    "/usr/include/c++/12/bits/hashtable_policy.h",
    "/usr/include/c++/12/bits/unique_ptr.h",
    "/usr/include/c++/12/bits/shared_ptr_base.h",
    "/usr/include/c++/12/bits/stl_tree.h",
    "/usr/include/c++/12/bits/char_traits.h",
    "/usr/include/c++/12/bits/move.h",
    "/usr/include/c++/12/bits/stl_algo.h",
    "/usr/include/c++/12/bits/predefined_ops.h",
    "/usr/include/c++/12/bits/new_allocator.h",
];

/// The source file `n` of `spec`'s object; a C program's (`c`) are `.c`.
fn file_name(
    rng: &mut Rng,
    spec: &ObjectSpec,
    object: u32,
    module: u32,
    n: u32,
    c: bool,
) -> String {
    match spec.kind {
        Kind::Project => {
            let w = MODULE_WORDS[(module as usize + object as usize * 7) % MODULE_WORDS.len()];
            let ext = if c {
                "c"
            } else if rng.chance(850) {
                "cc"
            } else {
                "cpp"
            };
            format!(
                "./src/{w}_{module}/{}_{n}.{ext}",
                rng.pick(CLASS_WORDS).to_lowercase()
            )
        }
        Kind::Libc => match LIBC_FILES.get(n as usize - 1) {
            Some(f) => (*f).to_string(),
            None => {
                let d = rng.pick(&["misc", "stdlib", "string", "libio", "posix"]);
                format!("./{d}/./{d}/{}_{n}.c", rng.pick(C_WORDS))
            }
        },
        Kind::Ld => match LD_FILES.get(n as usize - 1) {
            Some(f) => (*f).to_string(),
            None => format!("./elf/./elf/dl-{}{n}.c", rng.pick(C_WORDS)),
        },
        Kind::Libstdcxx => {
            if rng.chance(500) {
                format!(
                    "/build/gcc-12-sWx2Kq/gcc-12-12.2.0/build/x86_64-linux-gnu/libstdc++-v3/include/bits/{}_{n}.tcc",
                    rng.pick(C_WORDS)
                )
            } else {
                format!(
                    "../../../../src/libstdc++-v3/src/c++11/{}-inst{n}.cc",
                    rng.pick(C_WORDS)
                )
            }
        }
        Kind::CDebug => format!(
            "./math/../sysdeps/ieee754/dbl-64/e_{}{n}.c",
            rng.pick(C_WORDS)
        ),
        Kind::NoDebug | Kind::Unknown => "???".to_string(),
    }
}

/// A header whose code is inlined into functions of `spec`'s object; a C
/// program's (`c`) are its own, never the C++ library's.
fn header_name(rng: &mut Rng, spec: &ObjectSpec, module: u32, c: bool) -> String {
    match spec.kind {
        Kind::Project if c || rng.chance(500) => {
            let w = MODULE_WORDS[module as usize % MODULE_WORDS.len()];
            format!(
                "./src/{w}_{module}/{}.h",
                rng.pick(CLASS_WORDS).to_lowercase()
            )
        }
        Kind::Project | Kind::Libstdcxx => (rng.pick(STD_HEADERS)).to_string(),
        Kind::Ld => "./elf/../include/rtld-malloc.h".to_string(),
        Kind::Libc => (rng.pick(&[
            "./malloc/./malloc/arena.c",
            "./libio/./libio/libioP.h",
            "./string/../string/memcopy.h",
        ]))
        .to_string(),
        _ => "./math/../sysdeps/ieee754/dbl-64/math_config.h".to_string(),
    }
}

/// Makes function names.
#[derive(Default)]
struct Namer {
    buf: String,
    /// The program's own functions have C names.
    c_program: bool,
}

impl Namer {
    /// A name for function `k` of an object; the flag is true for the real
    /// library names (the popular callees).
    fn name(
        &mut self,
        rng: &mut Rng,
        spec: &ObjectSpec,
        k: u64,
        addr: u64,
        instrs: u32,
    ) -> (String, bool) {
        let fixed = |list: &[&str]| list.get(k as usize).map(|s| (s.to_string(), true));
        let special = |list: &[&str]| list.get(k as usize).map(|s| (s.to_string(), false));
        let found = match spec.kind {
            Kind::Libc => fixed(LIBC_NAMES),
            Kind::Ld => fixed(LD_NAMES),
            Kind::Libstdcxx => fixed(STDCXX_NAMES),
            Kind::Project if spec.prefix == "app" => special(&[
                "(below main)",
                "main",
                "_start",
                "_init",
                "frame_dummy",
                "register_tm_clones",
                "__do_global_dtors_aux",
            ]),
            // Every shared object has these: the same names in different
            // objects are different functions.
            Kind::Project | Kind::NoDebug => {
                special(&["_init", "frame_dummy", "deregister_tm_clones"])
            }
            _ => None,
        };
        if let Some(f) = found {
            return f;
        }
        let name = match spec.kind {
            Kind::Unknown => format!("0x{addr:016x}"),
            Kind::Project if self.c_program => self.c(rng, spec),
            Kind::Project | Kind::Libstdcxx => self.cxx(rng, spec, instrs),
            Kind::NoDebug | Kind::CDebug | Kind::Libc | Kind::Ld => self.c(rng, spec),
        };
        (name, false)
    }

    fn c(&mut self, rng: &mut Rng, spec: &ObjectSpec) -> String {
        let mut s = String::new();
        match rng.below(4) {
            0 => s.push_str("__"),
            1 if !spec.prefix.is_empty() => {
                s.push_str(&spec.prefix);
                s.push('_');
            }
            _ => {}
        }
        let n = rng.range(1, 3);
        for i in 0..n {
            if i > 0 {
                s.push('_');
            }
            s.push_str(rng.pick(C_WORDS));
        }
        if rng.chance(60) {
            s.push_str(rng.pick(&[".part.0", ".isra.0", ".constprop.0", ".cold"]));
        }
        s
    }

    /// A demangled (mostly) or mangled C++ name: namespaces, classes,
    /// templates, parameter lists, const methods, lambdas, long STL
    /// instantiations.
    fn cxx(&mut self, rng: &mut Rng, spec: &ObjectSpec, instrs: u32) -> String {
        let ns = if spec.kind == Kind::Libstdcxx {
            "std"
        } else {
            rng.pick(MODULE_WORDS)
        };
        let cls = rng.pick(CLASS_WORDS);
        let method = rng.pick(METHOD_WORDS);
        if rng.chance(200) {
            // Mangled: what `--demangle=no` or an unknown demangling shows.
            let mut s = String::from("_ZN");
            if rng.chance(300) {
                s.insert(3, 'K');
            }
            for part in [spec.prefix.as_str(), ns, cls, method] {
                if !part.is_empty() {
                    s.push_str(&format!("{}{part}", part.len()));
                }
            }
            s.push('E');
            let np = rng.below(4);
            if np == 0 {
                s.push('v');
            }
            for _ in 0..np {
                s.push_str(rng.pick(MANGLED_TYPES));
            }
            return s;
        }
        self.buf.clear();
        let outer = if spec.prefix.len() > 3 && rng.chance(300) {
            format!("{}::", spec.prefix)
        } else {
            String::new()
        };
        let sub = if rng.chance(300) {
            format!(
                "{}::",
                rng.pick(&["detail", "impl", "internal", "(anonymous namespace)"])
            )
        } else {
            String::new()
        };
        let targs = if rng.chance(250) {
            angle(&self.ty(rng, ns, cls, true))
        } else {
            String::new()
        };
        let params: Vec<String> = (0..rng.below(4))
            .map(|_| self.ty(rng, ns, cls, false))
            .collect();
        let constness = if rng.chance(250) { " const" } else { "" };
        let mut s = match rng.below(20) {
            0 => format!(
                "{outer}{ns}::{sub}{cls}{targs}::{cls}({})",
                params.join(", ")
            ),
            1 => format!("{outer}{ns}::{sub}{cls}{targs}::~{cls}()"),
            2 => format!(
                "{outer}{ns}::{sub}{cls}{targs}::{method}({})::{{lambda({})#1}}::operator()({}) const",
                params.join(", "),
                self.ty(rng, ns, cls, false),
                self.ty(rng, ns, cls, false)
            ),
            3 if instrs > 60 => {
                // A long STL instantiation, as templates produce.
                let t = format!("{ns}::{cls}*");
                format!(
                    "void std::vector<{t}, std::allocator<{t}> >::_M_realloc_insert<{t} const&>(__gnu_cxx::__normal_iterator<{t}*, std::vector<{t}, std::allocator<{t}> > >, {t} const&)"
                )
            }
            4 => format!(
                "void {outer}{ns}::{sub}{method}_{}{}({})",
                rng.pick(C_WORDS),
                angle(&self.ty(rng, ns, cls, true)),
                params.join(", ")
            ),
            _ => format!(
                "{outer}{ns}::{sub}{cls}{targs}::{method}({}){constness}",
                params.join(", ")
            ),
        };
        if rng.chance(40) {
            s.push_str(rng.pick(&[
                " [clone .cold]",
                " [clone .constprop.0]",
                " [clone .isra.0]",
            ]));
        }
        s
    }

    fn ty(&self, rng: &mut Rng, ns: &str, cls: &str, template: bool) -> String {
        let t = rng.pick(TYPES);
        let t = if t.contains('{') {
            t.replace("{ns}", ns).replace("{cls}", cls)
        } else {
            t.to_string()
        };
        if template {
            // Template arguments are plain types, not references.
            t.trim_end_matches(" const&")
                .trim_end_matches('&')
                .to_string()
        } else {
            t
        }
    }
}

/// Template arguments as GCC's demangler prints them: `> >`, never `>>`.
fn angle(t: &str) -> String {
    if t.ends_with('>') {
        format!("<{t} >")
    } else {
        format!("<{t}>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_function() {
        let f = Func {
            object: 0,
            file: 0,
            name: 0,
            inline: NO_FILE,
            inline_line: 0,
            addr: 0,
            line: 1,
            instrs: 101,
            segments: 4,
            hot: 1,
            per_call: 1,
        };
        let mut next = 0;
        for s in 0..4 {
            let (a, n) = f.segment(s);
            assert_eq!(a, next);
            assert!(n > 0);
            next = a + n;
        }
        assert_eq!(next, 101);
    }

    #[test]
    fn model_is_deterministic_and_keys_are_unique() {
        let a = Model::build(5, 200_000, Shape::default());
        let b = Model::build(5, 200_000, Shape::default());
        assert_eq!(a.order, b.order);
        assert_eq!(a.symbols.names, b.symbols.names);
        let keys: std::collections::HashSet<_> =
            a.funcs.iter().map(|f| (f.object, f.file, f.name)).collect();
        assert_eq!(keys.len(), a.funcs.len());
        // No name may look like a compressed id, `(digit`.
        for n in a
            .symbols
            .names
            .iter()
            .chain(&a.files.names)
            .chain(&a.objects.names)
        {
            let b = n.as_bytes();
            assert!(
                !(b.len() >= 2 && b[0] == b'(' && b[1].is_ascii_digit()),
                "{n}"
            );
        }
    }
}
