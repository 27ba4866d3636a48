//! tally-symbols's integration tests in one binary: against nm, objdump and addr2line.

mod gnu_tools;
