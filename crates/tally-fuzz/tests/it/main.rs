//! tally-fuzz's integration tests in one binary: the committed seeds replayed.

mod seeds;
