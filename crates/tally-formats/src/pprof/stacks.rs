//! Between whole stacks and a part's records.

use tally_model::{Cost, Frame, Profile, Stacks};

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
