//! Analyses over the profile model: self costs and arcs summed over parts,
//! the call graph's strongly connected components, inclusive costs that stay
//! right under recursion, costs per source line or instruction, and whole
//! stacks estimated from arcs, and the budget check of `tally gate`;
//! the analysis behind `tally annotate`'s
//! tables, trees and annotations (`annotate`, handed to writers as a view);
//! GNU gprof's analysis of gmon data and Callgrind profiles (`gprof`), and
//! the conversions that need a program's symbols (`convert`: gmon →
//! Callgrind, DCPI ↔ Callgrind); transforms of a profile's stacks
//! (`transform`: focus, hide, collapse…) and the call trees drawn from them
//! (`calltree`).
//!
//! Everything here is pure and deterministic: the same profile gives the
//! same numbers and the same order, whatever the hash seeds.
#![deny(missing_docs)]

mod aggregate;
pub mod annotate;
pub mod calltree;
pub mod combine;
pub mod convert;
mod error;
mod estimate;
mod folding;
pub mod gate;
pub mod gprof;
mod inclusive;
mod positions;
mod scc;
mod subst;
pub mod transform;

pub use aggregate::{Aggregate, AggregateBuilder, Arc, ArcCosts, CostTable, RowKey, add_into};
pub use error::Error;
pub use estimate::{
    EstimateOptions, StackTree, estimate_from, estimate_split, estimate_stacks,
    estimate_stacks_with, estimate_tree,
};
pub use folding::Folding;
pub use inclusive::{CallKind, Cycle, Inclusive, RowCosts};
pub use positions::{CallSite, JumpSite, PositionCosts, by_instr, by_line};
pub use scc::{Components, Graph as Digraph, strongly_connected};
pub use subst::Subst;
