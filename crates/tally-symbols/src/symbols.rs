//! The function symbol table: sorted, deduplicated, searchable by address
//! and by the names Valgrind prints.

use std::fmt;
use std::sync::OnceLock;

use crate::demangle::demangle;

/// How widely a symbol is visible; decides which of several names at one
/// address is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Binding {
    /// `STB_GLOBAL` (and `STB_GNU_UNIQUE`).
    Global,
    /// `STB_WEAK`.
    Weak,
    /// `STB_LOCAL`, e.g. a C `static` function.
    Local,
}

/// A GNU symbol version, as in `memcpy@@GLIBC_2.14`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SymbolVersion {
    /// The version name, e.g. `GLIBC_2.14`.
    pub name: String,
    /// A hidden (non-default) version, written with one `@`; the default
    /// version is written with `@@`.
    pub hidden: bool,
}

impl fmt::Display for SymbolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.hidden { "@" } else { "@@" };
        write!(f, "{at}{}", self.name)
    }
}

/// Another name for the same function (same address), e.g. glibc's
/// `__libc_malloc` beside `malloc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The raw (mangled) name.
    pub name: String,
    /// The demangled name, as Valgrind would print it, if it differs.
    pub demangled: Option<String>,
    /// Its ELF binding.
    pub binding: Binding,
    /// Its symbol version, if the file has version information.
    pub version: Option<SymbolVersion>,
    /// `st_size` of this name.
    pub size: u64,
}

/// A function in the object file.
///
/// Addresses are ELF virtual addresses, the addresses Callgrind writes for
/// instructions of this object and the ones `nm` and `objdump` print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// The raw (mangled) name, as in the symbol table.
    pub name: String,
    /// The demangled name, as Valgrind would print it, if it differs.
    pub demangled: Option<String>,
    /// Start address.
    pub address: u64,
    /// `st_size` of the chosen name; 0 for some hand-written or linker-made
    /// functions.
    pub size: u64,
    /// The end (exclusive) used for lookups: `address` plus the largest size
    /// of its names, or, if all are 0, the start of the next function or
    /// the end of its section, whichever comes first.
    pub end: u64,
    /// The ELF binding of the chosen name.
    pub binding: Binding,
    /// The symbol version of the chosen name, if the file has versions.
    pub version: Option<SymbolVersion>,
    /// Other names at the same address, best first.
    pub aliases: Vec<Alias>,
}

impl Symbol {
    /// The name as Valgrind prints it: demangled if it is mangled.
    pub fn display_name(&self) -> &str {
        self.demangled.as_deref().unwrap_or(&self.name)
    }

    /// The name Valgrind's tools print for this function, which picks
    /// among aliases by its own rule: of the names as long as the function
    /// (Valgrind groups names by address and size), the shortest before
    /// any `@version`, then a versioned one, then the first in byte order;
    /// demangled if mangled.
    pub fn valgrind_name(&self) -> &str {
        let size = self
            .aliases
            .iter()
            .map(|a| a.size)
            .fold(self.size, u64::max);
        let names = std::iter::once((self.size, &self.name, &self.demangled))
            .chain(self.aliases.iter().map(|a| (a.size, &a.name, &a.demangled)));
        fn key(n: &str) -> (usize, bool, &str) {
            let v = n.find('@');
            (v.unwrap_or(n.len()), v.is_none(), n)
        }
        names
            .filter(|(s, _, _)| *s == size)
            .min_by(|a, b| key(a.1).cmp(&key(b.1)))
            .map_or(self.display_name(), |(_, n, d)| d.as_deref().unwrap_or(n))
    }

    /// The name perf prints for this function, which picks among aliases
    /// by its own rule (unlike Valgrind's): a sized name, then a non-weak
    /// one, then a global one, then the fewest leading underscores, then
    /// the longest (`fstatat64` over `fstatat`); demangled if mangled.
    pub fn perf_name(&self) -> &str {
        let names = std::iter::once((self.size, self.binding, &self.name, &self.demangled)).chain(
            self.aliases
                .iter()
                .map(|a| (a.size, a.binding, &a.name, &a.demangled)),
        );
        let key = |(size, binding, name, _): &(u64, Binding, &String, &Option<String>)| {
            (
                *size == 0,
                *binding == Binding::Weak,
                *binding != Binding::Global,
                name.bytes().take_while(|&b| b == b'_').count(),
                std::cmp::Reverse(name.len()),
            )
        };
        // Of equals, `min_by_key` keeps the first.
        names
            .min_by_key(key)
            .map_or(self.display_name(), |(_, _, n, d)| {
                d.as_deref().unwrap_or(n)
            })
    }

    /// Whether one of its names has a size (`st_size`); an unsized
    /// function runs to the next one.
    pub fn is_sized(&self) -> bool {
        self.size != 0 || self.aliases.iter().any(|a| a.size != 0)
    }

    /// Whether `addr` lies in `[address, end)`.
    pub fn contains(&self, addr: u64) -> bool {
        self.address <= addr && addr < self.end
    }

    /// The raw names of this function: the chosen one, then the aliases.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str()).chain(self.aliases.iter().map(|a| a.name.as_str()))
    }
}

/// One function symbol as read from `.symtab` or `.dynsym`.
#[derive(Debug, Clone)]
pub(crate) struct RawSymbol {
    pub(crate) name: String,
    pub(crate) address: u64,
    pub(crate) size: u64,
    pub(crate) binding: Binding,
    pub(crate) version: Option<SymbolVersion>,
    /// End of the allocated section holding the symbol, if known.
    pub(crate) section_end: Option<u64>,
}

impl RawSymbol {
    /// The order in which names at one address are preferred: global over
    /// weak over local, default versions over hidden ones, sized over
    /// unsized, fewer leading underscores, then by name so the choice never
    /// depends on table order.
    fn preference(&self) -> (Binding, bool, bool, usize, &str) {
        (
            self.binding,
            self.version.as_ref().is_some_and(|v| v.hidden),
            self.size == 0,
            self.name.bytes().take_while(|&b| b == b'_').count(),
            &self.name,
        )
    }
}

/// How objdump writes an address inside a symbol: `name@@VERSION+0x10`.
pub(crate) fn label(name: &str, version: Option<&SymbolVersion>, offset: u64) -> String {
    let mut out = name.to_owned();
    if let Some(version) = version
        && !name.contains('@')
    {
        out.push_str(&version.to_string());
    }
    if offset != 0 {
        out.push_str(&format!("+{offset:#x}"));
    }
    out
}

/// Sized data objects (`STT_OBJECT`), only to name the target of a
/// RIP-relative operand the way objdump does (`# 4024 <counter>`).
#[derive(Debug, Default)]
pub(crate) struct DataLabels {
    /// Sorted by address, one per address.
    objects: Vec<RawSymbol>,
}

impl DataLabels {
    pub(crate) fn new(mut objects: Vec<RawSymbol>) -> DataLabels {
        objects.retain(|o| o.size != 0);
        objects.sort_by(|a, b| {
            a.address
                .cmp(&b.address)
                .then_with(|| a.preference().cmp(&b.preference()))
        });
        objects.dedup_by_key(|o| o.address);
        DataLabels { objects }
    }

    /// The label of the object containing `addr`, if any.
    pub(crate) fn find(&self, addr: u64) -> Option<String> {
        let i = self.objects.partition_point(|o| o.address <= addr);
        let o = self.objects.get(i.checked_sub(1)?)?;
        (addr - o.address < o.size).then(|| label(&o.name, o.version.as_ref(), addr - o.address))
    }
}

/// Untyped code labels, each with the end of the code it names: the next
/// label or function, or the end of its section.
#[derive(Debug, Default)]
pub(crate) struct CodeLabels {
    /// `(start, end, name)`, sorted by start, one per start.
    labels: Vec<(u64, u64, String)>,
}

impl CodeLabels {
    /// `functions` must be sorted by address (as [`SymbolTable`] keeps them).
    pub(crate) fn new(mut raw: Vec<RawSymbol>, functions: &[Symbol]) -> CodeLabels {
        raw.sort_by(|a, b| {
            a.address
                .cmp(&b.address)
                .then_with(|| a.preference().cmp(&b.preference()))
        });
        raw.dedup_by_key(|l| l.address);
        let starts: Vec<u64> = raw.iter().map(|l| l.address).collect();
        let labels = raw
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let next_label = starts.get(i + 1).copied();
                let f = functions.partition_point(|s| s.address <= l.address);
                let next_function = functions.get(f).map(|s| s.address);
                let end = [
                    next_label,
                    next_function,
                    l.section_end.filter(|&e| e > l.address),
                ]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(l.address.saturating_add(1));
                (l.address, end, l.name)
            })
            .collect();
        CodeLabels { labels }
    }

    /// The label whose code holds `addr`, as `(start, name)`.
    pub(crate) fn find(&self, addr: u64) -> Option<(u64, &str)> {
        let i = self.labels.partition_point(|l| l.0 <= addr);
        let (start, end, name) = self.labels.get(i.checked_sub(1)?)?;
        (addr < *end).then_some((*start, name.as_str()))
    }
}

/// Where a name points: a symbol, and which of its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NameRef {
    symbol: u32,
    /// `u32::MAX` for the symbol's own name, else an index into `aliases`.
    alias: u32,
}

const PRIMARY: u32 = u32::MAX;

/// Sorted functions with the indexes to search them.
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    symbols: Vec<Symbol>,
    /// `max_end[i]` is the largest `end` of `symbols[..=i]`, so an address
    /// lookup knows when no earlier symbol can contain the address.
    max_end: Vec<u64>,
    /// Hashes of the raw, version-less and demangled names, sorted, with
    /// the names they belong to. A hash match is confirmed against the
    /// names themselves, so keys need no memory of their own.
    by_name: Vec<(u64, NameRef)>,
    /// The same without white space, built on the first miss: C++
    /// demanglers differ in spacing (`> >` against `>>`).
    by_squeezed_name: OnceLock<Vec<(u64, NameRef)>>,
}

impl SymbolTable {
    pub(crate) fn new(mut raw: Vec<RawSymbol>) -> SymbolTable {
        raw.sort_by(|a, b| {
            a.address
                .cmp(&b.address)
                .then_with(|| a.preference().cmp(&b.preference()))
        });
        raw.dedup_by(|later, earlier| {
            later.address == earlier.address
                && later.name == earlier.name
                && later.version == earlier.version
        });

        let mut symbols: Vec<Symbol> = Vec::new();
        let mut section_ends: Vec<Option<u64>> = Vec::new();
        let mut by_name: Vec<(u64, NameRef)> = Vec::new();
        for r in raw {
            let demangled = demangle(&r.name);
            let mut keys = vec![hash(&r.name, false)];
            // A `.symtab` name may carry its version (`memcpy@@GLIBC_2.14`).
            if let Some(base) = base_name(&r.name) {
                keys.push(hash(base, false));
            }
            if let Some(d) = &demangled {
                keys.push(hash(d, false));
            }
            keys.sort_unstable();
            keys.dedup();
            let count = symbols.len();
            let at = match symbols.last_mut() {
                Some(last) if last.address == r.address => {
                    last.aliases.push(Alias {
                        name: r.name,
                        demangled,
                        binding: r.binding,
                        version: r.version,
                        size: r.size,
                    });
                    NameRef {
                        symbol: (count - 1) as u32,
                        alias: (last.aliases.len() - 1) as u32,
                    }
                }
                _ => {
                    section_ends.push(r.section_end);
                    symbols.push(Symbol {
                        name: r.name,
                        demangled,
                        address: r.address,
                        size: r.size,
                        end: 0,
                        binding: r.binding,
                        version: r.version,
                        aliases: Vec::new(),
                    });
                    NameRef {
                        symbol: count as u32,
                        alias: PRIMARY,
                    }
                }
            };
            by_name.extend(keys.into_iter().map(|k| (k, at)));
        }

        // Effective ends; an unsized symbol runs to the next function, but
        // not past its section (e.g. `_fini`, alone in `.fini`).
        for i in 0..symbols.len() {
            let start = symbols[i].address;
            // Aliases may know the size the chosen name lacks.
            let size = symbols[i]
                .aliases
                .iter()
                .map(|a| a.size)
                .fold(symbols[i].size, u64::max);
            symbols[i].end = if size != 0 {
                start.saturating_add(size)
            } else {
                let next = symbols.get(i + 1).map(|s| s.address);
                match (next, section_ends[i]) {
                    (Some(n), Some(e)) if e > start => n.min(e),
                    (Some(n), _) => n,
                    (None, Some(e)) if e > start => e,
                    (None, _) => start.saturating_add(1),
                }
            };
        }
        by_name.sort_unstable_by_key(|&(k, _)| k);
        let mut max_end = Vec::with_capacity(symbols.len());
        let mut running = 0;
        for s in &symbols {
            running = running.max(s.end);
            max_end.push(running);
        }

        SymbolTable {
            symbols,
            max_end,
            by_name,
            by_squeezed_name: OnceLock::new(),
        }
    }

    pub(crate) fn symbols(&self) -> &[Symbol] {
        &self.symbols
    }

    pub(crate) fn symbol_at(&self, addr: u64) -> Option<&Symbol> {
        let mut i = self.symbols.partition_point(|s| s.address <= addr);
        // Walk back over earlier starts while one of them may still reach
        // `addr`; the first hit is the innermost symbol.
        while i > 0 && self.max_end[i - 1] > addr {
            i -= 1;
            if self.symbols[i].contains(addr) {
                return Some(&self.symbols[i]);
            }
        }
        None
    }

    pub(crate) fn find_function(&self, name: &str) -> Option<&Symbol> {
        if let Some(s) = self.find_in(name, false) {
            return Some(s);
        }
        // Callgrind's `--separate-recs` marks recursion depth as `name'2`.
        if let Some((base, depth)) = name.rsplit_once('\'')
            && !depth.is_empty()
            && depth.bytes().all(|b| b.is_ascii_digit())
            && let Some(s) = self.find_in(base, false)
        {
            return Some(s);
        }
        self.find_in(name, true)
    }

    /// The names whose key hashes like `name`'s and that really bear it.
    fn lookup(&self, name: &str, squeezed: bool) -> Vec<NameRef> {
        let index = if squeezed {
            self.by_squeezed_name.get_or_init(|| {
                let mut index: Vec<(u64, NameRef)> = Vec::new();
                for i in 0..self.symbols.len() {
                    for (a, (raw, demangled)) in self.names_of(i).enumerate() {
                        let r = NameRef {
                            symbol: i as u32,
                            alias: if a == 0 { PRIMARY } else { a as u32 - 1 },
                        };
                        index.push((hash(raw, true), r));
                        if let Some(d) = demangled {
                            index.push((hash(d, true), r));
                        }
                    }
                }
                index.sort_unstable_by_key(|&(k, _)| k);
                index.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
                index
            })
        } else {
            &self.by_name
        };
        let key = hash(name, squeezed);
        let from = index.partition_point(|&(k, _)| k < key);
        index[from..]
            .iter()
            .take_while(|&&(k, _)| k == key)
            .map(|&(_, r)| r)
            .filter(|&r| {
                let (raw, demangled) = self.name(r);
                let same = |candidate: &str| {
                    if squeezed {
                        unspaced(candidate).eq(unspaced(name))
                    } else {
                        candidate == name
                    }
                };
                same(raw)
                    || (!squeezed && base_name(raw) == Some(name))
                    || demangled.is_some_and(same)
            })
            .collect()
    }

    fn find_in(&self, name: &str, squeezed: bool) -> Option<&Symbol> {
        let refs = self.lookup(name, squeezed);
        if !refs.is_empty() {
            return self.best(refs.into_iter());
        }
        // `name@@VERSION` or `name@VERSION`.
        let (base, version) = name.split_once('@')?;
        let version = version.trim_start_matches('@');
        let refs = self.lookup(base, squeezed);
        let versioned = refs
            .iter()
            .copied()
            .filter(|r| self.version_of(*r).is_some_and(|v| v.name == version));
        if let Some(s) = self.best(versioned) {
            return Some(s);
        }
        // Without version information in the file, the base name decides.
        if refs.iter().all(|r| self.version_of(*r).is_none()) {
            return self.best(refs.into_iter());
        }
        None
    }

    /// The raw and demangled names of symbol `i`: its own, then its aliases'.
    fn names_of(&self, i: usize) -> impl Iterator<Item = (&str, Option<&str>)> {
        let s = &self.symbols[i];
        std::iter::once((s.name.as_str(), s.demangled.as_deref())).chain(
            s.aliases
                .iter()
                .map(|a| (a.name.as_str(), a.demangled.as_deref())),
        )
    }

    fn name(&self, r: NameRef) -> (&str, Option<&str>) {
        let s = &self.symbols[r.symbol as usize];
        if r.alias == PRIMARY {
            (&s.name, s.demangled.as_deref())
        } else {
            let a = &s.aliases[r.alias as usize];
            (&a.name, a.demangled.as_deref())
        }
    }

    fn version_of(&self, r: NameRef) -> Option<&SymbolVersion> {
        let s = &self.symbols[r.symbol as usize];
        if r.alias == PRIMARY {
            s.version.as_ref()
        } else {
            s.aliases[r.alias as usize].version.as_ref()
        }
    }

    fn binding_of(&self, r: NameRef) -> Binding {
        let s = &self.symbols[r.symbol as usize];
        if r.alias == PRIMARY {
            s.binding
        } else {
            s.aliases[r.alias as usize].binding
        }
    }

    /// Among several functions of one name (two C `static` functions, or
    /// versions of one glibc function), the default version, then the most
    /// visible binding, then the lowest address.
    fn best(&self, refs: impl Iterator<Item = NameRef>) -> Option<&Symbol> {
        refs.min_by_key(|&r| {
            (
                self.version_of(r).is_some_and(|v| v.hidden),
                self.binding_of(r),
                self.symbols[r.symbol as usize].address,
            )
        })
        .map(|r| &self.symbols[r.symbol as usize])
    }
}

/// `memcpy` of `memcpy@@GLIBC_2.14`.
fn base_name(raw: &str) -> Option<&str> {
    raw.split_once('@')
        .map(|(base, _)| base)
        .filter(|b| !b.is_empty())
}

/// The bytes of `s` without white space.
fn unspaced(s: &str) -> impl Iterator<Item = u8> + '_ {
    s.bytes().filter(|b| !b.is_ascii_whitespace())
}

/// FNV-1a, byte by byte, so the squeezed hash needs no squeezed copy.
fn hash(s: &str, squeezed: bool) -> u64 {
    let step = |h: u64, b: u8| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    let seed = 0xcbf2_9ce4_8422_2325;
    if squeezed {
        unspaced(s).fold(seed, step)
    } else {
        s.bytes().fold(seed, step)
    }
}

/// Splits a `.symtab` name such as `memcpy@@GLIBC_2.14` into its version.
pub(crate) fn version_in_name(name: &str) -> Option<SymbolVersion> {
    let (base, rest) = name.split_once('@')?;
    if base.is_empty() {
        return None;
    }
    let (hidden, version) = match rest.strip_prefix('@') {
        Some(v) => (false, v),
        None => (true, rest),
    };
    (!version.is_empty()).then(|| SymbolVersion {
        name: version.to_owned(),
        hidden,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str, address: u64, size: u64, binding: Binding) -> RawSymbol {
        RawSymbol {
            name: name.to_owned(),
            address,
            size,
            binding,
            version: version_in_name(name),
            section_end: Some(0x2000),
        }
    }

    #[test]
    fn aliases_prefer_global_names() {
        let t = SymbolTable::new(vec![
            raw("__libc_malloc", 0x1000, 16, Binding::Local),
            raw("malloc", 0x1000, 16, Binding::Weak),
            raw("__malloc", 0x1000, 16, Binding::Global),
            raw("free", 0x1010, 8, Binding::Global),
        ]);
        let s = t.symbols();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "__malloc");
        let aliases: Vec<_> = s[0].aliases.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(aliases, ["malloc", "__libc_malloc"]);
        assert_eq!(t.find_function("malloc").unwrap().address, 0x1000);
        assert_eq!(t.find_function("__libc_malloc").unwrap().address, 0x1000);
    }

    #[test]
    fn valgrind_names_follow_its_own_preference() {
        // Names seen in Debian's libc: shortest before the version, then
        // versioned, then byte order; names of another size do not count.
        let t = SymbolTable::new(vec![
            raw("__GI_____strtol_l_internal", 0x1000, 16, Binding::Local),
            raw("____strtol_l_internal", 0x1000, 16, Binding::Local),
            raw("_exit", 0x1010, 8, Binding::Global),
            raw("_Exit", 0x1010, 8, Binding::Weak),
            raw("__default_morecore@GLIBC_2.2.5", 0x1020, 8, Binding::Global),
            raw("__default_morecore", 0x1020, 8, Binding::Global),
            raw("__glibc_morecore", 0x1020, 8, Binding::Local),
            raw("memcpy@GLIBC_2.2.5", 0x1030, 8, Binding::Global),
            raw("memcpy@@GLIBC_2.14", 0x1030, 8, Binding::Global),
            raw("memcpy", 0x1030, 8, Binding::Global),
            raw("a", 0x1040, 2, Binding::Global),
            raw("long_name", 0x1040, 8, Binding::Global),
        ]);
        let names: Vec<_> = t.symbols().iter().map(|s| s.valgrind_name()).collect();
        assert_eq!(
            names,
            [
                "____strtol_l_internal",
                "_Exit",
                "__glibc_morecore",
                "memcpy@@GLIBC_2.14",
                "long_name"
            ]
        );
    }

    #[test]
    fn unsized_symbols_reach_the_next_one_or_the_section_end() {
        let t = SymbolTable::new(vec![
            raw("a", 0x1000, 0, Binding::Global),
            raw("b", 0x1010, 4, Binding::Global),
            raw("c", 0x1020, 0, Binding::Global),
        ]);
        assert_eq!(t.symbol_at(0x100f).unwrap().name, "a");
        assert_eq!(t.symbol_at(0x1013).unwrap().name, "b");
        // Padding after a sized symbol belongs to nobody.
        assert!(t.symbol_at(0x1015).is_none());
        assert_eq!(t.symbol_at(0x1fff).unwrap().name, "c");
        assert!(t.symbol_at(0x2000).is_none());
        assert!(t.symbol_at(0xfff).is_none());
    }

    #[test]
    fn nested_symbols_give_the_innermost() {
        let t = SymbolTable::new(vec![
            raw("outer", 0x1000, 0x100, Binding::Global),
            raw("inner", 0x1010, 0x10, Binding::Local),
        ]);
        assert_eq!(t.symbol_at(0x1015).unwrap().name, "inner");
        assert_eq!(t.symbol_at(0x1020).unwrap().name, "outer");
        assert_eq!(t.symbol_at(0x10ff).unwrap().name, "outer");
    }

    #[test]
    fn versioned_names_match_their_version() {
        let mut old = raw("memcpy", 0x1000, 8, Binding::Global);
        old.version = Some(SymbolVersion {
            name: "GLIBC_2.2.5".into(),
            hidden: true,
        });
        let mut new = raw("memcpy", 0x1100, 8, Binding::Global);
        new.version = Some(SymbolVersion {
            name: "GLIBC_2.14".into(),
            hidden: false,
        });
        let t = SymbolTable::new(vec![old, new]);
        assert_eq!(t.find_function("memcpy").unwrap().address, 0x1100);
        assert_eq!(
            t.find_function("memcpy@@GLIBC_2.14").unwrap().address,
            0x1100
        );
        assert_eq!(
            t.find_function("memcpy@GLIBC_2.2.5").unwrap().address,
            0x1000
        );
        assert!(t.find_function("memcpy@@GLIBC_9.9").is_none());
    }

    #[test]
    fn versions_in_symtab_names_are_understood() {
        let t = SymbolTable::new(vec![raw("f@@V1", 0x1000, 8, Binding::Global)]);
        let s = t.find_function("f").unwrap();
        assert_eq!(s.version.as_ref().unwrap().to_string(), "@@V1");
        assert!(t.find_function("f@@V1").is_some());
        assert!(t.find_function("f@V1").is_some());
    }

    #[test]
    fn unversioned_files_match_the_base_name() {
        let t = SymbolTable::new(vec![raw("__libc_start_main", 0x1000, 8, Binding::Global)]);
        assert!(t.find_function("__libc_start_main@@GLIBC_2.34").is_some());
    }

    #[test]
    fn demangled_and_recursion_marked_names_match() {
        let t = SymbolTable::new(vec![
            raw("_ZN5space3fooEibc", 0x1000, 8, Binding::Global),
            raw(
                "_ZN3std2rt10lang_start17h0123456789abcdefE",
                0x1100,
                8,
                Binding::Global,
            ),
            raw("fib", 0x1200, 8, Binding::Global),
        ]);
        assert_eq!(
            t.find_function("space::foo(int, bool, char)")
                .unwrap()
                .address,
            0x1000
        );
        assert_eq!(
            t.find_function("space::foo(int,bool,char)")
                .unwrap()
                .address,
            0x1000
        );
        assert_eq!(
            t.find_function("_ZN5space3fooEibc").unwrap().address,
            0x1000
        );
        assert_eq!(
            t.find_function("std::rt::lang_start").unwrap().address,
            0x1100
        );
        assert_eq!(t.find_function("fib'2").unwrap().address, 0x1200);
        assert!(t.find_function("fob").is_none());
        assert_eq!(t.symbols()[0].display_name(), "space::foo(int, bool, char)");
    }

    #[test]
    fn empty_table_answers_nothing() {
        let t = SymbolTable::new(Vec::new());
        assert!(t.symbol_at(0).is_none());
        assert!(t.find_function("main").is_none());
    }
}
