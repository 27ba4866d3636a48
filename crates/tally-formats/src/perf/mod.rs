//! Linux perf's profiles: `perf.data` ([`data`]) and `perf script` text
//! ([`script`]).
//!
//! Both hold whole stacks, which become the profile's
//! [`tally_model::Stacks`]; the part every report reads is derived from
//! them.

pub mod data;
pub mod script;
