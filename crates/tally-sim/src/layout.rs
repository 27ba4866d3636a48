//! The program's memory mappings placed as Valgrind places them, so that
//! the caches see the addresses a program has under Cachegrind.
//!
//! Caches are indexed and tagged by virtual address, so where a mapping
//! lies decides which earlier lines it meets again. QEMU 7.2 places every
//! guest mapping made without an address (`mmap(NULL, …)`, and every
//! `mremap` that may move) above the last one, never in a hole left by
//! `munmap`, and always moves a growing `mremap`. Valgrind's address space
//! manager puts such a mapping in the lowest hole that fits and grows an
//! `mremap` in place when the pages after it are free. A program whose
//! allocator maps, unmaps and remaps large blocks (glibc's `malloc` above
//! its mmap threshold) therefore touches fresh lines under QEMU where under
//! Valgrind it meets lines still in the last-level cache: on Lua's
//! benchmark +43 % LL misses.
//!
//! [`Layout`] follows the program's `mmap`, `munmap` and `mremap` calls
//! and gives each mapping QEMU placed an address in a separate model space
//! (from [`MODEL_BASE`]) chosen by Valgrind's rules; data accesses inside
//! such a mapping are moved there ([`Layout::range`]). Mappings QEMU made
//! itself (the program, its interpreter, the stack, `brk`) and those at an
//! address the program chose keep their addresses.

use std::collections::BTreeMap;

/// Where the model space starts: far above what QEMU gives a 64-bit
/// guest (its mappings start at 0x40_0000_0000), below the 47-bit limit,
/// and aligned far beyond any cache's set index.
pub const MODEL_BASE: u64 = 0x1000_0000_0000;

/// Pages, as both emulators map them.
const PAGE: u64 = 4096;

/// A range of guest addresses and the distance to add to move it into the
/// model space (0 for addresses kept as they are): every address in
/// `start..end` becomes `address + delta` (wrapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moved {
    /// First address.
    pub start: u64,
    /// One past the last (`u64::MAX` for the top).
    pub end: u64,
    /// What to add.
    pub delta: u64,
}

/// The guest's placed mappings and the model space they are moved to.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// Guest start → (guest end, model start), non-overlapping.
    guest: BTreeMap<u64, (u64, u64)>,
    /// Model start → (model end, moved by `mremap`), the pages in use,
    /// non-overlapping.
    model: BTreeMap<u64, (u64, bool)>,
    /// Where the model space's first hole starts, above [`MODEL_BASE`].
    offset: u64,
}

fn pages(len: u64) -> u64 {
    len.div_ceil(PAGE).saturating_mul(PAGE)
}

impl Layout {
    /// No mapping moved yet.
    pub fn new() -> Layout {
        Layout::default()
    }

    /// Starts the model space `offset` bytes (modulo 4 GiB) above
    /// [`MODEL_BASE`], as long as nothing has been placed in it; `false`
    /// once something has. Valgrind places the first mapping just above
    /// the program's `brk` segment: with `offset` that address's distance
    /// from the break under QEMU, heap and mappings lie as far apart
    /// modulo 4 GiB as under Valgrind, and meet in the same sets of any
    /// cache.
    pub fn start_at(&mut self, offset: u64) -> bool {
        if !self.model.is_empty() {
            return false;
        }
        self.offset = offset & 0xffff_ffff & !(PAGE - 1);
        true
    }

    /// The range around `addr` with one distance: inside a moved mapping,
    /// or the gap between two.
    pub fn range(&self, addr: u64) -> Moved {
        let below = self.guest.range(..=addr).next_back();
        if let Some((&s, &(e, m))) = below
            && addr < e
        {
            return Moved {
                start: s,
                end: e,
                delta: m.wrapping_sub(s),
            };
        }
        let start = below.map_or(0, |(_, &(e, _))| e);
        let end = self
            .guest
            .range(addr.saturating_add(1)..)
            .next()
            .map_or(u64::MAX, |(&s, _)| s);
        Moved {
            start,
            end,
            delta: 0,
        }
    }

    /// Where `addr` is simulated.
    pub fn translate(&self, addr: u64) -> u64 {
        addr.wrapping_add(self.range(addr).delta)
    }

    /// The lowest hole of `len` bytes in the model space.
    fn first_fit(&self, len: u64) -> u64 {
        let mut at = MODEL_BASE + self.offset;
        for (&s, &(e, _)) in &self.model {
            if s >= at && s - at >= len {
                return at;
            }
            at = at.max(e);
        }
        at
    }

    /// Whether the model pages `start..start + len` are free.
    fn model_free(&self, start: u64, len: u64) -> bool {
        let end = start.saturating_add(len);
        let below = self.model.range(..end).next_back();
        below.is_none_or(|(_, &(e, _))| e <= start)
    }

    fn take_model(&mut self, start: u64, len: u64, moved: bool) {
        if len > 0 {
            self.model.insert(start, (start + len, moved));
        }
    }

    /// Whether Valgrind can grow the mapping at model `start` (moved by
    /// `mremap` or not): it merges a mapping with one that ends where it
    /// starts and asks the kernel to grow both, which works only if the
    /// kernel merged them too, and it does not merge a mapping an `mremap`
    /// moved (its page offset does not follow on).
    fn can_grow(&self, start: u64, moved: bool) -> bool {
        let below = self.model.range(..start).next_back();
        below.is_none_or(|(_, &(e, m))| e != start || !(m || moved))
    }

    /// Frees the model pages `start..end` (parts of ranges included).
    fn free_model(&mut self, start: u64, end: u64) {
        let hit: Vec<(u64, u64, bool)> = self
            .model
            .range(..end)
            .rev()
            .take_while(|&(_, &(e, _))| e > start)
            .map(|(&s, &(e, m))| (s, e, m))
            .collect();
        for (s, e, m) in hit {
            self.model.remove(&s);
            if s < start {
                self.model.insert(s, (start, m));
            }
            if e > end {
                self.model.insert(end, (e, m));
            }
        }
    }

    /// Takes the guest range `start..end` out of the moved mappings; the
    /// model ranges its moved parts had, in guest order.
    fn cut_guest(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let hit: Vec<(u64, u64, u64)> = self
            .guest
            .range(..end)
            .rev()
            .take_while(|&(_, &(e, _))| e > start)
            .map(|(&s, &(e, m))| (s, e, m))
            .collect();
        let mut out = Vec::new();
        for &(s, e, m) in hit.iter().rev() {
            self.guest.remove(&s);
            if s < start {
                self.guest.insert(s, (start, m));
            }
            if e > end {
                self.guest.insert(end, (e, m + (end - s)));
            }
            let (a, b) = (s.max(start), e.min(end));
            out.push((m + (a - s), m + (b - s)));
        }
        out
    }

    /// The program mapped `len` bytes at `addr`; `placed`: QEMU chose the
    /// address (no address asked for, no `MAP_FIXED`). A mapping over
    /// part of a moved one (a library's segments over its reservation)
    /// stays moved with it.
    pub fn mapped(&mut self, addr: u64, len: u64, placed: bool) {
        let len = pages(len);
        if !placed || len == 0 {
            return;
        }
        self.unmapped(addr, len);
        let m = self.first_fit(len);
        self.take_model(m, len, false);
        self.guest.insert(addr, (addr + len, m));
    }

    /// The program unmapped `addr..addr + len`.
    pub fn unmapped(&mut self, addr: u64, len: u64) {
        let end = addr.saturating_add(pages(len));
        for (s, e) in self.cut_guest(addr, end) {
            self.free_model(s, e);
        }
    }

    /// The program's `mremap` moved or resized `old..old + old_len` to
    /// `new..new + new_len`. In the model, as Valgrind does: a shrink
    /// stays, a growth stays if the pages after are free, else the
    /// mapping goes to the lowest hole that fits (looked for while the old
    /// one is still mapped); a growth in place also fails where Valgrind's
    /// fails (`can_grow`). A mapping that was not moved keeps its
    /// addresses if QEMU left it in place, else it is placed anew.
    pub fn remapped(&mut self, old: u64, old_len: u64, new: u64, new_len: u64) {
        let (old_len, new_len) = (pages(old_len), pages(new_len));
        if new_len == 0 {
            return;
        }
        let r = self.range(old);
        let whole = r.delta != 0 && old_len > 0 && old + old_len <= r.end;
        if !whole {
            if new != old || r.delta != 0 {
                self.unmapped(old, old_len);
                self.mapped(new, new_len, true);
            }
            return;
        }
        let m_old = old.wrapping_add(r.delta);
        let moved = self.model.get(&m_old).is_some_and(|&(_, m)| m);
        let m_new = if new_len <= old_len {
            self.free_model(m_old + new_len, m_old + old_len);
            m_old
        } else if self.model_free(m_old + old_len, new_len - old_len) && self.can_grow(m_old, moved)
        {
            self.take_model(m_old + old_len, new_len - old_len, moved);
            m_old
        } else {
            let m = self.first_fit(new_len);
            self.take_model(m, new_len, true);
            self.free_model(m_old, m_old + old_len);
            m
        };
        self.cut_guest(old, old + old_len);
        for (s, e) in self.cut_guest(new, new + new_len) {
            self.free_model(s, e);
        }
        self.guest.insert(new, (new + new_len, m_new));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 4096;

    #[test]
    fn model_space_starts_above_the_brk_segment() {
        let mut l = Layout::new();
        // A break at 0x40_0000_5000 and Valgrind's 8 MiB segment above it.
        assert!(l.start_at(0x40_0000_5000 + 0x80_0000));
        l.mapped(0x40_0100_0000, 33 * K, true);
        assert_eq!(l.translate(0x40_0100_0010), MODEL_BASE + 0x80_5010);
        assert!(!l.start_at(0));
    }

    #[test]
    fn unmapped_holes_are_reused_lowest_first() {
        let mut l = Layout::new();
        l.mapped(0x40_0000_0000, 33 * K, true);
        l.mapped(0x40_0002_1000, 33 * K, true);
        assert_eq!(l.translate(0x40_0000_0010), MODEL_BASE + 0x10);
        assert_eq!(l.translate(0x40_0002_1008), MODEL_BASE + 33 * K + 8);
        l.unmapped(0x40_0000_0000, 33 * K);
        // QEMU places the next one higher; the model reuses the hole.
        l.mapped(0x40_0004_2000, 10 * K, true);
        assert_eq!(l.translate(0x40_0004_2000), MODEL_BASE);
        // What was unmapped keeps its own address.
        assert_eq!(l.translate(0x40_0000_a000), 0x40_0000_a000);
        // Not placed by QEMU: kept.
        l.mapped(0x7000_0000, K, false);
        assert_eq!(l.translate(0x7000_0004), 0x7000_0004);
    }

    #[test]
    fn mremap_grows_in_place_when_the_model_allows() {
        // Valgrind's own trace of Lua's string table (syscalls 25):
        // 0x4b0a000 +0x21000, 0x4b2b000 +0x21000; the first grows to
        // 0x41000 (moves to 0x4b4c000), the second too (0x4b8d000), the
        // first to 0x81000 (0x4bce000), the second to 0x81000 (back to
        // 0x4b0a000), the first to 0x101000 (in place).
        let mut l = Layout::new();
        let g = |i: u64| 0x40_0000_0000 + i * 0x100_0000;
        l.mapped(g(0), 0x21000, true);
        l.mapped(g(1), 0x21000, true);
        l.remapped(g(0), 0x21000, g(2), 0x41000);
        assert_eq!(l.translate(g(2)), MODEL_BASE + 0x42000);
        l.remapped(g(1), 0x21000, g(3), 0x41000);
        assert_eq!(l.translate(g(3)), MODEL_BASE + 0x83000);
        l.remapped(g(2), 0x41000, g(4), 0x81000);
        assert_eq!(l.translate(g(4)), MODEL_BASE + 0xc4000);
        l.remapped(g(3), 0x41000, g(5), 0x81000);
        assert_eq!(l.translate(g(5)), MODEL_BASE);
        l.remapped(g(4), 0x81000, g(6), 0x101000);
        assert_eq!(
            l.translate(g(6) + 0x100000),
            MODEL_BASE + 0xc4000 + 0x100000
        );
        assert_eq!(l.translate(g(4)), g(4));
        // Then 0x21000 lands right after 0x4b0a000's 0x81000 (0x4b8b000)
        // and cannot grow in place, though the pages after it are free:
        // it goes to 0x4ccf000.
        l.mapped(g(7), 0x21000, true);
        assert_eq!(l.translate(g(7)), MODEL_BASE + 0x81000);
        l.remapped(g(7), 0x21000, g(8), 0x41000);
        assert_eq!(l.translate(g(8)), MODEL_BASE + 0x1c5000);
    }

    #[test]
    fn a_fresh_neighbour_does_not_stop_growth_in_place() {
        // Valgrind's trace of sqlite3: 0x4d12000 +0x3000, then 0x4d15000
        // +0x21000 grows in place three times.
        let mut l = Layout::new();
        l.mapped(0x40_0000_0000, 0x3000, true);
        l.mapped(0x40_0010_0000, 0x21000, true);
        l.remapped(0x40_0010_0000, 0x21000, 0x40_0020_0000, 0x41000);
        l.remapped(0x40_0020_0000, 0x41000, 0x40_0030_0000, 0x81000);
        assert_eq!(l.translate(0x40_0030_0000), MODEL_BASE + 0x3000);
    }

    #[test]
    fn partial_unmaps_and_fixed_maps_inside_keep_the_rest() {
        let mut l = Layout::new();
        l.mapped(0x40_0000_0000, 8 * K, true);
        // A segment mapped over the reservation stays where it was moved.
        l.mapped(0x40_0000_2000, 2 * K, false);
        assert_eq!(l.translate(0x40_0000_2000), MODEL_BASE + 2 * K);
        l.unmapped(0x40_0000_2000, 2 * K);
        assert_eq!(l.translate(0x40_0000_2000), 0x40_0000_2000);
        assert_eq!(l.translate(0x40_0000_4000), MODEL_BASE + 4 * K);
        // The freed middle is the first hole that fits two pages.
        l.mapped(0x40_0001_0000, 2 * K, true);
        assert_eq!(l.translate(0x40_0001_0000), MODEL_BASE + 2 * K);
        let r = l.range(0x40_0000_2000);
        assert_eq!(
            (r.start, r.end, r.delta),
            (0x40_0000_2000, 0x40_0000_4000, 0)
        );
    }
}
