//! Profiles as Parquet tables, for engines that query many of them at
//! once (Spark, DataFusion, Ballista, DuckDB, Trino).
//!
//! An [`Exporter`] takes one profile at a time and appends its rows to
//! four tables (costs, functions, arcs, profiles; see the `schema` module and
//! docs/parquet.md), so thousands of profiles stream through the memory
//! of one. Rows follow the profile's own order, so the same inputs always
//! give the same files.
#![deny(missing_docs)]

mod schema;
mod table;
#[cfg(test)]
mod tests;

pub use schema::{SCHEMA_VERSION, Table};
pub use table::{BATCH_ROWS, ProfileColumns, ROW_GROUP_ROWS, TableWriter, Value};

use rustc_hash::FxHashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use tally_analysis::{Aggregate, Inclusive};
use tally_model::{Cost, FunctionId, Profile};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Parquet or Arrow library refused to write.
    #[error("{}: {source}", path.display())]
    Parquet {
        /// The file being written.
        path: PathBuf,
        /// The library's error.
        source: parquet::errors::ParquetError,
    },
    /// A count does not fit Parquet's signed 64-bit integers.
    #[error("{input}: a count of {function} ({event}) exceeds 2^63 - 1")]
    Range {
        /// The input.
        input: String,
        /// The function it belongs to.
        function: String,
        /// The event.
        event: String,
    },
}

impl Error {
    fn parquet(path: &Path, source: parquet::errors::ParquetError) -> Self {
        Error::Parquet {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What an export knows of a profile besides its contents.
#[derive(Clone, Debug, Default)]
pub struct ProfileInfo {
    /// The profile's id ([`profile_id`]).
    pub id: String,
    /// The input as named on the command line.
    pub source: String,
    /// The format it was read from (`callgrind`, `cachegrind`, `gmon`,
    /// `dcpi`, `perf`, `pprof`, `folded`, ...).
    pub format: String,
    /// `--label KEY=VALUE` pairs, in the order given.
    pub labels: Vec<(String, String)>,
}

/// Row counts of a finished export, per table in [`Table::ALL`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Profiles exported.
    pub profiles: u64,
    /// Rows per table.
    pub rows: [u64; 4],
}

/// The four tables being written.
pub struct Exporter<W: Write + Send> {
    tables: [TableWriter<W>; 4],
    profiles: u64,
}

impl<W: Write + Send> Exporter<W> {
    /// An exporter into four writers, in [`Table::ALL`] order (`paths`:
    /// their names, for messages).
    pub fn new(outputs: [(W, PathBuf); 4]) -> Result<Self, Error> {
        let [c, f, a, p] = outputs;
        Ok(Exporter {
            tables: [
                TableWriter::new(Table::Costs, c.0, c.1)?,
                TableWriter::new(Table::Functions, f.0, f.1)?,
                TableWriter::new(Table::Arcs, a.0, a.1)?,
                TableWriter::new(Table::Profiles, p.0, p.1)?,
            ],
            profiles: 0,
        })
    }

    /// Appends the rows of one profile.
    pub fn add<C: Cost>(&mut self, p: &Profile<C>, info: &ProfileInfo) -> Result<(), Error> {
        let cols = ProfileColumns {
            id: info.id.clone(),
            command: p
                .parts
                .iter()
                .find_map(|part| part.info.cmd.as_deref())
                .map(text),
            creator: p.creator.as_deref().map(text),
            labels: info.labels.clone(),
        };
        let events: Vec<&str> = p
            .events
            .recorded()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        let mut ctx = Ctx {
            p,
            info,
            events: &events,
            cols: &cols,
            names: FxHashMap::default(),
        };
        let [costs, functions, arcs, profiles] = &mut self.tables;
        ctx.costs(costs)?;
        ctx.functions(functions)?;
        ctx.arcs(arcs)?;
        ctx.profile(profiles)?;
        self.profiles += 1;
        Ok(())
    }

    /// Writes the files' remaining rows and footers.
    pub fn finish(self) -> Result<Counts, Error> {
        let mut counts = Counts {
            profiles: self.profiles,
            ..Counts::default()
        };
        for (i, t) in self.tables.into_iter().enumerate() {
            counts.rows[i] = t.finish()?;
        }
        Ok(counts)
    }
}

/// A profile's id: 16 hex digits of a 64-bit FNV-1a hash of its input
/// bytes (every file it was read from, in order) and its labels, so the
/// same file exported twice with the same labels has the same id, in any
/// run and on any machine, and ids of a fleet exported in batches do not
/// collide.
pub fn profile_id<'a>(
    contents: impl IntoIterator<Item = &'a [u8]>,
    labels: &[(String, String)],
) -> String {
    let mut h = Fnv::default();
    for c in contents {
        h.write(&(c.len() as u64).to_le_bytes());
        h.write(c);
    }
    for (k, v) in labels {
        for s in [k, v] {
            h.write(&(s.len() as u64).to_le_bytes());
            h.write(s.as_bytes());
        }
    }
    format!("{:016x}", h.0)
}

/// FNV-1a, 64 bits: tiny, stable across versions and platforms (which
/// std's and rustc-hash's hashers do not promise).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The rows of one profile.
struct Ctx<'a, C> {
    p: &'a Profile<C>,
    info: &'a ProfileInfo,
    events: &'a [&'a str],
    cols: &'a ProfileColumns,
    /// (object, file, name) of each function met, as text.
    names: FxHashMap<FunctionId, [String; 3]>,
}

/// Self cost of one place, summed over the cost lines at it.
type CostKey = (FunctionId, tally_model::FileId, Option<u64>, Option<u64>);

impl<C: Cost> Ctx<'_, C> {
    fn names(&mut self, f: FunctionId) -> &[String; 3] {
        let n = &self.p.names;
        self.names.entry(f).or_insert_with(|| {
            [
                text(n.function_object(f)),
                text(n.function_file(f)),
                text(n.function_name(f)),
            ]
        })
    }

    fn value(&mut self, c: C, f: FunctionId, event: usize) -> Result<i64, Error> {
        i64::try_from(c.to_i128()).map_err(|_| Error::Range {
            input: self.info.source.clone(),
            function: self.names(f)[2].clone(),
            event: self.events[event].to_string(),
        })
    }

    /// One row per part, place (function, source file, line, address)
    /// and event with a cost other than zero; places in order of first
    /// appearance.
    fn costs<W: Write + Send>(&mut self, t: &mut TableWriter<W>) -> Result<(), Error> {
        let pos = self.p.positions;
        let (line_at, instr_at) = (pos.line(), pos.instr());
        let ev = self.events.len();
        for (pi, part) in self.p.parts.iter().enumerate() {
            let mut index: FxHashMap<CostKey, usize> = FxHashMap::default();
            let mut keys: Vec<CostKey> = Vec::new();
            let mut sums: Vec<C> = Vec::new();
            part.lines.for_each(|l| {
                let key = (
                    l.function,
                    l.file,
                    line_at.map(|i| l.positions[i]),
                    instr_at.map(|i| l.positions[i]),
                );
                let row = *index.entry(key).or_insert_with(|| {
                    keys.push(key);
                    sums.resize(sums.len() + ev, C::ZERO);
                    keys.len() - 1
                });
                for (s, &c) in sums[row * ev..(row + 1) * ev].iter_mut().zip(l.costs) {
                    *s = s.saturating_add(c);
                }
            });
            let part_no = i32::try_from(pi + 1).unwrap_or(i32::MAX);
            for (row, &(f, file, line, addr)) in keys.iter().enumerate() {
                let file = text(self.p.names.file_name(file));
                for e in 0..ev {
                    let c = sums[row * ev + e];
                    if c == C::ZERO {
                        continue;
                    }
                    let v = self.value(c, f, e)?;
                    let [object, _, function] = self.names(f).clone();
                    t.push(
                        self.cols,
                        &[
                            Value::I32(part_no),
                            Value::Str(&object),
                            Value::Str(&file),
                            Value::Str(&function),
                            Value::OptI64(line.map(|l| l as i64)),
                            Value::OptI64(addr.map(|a| a as i64)),
                            Value::Str(self.events[e]),
                            Value::I64(v),
                        ],
                    )?;
                }
            }
        }
        Ok(())
    }

    /// One row per function present and event where its self or
    /// inclusive cost is not zero; inclusive as `tally annotate` gives
    /// it (from whole stacks when the profile has them; for a cycle
    /// member, derived and marked so).
    fn functions<W: Write + Send>(&mut self, t: &mut TableWriter<W>) -> Result<(), Error> {
        let agg = Aggregate::new(self.p, |_| true);
        let incl = self
            .p
            .stacks
            .as_ref()
            .and_then(|s| Inclusive::from_stacks(&agg, s))
            .unwrap_or_else(|| Inclusive::new(&agg));
        // Functions in order of first appearance: rows, then arcs.
        let mut order: Vec<FunctionId> = Vec::new();
        let mut seen = vec![false; agg.function_self.len()];
        let mut see = |f: FunctionId, order: &mut Vec<FunctionId>| {
            if let Some(s) = seen.get_mut(f.index())
                && !*s
            {
                *s = true;
                order.push(f);
            }
        };
        for r in &agg.rows {
            see(r.function, &mut order);
        }
        for a in &agg.arcs {
            see(a.caller, &mut order);
            see(a.callee, &mut order);
        }
        for f in order {
            let own = agg.function_self.get(f.index());
            let (inclusive, derived) = incl.shown(f);
            let cycle = incl
                .cycle_of
                .get(f.index())
                .copied()
                .flatten()
                .map(|c| c as i32);
            for e in 0..self.events.len() {
                if own[e] == C::ZERO && inclusive[e] == C::ZERO {
                    continue;
                }
                let (s, i) = (self.value(own[e], f, e)?, self.value(inclusive[e], f, e)?);
                let [object, file, function] = self.names(f).clone();
                t.push(
                    self.cols,
                    &[
                        Value::Str(&object),
                        Value::Str(&file),
                        Value::Str(&function),
                        Value::Str(self.events[e]),
                        Value::I64(s),
                        Value::I64(i),
                        Value::OptI32(cycle),
                        Value::Bool(derived),
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// One row per part, arc (caller, callee, call-site line) and event,
    /// calls and inclusive costs summed over the arc's call sites at that
    /// line; every event has its row, so `calls` is found whichever event
    /// a query picks.
    fn arcs<W: Write + Send>(&mut self, t: &mut TableWriter<W>) -> Result<(), Error> {
        let line_at = self.p.positions.line();
        let ev = self.events.len();
        type ArcKey = (FunctionId, FunctionId, Option<u64>);
        for (pi, part) in self.p.parts.iter().enumerate() {
            let mut index: FxHashMap<ArcKey, usize> = FxHashMap::default();
            let mut keys: Vec<ArcKey> = Vec::new();
            let mut calls: Vec<C> = Vec::new();
            let mut sums: Vec<C> = Vec::new();
            for c in part.calls.iter() {
                let key = (
                    c.info.caller,
                    c.info.callee,
                    line_at.and_then(|i| c.site.get(i).copied()),
                );
                let row = *index.entry(key).or_insert_with(|| {
                    keys.push(key);
                    calls.push(C::ZERO);
                    sums.resize(sums.len() + ev, C::ZERO);
                    keys.len() - 1
                });
                calls[row] = calls[row].saturating_add(c.info.count);
                for (s, &x) in sums[row * ev..(row + 1) * ev].iter_mut().zip(c.inclusive) {
                    *s = s.saturating_add(x);
                }
            }
            let part_no = i32::try_from(pi + 1).unwrap_or(i32::MAX);
            for (row, &(caller, callee, line)) in keys.iter().enumerate() {
                let n = self.value(calls[row], caller, 0)?;
                let [co, cf, cn] = self.names(caller).clone();
                let [eo, ef, en] = self.names(callee).clone();
                for e in 0..ev {
                    let v = self.value(sums[row * ev + e], callee, e)?;
                    t.push(
                        self.cols,
                        &[
                            Value::I32(part_no),
                            Value::Str(&co),
                            Value::Str(&cf),
                            Value::Str(&cn),
                            Value::Str(&eo),
                            Value::Str(&ef),
                            Value::Str(&en),
                            Value::OptI64(line.map(|l| l as i64)),
                            Value::I64(n),
                            Value::Str(self.events[e]),
                            Value::I64(v),
                        ],
                    )?;
                }
            }
        }
        Ok(())
    }

    /// One row per recorded event: the profile's metadata and total.
    fn profile<W: Write + Send>(&mut self, t: &mut TableWriter<W>) -> Result<(), Error> {
        let totals: Vec<i128> = {
            let mut v = vec![0i128; self.events.len()];
            for part in &self.p.parts {
                part.lines.for_each(|l| {
                    for (a, c) in v.iter_mut().zip(l.costs) {
                        *a += c.to_i128();
                    }
                });
            }
            v
        };
        let parts = i32::try_from(self.p.parts.len()).unwrap_or(i32::MAX);
        for (e, event) in self.p.events.recorded().iter().enumerate() {
            let total = i64::try_from(totals[e]).map_err(|_| Error::Range {
                input: self.info.source.clone(),
                function: "(total)".into(),
                event: event.name.clone(),
            })?;
            t.push(
                self.cols,
                &[
                    Value::Str(&self.info.source),
                    Value::Str(&self.info.format),
                    Value::I32(parts),
                    Value::Str(&event.name),
                    Value::OptStr(event.long_name.as_deref()),
                    Value::I64(total),
                ],
            )?;
        }
        Ok(())
    }
}
