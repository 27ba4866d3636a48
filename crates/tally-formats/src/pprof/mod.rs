//! pprof profiles: profile.proto messages, usually gzip'd, as Go's
//! `runtime/pprof` and `go tool pprof` write them.
//!
//! Reading keeps what pprof shows: every sample type is an event (its unit
//! in the event's long name, `cpu (nanoseconds)`), every location a run of
//! frames (inlined functions expanded, innermost last, as pprof lists
//! them), and every sample a whole stack in [`Profile::stacks`]; the self
//! costs and call arcs of the profile's one part are derived from the
//! stacks. Writing does the reverse: every recorded event is a sample
//! type, and the stacks are written as they are; a profile without stacks
//! (Callgrind, Cachegrind) is written as one-frame samples of self costs,
//! and a comment in the file says so (docs/interchange.md).
//!
//! Profile facts that have no place in the model (period, duration, time,
//! comments, the default sample type) are kept as the part's `desc:`
//! lines, so that they come back when the profile is written as pprof.

mod read;
mod stacks;
mod wire;
mod write;

pub use read::{read, read_as};
pub(crate) use stacks::stacks_to_write;
pub use stacks::{SELF_COST_NOTE, self_cost_stacks};
pub use write::write;

use tally_model::Profile;

/// `desc:` keys under which pprof facts are kept.
pub(crate) mod desc {
    /// The sampling period: `<n> <type>/<unit>`.
    pub const PERIOD: &[u8] = b"pprof period";
    /// The profile's duration in nanoseconds.
    pub const DURATION: &[u8] = b"pprof duration ns";
    /// When the profile was taken, nanoseconds since the epoch.
    pub const TIME: &[u8] = b"pprof time ns";
    /// A comment of the profile (one line each).
    pub const COMMENT: &[u8] = b"pprof comment";
    /// The sample type pprof shows first.
    pub const DEFAULT_TYPE: &[u8] = b"pprof default sample type";
}

/// The comment of a profile whose stacks were estimated from its
/// caller→callee arcs (`tally_analysis::estimate_stacks`) rather than
/// recorded: written into pprof files, and into speedscope's title.
pub const ESTIMATED_NOTE: &str = "tally: stacks estimated from caller->callee arcs, not \
                                  recorded: each function's cost is split across its callers in \
                                  proportion to the calls' costs; recursion is collapsed";

/// Gives `profile` estimated `stacks`, with [`ESTIMATED_NOTE`] as a comment
/// of its first part, which pprof and speedscope output carry.
pub fn set_estimated_stacks<C: tally_model::Cost>(
    profile: &mut Profile<C>,
    stacks: tally_model::Stacks<C>,
) {
    if profile.parts.is_empty() {
        profile.add_part();
    }
    profile.parts[0]
        .info
        .desc
        .push((desc::COMMENT.to_vec(), ESTIMATED_NOTE.as_bytes().to_vec()));
    profile.stacks = Some(stacks);
}

/// Whether the profile's stacks were estimated ([`set_estimated_stacks`]).
pub fn stacks_estimated<C>(profile: &Profile<C>) -> bool {
    desc_values(profile, desc::COMMENT).any(|c| c == ESTIMATED_NOTE.as_bytes())
}

/// The unit of an event kept by the reader in its long name
/// (`cpu (nanoseconds)`), if it has one.
pub fn event_unit<'a>(name: &str, long_name: Option<&'a str>) -> Option<&'a str> {
    let rest = long_name?.strip_prefix(name)?.strip_prefix(" (")?;
    rest.strip_suffix(')')
}

/// The values of a `desc:` key in the profile's first part.
pub(crate) fn desc_values<'a, C>(
    profile: &'a Profile<C>,
    key: &'a [u8],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    profile
        .parts
        .first()
        .into_iter()
        .flat_map(|p| p.info.desc.iter())
        .filter(move |(k, _)| k == key)
        .map(|(_, v)| v.as_slice())
}

/// Whether decompressed bytes start like a profile.proto message: the
/// first fields (up to 8, or to the end of `head`) have the numbers and
/// wire types of the Profile message's fields. Go writes `time_nanos`
/// first, other writers `sample_type`; text never passes (its first byte
/// would be a wire type pprof does not use, or a field past 14).
pub fn looks_like_pprof(head: &[u8]) -> bool {
    let mut fields = wire::Fields::new(wire::Slice {
        bytes: head,
        offset: 0,
    });
    let mut seen = 0;
    while seen < 8 {
        match fields.next_field() {
            Ok(Some((n, v, _))) => {
                let ok = match v {
                    wire::Value::Bytes(_) => matches!(n, 1..=6 | 11 | 13),
                    wire::Value::Varint(_) => matches!(n, 7..=10 | 12..=14),
                    wire::Value::Fixed => false,
                };
                if !ok {
                    return false;
                }
                seen += 1;
            }
            Ok(None) => break,
            // The head may end inside a field: what came before decides.
            Err(_) => break,
        }
    }
    seen > 0
}

/// The pprof format, as a reader and a writer of the one shape
/// ([`crate::ReadProfile`], [`crate::WriteProfile`]).
pub struct Pprof;

impl crate::shape::ReadProfile for Pprof {
    fn read(
        &self,
        path: &std::path::Path,
        bytes: &[u8],
    ) -> Result<tally_model::AnyProfile, crate::Error> {
        read(path, bytes)
    }
}

impl<C: tally_model::Cost> crate::shape::WriteProfile<C> for Pprof {
    fn write(
        &self,
        profile: &tally_model::Profile<C>,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        write(profile, out)
    }
}
