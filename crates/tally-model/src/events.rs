//! Event types: the recorded events of `events:`, their long names from
//! `event:` lines, and derived events defined by formulas
//! (`event: S = Ir + 2 * Dr`).

use crate::Cost;

/// A recorded event: one column of every cost vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The short name from `events:`.
    pub name: String,
    /// The long name from an `event: NAME : long name` line.
    pub long_name: Option<String>,
}

/// One term of a formula: `coefficient * event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// Multiplier (1 when none is written).
    pub coefficient: i64,
    /// Name of a recorded or another derived event.
    pub event: String,
}

/// An event computed from others, never stored in cost vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedEvent {
    /// Its short name.
    pub name: String,
    /// Its long name, if one was given.
    pub long_name: Option<String>,
    /// The formula as terms, in the order written.
    pub terms: Vec<Term>,
    /// The formula expanded to one coefficient per recorded event.
    coefficients: Vec<i128>,
}

impl DerivedEvent {
    /// The formula as text, e.g. `Ir + 2 * Dr`.
    pub fn formula(&self) -> String {
        let mut s = String::new();
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                s.push_str(" + ");
            }
            if t.coefficient != 1 {
                s.push_str(&format!("{} * ", t.coefficient));
            }
            s.push_str(&t.event);
        }
        s
    }

    /// One coefficient per recorded event.
    pub fn coefficients(&self) -> &[i128] {
        &self.coefficients
    }

    /// Evaluates the formula on a cost vector of recorded events; `None` if
    /// the result does not fit the cost type (e.g. negative for `u64`).
    pub fn evaluate<C: Cost>(&self, costs: &[C]) -> Option<C> {
        let mut sum: i128 = 0;
        for (c, v) in self.coefficients.iter().zip(costs) {
            sum = sum.checked_add(c.checked_mul(v.to_i128())?)?;
        }
        C::from_i128(sum)
    }
}

/// Why an `event:` definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The formula does not follow `[N [*]] NAME (+ [N [*]] NAME)*`.
    #[error("malformed event formula `{0}`")]
    Syntax(String),
    /// A formula names an event that is neither recorded nor derived.
    #[error("event formula for `{derived}` names unknown event `{name}`")]
    Unknown {
        /// The derived event.
        derived: String,
        /// The unknown name.
        name: String,
    },
    /// Derived events that refer to each other.
    #[error("event formula for `{0}` refers to itself")]
    Cycle(String),
    /// The same event name twice in `events:`.
    #[error("event `{0}` is listed twice")]
    Duplicate(String),
}

/// The events of a profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Events {
    recorded: Vec<Event>,
    derived: Vec<DerivedEvent>,
    /// Long names from `event:` lines for names not (yet) recorded, kept so
    /// that nothing the file said is lost.
    extra_long_names: Vec<(String, String)>,
}

/// An event looked up by name: recorded or derived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventRef {
    /// Index into the recorded events (and every cost vector).
    Recorded(usize),
    /// Index into the derived events.
    Derived(usize),
}

/// Parses a formula like `Ir + 2 * Dr + 3 Dw` into terms.
pub fn parse_formula(text: &str) -> Result<Vec<Term>, EventError> {
    let bad = || EventError::Syntax(text.trim().to_string());
    let mut terms = Vec::new();
    for part in text.split('+') {
        let part = part.trim();
        if part.is_empty() {
            return Err(bad());
        }
        let (coefficient, name) = match part.find(|c: char| !c.is_ascii_digit()) {
            Some(0) => (1, part),
            Some(i) => {
                let n: i64 = part[..i].parse().map_err(|_| bad())?;
                let rest = part[i..].trim_start();
                let rest = rest.strip_prefix('*').unwrap_or(rest).trim_start();
                (n, rest)
            }
            None => return Err(bad()),
        };
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(bad());
        }
        terms.push(Term {
            coefficient,
            event: name.to_string(),
        });
    }
    Ok(terms)
}

impl Events {
    /// Events recorded in this order (the `events:` line).
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Result<Self, EventError> {
        let mut e = Events::default();
        for n in names {
            let name = n.into();
            if e.recorded.iter().any(|x| x.name == name) {
                return Err(EventError::Duplicate(name));
            }
            e.recorded.push(Event {
                name,
                long_name: None,
            });
        }
        Ok(e)
    }

    /// The recorded events, in cost-vector order.
    pub fn recorded(&self) -> &[Event] {
        &self.recorded
    }

    /// The derived events, in definition order.
    pub fn derived(&self) -> &[DerivedEvent] {
        &self.derived
    }

    /// Number of recorded events: the length of every cost vector.
    pub fn len(&self) -> usize {
        self.recorded.len()
    }

    /// True when no event is recorded.
    pub fn is_empty(&self) -> bool {
        self.recorded.is_empty()
    }

    /// Long names given for events that are not recorded.
    pub fn extra_long_names(&self) -> &[(String, String)] {
        &self.extra_long_names
    }

    /// Finds an event by short name.
    pub fn find(&self, name: &str) -> Option<EventRef> {
        if let Some(i) = self.recorded.iter().position(|e| e.name == name) {
            return Some(EventRef::Recorded(i));
        }
        self.derived
            .iter()
            .position(|e| e.name == name)
            .map(EventRef::Derived)
    }

    /// Sets the long name of a recorded event, or remembers it for later.
    pub fn set_long_name(&mut self, name: &str, long: String) {
        if let Some(e) = self.recorded.iter_mut().find(|e| e.name == name) {
            e.long_name = Some(long);
        } else if let Some(e) = self.derived.iter_mut().find(|e| e.name == name) {
            e.long_name = Some(long);
        } else if let Some(x) = self.extra_long_names.iter_mut().find(|x| x.0 == name) {
            x.1 = long;
        } else {
            self.extra_long_names.push((name.to_string(), long));
        }
    }

    /// Adds a derived event. Terms may name recorded events or derived ones
    /// defined before or after (resolved by [`Events::resolve`]).
    pub fn add_derived(&mut self, name: String, long_name: Option<String>, terms: Vec<Term>) {
        self.derived.retain(|d| d.name != name);
        self.derived.push(DerivedEvent {
            name,
            long_name,
            terms,
            coefficients: Vec::new(),
        });
    }

    /// Replaces the recorded events (an `events:` line after `event:` lines),
    /// keeping long names already given.
    pub fn set_recorded<S: Into<String>>(
        &mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<(), EventError> {
        let mut fresh = Events::new(names)?;
        for e in &mut fresh.recorded {
            if let Some(pos) = self.extra_long_names.iter().position(|x| x.0 == e.name) {
                e.long_name = Some(self.extra_long_names.remove(pos).1);
            }
        }
        self.recorded = fresh.recorded;
        Ok(())
    }

    /// Expands every derived event to coefficients over recorded events.
    /// Call after all `event:` and `events:` lines are known.
    pub fn resolve(&mut self) -> Result<(), EventError> {
        let n = self.derived.len();
        let mut done: Vec<Option<Vec<i128>>> = vec![None; n];
        for i in 0..n {
            let mut stack = Vec::new();
            self.expand(i, &mut done, &mut stack)?;
        }
        for (d, c) in self.derived.iter_mut().zip(done) {
            d.coefficients = c.unwrap_or_default();
        }
        Ok(())
    }

    fn expand(
        &self,
        i: usize,
        done: &mut Vec<Option<Vec<i128>>>,
        stack: &mut Vec<usize>,
    ) -> Result<Vec<i128>, EventError> {
        if let Some(c) = &done[i] {
            return Ok(c.clone());
        }
        let d = &self.derived[i];
        if stack.contains(&i) {
            return Err(EventError::Cycle(d.name.clone()));
        }
        stack.push(i);
        let mut coeffs = vec![0i128; self.recorded.len()];
        for t in &d.terms {
            match self.find(&t.event) {
                Some(EventRef::Recorded(r)) => coeffs[r] += i128::from(t.coefficient),
                Some(EventRef::Derived(j)) => {
                    let sub = self.expand(j, done, stack)?;
                    for (c, s) in coeffs.iter_mut().zip(sub) {
                        *c += i128::from(t.coefficient) * s;
                    }
                }
                None => {
                    return Err(EventError::Unknown {
                        derived: d.name.clone(),
                        name: t.event.clone(),
                    });
                }
            }
        }
        stack.pop();
        done[i] = Some(coeffs.clone());
        Ok(coeffs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_parse_and_evaluate() {
        let mut e = Events::new(["Ir", "Dr", "Dw"]).unwrap();
        e.add_derived("S".into(), None, parse_formula("Ir + Dr").unwrap());
        e.add_derived(
            "T".into(),
            Some("Total".into()),
            parse_formula("2 * S + 3Dw").unwrap(),
        );
        e.resolve().unwrap();
        assert_eq!(e.derived()[0].evaluate(&[10u64, 5, 1]), Some(15));
        assert_eq!(e.derived()[1].evaluate(&[10u64, 5, 1]), Some(33));
        assert_eq!(e.derived()[1].formula(), "2 * S + 3 * Dw");
        assert_eq!(e.find("T"), Some(EventRef::Derived(1)));
    }

    #[test]
    fn bad_formulas_are_refused() {
        assert!(parse_formula("Ir +").is_err());
        assert!(parse_formula("2").is_err());
        assert!(parse_formula("Ir Dr").is_err());
        let mut e = Events::new(["Ir"]).unwrap();
        e.add_derived("A".into(), None, parse_formula("B").unwrap());
        e.add_derived("B".into(), None, parse_formula("A").unwrap());
        assert!(matches!(e.resolve(), Err(EventError::Cycle(_))));
        let mut e = Events::new(["Ir"]).unwrap();
        e.add_derived("A".into(), None, parse_formula("Zz").unwrap());
        assert!(matches!(e.resolve(), Err(EventError::Unknown { .. })));
        assert!(Events::new(["Ir", "Ir"]).is_err());
    }
}
