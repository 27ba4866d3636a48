//! The running sums of magnitudes the reader keeps, so that every sum an
//! analysis makes later fits the cost type, and the errors when they do not.

use super::Parser;
use crate::error::ParseErrorKind;
use tally_model::{Cost, FunctionId, Sink};

/// Running sums of magnitudes over everything read (every part, and the
/// files read before into one profile). While they fit the cost type,
/// every sum an analysis makes of the records fits too: a function's or a
/// line's self cost, an inclusive cost (self plus calls), a call count
/// summed over sites, parts or files. The reader checks them line by line,
/// so an overflow is an error naming the line and the function instead of
/// a saturated or wrapped number later.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sums {
    /// Per event: the magnitudes of every self cost and every call's
    /// inclusive cost.
    pub costs: Vec<u64>,
    /// The magnitudes of every call count.
    pub calls: u64,
}

/// Adds the magnitudes of a line's costs to the running sums; on overflow
/// (past the cost type's largest magnitude) undoes it and returns false.
/// Overflow is checked once per line, not per addition.
#[inline(always)]
pub(super) fn add_magnitudes<C: Cost>(sums: &mut [u64], costs: &[C]) -> bool {
    let mut over = false;
    for (s, &c) in sums.iter_mut().zip(costs) {
        let (v, o) = s.overflowing_add(c.magnitude());
        *s = v;
        over |= o | (v > C::MAX_MAGNITUDE);
    }
    if over {
        sub_magnitudes(sums, costs);
    }
    !over
}

/// Undoes [`add_magnitudes`].
#[inline]
pub(super) fn sub_magnitudes<C: Cost>(sums: &mut [u64], costs: &[C]) {
    for (s, &c) in sums.iter_mut().zip(costs) {
        *s = s.wrapping_sub(c.magnitude());
    }
}

impl Sums {
    /// Adds a call's count and inclusive costs; false (and nothing added)
    /// if they do not fit.
    #[inline]
    pub(super) fn add_call<C: Cost>(&mut self, count: C, costs: &[C]) -> bool {
        let Some(calls) = self
            .calls
            .checked_add(count.magnitude())
            .filter(|&v| v <= C::MAX_MAGNITUDE)
        else {
            return false;
        };
        if !add_magnitudes(&mut self.costs, costs) {
            return false;
        }
        self.calls = calls;
        true
    }
}

impl<C: Cost, S: Sink<C>> Parser<'_, '_, C, S> {
    /// The error for a cost line whose costs do not fit the running sums
    /// (`what` names them), naming the first event that overflows.
    #[cold]
    pub(super) fn sum_overflow(
        &self,
        function: FunctionId,
        n: usize,
        what: &str,
    ) -> ParseErrorKind {
        let event = (0..n)
            .find(|&k| {
                let s = self.sums.costs.get(k).copied().unwrap_or(0);
                s.checked_add(self.costs[k].magnitude())
                    .is_none_or(|v| v > C::MAX_MAGNITUDE)
            })
            .map_or_else(String::new, |k| {
                format!(" of event `{}`", self.profile.events.recorded()[k].name)
            });
        self.overflow(function, format!("the {what}{event}"))
    }

    /// The error for a call whose count or costs do not fit the sums.
    #[cold]
    pub(super) fn call_overflow(&self, caller: FunctionId, count: C, n: usize) -> ParseErrorKind {
        let fits = self
            .sums
            .calls
            .checked_add(count.magnitude())
            .is_some_and(|v| v <= C::MAX_MAGNITUDE);
        if fits {
            self.sum_overflow(caller, n, "self costs and call costs")
        } else {
            self.overflow(caller, "the call counts (`calls=`)".into())
        }
    }

    pub(super) fn overflow(&self, function: FunctionId, what: String) -> ParseErrorKind {
        ParseErrorKind::SumOverflow {
            what,
            function: String::from_utf8_lossy(self.profile.names.function_name(function))
                .into_owned(),
            limit: if C::SIGNED { "2^63-1" } else { "2^64-1" },
        }
    }
}
