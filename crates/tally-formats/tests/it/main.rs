//! tally-formats's integration tests in one binary (libtest; the fixture corpus is in golden/).

mod common;
mod dcpi;
mod detect;
mod firefox;
mod gmon;
mod json_input;
mod names;
mod perf_jit;
mod pprof_timed;
mod robustness;
mod semantics;
mod split;
mod split_join;
mod timeline;
