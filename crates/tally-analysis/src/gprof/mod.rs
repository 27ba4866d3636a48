//! GNU gprof's analysis, as GNU gprof computes it, so that reports agree
//! with GNU gprof's to the last digit: from a program and its gmon files or
//! from a Callgrind profile, to the one [`Report`] the writers of
//! `tally-report` lay out as text or JSON.
//!
//! Two analyses fill one [`Report`]: [`analyse`] (gmon data: histogram
//! samples and arcs mapped to the routines of [`function_table`], gprof's
//! table of `.symtab` entries, or of [`lines`] for `-l`) and
//! [`callgrind::analyse`] (one routine per function, the costs of one event,
//! and the inclusive costs Callgrind measured). Both then run gprof's
//! propagation (the steps below), with the selections of [`Specs`].
//!
//! The routine table follows GNU gprof's rules (which symbols count as
//! routines, which of several names at one address wins), because every
//! number in the report depends on it: a histogram bin belongs to the
//! routine whose range holds it, and a call from an address outside every
//! routine makes its callee `<spontaneous>`.
//!
//! The propagation (Graham, Kessler and McKusick, 1982), each step a
//! function here:
//!
//! 1. [`SymbolTable::finalize`]: routines sorted by address, one per address
//!    (globals over statics, functions over other symbols, names without a
//!    leading underscore over those with one), each extending to the next.
//! 2. [`assign_samples`]: histogram bins to self time; a bin that straddles
//!    two routines is split by overlap.
//! 3. [`Graph::tally`]: call arcs from `(from_pc, self_pc, count)` records;
//!    a record whose caller is no known routine is dropped, which is what
//!    makes a routine `<spontaneous>`.
//! 4. [`assemble`]: self calls taken out, static arcs added, routines
//!    numbered depth-first with cycles collapsed (the strongly connected
//!    components), cycles numbered, then print flags and propagation
//!    fractions passed down and time passed up:
//!    `T_r = S_r + Σ T_e · C_e^r / C_e` over the collapsed graph.
//!
//! Everything is a plain index into the symbol table; cycles get the indices
//! after the routines. Orders that GNU gprof leaves to `qsort` are stable
//! here, as glibc's `qsort` (a merge sort) is for tables of this size.
//!
//! Times are in histogram ticks (or any cost unit: the Callgrind path feeds
//! event counts); dividing by the sampling rate is the printer's job.

pub use crate::Error;

pub mod callgrind;
mod gmon;
pub mod lines;
mod propagate;
mod report;
mod routines;
mod specs;

pub use gmon::{analyse, layout_of};
pub use propagate::{
    Arc, AssembleOptions, CallGraph, CycleInfo, Graph, Routine, Samples, Selection, SelfTimes,
    SymbolTable, UNIT, assemble, assign_samples, depth_first,
};
pub use report::{Costs, EventCounts, Histogram, Measured, Report};
pub use routines::{display_name, function_table, function_table_with_files};
pub use specs::{ArcSpec, Specs, SymSpec, arc_filter, selection};

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
