//! tally-cli's libtest-mimic suites (`harness = false`) in one binary, with one set of arguments.

mod annotate_compare;
mod gprof_compare;
mod recursion;

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let mut trials = annotate_compare::trials();
    trials.extend(recursion::trials());
    trials.extend(gprof_compare::trials());
    let mut names = std::collections::HashSet::new();
    for t in &trials {
        assert!(names.insert(t.name()), "two trials named {}", t.name());
    }
    libtest_mimic::run(&args, trials).exit();
}
