//! The one error type of the model.

/// Why an `event:` definition was refused, or two profiles cannot be
/// combined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The formula does not follow `[N [*]] NAME (+ [N [*]] NAME)*`
    /// (terms may also be `NAME * N` and subtracted; `--event` allows one
    /// `/`).
    #[error("malformed event formula `{formula}`: at character {position}, {problem}")]
    Syntax {
        /// The formula as written.
        formula: String,
        /// 1-based character position of the problem.
        position: usize,
        /// What was expected or found there.
        problem: String,
    },
    /// A formula names an event that is neither recorded nor derived.
    #[error("event formula for `{derived}` names unknown event `{name}`")]
    UnknownInFormula {
        /// The derived event.
        derived: String,
        /// The unknown name.
        name: String,
    },
    /// A formula that names a ratio: ratios are not summed, so they can
    /// only stand alone.
    #[error("event formula for `{derived}` names the ratio `{name}`; a ratio can only stand alone")]
    RatioInFormula {
        /// The derived event.
        derived: String,
        /// The ratio it names.
        name: String,
    },
    /// Derived events that refer to each other.
    #[error("event formula for `{0}` refers to itself")]
    Cycle(String),
    /// The same event name twice in `events:`.
    #[error("event `{0}` is listed twice")]
    DuplicateEvent(String),

    // Combining profiles (`Profile::absorb`).
    /// Profiles to combine with different recorded events.
    #[error("events differ: `{0}` vs `{1}`")]
    EventsDiffer(String, String),
    /// Profiles to combine with different positions kinds.
    #[error("positions differ: `{0}` vs `{1}`")]
    PositionsDiffer(String, String),
    /// Together the profiles to combine have more names than the tables
    /// hold.
    #[error("too many names (4 GiB of names or 2^32 functions)")]
    TooManyNames,
    /// A stack's summed cost does not fit the cost type.
    #[error("a stack's cost overflows")]
    StackCostOverflow,
}
