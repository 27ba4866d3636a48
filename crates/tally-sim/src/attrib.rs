//! Attribution: the program's memory map (main executable and shared
//! libraries at their load addresses) and the profile built from per
//! instruction costs, with ELF symbols and DWARF lines of each image.
//!
//! Instructions are placed once each, after the run: image by address
//! (QEMU's memory map, reported by the plugin as code is translated;
//! Valgrind's `svma`/`avma` pairs for Lackey), then symbol and line. Names
//! follow Valgrind (its preference among aliases, zero-size symbols
//! dropped, startup code as `(below main)`), so per-function counts
//! compare with Cachegrind's directly.

use crate::Counts;
use crate::engine::Output;
use crate::flow::{Flow, classify_x86_64};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tally_model::{
    CallInfo, Events, FileId, Format, FunctionId, FunctionKey, Part, Positions, Profile,
};
use tally_symbols::{Mapping, ObjectFile};

/// An image as attribution sees it: a mapping of the process, with its
/// object file when the mapping is placed in it.
#[derive(Clone, Copy)]
struct Image<'a> {
    /// The file as the program opened it.
    path: &'a [u8],
    /// Run-time address minus the file's own address.
    bias: u64,
    /// The parsed file; `None` if it could not be read, or the mapping
    /// holds none of its code.
    file: Option<&'a Arc<ObjectFile>>,
}

/// The images of one process: tally-symbols' [`tally_symbols::AddressSpace`]
/// (one process, its mappings layered as the plugin reports them), each
/// file opened once, its lines loaded in another thread.
#[derive(Clone)]
pub struct AddressSpace {
    space: tally_symbols::AddressSpace,
    /// Files that could not be read, with the reason (reported once).
    pub problems: Vec<String>,
}

impl Default for AddressSpace {
    fn default() -> Self {
        AddressSpace::new()
    }
}

/// The process of a run: an address space holds one.
const PID: i32 = 0;

impl AddressSpace {
    /// An empty map.
    pub fn new() -> Self {
        AddressSpace {
            space: tally_symbols::AddressSpace::with_opener(Arc::new(|_| None)).layered(),
            problems: Vec::new(),
        }
    }

    /// The image of `path`, its file opened (once) and its lines loaded
    /// in another thread: the profile needs them at the end, when nothing
    /// else is left to do, and while the program runs the simulation
    /// leaves a core some time.
    fn image(&mut self, path: &Path) -> usize {
        let problems = &mut self.problems;
        self.space
            .image_with(path.as_os_str().as_encoded_bytes(), || {
                match ObjectFile::open(path) {
                    Ok(f) => {
                        let f = Arc::new(f);
                        let g = Arc::clone(&f);
                        // Without the thread the lines load at the first lookup.
                        let _ = std::thread::Builder::new()
                            .name("tally-lines".into())
                            .spawn(move || g.load_lines_now());
                        Some(f)
                    }
                    Err(e) => {
                        problems.push(e.to_string());
                        None
                    }
                }
            })
    }

    /// Adds `path` loaded at `bias` (Valgrind's `svma`/`avma` pair, or a
    /// non-PIE executable at 0); its range is that of its code.
    pub fn add_biased(&mut self, path: &Path, bias: u64) {
        let image = self.image(path);
        self.space.map_biased(PID, image, bias);
    }

    /// Adds a mapping `[start, end)` of `path` from file `offset`, as
    /// `/proc/PID/maps` shows it; an empty path is anonymous memory.
    pub fn add_mapping(&mut self, start: u64, end: u64, offset: u64, path: &[u8]) {
        let path = PathBuf::from(String::from_utf8_lossy(path).into_owned());
        let image = if path.as_os_str().is_empty() {
            self.space.image_with(b"", || None)
        } else {
            self.image(&path)
        };
        self.space.map_range(PID, start, end, offset, image);
    }

    /// The images, as mappings of the process in the order added.
    fn images(&self) -> impl Iterator<Item = Image<'_>> {
        self.space.mappings(PID).map(|m| self.view(m))
    }

    fn view<'a>(&'a self, m: &Mapping) -> Image<'a> {
        let image = self.space.image(m.image);
        Image {
            path: &image.path,
            bias: m.bias().unwrap_or(0),
            file: image.file.as_ref().filter(|_| m.bias().is_some()),
        }
    }

    /// The image whose code holds `addr`, with its index.
    #[inline]
    fn find_indexed(&self, addr: u64) -> Option<(usize, Image<'_>)> {
        self.space
            .mapping_indexed(PID, addr)
            .map(|(i, m)| (i, self.view(m)))
    }

    /// The control-flow kind of the instruction at run-time `addr`, from
    /// its image's bytes (x86-64 images only).
    pub fn classify(&self, addr: u64) -> Flow {
        let Some((_, img)) = self.find_indexed(addr) else {
            return Flow::default();
        };
        let Some(f) = img.file.filter(|f| f.is_x86_64()) else {
            return Flow::default();
        };
        let a = addr.wrapping_sub(img.bias);
        match f.code_bytes(a, a + 15) {
            Some(b) => classify_x86_64(b, addr),
            None => Flow::default(),
        }
    }
}

/// What goes into a profile besides the costs.
pub struct ProfileSpec<'a> {
    /// Cachegrind or Callgrind.
    pub format: Format,
    /// `cmd:`.
    pub cmd: String,
    /// `desc:` lines, (type, value).
    pub desc: Vec<(String, String)>,
    /// Which of [`Counts::values`] to write, by index
    /// ([`crate::event_indices`]).
    pub events: &'a [usize],
    /// Write call arcs (Callgrind).
    pub calls: bool,
    /// `pid:`.
    pub pid: Option<u64>,
    /// Write source file names as Valgrind 3.19 does
    /// ([`tally_symbols::valgrind_file_name`]), so that the profile
    /// compares function by function with Valgrind's.
    pub valgrind_names: bool,
}

/// Where an instruction is: object, function, file and line.
struct Place {
    function: FunctionId,
    file: FileId,
    line: u64,
}

/// Looks places up, one symbol lookup per instruction.
struct Placer<'a> {
    space: &'a AddressSpace,
    fn_files: HashMap<(usize, u64), FileId>,
    /// Callgrind's names for code without a symbol, by image: the file
    /// addresses where such code was entered ([`entries`]), sorted.
    entries: Option<HashMap<usize, Vec<u64>>>,
    /// File names as Valgrind writes them.
    valgrind_names: bool,
}

/// Where code without a symbol was entered, by image: the targets of
/// calls and each image's entry point, as file addresses. Callgrind
/// names such code by the address of the call that entered it (its
/// function is the caller's context until the next call or return), so
/// an instruction without a symbol belongs to the nearest entry at or
/// below it.
fn entries(space: &AddressSpace, out: &Output) -> HashMap<usize, Vec<u64>> {
    let mut by_image: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut add = |addr: u64| {
        if let Some((ix, img)) = space.find_indexed(addr)
            && let Some(f) = img.file
        {
            let a = addr.wrapping_sub(img.bias);
            if f.symbol_at(a).is_none_or(|s| !has_size(s)) {
                by_image.entry(ix).or_default().push(a);
            }
        }
    };
    for &(_, target) in out.arcs.keys() {
        add(target);
    }
    for img in space.images() {
        if let Some(f) = img.file {
            add(f.entry().wrapping_add(img.bias));
        }
    }
    for v in by_image.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    by_image
}

/// Whether Valgrind takes a symbol as a function: it drops symbols of
/// size 0 (`_init`, crtstuff's `frame_dummy`, ...).
fn has_size(s: &tally_symbols::Symbol) -> bool {
    s.size > 0 || s.aliases.iter().any(|x| x.size > 0)
}

impl Placer<'_> {
    fn place(&mut self, p: &mut Profile<u64>, addr: u64) -> Place {
        let names = &mut p.names;
        let unknown = names.file(b"???");
        let Some((ix, img)) = self.space.find_indexed(addr) else {
            let object = names.object(b"???");
            let name = names.symbol(b"???");
            let function = names.function(FunctionKey {
                object,
                file: unknown,
                name,
            });
            return Place {
                function,
                file: unknown,
                line: 0,
            };
        };
        let object = names.object(img.path);
        let a = addr.wrapping_sub(img.bias);
        let f = img.file;
        // Valgrind drops symbols of size 0 (`has_size`): their code is
        // `???` in its Cachegrind profiles and named by address in its
        // Callgrind ones, and so in ours.
        let sym = f.and_then(|f| f.symbol_at(a)).filter(|s| has_size(s));
        let vg = self.valgrind_names;
        let file_name = |n: &str| -> Vec<u8> {
            if vg {
                tally_symbols::valgrind_file_name(n).as_bytes().to_vec()
            } else {
                n.as_bytes().to_vec()
            }
        };
        let (file, line) = match f.and_then(|f| f.source_line(a)) {
            Some((file, line)) => (names.file(&file_name(&file)), u64::from(line)),
            None => (unknown, 0),
        };
        let fn_file = match (f, sym) {
            (Some(f), Some(s)) => *self
                .fn_files
                .entry((ix, s.address))
                .or_insert_with(|| match f.source_line(s.address) {
                    Some((file, _)) => names.file(&file_name(&file)),
                    None => unknown,
                }),
            _ => file,
        };
        let by_address;
        let name = match sym {
            Some(s) => below_main(s.valgrind_name()),
            None => match self.entries.as_ref().and_then(|e| e.get(&ix)) {
                Some(v) if v.first().is_some_and(|&e| e <= a) => {
                    let e = v[v.partition_point(|&e| e <= a) - 1];
                    by_address = format!("0x{e:016x}");
                    &by_address
                }
                _ => "???",
            },
        };
        let name = names.symbol(name.as_bytes());
        let function = names.function(FunctionKey {
            object,
            file: fn_file,
            name,
        });
        Place {
            function,
            file,
            line,
        }
    }
}

/// Valgrind's name for the startup code that calls `main` (its
/// `--show-below-main=no` default): the functions differ between libc
/// versions, the name does not, so profiles compare across them.
fn below_main(name: &str) -> &str {
    let below = matches!(
        name,
        "_start" | "__libc_start_main" | "__libc_start_call_main" | "generic_start_main"
    ) || name.starts_with("__libc_start_main.")
        || name.starts_with("generic_start_main.");
    if below { "(below main)" } else { name }
}

/// Builds the profile of machine `k` of a run.
pub fn to_profile(
    out: &Output,
    k: usize,
    space: &AddressSpace,
    spec: &ProfileSpec<'_>,
) -> Profile<u64> {
    let names: Vec<String> = spec.events.iter().map(|&i| Counts::event_name(i)).collect();
    let events = Events::new(names).unwrap_or_else(|_| Events::new(["Ir"]).unwrap_or_default());
    let mut prof = Profile::new(spec.format, events, Positions::INSTR_LINE);
    if spec.format == Format::Callgrind {
        prof.version = Some(1);
        prof.creator = Some(format!("tally-sim {}", env!("CARGO_PKG_VERSION")).into_bytes());
    }
    let mut part = Part::new(Positions::INSTR_LINE, spec.events.len());
    part.info.cmd = Some(spec.cmd.as_bytes().to_vec());
    part.info.pid = spec.pid;
    for (t, v) in &spec.desc {
        part.info
            .desc
            .push((t.as_bytes().to_vec(), format!(" {v}").into_bytes()));
    }
    let mut placer = Placer {
        space,
        fn_files: HashMap::new(),
        entries: spec.calls.then(|| entries(space, out)),
        valgrind_names: spec.valgrind_names,
    };
    let pick = |c: &Counts| -> Vec<u64> {
        let v = c.values();
        spec.events.iter().map(|&i| v[i]).collect()
    };
    // Calls go right after their call site's cost line, as Callgrind
    // writes them: the site is then the previous position, which every
    // reader (callgrind_annotate included) resolves the same way.
    let mut arcs_at: HashMap<u32, Vec<(u64, &crate::engine::Arc)>> = HashMap::new();
    if spec.calls && k == 0 {
        for ((site, target), arc) in &out.arcs {
            arcs_at.entry(*site).or_default().push((*target, arc));
        }
        for v in arcs_at.values_mut() {
            v.sort_by_key(|x| x.0);
        }
    }
    let mut order: Vec<usize> = (0..out.instrs.len()).collect();
    order.sort_by_key(|&i| out.instrs[i].addr);
    let mut totals = vec![0u64; spec.events.len()];
    for i in order {
        let c = &out.costs[i * out.machines + k];
        let v = pick(c);
        let calls = arcs_at.get(&(i as u32));
        if v.iter().all(|&x| x == 0) && calls.is_none() {
            continue;
        }
        let addr = out.instrs[i].addr;
        let pl = placer.place(&mut prof, addr);
        part.lines.push(pl.function, pl.file, &[addr, pl.line], &v);
        for (t, x) in totals.iter_mut().zip(&v) {
            *t += x;
        }
        for (target, arc) in calls.into_iter().flatten() {
            let t = placer.place(&mut prof, *target);
            let info = CallInfo {
                caller: pl.function,
                site_file: pl.file,
                callee: t.function,
                count: arc.count,
                seq: part.next_seq(),
            };
            part.calls.push(
                info,
                &[addr, pl.line],
                &[*target, t.line],
                &pick(&arc.inclusive),
            );
        }
    }
    part.info.totals = Some(totals);
    prof.parts.push(part);
    prof
}
