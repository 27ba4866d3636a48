//! The sink that keeps every record of a read.

use super::ReadOutcome;
use crate::error::Warnings;
use tally_model::{
    CallInfo, Calls, Cost, CostLines, FileId, FunctionId, JumpInfo, Jumps, Positions, Profile,
    Renumbering, Sink,
};

/// A sink that keeps everything: the records become the parts of a profile.
#[derive(Default)]
pub struct ProfileSink<C: Cost> {
    parts: Vec<(CostLines<C>, Calls<C>, Jumps<C>)>,
}

impl<C: Cost> ProfileSink<C> {
    /// The whole profile: the read's header facts with the records kept
    /// here, and the read's warnings.
    pub fn into_profile(self, read: ReadOutcome<C>) -> (Profile<C>, Warnings) {
        let mut profile = read.profile;
        for (part, (lines, calls, jumps)) in profile.parts.iter_mut().zip(self.parts) {
            part.lines = lines;
            part.calls = calls;
            part.jumps = jumps;
        }
        (profile, read.warnings)
    }

    /// Takes the records of a sink that a second reader filled from a
    /// later region of the same input, as [`Sink::absorb`] describes,
    /// keeping those whose file `keep` admits (in this reader's ids): the
    /// stores end as if every record had come to this sink in order.
    ///
    /// [`Sink::split`] stays `None` for whole loads: taking a region back
    /// codes its lines again, which for a sink that keeps every line
    /// holds the region twice for a while. A sink that keeps only some
    /// records (annotate's) splits and calls this.
    pub fn append(
        &mut self,
        later: ProfileSink<C>,
        ids: &Renumbering,
        mut keep: impl FnMut(FileId) -> bool,
    ) {
        let function = |f: FunctionId| ids.functions[f.index()];
        let file = |f: FileId| ids.files[f.index()];
        let Some((lines, calls, jumps)) = self.parts.last_mut() else {
            return;
        };
        for (l, c, j) in later.parts {
            // A run of one function and file is kept or left whole, and
            // one left is not decoded.
            for (b, block) in l.blocks().iter().enumerate() {
                let f = file(block.file);
                if keep(f) {
                    let g = function(block.function);
                    l.for_each_in_block(b, |r| lines.push(g, f, r.positions, r.costs));
                }
            }
            for r in c.iter() {
                let info = CallInfo {
                    caller: function(r.info.caller),
                    site_file: file(r.info.site_file),
                    callee: function(r.info.callee),
                    seq: r.info.seq + ids.seq,
                    ..r.info
                };
                if keep(info.site_file) {
                    calls.push(info, r.site, r.target, r.inclusive);
                }
            }
            for r in j.iter() {
                let info = JumpInfo {
                    function: function(r.info.function),
                    file: file(r.info.file),
                    target_function: function(r.info.target_function),
                    target_file: file(r.info.target_file),
                    seq: r.info.seq + ids.seq,
                    ..r.info
                };
                jumps.push(info, r.source, r.target);
            }
        }
    }
}

impl<C: Cost> Sink<C> for ProfileSink<C> {
    fn start_part(&mut self, positions: Positions, events: usize) {
        self.parts.push((
            CostLines::new(positions, events),
            Calls::new(positions, events),
            Jumps::new(positions),
        ));
    }
    #[inline]
    fn line(&mut self, function: FunctionId, file: FileId, positions: &[u64], costs: &[C]) {
        let p = self.parts.last_mut().expect("part started");
        p.0.push(function, file, positions, costs);
    }
    fn call(&mut self, info: CallInfo<C>, site: &[u64], target: &[u64], inclusive: &[C]) {
        let p = self.parts.last_mut().expect("part started");
        p.1.push(info, site, target, inclusive);
    }
    fn jump(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]) {
        let p = self.parts.last_mut().expect("part started");
        p.2.push(info, source, target);
    }
    fn held_bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|(l, c, j)| l.heap_bytes() + c.heap_bytes() + j.heap_bytes())
            .sum()
    }
}
