//! The fast path for cost lines: runs of plain cost lines and the line
//! after `calls=` or a jump, read straight from the padded chunk with the
//! context in locals, and the number scanners they use (eight digits at a
//! time). Every function either reads the whole line as the careful path
//! would, or declines (`None`, or stops the run) before changing anything,
//! so that the careful path reads the line again and reports its errors.

use super::pipeline::Decoded;
use super::sums::{add_magnitudes, sub_magnitudes};
use super::{Parser, Pending, is_space};
use tally_model::{Cost, FunctionId, Sink};

impl<C: Cost, S: Sink<C>> Parser<'_, '_, C, S> {
    /// Reads a run of plain cost lines of one function straight from the
    /// chunk, keeping the context in locals; stops at the first line that is
    /// anything else or unusual (see [`scan_cost_line`]) and returns where.
    #[inline(never)]
    pub(super) fn fast_run(&mut self, data: &[u8], p: usize, len: usize) -> usize {
        // One event, the shape of instruction-level profiles: lines read
        // with the positions and the count in registers; a line it stops
        // at is read again below.
        let p =
            match (self.ne, self.np) {
                (1, 1) => self
                    .one_event_run::<1>(p, len, |p, last| one_count_line::<1>(data, p, len, last)),
                (1, 2) => self
                    .one_event_run::<2>(p, len, |p, last| one_count_line::<2>(data, p, len, last)),
                (1, 3) => self
                    .one_event_run::<3>(p, len, |p, last| one_count_line::<3>(data, p, len, last)),
                _ => p,
            };
        let np = self.np;
        self.cost_run(p, len, |p, last, costs| {
            scan_cost_line(data, p, len, np, last, costs)
        })
    }

    /// A run of cost lines for one event and `NP` positions, the common
    /// shape of instruction-level profiles: `next(p, last)` reads the line
    /// at `p` against the positions `last`, giving its positions, its
    /// count if any and its end, or `None` to stop there. The same lines
    /// are taken and the same records made as by [`Parser::cost_run`],
    /// with the sums checked against what room is left at the run's start.
    /// The counts are never negative, so the sums only grow along a run: a
    /// line fits both the running magnitudes
    /// ([`add_magnitudes`](super::sums::add_magnitudes)) and the part's
    /// total ([`add_totals`]) exactly when the run's sum up to it fits the
    /// smaller room, one comparison instead of two checked sums a line; the
    /// run stops at a line that does not, for the checked path.
    #[inline(always)]
    pub(super) fn one_event_run<const NP: usize>(
        &mut self,
        mut p: usize,
        len: usize,
        mut next: impl FnMut(usize, [u64; 3]) -> Option<([u64; 3], Option<u64>, usize)>,
    ) -> usize {
        let Some(function) = self.run_function() else {
            return p;
        };
        let fi = self.fi;
        let mut last = self.last;
        let Parser {
            stats,
            costs,
            sink,
            sums,
            ..
        } = self;
        let stats = stats.last_mut().expect("part");
        let (Some(total), Some(sum), Some(cost)) = (
            stats.totals.first_mut(),
            sums.costs.first_mut(),
            costs.first_mut(),
        ) else {
            return p;
        };
        // Carried sums past this cost type's room: the general path reads
        // the lines (and declines them).
        let Some(room) = room_left(std::slice::from_ref(sum), std::slice::from_ref(total)) else {
            return p;
        };
        let mut run = 0u64;
        let mut lines = 0u64;
        // Whether a line of the run has a count (for a sink that takes the
        // run as one line, see `Sink::EACH_LINE`).
        let mut counted = false;
        while p < len {
            let Some((pos, c, end)) = next(p, last) else {
                break;
            };
            let one = match c {
                Some(c) => {
                    let Some(x) = run.checked_add(c).filter(|&x| x <= room) else {
                        break;
                    };
                    let Some(c) = C::from_u64(c) else {
                        break;
                    };
                    run = x;
                    *cost = c;
                    true
                }
                None => false,
            };
            if S::EACH_LINE {
                let taken: &[C] = if one { std::slice::from_ref(cost) } else { &[] };
                sink.line(function, fi, &pos[..NP], taken);
            }
            counted |= one;
            last = pos;
            lines += 1;
            p = end + 1;
        }
        if lines > 0 {
            // Within the room computed above, so it fits.
            let r = C::from_u64(run).expect("within the room left");
            if !S::EACH_LINE {
                *cost = r;
                let taken: &[C] = if counted {
                    std::slice::from_ref(cost)
                } else {
                    &[]
                };
                sink.line(function, fi, &last[..NP], taken);
            }
            *sum += run;
            *total = total.checked_add(r).expect("within the room left");
        }
        self.end_run(lines, last);
        p
    }

    /// The loop of [`Parser::fast_run`] and of the two-thread reader's
    /// `decoded_run`: `next(p, last, costs)` reads the cost line at `p`
    /// against the positions `last`, giving its positions, its number of
    /// counts (in `costs`) and its end, or `None` to stop there. A line is
    /// taken only when its sums fit, so `last` moves only with it.
    #[inline(always)]
    pub(super) fn cost_run(
        &mut self,
        mut p: usize,
        len: usize,
        mut next: impl FnMut(usize, [u64; 3], &mut [C]) -> Option<([u64; 3], usize, usize)>,
    ) -> usize {
        let Some(function) = self.run_function() else {
            return p;
        };
        let (np, fi) = (self.np, self.fi);
        let mut last = self.last;
        let Parser {
            stats,
            costs,
            sink,
            sums,
            ..
        } = self;
        let stats = stats.last_mut().expect("part");
        let totals = &mut stats.totals[..];
        let sums = &mut sums.costs[..];
        let mut lines = 0u64;
        // While the lines taken since `room` was measured add at most
        // `room` to any sum, no sum can pass the cost type's largest
        // magnitude: their counts are added without a check each, and the
        // checked sums (which would have passed) are left for the line
        // that could reach it.
        let mut room = room_left(sums, totals);
        let mut used = 0u64;
        while p < len {
            let Some((pos, n, end)) = next(p, last, costs) else {
                break;
            };
            let line = &costs[..n];
            // At least the largest magnitude of the line.
            let most = line.iter().fold(0u64, |m, c| m | c.magnitude());
            match room.and_then(|r| used.checked_add(most).filter(|&u| u <= r)) {
                Some(u) => {
                    for ((s, t), &c) in sums.iter_mut().zip(totals.iter_mut()).zip(line) {
                        *s = s.wrapping_add(c.magnitude());
                        *t = t.overflowing_add(c).0;
                    }
                    used = u;
                }
                None => {
                    if !add_magnitudes(sums, line) {
                        break;
                    }
                    if !add_totals(totals, line) {
                        sub_magnitudes(sums, line);
                        break;
                    }
                    room = room_left(sums, totals);
                    used = 0;
                }
            }
            sink.line(function, fi, &pos[..np], line);
            last = pos;
            lines += 1;
            p = end + 1;
        }
        self.end_run(lines, last);
        p
    }

    /// The function of a run of cost lines starting here, or `None` where
    /// no run can start (before the first part, or while a call or jump
    /// waits for its line). After `fn=` the function is resolved here, as
    /// the careful path would on this line (the same interning, in the
    /// same order).
    #[inline(always)]
    pub(super) fn run_function(&mut self) -> Option<FunctionId> {
        if !self.started || !matches!(self.pending, Pending::None) {
            return None;
        }
        self.function.or_else(|| self.current_function().ok())
    }

    /// Counts a run of `lines` cost lines taken, the last at `last`.
    #[inline(always)]
    pub(super) fn end_run(&mut self, lines: u64, last: [u64; 3]) {
        if lines > 0 {
            self.stats.last_mut().expect("part").lines += lines;
            self.last = last;
            self.line_no += lines;
            self.seq += lines;
            self.in_body = true;
        }
    }

    /// The line after `calls=` or a jump line, when it is in the usual form;
    /// `None` sends it to the careful path.
    #[inline]
    pub(super) fn fast_pending_line(
        &mut self,
        data: &[u8],
        p: usize,
        len: usize,
        decoded: Option<&mut Decoded<'_>>,
    ) -> Option<usize> {
        if matches!(self.pending, Pending::None) || !self.started {
            return None;
        }
        let function = self.function?;
        let (np, last) = (self.np, self.last);
        // The decoded line where the reading thread made one; it reads as
        // the text would, so a line it declines is declined below too.
        let (pos, n, end) = match decoded.and_then(|d| d.cost_line(p, np, last, &mut self.costs)) {
            Some(line) => line,
            None => scan_cost_line(data, p, len, np, last, &mut self.costs)?,
        };
        match self.pending {
            Pending::Call { count, .. } => {
                if !self.sums.add_call(count, &self.costs[..n]) {
                    return None;
                }
                self.line_no += 1;
                self.in_body = true;
                self.emit_call(function, &pos, n);
            }
            Pending::Jump { .. } if n == 0 => {
                let Pending::Jump { info, target, .. } =
                    std::mem::replace(&mut self.pending, Pending::None)
                else {
                    unreachable!("matched above")
                };
                self.line_no += 1;
                self.in_body = true;
                self.emit_jump(info, &pos, &target);
            }
            _ => return None,
        }
        Some(end + 1)
    }
}

/// The common case of a number: up to 19 decimal digits (which cannot
/// overflow) followed by a space or the end. Anything else (hex, `.`, a sign,
/// more digits, garbage) takes the careful path.
#[inline(always)]
pub(super) fn fast_decimal(s: &[u8], i: usize) -> Option<(u64, usize)> {
    if s.get(i) == Some(&b'0') && s.get(i + 1) == Some(&b'x') {
        return fast_hex(s, i + 2);
    }
    let mut j = i;
    let mut v = 0u64;
    while j < s.len() {
        let d = s[j].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        j += 1;
    }
    let n = j - i;
    if n == 0 || n > 19 || (j < s.len() && !is_space(s[j])) {
        return None;
    }
    Some((v, j))
}

/// The value of a hexadecimal digit.
#[inline(always)]
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Up to 16 hexadecimal digits at `s[i..]` (after `0x`), ending at a space or
/// the end.
#[inline]
pub(super) fn fast_hex(s: &[u8], i: usize) -> Option<(u64, usize)> {
    let mut j = i;
    let mut v = 0u64;
    while let Some(d) = s.get(j).and_then(|&b| hex_digit(b)) {
        v = (v << 4) | u64::from(d);
        j += 1;
    }
    let n = j - i;
    if n == 0 || n > 16 || (j < s.len() && !is_space(s[j])) {
        return None;
    }
    Some((v, j))
}

/// Reads the positions and counts of a cost line at `data[p..]` in the forms
/// Valgrind writes (single spaces, decimal or `0x` numbers, `+n`, `-n`, `*`),
/// straight from the chunk (the line ends at `\n` or `len`; `data` is
/// padded). Returns the positions, the number of counts put in `costs`, and
/// the index of the line's end; `None` for anything else (other line kinds,
/// tabs or several spaces, `.`, signs, `\r`, too many counts, numbers too
/// large), which the careful path then reads and reports.
#[inline(always)]
pub(super) fn scan_cost_line<C: Cost>(
    data: &[u8],
    p: usize,
    len: usize,
    np: usize,
    last: [u64; 3],
    costs: &mut [C],
) -> Option<([u64; 3], usize, usize)> {
    let (pos, mut i) = positions_at(data, p, np, last)?;
    let mut n = 0;
    if data[i] == b' ' {
        i += 1;
        loop {
            let b = data[i];
            if b == b'\n' {
                break;
            }
            let slot = costs.get_mut(n)?;
            // One digit and a space: three counts in four of a Cachegrind
            // line, taken without reading the space again.
            let d = b.wrapping_sub(b'0');
            if d <= 9 && data[i + 1] == b' ' {
                *slot = C::from_u64(u64::from(d))?;
                n += 1;
                i += 2;
                continue;
            }
            let (v, j) = number(data, i)?;
            *slot = C::from_u64(v)?;
            n += 1;
            i = j;
            if data[i] != b' ' {
                break;
            }
            i += 1;
        }
    }
    if i < len && data[i] != b'\n' {
        return None;
    }
    Some((pos, n, i))
}

/// [`scan_cost_line`] for `NP` positions and at most one count: the
/// positions, the count if any and the index of the line's end; `None`
/// wherever [`scan_cost_line`] with room for one count declines the line.
#[inline(always)]
fn one_count_line<const NP: usize>(
    data: &[u8],
    p: usize,
    len: usize,
    last: [u64; 3],
) -> Option<([u64; 3], Option<u64>, usize)> {
    let (pos, mut i) = positions_at(data, p, NP, last)?;
    let mut count = None;
    if data[i] == b' ' && data[i + 1] != b'\n' {
        let (v, j) = number(data, i + 1)?;
        count = Some(v);
        i = j;
        // One space may end the line; anything after it is a second
        // count, which one event has no room for.
        if data[i] == b' ' {
            i += 1;
            if data[i] != b'\n' {
                return None;
            }
        }
    } else if data[i] == b' ' {
        i += 1;
    }
    if i < len && data[i] != b'\n' {
        return None;
    }
    Some((pos, count, i))
}

/// The `np` (one to three) positions that start a cost line at `data[p..]`,
/// each relative to the last line's, and the index after them; `None` for
/// a line that does not start with one or forms the fast path declines.
#[inline(always)]
fn positions_at(data: &[u8], p: usize, np: usize, last: [u64; 3]) -> Option<([u64; 3], usize)> {
    if !matches!(data[p], b'0'..=b'9' | b'+' | b'-' | b'*') {
        return None;
    }
    // Unrolled over the (at most three) positions so that they stay in
    // registers: partial writes to an array on the stack followed by a
    // whole-array copy stall store forwarding.
    let (p0, mut i) = subposition_at(data, p, last[0])?;
    let mut pos = [p0, last[1], last[2]];
    if np > 1 {
        if data[i] != b' ' {
            return None;
        }
        let (p1, j) = subposition_at(data, i + 1, last[1])?;
        pos[1] = p1;
        i = j;
        if np > 2 {
            if data[i] != b' ' {
                return None;
            }
            let (p2, j) = subposition_at(data, i + 1, last[2])?;
            pos[2] = p2;
            i = j;
        }
    }
    Some((pos, i))
}

/// One subposition (`*`, `+n`, `-n`, `n`, `0xn`) at `data[i..]` relative to
/// `base`, in the fast forms only.
#[inline(always)]
pub(super) fn subposition_at(data: &[u8], i: usize, base: u64) -> Option<(u64, usize)> {
    match data[i] {
        b'*' => Some((base, i + 1)),
        b'+' => {
            let (d, j) = number(data, i + 1)?;
            Some((base.checked_add(d)?, j))
        }
        b'-' => {
            let (d, j) = number(data, i + 1)?;
            Some((base.checked_sub(d)?, j))
        }
        _ => number(data, i),
    }
}

/// How much any running sum of magnitudes and any part total can still
/// grow before one passes the cost type's largest magnitude: a set of
/// lines whose largest magnitudes add up to no more fits both
/// ([`add_magnitudes`] and [`add_totals`] would take each of them), since
/// a total's magnitude grows by at most the magnitude added. `None` when
/// a sum is already past it (carried from files read before): every line
/// then takes the checked sums, which decline it.
#[inline]
pub(super) fn room_left<C: Cost>(sums: &[u64], totals: &[C]) -> Option<u64> {
    sums.iter().zip(totals).try_fold(u64::MAX, |room, (&s, t)| {
        let s = C::MAX_MAGNITUDE.checked_sub(s)?;
        let t = C::MAX_MAGNITUDE.checked_sub(t.magnitude())?;
        Some(room.min(s).min(t))
    })
}

/// Adds a line's costs to the totals; on overflow undoes what it added and
/// returns false, so that the careful path can report it.
#[inline(always)]
pub(super) fn add_totals<C: Cost>(totals: &mut [C], costs: &[C]) -> bool {
    for (k, &c) in costs.iter().enumerate() {
        match totals[k].checked_add(c) {
            Some(v) => totals[k] = v,
            None => {
                for (t, &c) in totals.iter_mut().zip(&costs[..k]) {
                    *t = t.checked_sub(c).expect("just added");
                }
                return false;
            }
        }
    }
    true
}

/// A decimal number at `data[i..]` that ends at a space or a newline (or
/// the padding): one digit directly, longer ones eight digits at a time.
#[inline(always)]
pub(super) fn number(data: &[u8], i: usize) -> Option<(u64, usize)> {
    let d = data[i].wrapping_sub(b'0');
    let next = data[i + 1];
    let (v, j) = if d <= 9 && (next == b' ' || next == b'\n') {
        (u64::from(d), i + 1)
    } else if d <= 9 && next.wrapping_sub(b'0') <= 9 && matches!(data[i + 2], b' ' | b'\n') {
        // Two digits, common enough (small deltas, counts) to skip the
        // eight-digit combination.
        (u64::from(d) * 10 + u64::from(next - b'0'), i + 2)
    } else if d == 0 && next == b'x' {
        // Jump targets and calls' addresses: read in place, as
        // [`fast_hex`] reads them up to the next space or newline (a
        // search for that end costs more than the digits).
        let mut j = i + 2;
        let mut v = 0u64;
        while let Some(d) = data.get(j).and_then(|&b| hex_digit(b)) {
            v = (v << 4) | u64::from(d);
            j += 1;
        }
        let n = j - (i + 2);
        if n == 0 || n > 16 || !matches!(data.get(j), Some(b' ' | b'\n')) {
            return None;
        }
        (v, j)
    } else {
        swar_decimal(data, i)?
    };
    match data[j] {
        b' ' | b'\n' | 0 => Some((v, j)),
        _ => None,
    }
}

/// Reads up to 19 decimal digits at `data[i..]` (which has 8 readable bytes
/// past any digit, see `input::PAD`), eight at a time. `None` if there is no
/// digit or more than 19 (the careful path then checks for overflow).
#[inline(always)]
pub(super) fn swar_decimal(data: &[u8], i: usize) -> Option<(u64, usize)> {
    let (v, n) = eight_digits(data, i);
    if n == 0 {
        return None;
    }
    if n < 8 {
        return Some((v, i + n));
    }
    // Long numbers (addresses, large counts): continue byte by byte.
    let mut v = v;
    let mut j = i + 8;
    while let Some(d) = data
        .get(j)
        .map(|b| b.wrapping_sub(b'0'))
        .filter(|d| *d <= 9)
    {
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        j += 1;
    }
    if j - i > 19 {
        return None;
    }
    Some((v, j))
}

/// The value and count of the leading decimal digits of `data[i..i + 8]`
/// (at most 8), without a branch per digit.
#[inline(always)]
fn eight_digits(data: &[u8], i: usize) -> (u64, usize) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let chunk: [u8; 8] = match data.get(i..i + 8) {
        Some(c) => c.try_into().expect("8 bytes"),
        None => {
            let mut c = [0u8; 8];
            let rest = &data[i.min(data.len())..];
            c[..rest.len()].copy_from_slice(rest);
            c
        }
    };
    let x = u64::from_le_bytes(chunk);
    // A byte is a digit if its high nibble is 3 and its low nibble is < 10.
    let high = (x & (0xF0 * ONES)) ^ (0x30 * ONES);
    let low = ((x & (0x0F * ONES)) + (0x06 * ONES)) & (0xF0 * ONES);
    let bad = high | low;
    // Set the top bit of every non-zero byte of `bad`.
    let flags = (((bad & (0x7F * ONES)) + (0x7F * ONES)) | bad) & (0x80 * ONES);
    let n = (flags.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // Right-align the n digits in the 8 bytes (leading zeros) and combine
    // them pairwise: 8 digits to 4 two-digit, 2 four-digit, 1 value.
    let mut d = (x & (0x0F * ONES)) << (8 * (8 - n));
    d = (d * 10 + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    d = (d * 100 + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
    d = (d * 10000 + (d >> 32)) & 0xFFFF_FFFF;
    (d, n)
}
