//! Event types: the recorded events of `events:`, their long names from
//! `event:` lines, and derived events defined by formulas
//! (`event: S = Ir + 2 * Dr`).

use crate::{Cost, Error};

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
    /// The formula as terms, in the order written (the numerator of a
    /// ratio).
    pub terms: Vec<Term>,
    /// The denominator of a ratio (`D1mr / Dr`); empty for a sum.
    pub denominator: Vec<Term>,
    /// The formula expanded to one coefficient per recorded event.
    coefficients: Vec<i128>,
    /// The denominator expanded the same way.
    den_coefficients: Vec<i128>,
}

impl DerivedEvent {
    /// The formula as text, e.g. `Ir + 2 * Dr` or `D1mr / (Dr + Dw)`.
    pub fn formula(&self) -> String {
        if self.denominator.is_empty() {
            return sum_text(&self.terms);
        }
        let side = |t: &[Term]| {
            if t.len() > 1 {
                format!("({})", sum_text(t))
            } else {
                sum_text(t)
            }
        };
        format!("{} / {}", side(&self.terms), side(&self.denominator))
    }

    /// A ratio: computed from the summed parts of a cost, never summed
    /// itself, so that a miss rate over a function is its misses over its
    /// accesses, not a sum of per-line rates.
    pub fn is_ratio(&self) -> bool {
        !self.denominator.is_empty()
    }

    /// The denominator's coefficients per recorded event (empty for a sum).
    pub fn denominator_coefficients(&self) -> &[i128] {
        &self.den_coefficients
    }

    /// One coefficient per recorded event.
    pub fn coefficients(&self) -> &[i128] {
        &self.coefficients
    }

    /// Evaluates the formula on a cost vector of recorded events; `None` if
    /// the result does not fit the cost type (e.g. negative for `u64`) or
    /// the event is a ratio (see [`DerivedEvent::ratio`]).
    pub fn evaluate<C: Cost>(&self, costs: &[C]) -> Option<C> {
        if self.is_ratio() {
            return None;
        }
        let mut sum: i128 = 0;
        for (c, v) in self.coefficients.iter().zip(costs) {
            sum = sum.checked_add(c.checked_mul(v.to_i128())?)?;
        }
        C::from_i128(sum)
    }

    /// The value of a ratio for a cost vector of recorded events; `None`
    /// when the denominator is 0.
    pub fn ratio<C: Cost>(&self, costs: &[C]) -> Option<f64> {
        ratio_of(&self.coefficients, &self.den_coefficients, costs)
    }
}

/// `num · costs / den · costs`, `None` when the denominator is 0.
pub(crate) fn ratio_of<C: Cost>(num: &[i128], den: &[i128], costs: &[C]) -> Option<f64> {
    let dot = |k: &[i128]| {
        k.iter().zip(costs).fold(0i128, |s, (c, v)| {
            s.saturating_add(c.saturating_mul(v.to_i128()))
        })
    };
    let d = dot(den);
    (d != 0).then(|| dot(num) as f64 / d as f64)
}

fn sum_text(terms: &[Term]) -> String {
    let mut s = String::new();
    for (i, t) in terms.iter().enumerate() {
        let c = if i > 0 && t.coefficient < 0 {
            s.push_str(" - ");
            -t.coefficient
        } else {
            if i > 0 {
                s.push_str(" + ");
            }
            t.coefficient
        };
        match c {
            1 => {}
            -1 => s.push('-'),
            c => s.push_str(&format!("{c} * ")),
        }
        s.push_str(&t.event);
    }
    s
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

/// A parsed formula: a sum of terms, or a ratio of two sums.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formula {
    /// The sum, or a ratio's numerator.
    pub terms: Vec<Term>,
    /// A ratio's denominator; empty for a sum.
    pub denominator: Vec<Term>,
}

/// Parses a formula like `Ir + 2 * Dr + 3 Dw - Dw * 2` into terms, as
/// `event:` lines define inherited events (the specification's
/// `N [*] NAME` terms, plus `NAME * N` and subtraction as KCachegrind
/// reads them). A ratio is refused: see [`parse_expression`].
pub fn parse_formula(text: &str) -> Result<Vec<Term>, Error> {
    let f = parse_expression(text)?;
    if !f.denominator.is_empty() {
        let at = text.find('/').map_or(0, |i| text[..i].chars().count());
        return Err(syntax(text, at, "a ratio (`/`) is not allowed here"));
    }
    Ok(f.terms)
}

/// Parses a sum, or a ratio of two sums (`D1mr / Dr`,
/// `(D1mr + D1mw) / (Dr + Dw)`), as `tally annotate --event` takes them.
pub fn parse_expression(text: &str) -> Result<Formula, Error> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = FormulaParser {
        text,
        chars: &chars,
        at: 0,
    };
    let terms = p.side()?;
    p.blanks();
    let denominator = if p.eat('/') { p.side()? } else { Vec::new() };
    p.blanks();
    if p.at < chars.len() {
        return Err(p.error(format!("unexpected `{}`", chars[p.at])));
    }
    Ok(Formula { terms, denominator })
}

fn syntax(text: &str, at: usize, problem: impl Into<String>) -> Error {
    Error::Syntax {
        formula: text.trim().to_string(),
        position: at + 1,
        problem: problem.into(),
    }
}

/// A recursive-descent reader of formulas, by characters so that errors
/// can point at one.
struct FormulaParser<'a> {
    text: &'a str,
    chars: &'a [char],
    at: usize,
}

impl FormulaParser<'_> {
    fn error(&self, problem: impl Into<String>) -> Error {
        syntax(self.text, self.at, problem)
    }

    fn blanks(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.blanks();
        if self.chars.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// A sum, in parentheses or not.
    fn side(&mut self) -> Result<Vec<Term>, Error> {
        if self.eat('(') {
            let t = self.sum()?;
            if !self.eat(')') {
                return Err(self.error("expected `)`"));
            }
            Ok(t)
        } else {
            self.sum()
        }
    }

    fn sum(&mut self) -> Result<Vec<Term>, Error> {
        let mut terms = Vec::new();
        let mut sign = if self.eat('-') {
            -1
        } else {
            self.eat('+');
            1
        };
        loop {
            let mut t = self.term()?;
            t.coefficient = t
                .coefficient
                .checked_mul(sign)
                .ok_or_else(|| self.error("coefficient too large"))?;
            terms.push(t);
            sign = if self.eat('+') {
                1
            } else if self.eat('-') {
                -1
            } else {
                return Ok(terms);
            };
        }
    }

    fn number(&mut self) -> Result<Option<i64>, Error> {
        self.blanks();
        let start = self.at;
        while self.chars.get(self.at).is_some_and(char::is_ascii_digit) {
            self.at += 1;
        }
        if start == self.at {
            return Ok(None);
        }
        let digits: String = self.chars[start..self.at].iter().collect();
        digits.parse().map(Some).map_err(|_| {
            let at = start;
            syntax(self.text, at, format!("coefficient `{digits}` too large"))
        })
    }

    fn name(&mut self) -> Option<String> {
        self.blanks();
        let start = self.at;
        while self
            .chars
            .get(self.at)
            .is_some_and(|&c| !c.is_whitespace() && !"+-*/()".contains(c))
        {
            self.at += 1;
        }
        (start < self.at).then(|| self.chars[start..self.at].iter().collect())
    }

    /// `N [*] NAME`, `NAME [* N]`.
    fn term(&mut self) -> Result<Term, Error> {
        let (coefficient, event) = match self.number()? {
            Some(n) => {
                self.eat('*');
                let Some(name) = self.name() else {
                    return Err(self.error("expected an event name"));
                };
                (n, name)
            }
            None => {
                let Some(name) = self.name() else {
                    return Err(self.error("expected an event name or a number"));
                };
                if self.eat('*') {
                    let Some(n) = self.number()? else {
                        return Err(self.error("expected a number after `*`"));
                    };
                    (n, name)
                } else {
                    (1, name)
                }
            }
        };
        Ok(Term { coefficient, event })
    }
}

impl Events {
    /// Events recorded in this order (the `events:` line).
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Result<Self, Error> {
        let mut e = Events::default();
        for n in names {
            let name = n.into();
            if e.recorded.iter().any(|x| x.name == name) {
                return Err(Error::DuplicateEvent(name));
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
        self.add_formula(
            name,
            long_name,
            Formula {
                terms,
                denominator: Vec::new(),
            },
        );
    }

    /// Adds a derived event that may be a ratio; see
    /// [`Events::add_derived`]. A ratio may name sums, not other ratios.
    pub fn add_formula(&mut self, name: String, long_name: Option<String>, formula: Formula) {
        self.derived.retain(|d| d.name != name);
        self.derived.push(DerivedEvent {
            name,
            long_name,
            terms: formula.terms,
            denominator: formula.denominator,
            coefficients: Vec::new(),
            den_coefficients: Vec::new(),
        });
    }

    /// Replaces the recorded events (an `events:` line after `event:` lines),
    /// keeping long names already given.
    pub fn set_recorded<S: Into<String>>(
        &mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Result<(), Error> {
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
    pub fn resolve(&mut self) -> Result<(), Error> {
        let n = self.derived.len();
        let mut done: Vec<Option<Vec<i128>>> = vec![None; n];
        for i in 0..n {
            let mut stack = Vec::new();
            self.expand(i, &mut done, &mut stack)?;
        }
        let mut dens = Vec::with_capacity(n);
        for d in &self.derived {
            let mut stack = Vec::new();
            dens.push(self.expand_terms(&d.name, &d.denominator, &mut done, &mut stack)?);
        }
        for ((d, c), den) in self.derived.iter_mut().zip(done).zip(dens) {
            d.coefficients = c.unwrap_or_default();
            d.den_coefficients = if d.denominator.is_empty() {
                Vec::new()
            } else {
                den
            };
        }
        Ok(())
    }

    fn expand(
        &self,
        i: usize,
        done: &mut Vec<Option<Vec<i128>>>,
        stack: &mut Vec<usize>,
    ) -> Result<Vec<i128>, Error> {
        if let Some(c) = &done[i] {
            return Ok(c.clone());
        }
        let d = &self.derived[i];
        if stack.contains(&i) {
            return Err(Error::Cycle(d.name.clone()));
        }
        stack.push(i);
        let coeffs = self.expand_terms(&d.name, &d.terms, done, stack)?;
        stack.pop();
        done[i] = Some(coeffs.clone());
        Ok(coeffs)
    }

    /// One coefficient per recorded event for `terms` of event `derived`.
    fn expand_terms(
        &self,
        derived: &str,
        terms: &[Term],
        done: &mut Vec<Option<Vec<i128>>>,
        stack: &mut Vec<usize>,
    ) -> Result<Vec<i128>, Error> {
        let mut coeffs = vec![0i128; self.recorded.len()];
        for t in terms {
            match self.find(&t.event) {
                Some(EventRef::Recorded(r)) => coeffs[r] += i128::from(t.coefficient),
                Some(EventRef::Derived(j)) => {
                    if self.derived[j].is_ratio() {
                        return Err(Error::RatioInFormula {
                            derived: derived.to_string(),
                            name: t.event.clone(),
                        });
                    }
                    let sub = self.expand(j, done, stack)?;
                    for (c, s) in coeffs.iter_mut().zip(sub) {
                        *c += i128::from(t.coefficient) * s;
                    }
                }
                None => {
                    return Err(Error::UnknownInFormula {
                        derived: derived.to_string(),
                        name: t.event.clone(),
                    });
                }
            }
        }
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
    fn products_subtraction_and_ratios() {
        let mut e = Events::new(["Ir", "Dr", "Dw"]).unwrap();
        e.add_derived("A".into(), None, parse_formula("Ir*2 - Dw").unwrap());
        e.add_formula("R".into(), None, parse_expression("(A + Dr) / Ir").unwrap());
        e.resolve().unwrap();
        assert_eq!(e.derived()[0].evaluate(&[10i64, 5, 1]), Some(19));
        assert_eq!(e.derived()[0].formula(), "2 * Ir - Dw");
        assert_eq!(e.derived()[1].ratio(&[10u64, 5, 1]), Some(2.4));
        assert_eq!(e.derived()[1].ratio(&[0u64, 5, 1]), None);
        assert_eq!(e.derived()[1].evaluate(&[10u64, 5, 1]), None);
        assert_eq!(e.derived()[1].formula(), "(A + Dr) / Ir");
        // A ratio cannot be part of another formula.
        e.add_derived("B".into(), None, parse_formula("R + Ir").unwrap());
        assert!(matches!(e.resolve(), Err(Error::RatioInFormula { .. })));
    }

    #[test]
    fn formula_errors_point_at_the_character() {
        let e = parse_formula("Ir + 2 *").unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed event formula `Ir + 2 *`: at character 9, expected an event name"
        );
        let e = parse_formula("Ir / Dr").unwrap_err();
        assert!(e.to_string().contains("character 4"), "{e}");
        let e = parse_expression("(Ir + Dr / Dw").unwrap_err();
        assert!(e.to_string().contains("expected `)`"), "{e}");
    }

    #[test]
    fn bad_formulas_are_refused() {
        assert!(parse_formula("Ir +").is_err());
        assert!(parse_formula("2").is_err());
        assert!(parse_formula("Ir Dr").is_err());
        let mut e = Events::new(["Ir"]).unwrap();
        e.add_derived("A".into(), None, parse_formula("B").unwrap());
        e.add_derived("B".into(), None, parse_formula("A").unwrap());
        assert!(matches!(e.resolve(), Err(Error::Cycle(_))));
        let mut e = Events::new(["Ir"]).unwrap();
        e.add_derived("A".into(), None, parse_formula("Zz").unwrap());
        assert!(matches!(e.resolve(), Err(Error::UnknownInFormula { .. })));
        assert!(Events::new(["Ir", "Ir"]).is_err());
    }
}
