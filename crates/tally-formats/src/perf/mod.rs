//! Linux perf's profiles: `perf.data` ([`data`]) and `perf script` text
//! ([`script`]); [`samples`] symbolises sampled call chains for the
//! perf.data reader and `tally record`, with the names JIT compilers
//! give their code ([`jit`]), reading the files it needs on another
//! thread ([`preload`]).
//!
//! Both hold whole stacks, which become the profile's
//! [`tally_model::Stacks`]; the part every report reads is derived from
//! them.

pub mod data;
pub mod jit;
pub mod preload;
pub mod samples;
pub mod script;
