//! Machine descriptions as users give them, the host's own caches, and
//! Cachegrind's end-of-run summary.

use crate::{CacheConfig, Counts, Error, HierarchyConfig, Policy};
// Counts as Cachegrind prints them; the summary is tally's, not the
// plugin's, so it comes with the `session` feature.
#[cfg(feature = "session")]
use tally_model::thousands as commas;

impl Policy {
    /// Parses `lru`, `fifo`, `plru` (tree pseudo-LRU) or `random[:SEED]`.
    pub fn parse(text: &str) -> Result<Policy, Error> {
        let bad = || Error::Geometry {
            cache: "all".into(),
            message: format!(
                "unknown replacement policy `{text}` (lru, fifo, plru, random or random:SEED)"
            ),
        };
        Ok(match text {
            "lru" => Policy::Lru,
            "fifo" => Policy::Fifo,
            "plru" | "tree-plru" => Policy::TreePlru,
            "random" => Policy::Random(1),
            _ => match text.strip_prefix("random:") {
                Some(s) => Policy::Random(s.parse().map_err(|_| bad())?),
                None => return Err(bad()),
            },
        })
    }

    /// The name [`Policy::parse`] reads back.
    pub fn name(&self) -> String {
        match self {
            Policy::Lru => "lru".into(),
            Policy::Fifo => "fifo".into(),
            Policy::TreePlru => "plru".into(),
            Policy::Random(s) => format!("random:{s}"),
        }
    }
}

/// One machine to simulate: the main one (`name` is `None`) or one of
/// `--config`'s.
pub struct Machine {
    /// The `--config` name.
    pub name: Option<String>,
    /// Its caches and policy.
    pub config: HierarchyConfig,
}

/// The machines as `tally sim`'s options give them: each cache
/// `SIZE,ASSOC,LINE_SIZE` (`None`: the host's), middle levels as
/// `NAME=SIZE,ASSOC,LINE_SIZE`, the replacement policy, and `--config`
/// specs `NAME: --D1=… --LL=… --cache=… --policy=…`, each the main
/// machine with some options changed.
pub struct MachineOptions<'a> {
    /// `--I1`.
    pub i1: Option<&'a str>,
    /// `--D1`.
    pub d1: Option<&'a str>,
    /// `--LL`.
    pub ll: Option<&'a str>,
    /// `--cache`, in order.
    pub cache: &'a [String],
    /// `--policy`.
    pub policy: &'a str,
    /// `--config`, in order.
    pub configs: &'a [String],
}

fn parse_level(text: &str) -> Result<CacheConfig, String> {
    let (name, geo) = text.split_once('=').ok_or_else(|| {
        format!("--cache {text}: expected NAME=SIZE,ASSOC,LINE_SIZE (e.g. L2=262144,4,64)")
    })?;
    CacheConfig::parse(name, geo).map_err(|e| e.to_string())
}

/// The main machine, then each of `--config`'s, every one checked; the
/// error is the message for the user (every one is in the options).
pub fn machines(o: &MachineOptions<'_>) -> Result<Vec<Machine>, String> {
    let (hi1, hd1, hll) = host_caches();
    let pick = |o: Option<&str>, name: &str, d: CacheConfig| match o {
        Some(t) => CacheConfig::parse(name, t).map_err(|e| e.to_string()),
        None => Ok(d),
    };
    let main = HierarchyConfig {
        i1: pick(o.i1, "I1", hi1)?,
        d1: pick(o.d1, "D1", hd1)?,
        middle: o
            .cache
            .iter()
            .map(|c| parse_level(c))
            .collect::<Result<_, _>>()?,
        ll: pick(o.ll, "LL", hll)?,
        policy: Policy::parse(o.policy).map_err(|e| e.to_string())?,
        iaddr_zero_bits: 0,
    };
    crate::Hierarchy::new(&main).map_err(|e| e.to_string())?;
    let mut out = vec![Machine {
        name: None,
        config: main.clone(),
    }];
    for spec in o.configs {
        let (name, opts) = spec
            .split_once(':')
            .ok_or_else(|| format!("--config `{spec}`: expected `NAME: --D1=… --LL=…`"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "--config `{spec}`: the name must be letters, digits, `-` or `_`"
            ));
        }
        if out.iter().any(|m| m.name.as_deref() == Some(name)) {
            return Err(format!("--config: the name `{name}` is used twice"));
        }
        let mut c = main.clone();
        let mut middle_given = false;
        for opt in opts.split_whitespace() {
            let (k, v) = opt
                .strip_prefix("--")
                .and_then(|o| o.split_once('='))
                .ok_or_else(|| format!("--config {name}: `{opt}`: expected --KEY=VALUE"))?;
            let ctx = |e: Error| format!("--config {name}: {e}");
            match k {
                "I1" => c.i1 = CacheConfig::parse("I1", v).map_err(ctx)?,
                "D1" => c.d1 = CacheConfig::parse("D1", v).map_err(ctx)?,
                "LL" => c.ll = CacheConfig::parse("LL", v).map_err(ctx)?,
                "policy" => c.policy = Policy::parse(v).map_err(ctx)?,
                "cache" => {
                    if !middle_given {
                        c.middle.clear();
                        middle_given = true;
                    }
                    c.middle.push(parse_level(v)?);
                }
                _ => {
                    return Err(format!(
                        "--config {name}: unknown option --{k} (I1, D1, LL, cache, policy)"
                    ));
                }
            }
        }
        crate::Hierarchy::new(&c).map_err(|e| format!("--config {name}: {e}"))?;
        out.push(Machine {
            name: Some(name.to_string()),
            config: c,
        });
    }
    Ok(out)
}

/// Cachegrind's caches for this host: L1 data and instruction caches and
/// the last level from `/sys/devices/system/cpu/cpu0/cache` (on AMD
/// processors from CPUID as Valgrind decodes it, see `amd_caches`), with
/// the last level changed as Cachegrind changes it when its number of sets
/// is not a power of two (`tweak_ll`). Without that information,
/// Cachegrind's fallback: 64 KiB 2-way L1s and a 256 KiB 8-way LL, 64-byte
/// lines.
pub fn host_caches() -> (CacheConfig, CacheConfig, CacheConfig) {
    if let Some((i1, d1, ll)) = amd_cpuid_caches() {
        return (i1, d1, tweak_ll(ll));
    }
    let fallback = (
        CacheConfig {
            size: 65536,
            assoc: 2,
            line_size: 64,
        },
        CacheConfig {
            size: 65536,
            assoc: 2,
            line_size: 64,
        },
        CacheConfig {
            size: 262144,
            assoc: 8,
            line_size: 64,
        },
    );
    sys_caches().map_or(fallback, |(i1, d1, ll)| (i1, d1, tweak_ll(ll)))
}

/// The caches of an AMD processor from CPUID as Valgrind decodes them;
/// `None` on other processors.
fn amd_cpuid_caches() -> Option<(CacheConfig, CacheConfig, CacheConfig)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        let v = __cpuid(0);
        let ext = __cpuid(0x8000_0000).eax;
        if [v.ebx, v.edx, v.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163] && ext >= 0x8000_0006 {
            let (l1, l2) = (__cpuid(0x8000_0005), __cpuid(0x8000_0006));
            return Some(amd_caches([l1.ecx, l1.edx], [l2.ecx, l2.edx]));
        }
    }
    None
}

/// When the default last level (Cachegrind's reading of CPUID) is not the
/// cache the kernel reports, a note saying both and the `--LL` that
/// simulates the kernel's: Valgrind 3.19 misreads newer AMD processors'
/// L3, and tally's defaults follow Cachegrind so that counts compare.
pub fn host_ll_note() -> Option<String> {
    amd_cpuid_caches()?;
    let (_, _, chosen) = host_caches();
    let (_, _, kernel) = sys_caches()?;
    let kernel = tweak_ll(kernel);
    let show = |c: CacheConfig| {
        let ways = if c.assoc == 1 {
            "direct-mapped".to_string()
        } else {
            format!("{}-way", c.assoc)
        };
        format!("{} KiB {ways}", c.size / 1024)
    };
    (chosen != kernel).then(|| {
        format!(
            "LL is Cachegrind's reading of this processor (CPUID): {}; the kernel reports {} (/sys): --LL={},{},{} simulates that",
            show(chosen),
            show(kernel),
            kernel.size,
            kernel.assoc,
            kernel.line_size
        )
    })
}

/// L1 instruction and data caches and the last level as the kernel
/// reports them (`/sys/devices/system/cpu/cpu0/cache`).
fn sys_caches() -> Option<(CacheConfig, CacheConfig, CacheConfig)> {
    let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let read = |i: usize, f: &str| std::fs::read_to_string(base.join(format!("index{i}/{f}"))).ok();
    let size = |s: &str| -> Option<u64> {
        let s = s.trim();
        if let Some(k) = s.strip_suffix('K') {
            k.parse::<u64>().ok().map(|v| v * 1024)
        } else if let Some(m) = s.strip_suffix('M') {
            m.parse::<u64>().ok().map(|v| v << 20)
        } else {
            s.parse().ok()
        }
    };
    let (mut i1, mut d1, mut ll): (
        Option<CacheConfig>,
        Option<CacheConfig>,
        Option<(u32, CacheConfig)>,
    ) = (None, None, None);
    for i in 0..8 {
        let (Some(level), Some(kind), Some(sz), Some(ways), Some(line)) = (
            read(i, "level"),
            read(i, "type"),
            read(i, "size"),
            read(i, "ways_of_associativity"),
            read(i, "coherency_line_size"),
        ) else {
            continue;
        };
        let (Ok(level), Some(sz), Ok(ways), Ok(line)) = (
            level.trim().parse::<u32>(),
            size(&sz),
            ways.trim().parse::<u64>(),
            line.trim().parse::<u64>(),
        ) else {
            continue;
        };
        let c = CacheConfig {
            size: sz,
            assoc: ways,
            line_size: line,
        };
        match (level, kind.trim()) {
            (1, "Instruction") => i1 = Some(c),
            (1, "Data") => d1 = Some(c),
            (l, "Unified") if ll.is_none_or(|(m, _)| l > m) => ll = Some((l, c)),
            _ => {}
        }
    }
    let (Some(i1), Some(d1), Some((_, ll))) = (i1, d1, ll) else {
        return None;
    };
    Some((i1, d1, ll))
}

/// The caches of an AMD processor as Valgrind reads them (`AMD_cache_info`
/// in its `m_cache.c`), from CPUID 0x80000005 (`l1`: ECX the data cache,
/// EDX the instruction cache) and 0x80000006 (`l2_l3`: ECX L2, EDX L3):
/// the last level is L3 when its size field is not zero. Valgrind decodes
/// the L2/L3 associativity with the older table only, so the code that
/// newer processors give there (9: "see CPUID 0x8000001D") and unknown
/// ones mean direct-mapped; Linux's `/sys` reads 0x8000001D instead, and
/// Cachegrind's default LL would differ from it.
pub fn amd_caches(l1: [u32; 2], l2_l3: [u32; 2]) -> (CacheConfig, CacheConfig, CacheConfig) {
    let first = |r: u32| CacheConfig {
        size: u64::from(r >> 24) * 1024,
        assoc: u64::from((r >> 16) & 0xff),
        line_size: u64::from(r & 0xff),
    };
    let ways = |code: u32| match code & 0xf {
        2 => 2,
        4 => 4,
        6 => 8,
        8 => 16,
        0xa => 32,
        0xb => 48,
        0xc => 64,
        0xd => 96,
        0xe => 128,
        _ => 1,
    };
    let [l2, l3] = l2_l3;
    let ll = if (l3 >> 18) & 0x3fff > 0 {
        CacheConfig {
            size: u64::from((l3 >> 18) & 0x3fff) * 512 * 1024,
            assoc: ways(l3 >> 12),
            line_size: u64::from(l3 & 0xff),
        }
    } else {
        CacheConfig {
            size: u64::from(l2 >> 16) * 1024,
            assoc: ways(l2 >> 12),
            line_size: u64::from(l2 & 0xff),
        }
    };
    (first(l1[1]), first(l1[0]), ll)
}

/// Cachegrind's adjustment of a last-level cache (`maybe_tweak_LLc`), which
/// simulates only a power-of-two number of sets: the sets are rounded down
/// to one and the ways scaled by the same factor, rounded to the nearest
/// (half up); the size follows from sets, ways and line.
pub fn tweak_ll(c: CacheConfig) -> CacheConfig {
    if c.size == 0 || c.assoc == 0 || c.line_size == 0 {
        return c;
    }
    let sets = c.size / (c.assoc * c.line_size);
    if sets == 0 {
        return c;
    }
    let new_sets = 1u64 << (63 - sets.leading_zeros());
    // floor(0.5 + assoc × sets / new_sets), exact: new_sets is a power of two.
    let assoc = (2 * c.assoc * sets + new_sets) / (2 * new_sets);
    CacheConfig {
        size: new_sets * assoc * c.line_size,
        assoc,
        line_size: c.line_size,
    }
}

/// Describes a machine for `desc:` lines, as Cachegrind does for its three
/// caches; middle levels and a policy other than LRU are added.
pub fn describe(c: &HierarchyConfig) -> Vec<(String, String)> {
    let mut v = vec![
        (
            "I1 cache".to_string(),
            format!("        {}", c.i1.describe()),
        ),
        (
            "D1 cache".to_string(),
            format!("        {}", c.d1.describe()),
        ),
    ];
    for (i, m) in c.middle.iter().enumerate() {
        v.push((
            format!("L{} cache", i + 2),
            format!("        {}", m.describe()),
        ));
    }
    v.push((
        "LL cache".to_string(),
        format!("        {}", c.ll.describe()),
    ));
    if c.policy != Policy::Lru {
        v.push(("replacement".to_string(), c.policy.name()));
    }
    v
}

/// Width of `n` printed with commas.
#[cfg(feature = "session")]
fn width(n: u64) -> usize {
    commas(n).len()
}

/// `100 * n / m` with `d` decimals, right-aligned in `w` columns.
#[cfg(feature = "session")]
fn percent(n: u64, m: u64, d: usize, w: usize) -> String {
    let s = if m == 0 {
        "--%".to_string()
    } else {
        format!("{:.*}%", d, n as f64 * 100.0 / m as f64)
    };
    format!("{s:>w$}")
}

/// The values of [`Counts::values`] a profile has, in the order it writes
/// them: Cachegrind's (`Ir` alone without cache simulation, the branch
/// events with branch simulation), each middle level's events after the
/// first level's of the same kind (`Ir I1mr I2mr ILmr Dr D1mr D2mr DLmr
/// Dw D1mw D2mw DLmw` with an L2).
pub fn event_indices(cache_sim: bool, branch_sim: bool, middle: usize) -> Vec<usize> {
    let mut v = vec![0];
    if cache_sim {
        for kind in 0..3 {
            let first = 3 * kind;
            if kind > 0 {
                v.push(first);
            }
            v.push(first + 1);
            v.extend((0..middle).map(|l| Counts::mid_index(l, kind)));
            v.push(first + 2);
        }
    }
    if branch_sim {
        v.extend(9..13);
    }
    v
}

/// Cachegrind's summary of a run, line by line (without the `==PID==`
/// prefix): the layout, widths and rounding of `cg_fini`. `middle`
/// levels between the first level and LL get lines of their own, named
/// as their events (`L2i misses`, `L2d misses`, `L2 refs`), and then LL's
/// references are the misses of the level above it.
#[cfg(feature = "session")]
pub fn summary(t: &Counts, cache_sim: bool, branch_sim: bool, middle: usize) -> Vec<String> {
    let mut out = Vec::new();
    let l1 = width(t.ir);
    let l2 = width(t.dr.max(t.bc));
    let l3 = width(t.dw.max(t.bi));
    let one = |label: &str, v: u64| format!("{label} {:>l1$}", commas(v));
    let three = |label: &str, a: u64, b: u64, c: u64, r: &str, w: &str| {
        format!(
            "{label} {:>l1$}  ({:>l2$} {r} + {:>l3$} {w})",
            commas(a),
            commas(b),
            commas(c)
        )
    };
    let mid = &t.mid[..middle.min(crate::MAX_MIDDLE)];
    let label = |l: usize, what: &str| format!("{:<14}", format!("L{}{what}", l + 2));
    if !cache_sim {
        out.push(one("I   refs:     ", t.ir));
    } else {
        out.push(one("I   refs:     ", t.ir));
        out.push(one("I1  misses:   ", t.i1mr));
        for (l, m) in mid.iter().enumerate() {
            out.push(one(&label(l, "i misses:"), m[0]));
        }
        out.push(one("LLi misses:   ", t.ilmr));
        let ir = t.ir.max(1);
        out.push(format!("I1  miss rate: {}", percent(t.i1mr, ir, 2, l1 + 1)));
        for (l, m) in mid.iter().enumerate() {
            out.push(format!(
                "{}{}",
                label(l, "i miss rate:"),
                percent(m[0], ir, 2, l1 + 2)
            ));
        }
        out.push(format!("LLi miss rate: {}", percent(t.ilmr, ir, 2, l1 + 1)));
        out.push(String::new());
        let (d, d1, dl) = (t.dr + t.dw, t.d1mr + t.d1mw, t.dlmr + t.dlmw);
        out.push(three("D   refs:     ", d, t.dr, t.dw, "rd  ", "wr"));
        out.push(three("D1  misses:   ", d1, t.d1mr, t.d1mw, "rd  ", "wr"));
        for (l, m) in mid.iter().enumerate() {
            out.push(three(
                &label(l, "d misses:"),
                m[1] + m[2],
                m[1],
                m[2],
                "rd  ",
                "wr",
            ));
        }
        out.push(three("LLd misses:   ", dl, t.dlmr, t.dlmw, "rd  ", "wr"));
        let (dm, drm, dwm) = (d.max(1), t.dr.max(1), t.dw.max(1));
        let rates = |label: &str, a: u64, b: u64, c: u64, sp: &str| {
            format!(
                "{label} {} ({}     + {}{sp})",
                percent(a, dm, 1, l1 + 1),
                percent(b, drm, 1, l2 + 1),
                percent(c, dwm, 1, l3 + 1)
            )
        };
        out.push(rates("D1  miss rate:", d1, t.d1mr, t.d1mw, "  "));
        for (l, m) in mid.iter().enumerate() {
            let name = label(l, "d miss rate:");
            out.push(rates(name.trim_end(), m[1] + m[2], m[1], m[2], "  "));
        }
        out.push(rates("LLd miss rate:", dl, t.dlmr, t.dlmw, "  "));
        out.push(String::new());
        // Each level's references are the misses of the level above it
        // (I1 and D1 for the first below them).
        let mut refs = (t.i1mr, t.d1mr, t.d1mw);
        let mut level = |name: &str, i: u64, r: u64, w: u64, out: &mut Vec<String>| {
            let (ri, rr, rw) = refs;
            out.push(three(
                &format!("{:<14}", format!("{name} refs:")),
                ri + rr + rw,
                ri + rr,
                rw,
                "rd  ",
                "wr",
            ));
            out.push(three(
                &format!("{:<14}", format!("{name} misses:")),
                i + r + w,
                i + r,
                w,
                "rd  ",
                "wr",
            ));
            out.push(format!(
                "{:<14} {} ({}     + {}  )",
                format!("{name} miss rate:"),
                percent(i + r + w, t.ir + d, 1, l1 + 1),
                percent(i + r, t.ir + t.dr, 1, l2 + 1),
                percent(w, t.dw, 1, l3 + 1)
            ));
            refs = (i, r, w);
        };
        for (l, m) in mid.iter().enumerate() {
            level(&format!("L{}", l + 2), m[0], m[1], m[2], &mut out);
        }
        level("LL", t.ilmr, t.dlmr, t.dlmw, &mut out);
    }
    if branch_sim {
        let (bc, bi) = (t.bc.max(1), t.bi.max(1));
        out.push(String::new());
        out.push(three("Branches:     ", bc + bi, bc, bi, "cond", "ind"));
        out.push(three(
            "Mispredicts:  ",
            t.bcm + t.bim,
            t.bcm,
            t.bim,
            "cond",
            "ind",
        ));
        out.push(format!(
            "Mispred rate:  {} ({}     + {}   )",
            percent(t.bcm + t.bim, bc + bi, 1, l1 + 1),
            percent(t.bcm, bc, 1, l2 + 1),
            percent(t.bim, bi, 1, l3 + 1)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "session")]
    fn summary_matches_cachegrind_layout() {
        // Totals and text of a real `valgrind --tool=cachegrind
        // --branch-sim=yes` run (Valgrind 3.19).
        let t = Counts {
            ir: 1_998_438,
            i1mr: 1_395,
            ilmr: 1_372,
            dr: 424_534,
            d1mr: 2_953,
            dlmr: 1_940,
            dw: 178_345,
            d1mw: 1_286,
            dlmw: 1_197,
            bc: 248_602,
            bcm: 38_129,
            bi: 40_302,
            bim: 195,
            ..Counts::default()
        };
        let want = "\
I   refs:      1,998,438
I1  misses:        1,395
LLi misses:        1,372
I1  miss rate:      0.07%
LLi miss rate:      0.07%

D   refs:        602,879  (424,534 rd   + 178,345 wr)
D1  misses:        4,239  (  2,953 rd   +   1,286 wr)
LLd misses:        3,137  (  1,940 rd   +   1,197 wr)
D1  miss rate:       0.7% (    0.7%     +     0.7%  )
LLd miss rate:       0.5% (    0.5%     +     0.7%  )

LL refs:           5,634  (  4,348 rd   +   1,286 wr)
LL misses:         4,509  (  3,312 rd   +   1,197 wr)
LL miss rate:        0.2% (    0.1%     +     0.7%  )

Branches:        288,904  (248,602 cond +  40,302 ind)
Mispredicts:      38,324  ( 38,129 cond +     195 ind)
Mispred rate:       13.3% (   15.3%     +     0.5%   )";
        assert_eq!(summary(&t, true, true, 0).join("\n"), want);
    }

    #[test]
    fn ll_tweak_as_cachegrind() {
        // 260 MiB, 20 ways: 212,992 sets; Cachegrind simulates 33 ways of
        // 131,072 sets (its warning on this machine).
        let c = tweak_ll(CacheConfig {
            size: 272_629_760,
            assoc: 20,
            line_size: 64,
        });
        assert_eq!((c.size, c.assoc), (276_824_064, 33));
    }

    #[test]
    fn amd_caches_as_cachegrind() {
        // CPUID of this project's AMD EPYC virtual machine: 0x80000005
        // ECX = EDX = 0x20080140, 0x80000006 ECX 0x04006140, EDX
        // 0x0a009140 (L3 associativity code 9). Cachegrind (Valgrind 3.19)
        // there: I1 and D1 32 KiB 8-way, "specified LL cache: line_size 64
        // assoc 1 total_size 335,544,320", "simulated LL cache: line_size
        // 64 assoc 1 total_size 268,435,456".
        let (i1, d1, ll) = amd_caches([0x2008_0140; 2], [0x0400_6140, 0x0a00_9140]);
        for c in [i1, d1] {
            assert_eq!((c.size, c.assoc, c.line_size), (32768, 8, 64));
        }
        assert_eq!((ll.size, ll.assoc, ll.line_size), (335_544_320, 1, 64));
        let ll = tweak_ll(ll);
        assert_eq!((ll.size, ll.assoc, ll.line_size), (268_435_456, 1, 64));
        // Without an L3, L2 (1 MiB, code 6: 8 ways).
        let (_, _, l2) = amd_caches([0x2008_0140; 2], [0x0400_6140, 0]);
        assert_eq!((l2.size, l2.assoc, l2.line_size), (1 << 20, 8, 64));
    }

    #[test]
    fn policies() {
        assert_eq!(Policy::parse("random:7").unwrap(), Policy::Random(7));
        assert_eq!(Policy::parse("plru").unwrap(), Policy::TreePlru);
        assert!(Policy::parse("mru").is_err());
    }
}
