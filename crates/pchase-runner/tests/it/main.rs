//! Integration tests of pchase-runner: one binary, one module per topic.

mod gpu;
mod sim;
mod pipeline;
