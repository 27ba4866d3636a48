//! tally-gen's integration tests in one binary: generated profiles measured and read back.

mod measure;
mod read_back;
