//! tally-sim's integration tests in one binary: against Cachegrind and reference models.

mod cachegrind;
mod reference;
