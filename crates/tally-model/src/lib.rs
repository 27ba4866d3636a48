//! The profile model of tally.
//!
//! A [`Profile`] is what every reader produces and every writer consumes:
//! header facts, [`Events`], the [`Positions`] kind, interned [`Names`], and
//! one or more [`Part`]s holding self-cost lines, call arcs and jumps. The
//! model does no I/O. It is generic over the [`Cost`] type so that signed
//! profiles (differences) share all code with measured ones.
#![deny(missing_docs)]

mod any;
mod cost;
mod error;
mod events;
mod names;
mod part;
mod rules;
mod sink;
mod stacks;

pub use any::{AnyCost, AnyProfile};
pub use cost::{Cost, NumberError, parse_u64, thousands};
pub use error::Error;
pub use events::{
    DerivedEvent, Event, EventRef, Events, Formula, Term, parse_expression, parse_formula,
};
pub use names::{FileId, FunctionId, FunctionKey, Interner, Names, ObjectId, SymbolId};
pub use part::{
    Block, CallInfo, CallRef, Calls, CostLines, JumpInfo, JumpRef, Jumps, LineCursor, LineRef,
    Part, PartInfo, PartVisitor,
};
pub use rules::{EventColumns, EventValue, UnknownEvent, program_total, stated_total};
pub use sink::{NullSink, Renumbering, Sink};
pub use stacks::{Frame, FrameId, Label, LabelSetId, LabelValue, Sample, Stacks, Thread, Timeline};

/// Which subpositions start every cost line: any of `instr`, `bb`, `line`,
/// in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Positions(u8);

impl Positions {
    const INSTR_BIT: u8 = 1;
    const BB_BIT: u8 = 2;
    const LINE_BIT: u8 = 4;

    /// `positions: line`, the default.
    pub const LINE: Positions = Positions(Self::LINE_BIT);
    /// `positions: instr line`, as `--dump-instr=yes` writes.
    pub const INSTR_LINE: Positions = Positions(Self::INSTR_BIT | Self::LINE_BIT);

    /// Builds a kind from flags; `None` if none is set.
    pub fn new(instr: bool, bb: bool, line: bool) -> Option<Positions> {
        let v = ((instr as u8) * Self::INSTR_BIT)
            | ((bb as u8) * Self::BB_BIT)
            | ((line as u8) * Self::LINE_BIT);
        (v != 0).then_some(Positions(v))
    }

    /// Parses the value of a `positions:` line; `None` if it is empty, names
    /// an unknown kind, or breaks the `instr bb line` order.
    pub fn parse(text: &[u8]) -> Option<Positions> {
        let mut v = 0u8;
        let mut last = 0u8;
        for w in text
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
        {
            let bit = match w {
                b"instr" => Self::INSTR_BIT,
                b"bb" => Self::BB_BIT,
                b"line" => Self::LINE_BIT,
                _ => return None,
            };
            if bit <= last {
                return None;
            }
            last = bit;
            v |= bit;
        }
        (v != 0).then_some(Positions(v))
    }

    /// Number of subpositions per line.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Never true: a kind has at least one subposition.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Index of the instruction address in a position slice.
    pub fn instr(self) -> Option<usize> {
        (self.0 & Self::INSTR_BIT != 0).then_some(0)
    }

    /// Index of the basic-block number in a position slice.
    pub fn bb(self) -> Option<usize> {
        (self.0 & Self::BB_BIT != 0).then(|| (self.0 & Self::INSTR_BIT).count_ones() as usize)
    }

    /// Index of the line number in a position slice.
    pub fn line(self) -> Option<usize> {
        (self.0 & Self::LINE_BIT != 0)
            .then(|| (self.0 & (Self::INSTR_BIT | Self::BB_BIT)).count_ones() as usize)
    }

    /// The names, as a `positions:` line gives them.
    pub fn names(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.0 & Self::INSTR_BIT != 0 {
            v.push("instr");
        }
        if self.0 & Self::BB_BIT != 0 {
            v.push("bb");
        }
        if self.0 & Self::LINE_BIT != 0 {
            v.push("line");
        }
        v
    }
}

impl Default for Positions {
    fn default() -> Self {
        Positions::LINE
    }
}

/// The file format a profile was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Callgrind (and other writers of that format).
    #[default]
    Callgrind,
    /// Cachegrind (the subset without calls, `.` for zero allowed).
    Cachegrind,
}

/// A whole profile: one file, or several files of one run loaded together.
#[derive(Clone, Debug)]
pub struct Profile<C = u64> {
    /// The format of the (first) input.
    pub format: Format,
    /// `version:`; `None` if absent (then 1 is assumed).
    pub version: Option<u64>,
    /// `creator:`, exactly as written.
    pub creator: Option<Vec<u8>>,
    /// Recorded and derived events.
    pub events: Events,
    /// The positions kind.
    pub positions: Positions,
    /// Names shared by all parts.
    pub names: Names,
    /// The parts, in order.
    pub parts: Vec<Part<C>>,
    /// Whole stacks, when the input recorded them (perf, pprof, folded);
    /// the parts then hold the self costs and arcs derived from them.
    pub stacks: Option<Stacks<C>>,
}

/// Equal when every field is; written out because lines compare by what
/// they hold, which needs [`Cost`].
impl<C: Cost> PartialEq for Profile<C> {
    fn eq(&self, o: &Self) -> bool {
        let Profile {
            format,
            version,
            creator,
            events,
            positions,
            names,
            parts,
            stacks,
        } = self;
        *format == o.format
            && *version == o.version
            && *creator == o.creator
            && *events == o.events
            && *positions == o.positions
            && *names == o.names
            && *parts == o.parts
            && *stacks == o.stacks
    }
}

impl<C: Cost> Eq for Profile<C> {}

impl<C: Cost> Profile<C> {
    /// An empty profile with the given events and positions.
    pub fn new(format: Format, events: Events, positions: Positions) -> Self {
        Profile {
            format,
            version: None,
            creator: None,
            events,
            positions,
            names: Names::default(),
            parts: Vec::new(),
            stacks: None,
        }
    }

    /// Adds an empty part and returns it.
    pub fn add_part(&mut self) -> &mut Part<C> {
        let p = Part::new(self.positions, self.events.len());
        self.parts.push(p);
        self.parts.last_mut().expect("just pushed")
    }

    /// The sum of all self costs of all parts; `None` on overflow.
    pub fn totals(&self) -> Option<Vec<C>> {
        let mut t = vec![C::ZERO; self.events.len()];
        for p in &self.parts {
            for (a, b) in t.iter_mut().zip(p.lines.totals()?) {
                *a = a.checked_add(b)?;
            }
        }
        Some(t)
    }
}

impl<C: Cost> Profile<C> {
    /// Appends the parts of `other` (e.g. the next file of a dump series or
    /// thread set), re-interning its names. Events and positions must agree.
    pub fn absorb(&mut self, other: Profile<C>) -> Result<(), Error> {
        let names_of =
            |e: &Events| -> Vec<String> { e.recorded().iter().map(|e| e.name.clone()).collect() };
        let (a, b) = (names_of(&self.events), names_of(&other.events));
        if a != b {
            return Err(Error::EventsDiffer(a.join(" "), b.join(" ")));
        }
        if self.positions != other.positions {
            return Err(Error::PositionsDiffer(
                self.positions.names().join(" "),
                other.positions.names().join(" "),
            ));
        }
        for d in other.events.derived() {
            if self.events.find(&d.name).is_none() {
                self.events
                    .add_derived(d.name.clone(), d.long_name.clone(), d.terms.clone());
            }
        }
        // Resolving cannot fail: the terms resolved in `other` over the same
        // recorded events.
        let _ = self.events.resolve();
        let names = &mut self.names;
        let files: Vec<FileId> = other
            .names
            .files
            .iter()
            .map(|n| names.files.try_intern(n).map(FileId))
            .collect::<Option<_>>()
            .ok_or(Error::TooManyNames)?;
        let functions: Vec<FunctionId> = other
            .names
            .functions()
            .map(|(_, k)| {
                let object = names
                    .objects
                    .try_intern(other.names.objects.get(k.object.0))?;
                let name = names
                    .symbols
                    .try_intern(other.names.symbols.get(k.name.0))?;
                names.try_function(FunctionKey {
                    object: ObjectId(object),
                    file: files[k.file.index()],
                    name: SymbolId(name),
                })
            })
            .collect::<Option<_>>()
            .ok_or(Error::TooManyNames)?;
        let f = |id: FunctionId| functions[id.index()];
        let fl = |id: FileId| files[id.index()];
        for part in other.parts {
            let mut new = Part::new(self.positions, self.events.len());
            new.info = part.info;
            part.lines.for_each(|l| {
                new.lines
                    .push(f(l.function), fl(l.file), l.positions, l.costs)
            });
            for c in part.calls.iter() {
                let info = CallInfo {
                    caller: f(c.info.caller),
                    callee: f(c.info.callee),
                    site_file: fl(c.info.site_file),
                    ..c.info
                };
                new.calls.push(info, c.site, c.target, c.inclusive);
            }
            for j in part.jumps.iter() {
                let info = JumpInfo {
                    function: f(j.info.function),
                    target_function: f(j.info.target_function),
                    file: fl(j.info.file),
                    target_file: fl(j.info.target_file),
                    ..j.info
                };
                new.jumps.push(info, j.source, j.target);
            }
            self.parts.push(new);
        }
        if let Some(other) = other.stacks {
            let mine = self.stacks.get_or_insert_with(Stacks::default);
            let frames: Vec<FrameId> = other
                .frames
                .iter()
                .map(|fr| {
                    mine.frame(Frame {
                        function: f(fr.function),
                        ..*fr
                    })
                })
                .collect();
            for s in &other.samples {
                let ids: Vec<FrameId> = s.frames.iter().map(|i| frames[i.index()]).collect();
                mine.add(&ids, &s.costs).ok_or(Error::StackCostOverflow)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse_in_order_only() {
        assert_eq!(Positions::parse(b"instr line"), Some(Positions::INSTR_LINE));
        assert_eq!(Positions::parse(b"line"), Some(Positions::LINE));
        assert_eq!(Positions::parse(b"line instr"), None);
        assert_eq!(Positions::parse(b""), None);
        assert_eq!(Positions::parse(b"instr instr"), None);
        let all = Positions::parse(b"instr bb line").unwrap();
        assert_eq!(
            (all.instr(), all.bb(), all.line()),
            (Some(0), Some(1), Some(2))
        );
        assert_eq!(all.names(), ["instr", "bb", "line"]);
        assert_eq!(Positions::LINE.line(), Some(0));
    }
}
