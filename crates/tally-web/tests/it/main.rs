//! tally-web's integration tests in one binary: the functions table of provisional data.

mod provisional;
