//! The one error type of the analyses.

/// Why an analysis could not be made: profiles that cannot be combined,
/// stacks that overflow, an event or part the profile lacks, or input the
/// analysis cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An input lacks events the output needs, or has others.
    #[error(
        "{input}: events `{found}` differ from `{expected}` ({first}); use --events to pick common ones"
    )]
    Events {
        /// The input that differs.
        input: String,
        /// Its events.
        found: String,
        /// The events wanted.
        expected: String,
        /// Where the wanted events come from.
        first: String,
    },
    /// An input lacks an event named by `--events`.
    #[error("{input}: has no event `{event}` (it has: {found})")]
    MissingEvent {
        /// The input.
        input: String,
        /// The event asked for.
        event: String,
        /// The events it has.
        found: String,
    },
    /// Positions (`line`, `instr line`, …) differ.
    #[error("{input}: positions `{found}` differ from `{expected}` of {first}")]
    Positions {
        /// The input that differs.
        input: String,
        /// Its positions.
        found: String,
        /// The first input's.
        expected: String,
        /// The first input.
        first: String,
    },
    /// A Callgrind file with a Cachegrind file.
    #[error(
        "{input} is a {found} profile but {first} is a {expected} profile; convert one first (`tally convert --to cachegrind`)"
    )]
    Formats {
        /// The input that differs.
        input: String,
        /// Its format.
        found: &'static str,
        /// The first input's format.
        expected: &'static str,
        /// The first input.
        first: String,
    },
    /// A sum or difference does not fit the cost type.
    #[error(
        "{input}: {}{} does not fit in 64 bits{}",
        if function.is_empty() { String::new() } else { format!("in function `{function}`: ") },
        if what.is_empty() { "a summed count" } else { what },
        if *.signed { " (signed)" } else { "" }
    )]
    Overflow {
        /// The input whose addition overflowed (all of them, for a total
        /// of the result).
        input: String,
        /// The function of the record, when one is known.
        function: String,
        /// The sum that overflowed and where: "the sum of the jump's
        /// execution counts at line 12 (to line 3)"; empty when unknown.
        what: String,
        /// Whether the output is signed.
        signed: bool,
    },
    /// The result's magnitudes (every self cost and call cost per event,
    /// or every call count) sum past what its cost type holds, so no
    /// reader could take it back: every reader keeps that bound so that
    /// the sums its reports make fit.
    #[error(
        "{inputs}: in function `{function}`: the result's {what} sum to more than {limit}, which tally's 64-bit sums cannot hold, so it could not be read back"
    )]
    Unreadable {
        /// Every input, joined.
        inputs: String,
        /// The function whose record passes the bound first.
        function: String,
        /// What passes it (`costs of event `Ir``, `call counts`).
        what: String,
        /// The bound (`2^63-1`, `2^64-1`).
        limit: &'static str,
    },
    /// A negative result where the output is unsigned.
    #[error("{input}: the result would be negative; use `tally diff` for differences")]
    Negative {
        /// The input.
        input: String,
    },
    /// More names than the model's tables hold.
    #[error("too many names (2^32)")]
    TooManyNames,
    /// Nothing was added.
    #[error("no input profiles")]
    Empty,
    /// An estimated stack's summed cost does not fit 64 bits.
    #[error("the estimated stacks' costs overflow 64 bits")]
    StacksOverflow,
    /// An event name the profile does not have.
    #[error("unknown event `{name}` (the profile has: {known})")]
    UnknownEvent {
        /// The name given.
        name: String,
        /// The events the profile has.
        known: String,
    },
    /// A part or thread the profile does not have.
    #[error("{0}")]
    NoSuchPart(String),
    /// Input that cannot be analysed (a program without symbols, …).
    #[error("{0}")]
    Input(String),

    /// `tally gate`: the event is not in a side's profile.
    #[error("{side}: no event `{event}` (it has: {known})")]
    UnknownGateEvent {
        /// The side (its files).
        side: String,
        /// The event asked for.
        event: String,
        /// The events it has.
        known: String,
    },
    /// The event is a ratio, which has no cost to add up.
    #[error("{side}: event `{event}` is a ratio; a gate needs a count")]
    Ratio {
        /// The side (its files).
        side: String,
        /// The event.
        event: String,
    },
    /// A threshold that is neither `N%` nor a count.
    #[error("`{text}`: expected a percentage (`2%`, `0.5%`) or a count (`1000000`)")]
    Limit {
        /// What was given.
        text: String,
    },
    /// An `ignore` pattern that is not a regular expression.
    #[error("`{pattern}`: {message}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why the regex crate refused it.
        message: String,
    },
    /// A line of a baseline file that cannot be read.
    #[error("{path}:{line}: {message}")]
    Baseline {
        /// The baseline file.
        path: String,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A `s/regex/replacement/` expression that cannot be applied.
    #[error("`{expr}`: {message}")]
    Subst {
        /// The expression as given.
        expr: String,
        /// What is wrong with it.
        message: String,
    },
}

impl From<tally_model::UnknownEvent> for Error {
    fn from(e: tally_model::UnknownEvent) -> Self {
        Error::UnknownEvent {
            name: e.name,
            known: e.known,
        }
    }
}
