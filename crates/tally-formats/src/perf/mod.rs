//! Linux perf's profiles: `perf.data` ([`data`]) and `perf script` text
//! ([`script`]); [`samples`] symbolises sampled call chains for the
//! perf.data reader and `tally record`, with the names JIT compilers
//! give their code ([`jit`]).
//!
//! Both hold whole stacks, which become the profile's
//! [`tally_model::Stacks`]; the part every report reads is derived from
//! them.

pub mod data;
pub mod jit;
pub mod samples;
pub mod script;
