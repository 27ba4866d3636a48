//! tally-analysis's integration tests in one binary: cycles, stacks, split and combine.

mod combine_props;
mod cycles;
mod estimate;
mod flat_combine;
mod gprof_props;
mod split_aggregate;
mod stacks;
