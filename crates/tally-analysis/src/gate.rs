//! The regression check of `tally gate`: is a new profile within budget of
//! a base profile?
//!
//! Each side (one profile, or several summed by the caller with
//! [`crate::combine`]) is reduced to [`SideCosts`]: the total of one event
//! and, per function, its self cost and its inclusive cost from
//! [`Inclusive`], so that recursion is counted once (a member of a cycle
//! has its derived cost, [`Inclusive::shown`], as every view shows it).
//! Functions are matched across the sides by name, source file and the
//! object's file name (its directory left out, so that two builds in two
//! folders match).
//!
//! [`check`] then judges the total against `max_increase` and every
//! function's self and inclusive change against `max_function_increase`
//! (or its budget from a [`Baseline`]): a relative budget is a share of the
//! function's base cost, or of the base total for a function that the base
//! lacks (or where it cost nothing), so that a new function is judged by
//! what it adds to the program. Functions that stay below `min_cost` of
//! their side's total on both sides, and functions matching an `ignore`
//! pattern, are not judged.
//!
//! Two runs of one program are not always equal: a program that seeds its
//! hash tables at random (Lua, Perl, Python) probes them more or less from
//! run to run, which moves a lookup function's cost by tens of percent of
//! its own. Such a change is small against the program, so no function's
//! increase up to `noise_floor` (by default 0.5 % of the base total) is
//! over budget, whatever its own budget says.

mod baseline;

pub use baseline::{Baseline, BaselineEntry, Budget};

use crate::{Aggregate, Error, Inclusive};
use regex::bytes::Regex;
use rustc_hash::FxHashMap;
use std::fmt;
use std::str::FromStr;
use tally_model::{Cost, EventColumns, Profile};

/// An allowed increase, or a floor: a share of a reference cost, or a
/// count of the event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Percent of the reference (`2%`).
    Percent(f64),
    /// A count of the event (`1000000`).
    Absolute(i128),
}

impl FromStr for Limit {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::Limit {
            text: s.to_string(),
        };
        let t = s.trim();
        let t = t.strip_prefix('+').unwrap_or(t);
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| bad())?;
            if !v.is_finite() || v < 0.0 || p.trim().starts_with(['+', '-']) {
                return Err(bad());
            }
            return Ok(Limit::Percent(v));
        }
        let digits: String = t.chars().filter(|&c| c != '_' && c != ',').collect();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        digits.parse().map(Limit::Absolute).map_err(|_| bad())
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Percent(p) => write!(f, "{p}%"),
            Limit::Absolute(n) => write!(f, "{n}"),
        }
    }
}

impl Limit {
    /// The count this limit allows with `reference` as 100 %.
    pub fn of(self, reference: i128) -> i128 {
        match self {
            Limit::Absolute(n) => n,
            Limit::Percent(p) => (p / 100.0 * reference.max(0) as f64).floor() as i128,
        }
    }
}

/// A function as matched across the two sides.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionName {
    /// The function's name (exact bytes).
    pub name: Vec<u8>,
    /// Its source file.
    pub file: Vec<u8>,
    /// The object's file name, without its directory (empty when the
    /// profile names none, as Cachegrind's).
    pub object: Vec<u8>,
}

/// One function's costs on one side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionCosts {
    /// Self cost.
    pub self_cost: i128,
    /// Inclusive cost, recursion counted once.
    pub inclusive: i128,
    /// Whether `inclusive` is derived (a cycle member's,
    /// [`Inclusive::shown`]) rather than exact.
    pub inclusive_derived: bool,
}

/// What one side contributes to a gate: the total of one event and each
/// function's self and inclusive cost of it.
#[derive(Clone, Debug, Default)]
pub struct SideCosts {
    /// The event.
    pub event: String,
    /// Sum of all self costs.
    pub total: i128,
    /// Functions with any cost, line or call, in first-seen order.
    pub functions: Vec<(FunctionName, FunctionCosts)>,
}

impl SideCosts {
    /// The costs of `event` (recorded or derived, not a ratio) in
    /// `profile`, summed over its parts; `side` names the side in errors.
    pub fn new<C: Cost>(profile: &Profile<C>, event: &str, side: &str) -> Result<Self, Error> {
        let columns = EventColumns::new(&profile.events);
        let e = columns.find(event).map_err(|u| Error::UnknownGateEvent {
            side: side.to_string(),
            event: event.to_string(),
            known: u.known,
        })?;
        if columns.is_ratio(e) {
            return Err(Error::Ratio {
                side: side.to_string(),
                event: event.to_string(),
            });
        }
        let agg = Aggregate::new(profile, |_| true);
        let inclusive = Inclusive::new(&agg);
        let names = &profile.names;
        let mut functions = Vec::new();
        for (f, _) in names.functions() {
            if !agg
                .function_present
                .get(f.index())
                .copied()
                .unwrap_or(false)
            {
                continue;
            }
            let own = columns.value(agg.function_self.get(f.index()), e);
            let incl = columns.value(inclusive.shown(f).0, e).max(own);
            functions.push((
                FunctionName {
                    name: names.function_name(f).to_vec(),
                    file: names.function_file(f).to_vec(),
                    object: base_name(names.function_object(f)).to_vec(),
                },
                FunctionCosts {
                    self_cost: own,
                    inclusive: incl,
                    inclusive_derived: inclusive.is_derived(f),
                },
            ));
        }
        Ok(SideCosts {
            event: columns.names()[e].clone(),
            total: columns.value(&agg.totals, e),
            functions,
        })
    }
}

/// `path` without its directory.
fn base_name(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// A pattern of function names not to judge (the `regex` crate's
/// syntax, matched anywhere in the name unless anchored).
pub fn ignore_pattern(pattern: &str) -> Result<Regex, Error> {
    Regex::new(pattern).map_err(|e| Error::Pattern {
        pattern: pattern.to_string(),
        message: e.to_string(),
    })
}

/// What the gate allows.
#[derive(Clone, Debug)]
pub struct GateOptions {
    /// The total's allowed increase (percent of the base total).
    pub max_increase: Limit,
    /// A function's allowed increase of self and of inclusive cost
    /// (percent of its base cost, or of the base total for a function new
    /// in the new profile).
    pub max_function_increase: Limit,
    /// Functions below this share (or count) of their side's total on
    /// both sides are not judged.
    pub min_cost: Limit,
    /// A function's increase up to this (percent of the base total, or
    /// a count) is never over budget: run-to-run noise.
    pub noise_floor: Limit,
    /// Functions whose name matches one of these are not judged.
    pub ignore: Vec<Regex>,
    /// Accepted budgets of named functions.
    pub baseline: Baseline,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            max_increase: Limit::Percent(2.0),
            max_function_increase: Limit::Percent(5.0),
            min_cost: Limit::Percent(0.1),
            noise_floor: Limit::Percent(0.5),
            ignore: Vec::new(),
            baseline: Baseline::default(),
        }
    }
}

/// A cost on both sides and whether its increase is within budget.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// The base cost (`None`: the base lacks the function).
    pub base: Option<i128>,
    /// The new cost (`None`: the new profile lacks the function).
    pub new: Option<i128>,
    /// New − base (a missing side counts 0).
    pub delta: i128,
    /// The change in percent of the base; `None` when the base is 0 or
    /// missing.
    pub percent: Option<f64>,
    /// The largest increase allowed; `None` when any is (budget `any`).
    pub allowed: Option<i128>,
    /// Whether this cost was judged (at or above the minimum cost).
    pub checked: bool,
    /// Judged and over budget.
    pub over: bool,
}

impl Change {
    fn new(base: Option<i128>, new: Option<i128>) -> Self {
        let (b, n) = (base.unwrap_or(0), new.unwrap_or(0));
        let delta = n - b;
        Change {
            base,
            new,
            delta,
            percent: (b != 0).then(|| delta as f64 * 100.0 / b as f64),
            allowed: None,
            checked: false,
            over: false,
        }
    }

    fn judge(&mut self, allowed: Option<i128>) {
        self.checked = true;
        self.allowed = allowed;
        self.over = allowed.is_some_and(|a| self.delta > a);
    }
}

/// Where a function's budget comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum BudgetSource {
    /// `max_function_increase`.
    Default(Limit),
    /// The baseline file's entry on this 1-based line.
    Baseline {
        /// The budget.
        budget: Budget,
        /// Its line.
        line: usize,
    },
}

impl fmt::Display for BudgetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetSource::Default(l) => write!(f, "{l}"),
            BudgetSource::Baseline { budget, .. } => write!(f, "{budget}"),
        }
    }
}

/// A judged function.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionVerdict {
    /// The function.
    pub function: FunctionName,
    /// Its self cost.
    pub self_cost: Change,
    /// Its inclusive cost.
    pub inclusive: Change,
    /// Whether the inclusive cost of either side is derived (a cycle
    /// member's) rather than exact.
    pub inclusive_derived: bool,
    /// Its budget.
    pub budget: BudgetSource,
}

impl FunctionVerdict {
    /// Self or inclusive cost over budget.
    pub fn over(&self) -> bool {
        self.self_cost.over || self.inclusive.over
    }

    /// The larger of the judged increases, for ranking.
    pub fn rank(&self) -> i128 {
        [&self.self_cost, &self.inclusive]
            .iter()
            .filter(|c| c.checked)
            .map(|c| c.delta)
            .max()
            .unwrap_or(0)
    }
}

/// The decision of a gate.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The event judged.
    pub event: String,
    /// The total.
    pub total: Change,
    /// The judged functions: over budget first, then by decreasing
    /// increase, then by name.
    pub functions: Vec<FunctionVerdict>,
    /// The increase any function is allowed, whatever its budget (the
    /// noise floor as a count).
    pub noise_floor: i128,
    /// Functions below the minimum cost on both sides.
    pub below_min_cost: usize,
    /// Functions left out by an ignore pattern.
    pub ignored: usize,
    /// Baseline entries that matched no function of either side.
    pub unused_baseline: Vec<BaselineEntry>,
}

impl Verdict {
    /// The number of functions over budget.
    pub fn functions_over(&self) -> usize {
        self.functions.iter().filter(|f| f.over()).count()
    }

    /// Within budget: the total and every function.
    pub fn passed(&self) -> bool {
        !self.total.over && self.functions_over() == 0
    }
}

/// Judges `new` against `base`.
pub fn check(base: &SideCosts, new: &SideCosts, o: &GateOptions) -> Verdict {
    let mut total = Change::new(Some(base.total), Some(new.total));
    total.judge(Some(o.max_increase.of(base.total)));
    let floor = o.noise_floor.of(base.total);

    let mut pairs: Vec<(&FunctionName, [Option<&FunctionCosts>; 2])> = Vec::new();
    let mut index: FxHashMap<&FunctionName, usize> = FxHashMap::default();
    for (side, costs) in [base, new].into_iter().enumerate() {
        for (name, c) in &costs.functions {
            let i = *index.entry(name).or_insert_with(|| {
                pairs.push((name, [None, None]));
                pairs.len() - 1
            });
            pairs[i].1[side] = Some(c);
        }
    }
    let mut used = vec![false; o.baseline.entries.len()];
    let (mut below_min_cost, mut ignored) = (0, 0);
    let mut functions = Vec::new();
    for (name, [b, n]) in pairs {
        if o.ignore.iter().any(|r| r.is_match(&name.name)) {
            ignored += 1;
            continue;
        }
        let entry = o.baseline.find(name);
        if let Some(i) = entry {
            used[i] = true;
        }
        let significant = |cost: fn(&FunctionCosts) -> i128| {
            let reaches = |c: Option<&FunctionCosts>, total: i128| {
                c.is_some_and(|c| cost(c) >= o.min_cost.of(total).max(1))
            };
            reaches(b, base.total) || reaches(n, new.total)
        };
        let (check_self, check_incl) = (significant(|c| c.self_cost), significant(|c| c.inclusive));
        if !check_self && !check_incl {
            below_min_cost += 1;
            continue;
        }
        let budget = match entry {
            Some(i) => BudgetSource::Baseline {
                budget: o.baseline.entries[i].budget,
                line: o.baseline.entries[i].line,
            },
            None => BudgetSource::Default(o.max_function_increase),
        };
        let limit = match &budget {
            BudgetSource::Default(l) => Some(*l),
            BudgetSource::Baseline { budget, .. } => budget.limit(),
        };
        let allowed = |base_cost: Option<i128>| {
            limit.map(|l| {
                let own = match base_cost {
                    Some(c) if c > 0 => l.of(c),
                    _ => l.of(base.total),
                };
                own.max(floor)
            })
        };
        let mut self_cost = Change::new(b.map(|c| c.self_cost), n.map(|c| c.self_cost));
        let mut inclusive = Change::new(b.map(|c| c.inclusive), n.map(|c| c.inclusive));
        if check_self {
            self_cost.judge(allowed(self_cost.base));
        }
        if check_incl {
            inclusive.judge(allowed(inclusive.base));
        }
        functions.push(FunctionVerdict {
            function: name.clone(),
            self_cost,
            inclusive,
            inclusive_derived: [b, n].iter().flatten().any(|c| c.inclusive_derived),
            budget,
        });
    }
    functions.sort_by(|x, y| {
        y.over()
            .cmp(&x.over())
            .then_with(|| y.rank().cmp(&x.rank()))
            .then_with(|| x.function.cmp(&y.function))
    });
    let unused_baseline = o
        .baseline
        .entries
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(e, _)| e.clone())
        .collect();
    Verdict {
        event: new.event.clone(),
        total,
        functions,
        noise_floor: floor,
        below_min_cost,
        ignored,
        unused_baseline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(total: i128, fs: &[(&str, i128, i128)]) -> SideCosts {
        SideCosts {
            event: "Ir".into(),
            total,
            functions: fs
                .iter()
                .map(|&(n, s, i)| {
                    (
                        FunctionName {
                            name: n.into(),
                            file: b"a.c".to_vec(),
                            object: b"prog".to_vec(),
                        },
                        FunctionCosts {
                            self_cost: s,
                            inclusive: i,
                            inclusive_derived: false,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn limits_read_percentages_and_counts() {
        assert_eq!("2%".parse::<Limit>(), Ok(Limit::Percent(2.0)));
        assert_eq!(" 0.5 %".parse::<Limit>(), Ok(Limit::Percent(0.5)));
        assert_eq!("+1000000".parse::<Limit>(), Ok(Limit::Absolute(1_000_000)));
        assert_eq!("1_000".parse::<Limit>(), Ok(Limit::Absolute(1000)));
        for bad in ["", "%", "-2%", "x", "2 %%", "1e3", "-5", "NaN%", "inf%"] {
            assert!(bad.parse::<Limit>().is_err(), "{bad}");
        }
        assert_eq!(Limit::Percent(5.0).of(1000), 50);
        assert_eq!(Limit::Absolute(7).of(1000), 7);
    }

    #[test]
    fn functions_over_budget_fail_and_others_pass() {
        let base = side(10_000, &[("main", 100, 10_000), ("work", 5000, 5000)]);
        let new = side(10_400, &[("main", 100, 10_400), ("work", 5400, 5400)]);
        let v = check(&base, &new, &GateOptions::default());
        // Total +4 % > 2 %; work +8 % > 5 %; main's inclusive +4 %.
        assert!(v.total.over);
        assert_eq!(v.functions_over(), 1);
        assert_eq!(v.functions[0].function.name, b"work");
        assert!(v.functions[0].self_cost.over && v.functions[0].inclusive.over);
        assert!(!v.functions[1].over());
        assert!(!v.passed());
        let loose = GateOptions {
            max_increase: Limit::Percent(5.0),
            max_function_increase: Limit::Absolute(400),
            ..GateOptions::default()
        };
        assert!(check(&base, &new, &loose).passed());
    }

    #[test]
    fn new_functions_are_judged_against_the_total_and_small_ones_skipped() {
        let base = side(100_000, &[("main", 50_000, 100_000), ("tiny", 10, 10)]);
        let new = side(
            103_000,
            &[
                ("main", 50_000, 103_000),
                ("tiny", 60, 60),
                ("fresh", 3000, 3000),
            ],
        );
        let o = GateOptions {
            max_increase: Limit::Percent(10.0),
            ..GateOptions::default()
        };
        let v = check(&base, &new, &o);
        // fresh: 3000 > 5 % of 100000? No: 3 %, within budget.
        assert!(v.passed(), "{v:?}");
        // tiny grew sixfold but stays below 0.1 % of the total.
        assert_eq!(v.below_min_cost, 1);
        let strict = GateOptions {
            max_function_increase: Limit::Percent(2.0),
            ..o.clone()
        };
        let v = check(&base, &new, &strict);
        let over: Vec<&[u8]> = v
            .functions
            .iter()
            .filter(|f| f.over())
            .map(|f| f.function.name.as_slice())
            .collect();
        assert_eq!(over, [b"fresh".as_slice(), b"main"]);
        let ignoring = GateOptions {
            ignore: vec![Regex::new("^(fresh|main)$").unwrap()],
            ..strict
        };
        let v = check(&base, &new, &ignoring);
        assert!(v.passed());
        assert_eq!(v.ignored, 2);
    }

    #[test]
    fn increases_within_the_noise_floor_pass() {
        // lookup is 1 % of the program: +30 % of its own cost is 0.3 % of
        // the total, under the default floor of 0.5 %; work's +10 % is 1 %.
        let base = side(
            1_000_000,
            &[("lookup", 10_000, 10_000), ("work", 100_000, 100_000)],
        );
        let new = side(
            1_003_000,
            &[("lookup", 13_000, 13_000), ("work", 100_000, 100_000)],
        );
        let v = check(&base, &new, &GateOptions::default());
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.functions[0].self_cost.allowed, Some(5000));
        let exact = GateOptions {
            noise_floor: Limit::Absolute(0),
            ..GateOptions::default()
        };
        let v = check(&base, &new, &exact);
        assert_eq!(v.functions_over(), 1);
        assert_eq!(v.functions[0].self_cost.allowed, Some(500));
        let slow = side(
            1_010_000,
            &[("lookup", 10_000, 10_000), ("work", 110_000, 110_000)],
        );
        let v = check(&base, &slow, &GateOptions::default());
        assert_eq!(v.functions_over(), 1);
        assert_eq!(v.functions[0].function.name, b"work");
        // An increase equal to the floor passes; one more fails.
        let at = |floor: i128| {
            let o = GateOptions {
                noise_floor: Limit::Absolute(floor),
                ..GateOptions::default()
            };
            check(&base, &slow, &o).passed()
        };
        assert!(at(10_000));
        assert!(!at(9_999));
    }
}
