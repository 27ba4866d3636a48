//! Building a profile from whole stacks, for the readers of stack formats
//! (folded stacks, `perf script` text, perf.data).
//!
//! The readers name frames and add stacks; [`StackProfile::finish`] then
//! derives the one part every report reads (self cost at the leaf, arcs
//! counted once per stack: [`tally_model::Stacks::derive_part`]) and keeps
//! the stacks beside it.

use tally_model::{
    Events, Format, Frame, FrameId, FunctionId, FunctionKey, Positions, Profile, Stacks,
};

/// A profile being built from stacks, with `u64` costs.
pub(crate) struct StackProfile {
    profile: Profile<u64>,
    stacks: Stacks<u64>,
    cmd: Option<Vec<u8>>,
}

impl StackProfile {
    /// An empty profile; its events are given at the end, and every stack
    /// added has one cost for each of them.
    pub(crate) fn new(positions: Positions, creator: &[u8]) -> Self {
        let mut profile = Profile::new(Format::Callgrind, Events::default(), positions);
        profile.creator = Some(creator.to_vec());
        StackProfile {
            profile,
            stacks: Stacks::default(),
            cmd: None,
        }
    }

    /// The function `name` of `object` and `file` (empty when unknown: the
    /// file is then `???`, as Valgrind writes an unknown file, which
    /// callgrind_annotate expects). `None` when the name tables are full.
    pub(crate) fn function(
        &mut self,
        object: &[u8],
        file: &[u8],
        name: &[u8],
    ) -> Option<FunctionId> {
        let file = if file.is_empty() { b"???" } else { file };
        let n = &mut self.profile.names;
        let key = FunctionKey {
            object: tally_model::ObjectId(n.objects.try_intern(object)?),
            file: tally_model::FileId(n.files.try_intern(file)?),
            name: tally_model::SymbolId(n.symbols.try_intern(name)?),
        };
        n.try_function(key)
    }

    /// The frame of `function` at `line` and `address` (0 when unknown).
    pub(crate) fn frame(&mut self, function: FunctionId, line: u32, address: u64) -> FrameId {
        self.stacks.frame(Frame {
            function,
            line,
            address,
        })
    }

    /// Adds `costs` to the stack `frames`, root first. `None` on overflow.
    pub(crate) fn add(&mut self, frames: &[FrameId], costs: &[u64]) -> Option<()> {
        self.stacks.add(frames, costs)
    }

    /// The stacks being built, for a reader that adds timed samples.
    pub(crate) fn stacks_mut(&mut self) -> &mut Stacks<u64> {
        &mut self.stacks
    }

    /// Sets the command the profile is of (the part's `cmd:`).
    pub(crate) fn set_cmd(&mut self, cmd: Vec<u8>) {
        self.cmd = Some(cmd);
    }

    /// The profile of `events`: one part derived from the stacks, and the
    /// stacks. `None` if the costs sum to more than 64 bits hold.
    pub(crate) fn finish(self, events: Events) -> Option<Profile<u64>> {
        let StackProfile {
            mut profile,
            stacks,
            cmd,
        } = self;
        profile.events = events;
        stacks.totals(profile.events.len())?;
        let mut part = tally_model::Part::new(profile.positions, profile.events.len());
        stacks.derive_part(&profile.names, profile.positions, &mut part)?;
        part.info.cmd = cmd;
        profile.parts.push(part);
        profile.stacks = Some(stacks);
        Some(profile)
    }
}
