//! The integration tests of `cpd`: reference fixtures from ruptures and scipy,
//! a brute-force oracle, property tests and bad-input handling.

mod bad_input;
mod fast_paths;
mod fixtures;
mod invariants;
mod ks;
mod noise;
mod oracle;
mod properties;
mod support;
