//! Integration tests of pchase-runner: one binary, one module per topic.

mod golden;
mod gpu;
mod levels;
mod mlp;
mod pipeline;
mod search;
mod sim;
mod tlb;
mod watch;
