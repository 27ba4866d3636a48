//! tally-cli's integration tests in one binary: the tally command run as users run it.

mod annotate;
mod annotate_defaults;
mod bounded_memory;
mod cli;
mod cycle_inclusive;
mod dcpi;
mod export;
mod firefox;
mod flame;
mod gate;
mod gmon_convert;
mod gprof;
mod gprof_callgrind;
mod graph;
mod input;
mod interop;
#[cfg(target_os = "linux")]
mod memory_ceiling;
mod merge_diff;
mod names;
mod perf_dwarf;
mod pprof;
mod record;
mod record_jit;
mod record_offcpu;
mod reliability_input;
#[cfg(unix)]
mod reliability_io;
mod sim;
mod sim_children;
mod sim_exact;
mod sim_more;
mod sim_readers;
mod sim_signals;
mod sim_trace_children;
mod speedscope;
mod stacks;
mod timeline;
mod transforms;
mod truncation;
mod web;
mod web_cfg;
mod web_compare;
mod web_explore;
mod web_sources;
mod web_transforms;
