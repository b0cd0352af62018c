//! Integration tests of pchase-runner: one binary, one module per topic.

mod async_copy;
mod doubles;
mod geometry;
mod golden;
mod gpc_contention;
mod gpu;
mod gpu_bandwidth;
mod gpu_code;
mod gpu_copy;
mod gpu_node;
mod gpu_outputs;
mod gpu_sentinels;
mod icache;
mod l2_address;
mod l2_confirm;
mod l2_report;
mod launch_budget;
mod levels;
mod mlp;
mod pipeline;
mod probes;
mod search;
mod sets;
mod sim;
mod tlb;
mod watch;
