//! Rules every report applies the same way, written once so that
//! `annotate`, `gprof` and `diff` cannot disagree.
//!
//! - **Events by name.** A report names events by their short names, recorded
//!   or derived. [`EventColumns`] lists them recorded first, then derived
//!   (the order reports show them in), and reads any of them from a cost
//!   vector of recorded events: a derived event is its formula expanded to
//!   one coefficient per recorded event, evaluated in `i128` with
//!   saturation, so that a sum never overflows the cost type.
//! - **The program total.** A multi-part profile totals the parts' own
//!   totals ([`stated_total`]: `summary:`, else `totals:`), not the last
//!   part's; a part that states neither counts the sum of its self costs
//!   ([`program_total`]).

use crate::{Cost, Events, Part};

/// How one event is read from a cost vector of recorded events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventValue {
    /// A recorded event: the cost at this index.
    Recorded(usize),
    /// A derived event: one coefficient per recorded event.
    Derived(Vec<i128>),
    /// A ratio of two derived sums (numerator, denominator coefficients).
    Ratio(Vec<i128>, Vec<i128>),
}

impl EventValue {
    /// The event's value for `costs` (missing costs count 0); 0 for a ratio,
    /// which is not a count (see [`EventValue::ratio`]).
    pub fn of<C: Cost>(&self, costs: &[C]) -> i128 {
        match self {
            EventValue::Ratio(..) => 0,
            EventValue::Recorded(i) => costs.get(*i).map_or(0, |c| c.to_i128()),
            EventValue::Derived(k) => k.iter().zip(costs).fold(0i128, |s, (c, v)| {
                s.saturating_add(c.saturating_mul(v.to_i128()))
            }),
        }
    }

    /// A ratio's value for `costs`, computed from the summed parts; `None`
    /// for a count, or when the denominator is 0.
    pub fn ratio<C: Cost>(&self, costs: &[C]) -> Option<f64> {
        match self {
            EventValue::Ratio(n, d) => crate::events::ratio_of(n, d, costs),
            _ => None,
        }
    }
}

/// An event name the profile does not have: what
/// [`EventColumns::find`] found instead of it, for the caller to name in
/// its own error (it is not an error type itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEvent {
    /// The name given.
    pub name: String,
    /// The names the profile has, separated by spaces.
    pub known: String,
}

/// The events a report can show, by index: recorded, then derived.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventColumns {
    names: Vec<String>,
    long_names: Vec<Option<String>>,
    values: Vec<EventValue>,
}

impl EventColumns {
    /// Every event of `events`: recorded, then derived.
    pub fn new(events: &Events) -> EventColumns {
        let mut c = EventColumns::recorded(events);
        for d in events.derived() {
            c.names.push(d.name.clone());
            c.long_names.push(d.long_name.clone());
            c.values.push(if d.is_ratio() {
                EventValue::Ratio(
                    d.coefficients().to_vec(),
                    d.denominator_coefficients().to_vec(),
                )
            } else {
                EventValue::Derived(d.coefficients().to_vec())
            });
        }
        c
    }

    /// The recorded events only, for outputs that store one count per
    /// recorded event.
    pub fn recorded(events: &Events) -> EventColumns {
        let rec = events.recorded();
        EventColumns {
            names: rec.iter().map(|e| e.name.clone()).collect(),
            long_names: rec.iter().map(|e| e.long_name.clone()).collect(),
            values: (0..rec.len()).map(EventValue::Recorded).collect(),
        }
    }

    /// The short names, by index.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The long name of event `e`, if the profile gives one.
    pub fn long_name(&self, e: usize) -> Option<&str> {
        self.long_names.get(e).and_then(|l| l.as_deref())
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The index of the event called `name`.
    pub fn find(&self, name: &str) -> Result<usize, UnknownEvent> {
        self.names
            .iter()
            .position(|e| e == name)
            .ok_or_else(|| UnknownEvent {
                name: name.to_owned(),
                known: self.names.join(" "),
            })
    }

    /// How event `e` is read from a cost vector.
    pub fn column(&self, e: usize) -> Option<&EventValue> {
        self.values.get(e)
    }

    /// Event `e` is a ratio: shown with decimals, computed from summed
    /// costs, never summed, sorted or thresholded.
    pub fn is_ratio(&self, e: usize) -> bool {
        matches!(self.values.get(e), Some(EventValue::Ratio(..)))
    }

    /// The value of ratio `e` for a cost vector of recorded events; `None`
    /// when `e` is not a ratio or its denominator is 0.
    pub fn ratio<C: Cost>(&self, costs: &[C], e: usize) -> Option<f64> {
        self.values.get(e).and_then(|v| v.ratio(costs))
    }

    /// The value of event `e` for a cost vector of recorded events (0 for
    /// an event that does not exist or a ratio).
    pub fn value<C: Cost>(&self, costs: &[C], e: usize) -> i128 {
        self.values.get(e).map_or(0, |v| v.of(costs))
    }
}

/// The total a part states for itself: `summary:`, else `totals:`, when it
/// has one value per event and not all of them are zero (as
/// callgrind_annotate reads them).
pub fn stated_total<C: Cost>(part: &Part<C>, events: usize) -> Option<&[C]> {
    let v = part.info.summary.as_ref().or(part.info.totals.as_ref())?;
    (v.len() == events && v.iter().any(|c| !c.is_zero())).then_some(v.as_slice())
}

/// The program total of the parts `chosen` selects: the sum of their stated
/// totals, where a part that states none counts `part_sum(i)`, the sum of
/// its self costs (or nothing when that is unknown). Sums saturate.
pub fn program_total<C: Cost>(
    parts: &[Part<C>],
    events: usize,
    chosen: impl Fn(usize) -> bool,
    part_sum: impl Fn(usize) -> Option<Vec<C>>,
) -> Vec<C> {
    let mut t = vec![C::ZERO; events];
    for (i, p) in parts.iter().enumerate() {
        if !chosen(i) {
            continue;
        }
        let own = match stated_total(p, events) {
            Some(v) => v.to_vec(),
            None => part_sum(i).unwrap_or_default(),
        };
        for (a, &c) in t.iter_mut().zip(&own) {
            *a = a.saturating_add(c);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Positions, parse_formula};

    #[test]
    fn derived_events_read_from_recorded_costs() {
        let mut ev = Events::new(["Ir", "Dr"]).unwrap();
        ev.add_derived("S".into(), None, parse_formula("Ir + 2 * Dr").unwrap());
        ev.resolve().unwrap();
        let c = EventColumns::new(&ev);
        assert_eq!(c.names(), ["Ir", "Dr", "S"]);
        assert_eq!(c.value(&[3u64, 4], c.find("S").unwrap()), 11);
        assert_eq!(c.value(&[3u64, 4], 1), 4);
        assert_eq!(c.value(&[3u64, 4], 7), 0);
        let e = EventColumns::recorded(&ev).find("S").unwrap_err();
        assert_eq!(
            e,
            UnknownEvent {
                name: "S".into(),
                known: "Ir Dr".into()
            }
        );
    }

    #[test]
    fn program_total_sums_stated_totals_else_the_lines() {
        let mut a: Part<u64> = Part::new(Positions::LINE, 2);
        a.info.summary = Some(vec![10, 20]);
        a.info.totals = Some(vec![1, 2]);
        let mut b: Part<u64> = Part::new(Positions::LINE, 2);
        b.info.totals = Some(vec![0, 0]);
        let parts = [a, b];
        let sums = |i: usize| Some(vec![i as u64 + 5, 1]);
        assert_eq!(program_total(&parts, 2, |_| true, sums), [16, 21]);
        assert_eq!(program_total(&parts, 2, |i| i == 1, sums), [6, 1]);
    }
}
