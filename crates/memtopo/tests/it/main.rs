//! Integration tests of the `memtopo` binary: one binary, one module per topic.

mod cli;
mod no_driver;
