//! tally-web's integration tests in one binary: the functions table of
//! provisional data, and the server under load and abuse.

mod provisional;
mod serve_load;
