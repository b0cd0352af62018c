//! Integration tests of the `memtopo` binary: one binary, one module per topic.

mod cli;
mod common;
mod driver_errors;
mod faults;
mod fleet;
mod host_link;
mod merge;
mod no_driver;
mod outputs;
mod progress;
mod shared_gpu;
mod speed_script;
mod subcommands;
mod visible_devices;
