//! Between whole stacks and a part's records.

use rustc_hash::FxHashMap;
use tally_model::{CallInfo, Cost, Frame, FrameId, Profile, Stacks};

fn add_into<C: Cost>(sum: &mut [C], costs: &[C]) -> Option<()> {
    for (a, b) in sum.iter_mut().zip(costs) {
        *a = a.checked_add(*b)?;
    }
    Some(())
}

/// Fills the profile's first part (added if there is none) with the self
/// costs and call arcs of its stacks: each stack's costs are the self cost
/// of its leaf frame, and the inclusive cost of each distinct caller →
/// callee arc in it, counted once per stack however often recursion
/// repeats it; an arc's call count is the number of distinct stacks that
/// hold it (sampling does not count calls). Does nothing without stacks.
pub fn derive_records<C: Cost>(profile: &mut Profile<C>) -> Result<(), String> {
    if profile.stacks.is_none() {
        return Ok(());
    }
    if profile.parts.is_empty() {
        profile.add_part();
    }
    let n = profile.events.len();
    let positions = profile.positions;
    let Profile {
        stacks: Some(stacks),
        names,
        parts,
        ..
    } = profile
    else {
        return Ok(());
    };
    let mut selfs: FxHashMap<FrameId, Vec<C>> = FxHashMap::default();
    let mut arcs: FxHashMap<(FrameId, FrameId), (u64, Vec<C>)> = FxHashMap::default();
    let mut seen = Vec::new();
    let overflow = || "the costs of one function add up past 64 bits".to_string();
    for s in &stacks.samples {
        let Some(&leaf) = s.frames.last() else {
            continue;
        };
        let e = selfs.entry(leaf).or_insert_with(|| vec![C::ZERO; n]);
        add_into(e, &s.costs).ok_or_else(overflow)?;
        seen.clear();
        for w in s.frames.windows(2) {
            let arc = (w[0], w[1]);
            if seen.contains(&arc) {
                continue;
            }
            seen.push(arc);
            let e = arcs.entry(arc).or_insert_with(|| (0, vec![C::ZERO; n]));
            e.0 += 1;
            add_into(&mut e.1, &s.costs).ok_or_else(overflow)?;
        }
    }
    let frame = |id: FrameId| stacks.frames[id.index()];
    // Records grouped by function, each function's lines before its calls,
    // in address and line order.
    let key = |f: &Frame| (f.function, f.address, f.line);
    let mut self_list: Vec<(Frame, Vec<C>)> =
        selfs.into_iter().map(|(id, c)| (frame(id), c)).collect();
    self_list.sort_by_key(|(f, _)| key(f));
    let mut arc_list: Vec<(Frame, Frame, u64, Vec<C>)> = arcs
        .into_iter()
        .map(|((a, b), (count, c))| (frame(a), frame(b), count, c))
        .collect();
    arc_list.sort_by_key(|(a, b, _, _)| (key(a), b.function));

    let pos = |f: &Frame| -> Vec<u64> {
        let mut p = vec![0; positions.len()];
        if let Some(i) = positions.instr() {
            p[i] = f.address;
        }
        if let Some(i) = positions.line() {
            p[i] = u64::from(f.line);
        }
        p
    };
    let file_of = |f: &Frame| names.key(f.function).file;
    let part = &mut parts[0];
    let (mut si, mut ai) = (0, 0);
    while si < self_list.len() || ai < arc_list.len() {
        let take_self = match (self_list.get(si), arc_list.get(ai)) {
            (Some(s), Some(a)) => s.0.function <= a.0.function,
            (s, _) => s.is_some(),
        };
        if take_self {
            let (f, c) = &self_list[si];
            part.lines.push(f.function, file_of(f), &pos(f), c);
            si += 1;
        } else {
            let (a, b, count, c) = &arc_list[ai];
            let info = CallInfo {
                caller: a.function,
                site_file: file_of(a),
                callee: b.function,
                count: C::from_u64(*count).ok_or_else(overflow)?,
                seq: part.next_seq(),
            };
            let target = pos(&Frame {
                line: 0,
                address: 0,
                ..*b
            });
            part.calls.push(info, &pos(a), &target, c);
            ai += 1;
        }
    }
    Ok(())
}

/// Stacks of one frame each, from the self costs of a profile without
/// stacks (Callgrind, Cachegrind): what a stack format can hold of it when
/// no stacks are estimated. `None` if a sum overflows.
pub fn self_cost_stacks<C: Cost>(profile: &Profile<C>) -> Option<Stacks<C>> {
    let mut stacks = Stacks::default();
    let positions = profile.positions;
    let mut failed = false;
    for part in &profile.parts {
        part.lines.for_each(|l| {
            let frame = stacks.frame(Frame {
                function: l.function,
                line: positions
                    .line()
                    .and_then(|i| u32::try_from(l.positions[i]).ok())
                    .unwrap_or(0),
                address: positions.instr().map_or(0, |i| l.positions[i]),
            });
            failed |= stacks.add(&[frame], l.costs).is_none();
        });
    }
    (!failed).then_some(stacks)
}

/// The note a stack format's output carries when the profile had no
/// stacks and its self costs were written as one-frame samples.
pub const SELF_COST_NOTE: &str = "tally: the input holds no call stacks; each sample is one \
                                  function's self cost (inclusive costs are not shown)";

/// The stacks to write for a profile: its own, or one-frame samples of its
/// self costs with [`SELF_COST_NOTE`].
pub(crate) fn stacks_to_write<C: Cost>(
    profile: &Profile<C>,
) -> std::io::Result<(std::borrow::Cow<'_, Stacks<C>>, Option<&'static str>)> {
    match &profile.stacks {
        Some(s) => Ok((std::borrow::Cow::Borrowed(s), None)),
        None => match self_cost_stacks(profile) {
            Some(s) => Ok((std::borrow::Cow::Owned(s), Some(SELF_COST_NOTE))),
            None => Err(std::io::Error::other(
                "a function's self cost adds up past 64 bits",
            )),
        },
    }
}
