//! `tally gprof`: gprof's flat profile and call graph, from a program and
//! its gmon files or from a Callgrind profile, as text or JSON.
//!
//! Two analyses fill one [`Report`]: `gmon` (histogram samples and arcs
//! mapped to the routines of `routines`, gprof's table of `.symtab`
//! entries, or `lines` for `-l`) and `callgrind` (one routine per
//! function, the costs of one event, and the inclusive costs Callgrind
//! measured). Both then run `tally_analysis::gprof`'s propagation, with the
//! selections of `specs`. One `text` and one `json` writer lay the report
//! out; `source` annotates source files (`-A`, gmon input).
//!
//! The routine table follows GNU gprof's rules (which symbols count as
//! routines, which of several names at one address wins), because every
//! number in the report depends on it: a histogram bin belongs to the
//! routine whose range holds it, and a call from an address outside every
//! routine makes its callee `<spontaneous>`.

pub mod callgrind;
mod gmon;
pub mod json;
pub mod lines;
mod report;
mod routines;
pub mod source;
mod specs;
pub mod text;

pub use gmon::{analyse, layout_of};
pub use report::{Costs, EventCounts, Histogram, Measured, Report};
pub use routines::{display_name, function_table, function_table_with_files};
pub use specs::{ArcSpec, Specs, SymSpec};
pub(crate) use specs::{arc_filter, selection};

/// Routines excluded from time propagation and from the call graph by
/// default, as GNU gprof does: the profiling runtime's own functions.
pub const DEFAULT_EXCLUDED: &[&str] = &[
    "_gprof_mcount",
    "mcount",
    "_mcount",
    "__mcount",
    "__mcount_internal",
    "__mcleanup",
    "<locore>",
    "<hicore>",
];

/// Report options.
#[derive(Debug, Clone)]
pub struct Options {
    /// `-b`: no explanations.
    pub brief: bool,
    /// Print the flat profile.
    pub flat: bool,
    /// Print the call graph (and its index).
    pub graph: bool,
    /// `-a`: leave static functions out.
    pub no_static: bool,
    /// `-z`: show routines that were never called and took no time.
    pub zeros: bool,
    /// `-c`: add the calls found in the code (count 0).
    pub static_calls: bool,
    /// Reproduce GNU gprof 2.40's results where they are wrong, to compare
    /// with its output: `-c` finds calls by scanning for the call opcode
    /// byte by byte with the displacement read unsigned (so on 64-bit
    /// programs only forward calls are found), and static names with a
    /// numeric suffix are checked on into the string table (see
    /// `routine_class`).
    pub gnu_compatible: bool,
    /// Demangle C++ and Rust names (gprof's default).
    pub demangle: bool,
    /// `-l`: one routine per source line.
    pub line: bool,
    /// `-L`: full source paths.
    pub print_path: bool,
    /// `-D`: only symbols marked as functions.
    pub functions_only: bool,
    /// `-w`: width of the index.
    pub width: usize,
    /// The selections.
    pub specs: Specs,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            brief: false,
            flat: true,
            graph: true,
            no_static: false,
            zeros: false,
            static_calls: false,
            gnu_compatible: false,
            demangle: true,
            line: false,
            print_path: false,
            functions_only: false,
            width: 80,
            specs: Specs::default(),
        }
    }
}

/// A warning about the input, printed to standard error by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice(pub String);
