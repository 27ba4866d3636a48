//! `tally gprof`: gprof's flat profile and call graph as text or JSON.
//!
//! The analysis, from a program and its gmon files or from a Callgrind
//! profile, is `tally_analysis::gprof`: it fills one
//! [`Report`](tally_analysis::gprof::Report), which the writers here lay
//! out. One `text` and one `json` writer print the report; `source`
//! annotates source files (`-A`, gmon input).

pub mod json;
pub mod source;
pub mod text;
