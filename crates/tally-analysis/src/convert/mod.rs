//! Conversions between profile kinds that need a program's symbols, so
//! that other tools read what one profiler measured: `gmon` turns gprof's
//! gmon data into a Callgrind profile (samples per instruction and line,
//! calls with gprof's estimated inclusive costs); `dcpi` turns DCPI
//! samples into a Callgrind profile and back, and sums DCPI profiles.
//!
//! Both map addresses to functions and lines through `tally-symbols`, by
//! the rules of the reports of the same data (`crate::gprof`'s routine
//! table, `dcpi::text_start`), so that a converted profile and the report
//! agree. Errors are [`crate::Error`]s.

pub mod dcpi;
pub mod gmon;
