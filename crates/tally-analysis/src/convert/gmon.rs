//! gprof data as a profile of the model: `tally convert gmon.out --binary
//! PROG` writes it as Callgrind (or Cachegrind, JSON), so that
//! KCachegrind, callgrind_annotate and `tally annotate` read gprof runs.
//!
//! What the profile holds (see `docs/gprof-convert.md`):
//!
//! - One event, `Samples`: histogram samples, kept as integer counts
//!   (`1/rate` of the histogram's dimension each, 0.01 s at 100 Hz).
//! - Self cost: every histogram bin is credited to the routines its address
//!   range overlaps, in proportion to the overlap, with GNU gprof's
//!   arithmetic (`assign_samples`: addresses in 2-byte units, bin bounds
//!   `low_pc + ⌊scale·i⌋`, routines extending to the next routine). The
//!   shares are made integral in two steps, each a largest-remainder
//!   apportionment: first every routine's total (so each routine is within
//!   one sample of its exact proportional share and the totals add up to
//!   the histogram's sample count), then that total over the routine's bins.
//!   A bin's share in a routine is placed on the first instruction starting
//!   in the bin inside the routine (x86; elsewhere the bin's first address
//!   in the routine), with its DWARF source line. Samples of bins outside
//!   every routine go to a function `???`.
//! - Calls: one call record per (call site `from_pc`, callee routine), with
//!   the count of the gmon arcs. glibc rounds `from_pc` down to 16 bytes;
//!   the site is placed on the call instruction found in those 16 bytes
//!   (`locate_calls`), with its source line; the target is the callee's
//!   first address and line.
//! - Inclusive cost of a call: not measured by gprof. It is gprof's
//!   estimate (`assemble`): the callee's self + descendant samples times
//!   the call's share of all the callee's calls, with cycles collapsed (a
//!   call inside a cycle and a recursive call carry no cost; a call into a
//!   cycle carries its share of the whole cycle), so no call costs more
//!   than the total. The estimates of the calls out of one function are
//!   made integral together (largest remainder), never more than the
//!   total minus the function's self cost.
//! - Arcs whose caller is outside every routine (GNU gprof's
//!   `<spontaneous>`) are left out, as gprof leaves them out of its call
//!   counts; arcs whose callee is outside every routine too. Both are
//!   counted in [`Conversion::notices`].

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use tally_formats::gmon::Gmon;
use tally_model::{
    CallInfo, Events, FileId, Format, FunctionId, FunctionKey, ObjectId, Positions, Profile,
};
use tally_symbols::{InstrKind, ObjectFile};

use crate::gprof::{
    AssembleOptions, DEFAULT_EXCLUDED, Error, Graph, Notice, Options, Selection, SymbolTable, UNIT,
    assemble, display_name, function_table,
};

/// The event of converted profiles.
pub const EVENT: &str = "Samples";

/// The name of the function and file that stand for unknown code.
const UNKNOWN: &[u8] = b"???";

/// A converted profile and what the caller should tell the user.
#[derive(Debug, Clone)]
pub struct Conversion {
    /// The profile: one part, event [`EVENT`], positions `instr line`.
    pub profile: Profile<u64>,
    /// Warnings about the input (samples or arcs outside every routine).
    pub notices: Vec<Notice>,
}

/// Converts a program's gmon data (several files already merged with
/// [`Gmon::merge`]) to a profile; see the module documentation.
pub fn gmon_to_profile(obj: &ObjectFile, gmon: &Gmon) -> Result<Profile<u64>, Error> {
    convert(obj, gmon, &Options::default()).map(|c| c.profile)
}

/// [`gmon_to_profile`] with gprof's options and the notices. The options
/// that apply are those that shape the routine table
/// ([`function_table`]: `gnu_compatible`, `no_static`, `functions_only`)
/// and `demangle`; the report options are ignored.
pub fn convert(obj: &ObjectFile, gmon: &Gmon, opts: &Options) -> Result<Conversion, Error> {
    let (table, discard) = function_table(obj, opts)?;
    let n = table.len();
    let mut notices = Vec::new();

    let rate = gmon.histograms.first().map_or(100, |h| h.prof_rate.max(1));
    let dimension = gmon
        .histograms
        .first()
        .map_or_else(|| "seconds".to_owned(), |h| h.dimension.clone());

    // Self samples: per routine, (address, weight) pieces and their exact
    // sum; samples outside every routine by address.
    let samples = spread_samples(&table, gmon);
    let total = samples.total;
    let routine_totals = apportion(samples.in_routines, &samples.exact);
    let mut code = Code::new(obj, &table);
    let mut self_samples = vec![0u64; n];
    let mut lines: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n];
    for (j, pieces) in samples.pieces.iter().enumerate() {
        if pieces.is_empty() {
            continue;
        }
        let weights: Vec<f64> = pieces.iter().map(|p| p.share).collect();
        let ints = apportion(routine_totals[j], &weights);
        let mut by_addr: BTreeMap<u64, u64> = BTreeMap::new();
        for (p, k) in pieces.iter().zip(ints) {
            if k > 0 {
                *by_addr
                    .entry(code.instruction_in(j, p.addr, p.end))
                    .or_default() += k;
            }
        }
        self_samples[j] = routine_totals[j];
        lines[j] = by_addr.into_iter().collect();
    }
    if samples.unknown_total > 0 {
        notices.push(Notice(format!(
            "{} of {} histogram samples fall outside every function of {} (credited to `???`; is the profile from another program?)",
            samples.unknown_total,
            total,
            obj.path().display()
        )));
    }

    if let Some(note) = other_program(obj, gmon) {
        notices.push(note);
    }

    // Calls: sites per (caller, from_pc, callee), and gprof's graph.
    let mut graph = Graph::new(n);
    let mut sites: Vec<Site> = Vec::new();
    let mut site_index: FxHashMap<(usize, u64, usize), usize> = FxHashMap::default();
    let (mut spontaneous, mut spontaneous_calls) = (0u64, 0u64);
    let (mut outside, mut outside_calls) = (0u64, 0u64);
    for arc in &gmon.arcs {
        let Some(child) = callee_of(&table, arc.self_pc) else {
            outside += 1;
            outside_calls = outside_calls.saturating_add(arc.count);
            continue;
        };
        let Some(parent) = table.lookup(arc.from_pc) else {
            spontaneous += 1;
            spontaneous_calls = spontaneous_calls.saturating_add(arc.count);
            continue;
        };
        graph.tally(&table, arc.from_pc, arc.self_pc, arc.count, |_, _| true);
        let i = *site_index
            .entry((parent, arc.from_pc, child))
            .or_insert_with(|| {
                sites.push(Site {
                    parent,
                    child,
                    from_pc: arc.from_pc,
                    at: arc.from_pc,
                    count: 0,
                    inclusive: 0,
                });
                sites.len() - 1
            });
        sites[i].count = sites[i].count.saturating_add(arc.count);
    }
    if outside > 0 {
        notices.push(Notice(format!(
            "{outside} call arc(s) ({outside_calls} calls) of the profile call addresses outside every function of {} and were left out (is the profile from another program?)",
            obj.path().display()
        )));
    }
    if spontaneous > 0 {
        notices.push(Notice(format!(
            "{spontaneous} call arc(s) ({spontaneous_calls} calls) come from code outside every function (gprof's <spontaneous>) and were left out"
        )));
    }
    estimate_call_costs(&table, graph, &self_samples, total, &mut sites);
    locate_calls(&mut code, &table, &mut sites);

    // The profile.
    // No `event:` long name: the writer puts it after `events:`, where
    // callgrind_annotate (3.19) warns about it. The unit is in `desc:`.
    let events = Events::new([EVENT]).expect("one event");
    let mut p = Profile::new(Format::Callgrind, events, Positions::INSTR_LINE);
    p.version = Some(1);
    p.creator = Some(b"tally".to_vec());
    let object_path = std::fs::canonicalize(obj.path()).unwrap_or_else(|_| obj.path().into());
    let object = p.names.object(object_path.as_os_str().as_encoded_bytes());
    let unknown_file = p.names.file(UNKNOWN);

    let mut b = Builder {
        table: &table,
        obj,
        discard,
        demangle: opts.demangle,
        object,
        unknown_file,
        ids: vec![None; n],
        profile: p,
    };
    let mut part = tally_model::Part::new(Positions::INSTR_LINE, 1);
    part.info.cmd = Some(obj.path().as_os_str().as_encoded_bytes().to_vec());
    let secs = 1.0 / f64::from(rate);
    for (t, v) in [
        (
            "Profiler",
            "gprof (gmon data: PC-sampling histogram and mcount call arcs), converted by tally"
                .to_owned(),
        ),
        (
            "Self cost",
            format!(
                "sampled: {EVENT} = histogram samples at {rate} Hz (one sample = {secs} {dimension}); \
                 a bin's samples are credited to the functions it overlaps, in proportion, \
                 each share on the bin's first instruction in the function"
            ),
        ),
        ("Calls", "counted exactly (mcount arcs)".to_owned()),
        (
            "Call cost",
            "estimated, not measured: gprof's average-time-per-call assumption (the callee's \
             self and descendant samples times this call's share of all its calls; calls within \
             a cycle and recursive calls carry none)"
                .to_owned(),
        ),
    ] {
        part.info
            .desc
            .push((t.as_bytes().to_vec(), format!(" {v}").into_bytes()));
    }
    part.info.summary = Some(vec![total]);
    part.info.totals = Some(vec![total]);

    // Records: per routine in address order, its lines and call sites
    // merged by address (a call after the line at its address).
    let mut sites_of: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in sites.iter().enumerate() {
        sites_of[s.parent].push(i);
    }
    for j in 0..n {
        let mut calls = std::mem::take(&mut sites_of[j]);
        if lines[j].is_empty() && calls.is_empty() {
            continue;
        }
        calls.sort_by_key(|&i| (sites[i].at, sites[i].child));
        let f = b.function(j);
        let fkey = b.profile.names.key(f);
        let (mut li, mut ci) = (0, 0);
        while li < lines[j].len() || ci < calls.len() {
            let take_line = match (lines[j].get(li), calls.get(ci)) {
                (Some(l), Some(&c)) => l.0 <= sites[c].at,
                (Some(_), None) => true,
                _ => false,
            };
            if take_line {
                let (addr, k) = lines[j][li];
                li += 1;
                let (file, line) = b.position(addr, fkey.file);
                part.lines.push(f, file, &[addr, line], &[k]);
            } else {
                let s = &sites[calls[ci]];
                ci += 1;
                if s.count == 0 {
                    continue;
                }
                let (site_file, line) = b.position(s.at, fkey.file);
                let callee = b.function(s.child);
                let r = &table.routines[s.child];
                let info = CallInfo {
                    caller: f,
                    site_file,
                    callee,
                    count: s.count,
                    seq: part.next_seq(),
                };
                part.calls.push(
                    info,
                    &[s.at, line],
                    &[r.addr, u64::from(r.line)],
                    &[s.inclusive],
                );
            }
        }
    }
    if !samples.unknown.is_empty() {
        let name = b.profile.names.symbol(UNKNOWN);
        let f = b.profile.names.function(FunctionKey {
            object,
            file: unknown_file,
            name,
        });
        for (&addr, &k) in &samples.unknown {
            part.lines.push(f, unknown_file, &[addr, 0], &[k]);
        }
    }
    let mut profile = b.profile;
    profile.parts.push(part);
    Ok(Conversion { profile, notices })
}

/// One call site: calls from `from_pc` in routine `parent` to `child`.
#[derive(Debug, Clone)]
struct Site {
    parent: usize,
    child: usize,
    from_pc: u64,
    /// The address the call is placed at ([`locate_calls`]).
    at: u64,
    count: u64,
    inclusive: u64,
}

/// A warning when the histogram does not end where the program's text
/// does. glibc profiles `[text start, etext)` with `etext` rounded up to 4
/// bytes, and gprof never checks: a gmon file read with another program
/// gives a report of nonsense. Only programs with an `etext` symbol are
/// checked; two programs whose text ends at the same address pass.
fn other_program(obj: &ObjectFile, gmon: &Gmon) -> Option<Notice> {
    let etext = obj.symtab().iter().find(|e| e.name == "etext")?.address;
    let high = gmon.histograms.iter().map(|h| h.high_pc).max()?;
    if high >= etext && high - etext < 16 {
        return None;
    }
    Some(Notice(format!(
        "the histogram ends at {high:#x} but the text of {} ends at {etext:#x} (etext): is the profile from another program?",
        obj.path().display()
    )))
}

/// Bytes of code one `from_pc` stands for: glibc keeps arcs per 16 bytes of
/// caller (`HASHFRACTION` × the size of its table entries) and writes the
/// first address of those 16, so the call returns somewhere in
/// `from_pc..from_pc + CALL_SITE_GRANULE`.
const CALL_SITE_GRANULE: u64 = 16;

/// Places every call site on its call instruction where the code says which
/// one it is (x86 and x86-64): among the calls of the caller whose return
/// address is in `from_pc..from_pc + 16`, the one returning exactly to
/// `from_pc`, else the only direct call to the callee, else (no direct
/// call to it there) the only indirect call, else (none of those) the only
/// call: at -O2 a function reached by a sibling call (a `jmp`) is counted
/// as called from its caller's caller. Other sites go to the first
/// instruction starting in the window (or holding `from_pc`), so that they
/// land on an instruction; without disassembly they stay at `from_pc`.
fn locate_calls(code: &mut Code<'_>, table: &SymbolTable, sites: &mut [Site]) {
    for s in sites.iter_mut() {
        // (address, return address, direct target) of the caller's calls.
        let list: Vec<(u64, u64, Option<u64>)> = code
            .routine(s.parent)
            .iter()
            .filter(|i| i.call)
            .map(|i| (i.address, i.end, i.target))
            .collect();
        let window =
            |c: &&(u64, u64, Option<u64>)| c.1 >= s.from_pc && c.1 - s.from_pc < CALL_SITE_GRANULE;
        let callee = table.routines[s.child].addr;
        let exact: Vec<_> = list
            .iter()
            .filter(|c| c.1 == s.from_pc && c.2.is_none_or(|t| t == callee))
            .collect();
        let direct: Vec<_> = list
            .iter()
            .filter(window)
            .filter(|c| c.2 == Some(callee))
            .collect();
        let indirect: Vec<_> = list
            .iter()
            .filter(window)
            .filter(|c| c.2.is_none())
            .collect();
        let any: Vec<_> = list.iter().filter(window).collect();
        let found = match (
            exact.as_slice(),
            direct.as_slice(),
            indirect.as_slice(),
            any.as_slice(),
        ) {
            ([c], _, _, _) => Some(c.0),
            (_, [c], _, _) => Some(c.0),
            (_, [], [c], _) => Some(c.0),
            // A call to another function that reached the callee by a
            // sibling (tail) call: mcount saw this call's return address.
            (_, [], [], [c]) => Some(c.0),
            _ => None,
        };
        s.at = match found {
            Some(at) => at,
            None => code.instruction_in(
                s.parent,
                s.from_pc,
                s.from_pc.saturating_add(CALL_SITE_GRANULE),
            ),
        };
    }
}

/// The routine an arc's `self_pc` belongs to, as gprof's `cg_tally` finds
/// it: the routine holding it, moved back to a function symbol.
fn callee_of(table: &SymbolTable, self_pc: u64) -> Option<usize> {
    let mut child = table.lookup(self_pc)?;
    while !table.routines[child].is_func {
        child = child.checked_sub(1)?;
    }
    Some(child)
}

/// An instruction, as far as the conversion cares.
#[derive(Debug, Clone, Copy)]
struct Insn {
    address: u64,
    end: u64,
    call: bool,
    target: Option<u64>,
}

/// The routines' instructions, decoded on first use (x86 and x86-64 only;
/// other machines have none, and positions stay as the data gives them).
struct Code<'a> {
    obj: &'a ObjectFile,
    table: &'a SymbolTable,
    supported: bool,
    cache: FxHashMap<usize, Vec<Insn>>,
}

impl<'a> Code<'a> {
    fn new(obj: &'a ObjectFile, table: &'a SymbolTable) -> Self {
        Code {
            obj,
            table,
            supported: obj.is_x86_64() || obj.machine() == "x86",
            cache: FxHashMap::default(),
        }
    }

    /// The instructions of routine `j`, from its address to the next
    /// routine's (padding included, as the routine's range is).
    fn routine(&mut self, j: usize) -> &[Insn] {
        let (obj, table, supported) = (self.obj, self.table, self.supported);
        self.cache.entry(j).or_insert_with(|| {
            if !supported {
                return Vec::new();
            }
            let r = &table.routines[j];
            let end = table
                .routines
                .get(j + 1)
                .map_or(r.end_addr.saturating_add(1), |n| n.addr);
            obj.disassemble(r.addr, end)
                .map(|insns| {
                    insns
                        .into_iter()
                        .map(|i| Insn {
                            address: i.address,
                            end: i.end(),
                            call: i.kind == InstrKind::Call,
                            target: i.branch_target,
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// The instruction of routine `j` that stands for the histogram range
    /// `addr..end`: the first one starting in the range (a sampled PC is
    /// always an instruction's start), else the one holding `addr`, else
    /// `addr` itself (no code).
    fn instruction_in(&mut self, j: usize, addr: u64, end: u64) -> u64 {
        let insns = self.routine(j);
        let i = insns.partition_point(|x| x.address < addr);
        if let Some(x) = insns.get(i)
            && x.address < end
        {
            return x.address;
        }
        match i.checked_sub(1).map(|k| insns[k]) {
            Some(x) if x.end > addr => x.address,
            _ => addr,
        }
    }
}

/// A bin's share in one routine.
#[derive(Debug, Clone, Copy)]
struct Piece {
    /// The first address of the bin in the routine.
    addr: u64,
    /// The end of the bin (exclusive).
    end: u64,
    /// Its exact share of the bin's samples.
    share: f64,
}

/// Self samples spread over routines.
struct Spread {
    /// Per routine: a piece per bin overlapping it.
    pieces: Vec<Vec<Piece>>,
    /// Per routine: the sum of its exact shares.
    exact: Vec<f64>,
    /// Samples credited to routines (an integer: whole bins).
    in_routines: u64,
    /// Samples of bins outside every routine, by bin address.
    unknown: BTreeMap<u64, u64>,
    /// Their sum.
    unknown_total: u64,
    /// All samples.
    total: u64,
}

/// Credits every bin to the routines it overlaps, in proportion to the
/// overlap, with the bounds GNU gprof's `hist_assign_samples` computes
/// (see [`crate::gprof::assign_samples`]). Unlike gprof, each
/// bin's shares add up to its count: gprof divides the overlap by the
/// nominal bin width (`scale`, e.g. 1.997 units), while the integer bounds
/// make a bin 1 or 2 units wide, so its per-routine times drift a little
/// from the sample counts; here the overlap is divided by the bin's total
/// overlap with routines. A bin of zero width or overlapping no routine
/// goes whole to the routine holding its first address, if any.
fn spread_samples(table: &SymbolTable, gmon: &Gmon) -> Spread {
    let n = table.len();
    let mut out = Spread {
        pieces: vec![Vec::new(); n],
        exact: vec![0.0; n],
        in_routines: 0,
        unknown: BTreeMap::new(),
        unknown_total: 0,
        total: 0,
    };
    let Some(first) = gmon.histograms.first() else {
        return out;
    };
    let scale = if first.bins.is_empty() {
        0.0
    } else {
        (first.high_pc.saturating_sub(first.low_pc) / UNIT) as f64 / first.bins.len() as f64
    };
    let scaled: Vec<u64> = table.routines.iter().map(|r| r.addr / UNIT).collect();
    let high_of = |j: usize| -> u64 {
        match scaled.get(j + 1) {
            Some(&next) => next,
            None => table.routines[j].end_addr.wrapping_add(1) / UNIT,
        }
    };
    let mut overlaps: Vec<(usize, u64)> = Vec::new();
    for h in &gmon.histograms {
        let lowpc = h.low_pc / UNIT;
        for (i, &count) in h.bins.iter().enumerate() {
            if count == 0 {
                continue;
            }
            out.total = out.total.saturating_add(count);
            let bin_low = lowpc.wrapping_add((scale * i as f64) as u64);
            let bin_high = lowpc.wrapping_add((scale * (i + 1) as f64) as u64);
            overlaps.clear();
            // The first routine that ends after the bin starts.
            let (mut j, mut hi) = (0, n);
            while j < hi {
                let mid = (j + hi) / 2;
                if high_of(mid) <= bin_low {
                    j = mid + 1;
                } else {
                    hi = mid;
                }
            }
            while j < n && scaled[j] < bin_high {
                let lo = bin_low.max(scaled[j]);
                let hi = bin_high.min(high_of(j));
                if hi > lo {
                    overlaps.push((j, hi - lo));
                }
                j += 1;
            }
            let sum: u64 = overlaps.iter().map(|o| o.1).sum();
            out.in_routines = out.in_routines.saturating_add(count);
            if sum == 0 {
                let addr = bin_low.wrapping_mul(UNIT);
                match table.lookup(addr) {
                    Some(j) => {
                        out.pieces[j].push(Piece {
                            addr,
                            end: addr.saturating_add(UNIT),
                            share: count as f64,
                        });
                        out.exact[j] += count as f64;
                    }
                    None => {
                        out.in_routines -= count;
                        *out.unknown.entry(addr).or_default() += count;
                        out.unknown_total = out.unknown_total.saturating_add(count);
                    }
                }
                continue;
            }
            for &(j, o) in &overlaps {
                let r = &table.routines[j];
                let addr = bin_low
                    .wrapping_mul(UNIT)
                    .max(r.addr)
                    .min(r.end_addr.max(r.addr));
                let share = count as f64 * o as f64 / sum as f64;
                out.pieces[j].push(Piece {
                    addr,
                    end: bin_high.wrapping_mul(UNIT),
                    share,
                });
                out.exact[j] += share;
            }
        }
    }
    out
}

/// Fills in every site's inclusive cost: gprof's propagated time of the
/// arc between the two routines (`assemble`, on the integer self samples),
/// split over the arc's sites by count, then made integral per caller.
fn estimate_call_costs(
    table: &SymbolTable,
    graph: Graph,
    self_samples: &[u64],
    total: u64,
    sites: &mut [Site],
) {
    let n = table.len();
    if sites.is_empty() {
        return;
    }
    let names: Vec<&str> = table.routines.iter().map(|r| r.name.as_str()).collect();
    let time_exclude: Vec<bool> = names
        .iter()
        .map(|name| DEFAULT_EXCLUDED.contains(name))
        .collect();
    let options = AssembleOptions {
        graph: Selection::default(),
        time: Selection::new(vec![false; n], time_exclude),
        static_arcs: Vec::new(),
    };
    let self_time: Vec<f64> = self_samples.iter().map(|&s| s as f64).collect();
    let cg = assemble(graph, &self_time, &names, &options);
    let mut by_caller: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in sites.iter().enumerate() {
        by_caller[s.parent].push(i);
    }
    for (p, list) in by_caller.iter().enumerate() {
        if list.is_empty() {
            continue;
        }
        let weights: Vec<f64> = list
            .iter()
            .map(|&i| {
                let s = &sites[i];
                let Some(a) = cg.graph.find(s.parent, s.child) else {
                    return 0.0;
                };
                let arc = &cg.graph.arcs[a];
                let t = arc.time + arc.child_time;
                if arc.count == 0 || !t.is_finite() || t <= 0.0 {
                    return 0.0;
                }
                t * s.count as f64 / arc.count as f64
            })
            .collect();
        let sum: f64 = weights.iter().sum();
        let cap = total.saturating_sub(self_samples[p]);
        let target = (sum.round().max(0.0) as u64).min(cap);
        for (&i, k) in list.iter().zip(apportion(target, &weights)) {
            sites[i].inclusive = k;
        }
    }
}

/// Splits `total` into integers in proportion to `weights` (largest
/// remainder): each gets the floor of its quota, then the ones with the
/// largest fractional parts (the earlier on ties) one more, so that the
/// parts add up to `total` exactly and each is within one of its quota.
/// Without positive weights, everything goes to the first.
pub fn apportion(total: u64, weights: &[f64]) -> Vec<u64> {
    let mut out = vec![0u64; weights.len()];
    if weights.is_empty() || total == 0 {
        return out;
    }
    let w = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    let sum: f64 = weights.iter().map(|&x| w(x)).sum();
    if sum <= 0.0 {
        out[0] = total;
        return out;
    }
    let mut fracs: Vec<(f64, usize)> = Vec::with_capacity(weights.len());
    let mut given = 0u64;
    for (i, &x) in weights.iter().enumerate() {
        let quota = total as f64 * (w(x) / sum);
        let floor = quota.floor();
        out[i] = floor as u64;
        given = given.saturating_add(out[i]);
        fracs.push((quota - floor, i));
    }
    // Largest fractional part first; earlier first on ties.
    fracs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    // Rounding error can make the floors overshoot: take back from the
    // smallest fractional parts.
    let mut k = fracs.len();
    while given > total {
        k = if k == 0 { fracs.len() } else { k } - 1;
        let i = fracs[k].1;
        if out[i] > 0 {
            out[i] -= 1;
            given -= 1;
        }
    }
    let mut k = 0;
    while given < total {
        let i = fracs[k % fracs.len()].1;
        if w(weights[i]) > 0.0 {
            out[i] += 1;
            given += 1;
        }
        k += 1;
    }
    out
}

/// Interns names while the records are built.
struct Builder<'a> {
    table: &'a SymbolTable,
    obj: &'a ObjectFile,
    discard: bool,
    demangle: bool,
    object: ObjectId,
    unknown_file: FileId,
    ids: Vec<Option<FunctionId>>,
    profile: Profile<u64>,
}

impl Builder<'_> {
    /// The function of routine `j`: its printed name (demangled as gprof
    /// prints it) and the file of its first address.
    fn function(&mut self, j: usize) -> FunctionId {
        if let Some(f) = self.ids[j] {
            return f;
        }
        let r = &self.table.routines[j];
        let names = &mut self.profile.names;
        let file = match &r.file {
            Some(f) => names.file(f.as_bytes()),
            None => self.unknown_file,
        };
        let name = names.symbol(display_name(&r.name, self.discard, self.demangle).as_bytes());
        let f = names.function(FunctionKey {
            object: self.object,
            file,
            name,
        });
        self.ids[j] = Some(f);
        f
    }

    /// The source file and line of `addr`; without DWARF for it, the
    /// function's file and line 0.
    fn position(&mut self, addr: u64, function_file: FileId) -> (FileId, u64) {
        match self.obj.source_line(addr) {
            Some((file, line)) => (self.profile.names.file(file.as_bytes()), u64::from(line)),
            None => (function_file, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::apportion;

    #[test]
    fn apportion_keeps_the_total_and_stays_within_one() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]), [4, 3, 3]);
        assert_eq!(apportion(1, &[0.4, 0.6]), [0, 1]);
        assert_eq!(apportion(0, &[0.4, 0.6]), [0, 0]);
        assert_eq!(apportion(5, &[0.0, 0.0]), [5, 0]);
        assert_eq!(apportion(3, &[]), Vec::<u64>::new());
        assert_eq!(apportion(7, &[0.0, 2.0, f64::NAN]), [0, 7, 0]);
        let w = [0.3, 2.9, 1.1, 5.7, 0.0, 10.0];
        for total in 0..200u64 {
            let a = apportion(total, &w);
            assert_eq!(a.iter().sum::<u64>(), total);
            let sum: f64 = w.iter().sum();
            for (k, x) in a.iter().zip(w) {
                let quota = total as f64 * x / sum;
                assert!((*k as f64 - quota).abs() < 1.0, "{total}: {a:?}");
            }
        }
    }
}
