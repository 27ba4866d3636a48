//! tally-formats's fixture-corpus tests in one libtest-mimic binary (`harness = false`).

#[path = "../it/common/mod.rs"]
mod common;
mod fixtures;

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    libtest_mimic::run(&args, fixtures::trials()).exit();
}
