//! The profiles a page shows, read once before the server starts, and the
//! analyses of them, made once per event and part and kept.
//!
//! Inputs are read whole into memory through tally-formats' one entry
//! point, so a file that changes on disk while served is never read again,
//! half-written or not; the page only ever sees the profile as it was read.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

use tally_analysis::gprof::{self, Options, Report};
use tally_analysis::{Aggregate, EstimateOptions, StackTree, estimate_tree};
use tally_input::GmonInput;
use tally_model::{AnyCost, EventColumns, FunctionId, Profile, Stacks};
use tally_report::annotate::SourceDirs;

use crate::Error;
use crate::view::{Grouping, Provisional, Table, View};

mod cache;
pub mod cfg;
pub mod code;
pub(crate) mod sums;

use cache::Lru;

/// The whole stacks of an input, for the flame graph.
pub enum WholeStacks {
    /// As the profile recorded them.
    Recorded(Stacks<u64>),
    /// Estimated from the call arcs.
    Estimated(StackTree),
}

/// One profile as the page shows it: files summed, with its stacks.
pub struct Input {
    /// The files, as given, joined for display.
    pub name: String,
    /// The profile (for gmon input, converted to Callgrind's model for
    /// the flame graph and the source view).
    pub profile: Profile<u64>,
    /// gmon input: the program and the summed gmon data, which gprof's
    /// own analysis reads.
    pub gmon: Option<GmonInput>,
    /// Whole stacks: recorded, or estimated from the call arcs on first
    /// use (only the flame graph needs them, and estimating takes a while
    /// on a large profile).
    stacks: OnceLock<Result<WholeStacks, String>>,
    /// Whether the stacks are estimated (the profile recorded none).
    pub estimated: bool,
    /// The input files.
    pub files: Vec<PathBuf>,
    /// Warnings of the read, for the user.
    pub warnings: Vec<String>,
    /// Each function's source window: one scan of the cost lines on the
    /// first source request, instead of one per request.
    lines: OnceLock<HashMap<FunctionId, (u64, u64)>>,
    /// Each part's sum of its cost lines (`None` on overflow), made once:
    /// program totals and every event's analysis start from them, and
    /// each sum decodes every line.
    sums: OnceLock<Vec<Option<Vec<u64>>>>,
}

/// Everything served: one input, or two (A and B) for a comparison.
pub struct Session {
    /// The inputs: one, or A and B with `diff`.
    pub inputs: Vec<Input>,
    /// Whether the page compares `inputs[1]` against `inputs[0]`.
    pub diff: bool,
    /// Where sources may be read from: a page may be published, and its
    /// profiles may name any file.
    pub sources: SourceDirs,
    views: Mutex<HashMap<ViewKey, Slot<View>>>,
    provisional: Mutex<Provisionals>,
    tables: Mutex<HashMap<TableKey, Arc<Table>>>,
    annotations: Mutex<HashMap<AnnotationKey, Slot<Annotation>>>,
    /// The source and assembly tables' costs, by file or function and
    /// part ([`code`]): a file's lines are summed once for all its
    /// functions.
    code: Mutex<HashMap<String, Slot<serde_json::Value>>>,
    /// The server's replies by request, so that asking again costs a
    /// lookup, not an analysis, a sort or a run of `dot`.
    replies: Mutex<Lru<String, Answer>>,
    /// Sessions of a time range of the recorded samples, by range
    /// ([`crate::timeline`]).
    pub(crate) ranges: Mutex<HashMap<String, Arc<Session>>>,
    /// Sessions of the inputs with transforms applied, by transform list
    /// ([`crate::explore`]).
    pub(crate) transformed: Mutex<HashMap<String, Arc<Session>>>,
    /// The main input's call tree, made on the first tree request.
    pub(crate) call_tree: OnceLock<Result<Arc<tally_analysis::calltree::CallTree>, String>>,
    /// Orders of tables' rows by sort and filter, so that every page of
    /// one costs a slice of it, not a new sort.
    orders: Mutex<Lru<OrderKey, Arc<[u32]>>>,
}

/// The provisional tables of the views being analysed, and the views
/// whose gprof report is made: those need none, since their table follows
/// in a moment, and dropping the provisional rows then keeps them from
/// adding to the memory the view's own rows take.
#[derive(Default)]
struct Provisionals {
    kept: HashMap<ViewKey, Arc<Provisional>>,
    reported: HashSet<ViewKey>,
}

/// Bytes of replies kept.
const REPLIES_KEPT: usize = 64 << 20;
/// Row indices of orders kept (4 bytes each).
const ORDER_ROWS_KEPT: usize = 8 << 20;

/// A reply as the server sends it, shared without copying.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    /// As [`crate::Reply::content_type`].
    pub(crate) content_type: &'static str,
    /// The body.
    pub(crate) body: Bytes,
}

/// Which table an order sorts: a view's table as grouped, or the
/// provisional table of a view whose analysis runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TableId {
    /// A table of [`Session::table`].
    Full(TableKey),
    /// The table of [`Session::provisional`].
    Provisional(ViewKey),
}

/// An order's key: the table, the sort and the filter.
pub(crate) type OrderKey = (TableId, String, Option<String>);

/// A value made once: the first caller makes it, callers that come
/// meanwhile wait for it instead of making it again (the first view is
/// made in the background while the page loads and asks for it).
type Slot<T> = Arc<OnceLock<Result<Arc<T>, String>>>;

/// `tally annotate`'s text and its warnings (one per line).
pub type Annotation = (String, String);

/// An annotation's key: the input, assembly or not, the source file (or
/// `None`: `--auto`), the event and the part.
pub type AnnotationKey = (usize, bool, Option<String>, Option<String>, Option<usize>);

/// A table's key: the view's key and the grouping.
pub(crate) type TableKey = (ViewKey, Grouping);

/// A view's key: the input, the event and the part (`None`: all parts).
pub(crate) type ViewKey = (usize, String, Option<usize>);

/// How to read the inputs.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The program that wrote gmon.out files.
    pub binary: Option<PathBuf>,
    /// Two inputs, B compared against A.
    pub diff: bool,
    /// The directories sources are read from (`--source-dir`); none: the
    /// inputs' own and the current one (see [`SourceDirs::new`]).
    pub source_dirs: Vec<PathBuf>,
}

impl Session {
    /// Reads `files`: summed into one input, or with `diff` exactly two, A
    /// and B. Errors are the ones every command gives for the same files.
    pub fn load(files: &[PathBuf], opts: &LoadOptions) -> Result<Session, Error> {
        if files.is_empty() {
            return Err(Error::Usage("no profile given".into()));
        }
        let groups: Vec<&[PathBuf]> = if opts.diff {
            if files.len() != 2 {
                return Err(Error::Usage(format!(
                    "--diff takes exactly two files, A (before) and B (after); {} given",
                    files.len()
                )));
            }
            files.chunks(1).collect()
        } else {
            vec![files]
        };
        let sources = SourceDirs::new(&opts.source_dirs, files)?;
        let inputs = groups
            .into_iter()
            .map(|g| load_input(g, opts.binary.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Session::assemble(inputs, opts.diff, sources))
    }

    /// A session of the main input with its profile and recorded stacks
    /// replaced (a time range of them, [`crate::timeline`]), reading
    /// sources as this one does.
    pub(crate) fn with_recorded(&self, profile: Profile<u64>, stacks: Stacks<u64>) -> Session {
        let main = &self.inputs[self.main()];
        let input = Input {
            name: main.name.clone(),
            profile,
            gmon: None,
            stacks: OnceLock::from(Ok(WholeStacks::Recorded(stacks))),
            estimated: false,
            files: main.files.clone(),
            warnings: main.warnings.clone(),
            lines: OnceLock::new(),
            sums: OnceLock::new(),
        };
        Session::assemble(vec![input], false, self.sources.clone())
    }

    /// A session of the main input with its profile and stacks replaced
    /// (transformed, [`crate::explore`]), stacks estimated or not as
    /// before.
    pub(crate) fn with_stacks(&self, profile: Profile<u64>, stacks: WholeStacks) -> Session {
        let main = &self.inputs[self.main()];
        let estimated = matches!(stacks, WholeStacks::Estimated(_));
        let input = Input {
            name: main.name.clone(),
            profile,
            gmon: None,
            stacks: OnceLock::from(Ok(stacks)),
            estimated,
            files: main.files.clone(),
            warnings: main.warnings.clone(),
            lines: OnceLock::new(),
            sums: OnceLock::new(),
        };
        Session::assemble(vec![input], false, self.sources.clone())
    }

    fn assemble(inputs: Vec<Input>, diff: bool, sources: SourceDirs) -> Session {
        Session {
            inputs,
            diff,
            sources,
            ranges: Mutex::new(HashMap::new()),
            transformed: Mutex::new(HashMap::new()),
            call_tree: OnceLock::new(),
            views: Mutex::new(HashMap::new()),
            provisional: Mutex::default(),
            tables: Mutex::new(HashMap::new()),
            annotations: Mutex::new(HashMap::new()),
            code: Mutex::new(HashMap::new()),
            replies: Mutex::new(Lru::new(REPLIES_KEPT)),
            orders: Mutex::new(Lru::new(ORDER_ROWS_KEPT)),
        }
    }

    /// The input the views show: B when comparing.
    pub fn main(&self) -> usize {
        self.inputs.len() - 1
    }

    /// The events a page can choose (recorded, then derived), or the
    /// histogram's dimension for gmon input.
    pub fn events(&self, input: usize) -> Vec<String> {
        let i = &self.inputs[input];
        if i.gmon.is_some() {
            return vec!["time".into()];
        }
        EventColumns::new(&i.profile.events).names().to_vec()
    }

    /// The view of `input` in `event` over `part` (all parts: `None`),
    /// analysed on first use and kept.
    pub fn view(
        &self,
        input: usize,
        event: Option<&str>,
        part: Option<usize>,
    ) -> Result<Arc<View>, Error> {
        let key = self.key(input, event, part)?;
        let slot = self
            .views
            .lock()
            .map_err(|_| Error::Poisoned)?
            .entry(key.clone())
            .or_default()
            .clone();
        let view = once(&slot, || {
            self.analyse(&key).map(Arc::new).map_err(|e| e.to_string())
        });
        // A failed analysis leaves its provisional table unshown too.
        self.provisional
            .lock()
            .map_err(|_| Error::Poisoned)?
            .kept
            .remove(&key);
        view
    }

    /// The key of a view: the event named (or the first) checked, and the
    /// part.
    fn key(
        &self,
        input: usize,
        event: Option<&str>,
        part: Option<usize>,
    ) -> Result<ViewKey, Error> {
        let events = self.events(input);
        let event = match event {
            Some(e) if !e.is_empty() => e.to_owned(),
            _ => events
                .first()
                .cloned()
                .ok_or_else(|| Error::Input(format!("{}: no event", self.inputs[input].name)))?,
        };
        if !events.contains(&event) {
            return Err(Error::NotFound(format!("no event `{event}`")));
        }
        let parts = self.inputs[input].profile.parts.len();
        if part.is_some_and(|p| p >= parts) {
            return Err(Error::NotFound(format!("no part {}", part.unwrap_or(0))));
        }
        Ok((input, event, part))
    }

    /// Whether the view of `input` in `event` over `part` is analysed.
    pub fn ready(
        &self,
        input: usize,
        event: Option<&str>,
        part: Option<usize>,
    ) -> Result<bool, Error> {
        let key = self.key(input, event, part)?;
        let views = self.views.lock().map_err(|_| Error::Poisoned)?;
        Ok(views.get(&key).is_some_and(|slot| slot.get().is_some()))
    }

    /// The functions table of the main input drawn from the sums alone
    /// (self costs, no inclusive costs, calls or cycles), for the pages
    /// asked for while gprof's cycle-aware analysis of the same view runs:
    /// `None` once its report is made (the view's table follows), when
    /// comparing, and for gmon
    /// input (whose self costs come from gprof's analysis itself).
    pub fn provisional(
        &self,
        event: Option<&str>,
        part: Option<usize>,
    ) -> Result<Option<Arc<Provisional>>, Error> {
        let input = self.main();
        if self.diff || self.inputs[input].gmon.is_some() || self.ready(input, event, part)? {
            return Ok(None);
        }
        let key = self.key(input, event, part)?;
        {
            let kept = self.provisional.lock().map_err(|_| Error::Poisoned)?;
            if kept.reported.contains(&key) {
                return Ok(None);
            }
            if let Some(p) = kept.kept.get(&key) {
                return Ok(Some(p.clone()));
            }
        }
        let inp = &self.inputs[input];
        let sums = sums::SelfSums::new(&inp.profile, |i| part.is_none_or(|p| p == i));
        if let Some(s) = sums.part_sums.clone() {
            let _ = inp.sums.set(s);
        }
        let p = Arc::new(Provisional::new(
            inp,
            &sums,
            &key.1,
            self.totals(input, part),
        ));
        let mut kept = self.provisional.lock().map_err(|_| Error::Poisoned)?;
        // Kept only while gprof's report is being made (its end removes it).
        if !kept.reported.contains(&key) {
            kept.kept.insert(key, p.clone());
        }
        drop(kept);
        Ok(Some(p))
    }

    /// The program totals of `input` over `part`, per event of the page
    /// (derived events included).
    fn totals(&self, input: usize, part: Option<usize>) -> Vec<i128> {
        let inp = &self.inputs[input];
        let chosen = |i: usize| part.is_none_or(|p| p == i);
        let columns = EventColumns::new(&inp.profile.events);
        let t =
            tally_model::program_total(&inp.profile.parts, inp.profile.events.len(), chosen, |i| {
                inp.part_sums()[i].clone()
            });
        (0..columns.names().len())
            .map(|e| columns.value(&t, e))
            .collect()
    }

    /// `make`'s annotation for `key`, made once (an annotation scans every
    /// cost line: a second request for the same file costs nothing).
    pub fn annotation(
        &self,
        key: AnnotationKey,
        make: impl FnOnce() -> Result<Annotation, Error>,
    ) -> Result<Arc<Annotation>, Error> {
        let slot = self
            .annotations
            .lock()
            .map_err(|_| Error::Poisoned)?
            .entry(key)
            .or_default()
            .clone();
        once(&slot, || make().map(Arc::new).map_err(|e| e.to_string()))
    }

    /// The value kept under `key` for the source and assembly tables,
    /// made by `make` on first use.
    pub(crate) fn code(
        &self,
        key: String,
        make: impl FnOnce() -> Result<serde_json::Value, Error>,
    ) -> Result<Arc<serde_json::Value>, Error> {
        let slot = self
            .code
            .lock()
            .map_err(|_| Error::Poisoned)?
            .entry(key)
            .or_default()
            .clone();
        once(&slot, || make().map(Arc::new).map_err(|e| e.to_string()))
    }

    /// The reply kept for `request` (a path and its query, see
    /// [`crate::api`]), if any.
    pub(crate) fn reply(&self, request: &str) -> Option<Answer> {
        self.replies.lock().ok()?.get(&request.to_owned())
    }

    /// Keeps `answer` as the reply to `request`.
    pub(crate) fn keep_reply(&self, request: String, answer: &Answer) {
        if let Ok(mut r) = self.replies.lock() {
            let weight = request.len() + answer.body.len() + 64;
            r.insert(request, answer.clone(), weight);
        }
    }

    /// The order `key` of a table's rows, made by `make` unless kept.
    pub(crate) fn order(
        &self,
        key: OrderKey,
        make: impl FnOnce() -> Result<Vec<u32>, Error>,
    ) -> Result<Arc<[u32]>, Error> {
        if let Some(o) = self.orders.lock().map_err(|_| Error::Poisoned)?.get(&key) {
            return Ok(o);
        }
        let o: Arc<[u32]> = make()?.into();
        let rows = o.len() + 16;
        self.orders
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(key, o.clone(), rows);
        Ok(o)
    }

    /// The functions table of the main input in `event` over `part`,
    /// grouped, with A's costs when comparing; made on first use and kept,
    /// so that a page of it costs a sort of indices, not a new table.
    pub fn table(
        &self,
        event: Option<&str>,
        part: Option<usize>,
        group: Grouping,
    ) -> Result<Arc<Table>, Error> {
        let v = self.view(self.main(), event, part)?;
        let key = ((self.main(), v.event.clone(), part), group);
        if let Some(t) = self.tables.lock().map_err(|_| Error::Poisoned)?.get(&key) {
            return Ok(t.clone());
        }
        let base = if self.diff {
            Some(self.view(0, Some(&v.event), part)?)
        } else {
            None
        };
        let t = Arc::new(Table::new(&v, base.as_deref(), group));
        self.tables
            .lock()
            .map_err(|_| Error::Poisoned)?
            .insert(key, t.clone());
        Ok(t)
    }

    fn analyse(&self, key: &ViewKey) -> Result<View, Error> {
        let (input, event, part) = (key.0, key.1.as_str(), key.2);
        let inp = &self.inputs[input];
        let opts = Options::default();
        // Made for this view and not kept: on a large profile the sums'
        // arcs would stay beside the report for good, and another event
        // or part is a new analysis anyway.
        let agg = Aggregate::new(&inp.profile, |i| part.is_none_or(|p| p == i));
        let report: Report = match &inp.gmon {
            Some(g) => gprof::analyse(g.program.object(), &g.gmon, &opts)?,
            None => {
                let sums: Vec<Vec<u64>> = inp
                    .part_sums()
                    .iter()
                    .map(|t| t.clone().unwrap_or_else(|| vec![0; agg.events]))
                    .collect();
                gprof::callgrind::analyse(&inp.profile, &agg, &sums, Some(event), &opts, &inp.name)?
            }
        };
        // The view's table follows: requests wait for it from here on, and
        // the provisional rows go before the view's own are drawn.
        let mut kept = self.provisional.lock().map_err(|_| Error::Poisoned)?;
        kept.reported.insert(key.clone());
        let provisional = kept.kept.remove(key);
        drop(kept);
        drop(provisional);
        let total = inp.gmon.is_none().then(|| self.totals(input, part));
        Ok(View::new(inp, report, agg, event, total))
    }
}

/// The value of `slot`, made by `make` if nobody has made it yet.
fn once<T>(slot: &Slot<T>, make: impl FnOnce() -> Result<Arc<T>, String>) -> Result<Arc<T>, Error> {
    slot.get_or_init(make).clone().map_err(Error::Input)
}

impl Input {
    /// Each part's sum of its cost lines, `None` where it overflows; made
    /// on the first call.
    fn part_sums(&self) -> &[Option<Vec<u64>>] {
        self.sums.get_or_init(|| {
            self.profile
                .parts
                .iter()
                .map(|p| p.lines.totals())
                .collect()
        })
    }

    /// The lines of `f`'s source window (from its costliest run of lines
    /// in its own file to its last, with context), from an index made on
    /// the first call; `None` when it has no lines in its own file.
    pub fn window(&self, f: FunctionId) -> Option<(u64, u64)> {
        self.lines
            .get_or_init(|| code::windows(&self.profile))
            .get(&f)
            .copied()
    }

    /// The whole stacks: recorded, or estimated from the call arcs (kept
    /// after the first call). An estimate stays a tree, whose size grows
    /// with the distinct stacks, not with their lengths: a list of the
    /// stacks of a deep call chain grows with the square of its depth.
    pub fn stacks(&self) -> Result<&WholeStacks, Error> {
        self.stacks
            .get_or_init(|| {
                estimate_tree(
                    &Aggregate::new(&self.profile, |_| true),
                    EstimateOptions {
                        min_share: 0.1 / 1200.0,
                    },
                )
                .map(WholeStacks::Estimated)
                .map_err(|e| format!("{}: estimating stacks: {e}", self.name))
            })
            .as_ref()
            .map_err(|e| Error::Input(e.clone()))
    }
}

/// Reads one input: gmon files with their program, or any profile
/// tally reads, several summed.
fn load_input(files: &[PathBuf], binary: Option<&Path>) -> Result<Input, Error> {
    let sources = tally_input::open_all(files)?;
    let name = tally_input::names(&sources, " ");
    let options = tally_input::Options {
        program: binary.map(Path::to_path_buf),
        ..Default::default()
    };
    let loaded = tally_input::load_profile(&sources, &options)?;
    let mut warnings = loaded.notices;
    warnings.extend(loaded.warnings);
    let mut profile = match loaded.profile {
        AnyCost::Unsigned(p) => p,
        AnyCost::Signed(_) => {
            return Err(Error::Input(format!(
                "{}: a difference (negative counts) cannot be served: serve the two profiles with `tally serve A B --diff`",
                files[0].display()
            )));
        }
    };
    let gmon = loaded.gmon;
    let stacks = OnceLock::new();
    let estimated = match profile.stacks.take() {
        Some(s) if !s.is_empty() => {
            let _ = stacks.set(Ok(WholeStacks::Recorded(s)));
            false
        }
        _ => true,
    };
    Ok(Input {
        name,
        profile,
        gmon,
        stacks,
        estimated,
        files: files.to_vec(),
        warnings,
        lines: OnceLock::new(),
        sums: OnceLock::new(),
    })
}
