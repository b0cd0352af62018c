//! The simulated GPU: profiles, validation, and chases whose outcome the cache model fixes.
//!
//! This file holds the toy profile and the helpers every topic uses; the topics are
//! `profiles` (bundled profiles, validation, the memory budget), `chase` (what the cache
//! model makes of chases: capacity, replacement, sectors, partitions, written chains, pinned
//! chases), `two_phase` (the cache-sharing probe) and `random` (random valid hierarchies).

mod chase;
mod profiles;
mod random;
mod two_phase;

use pchase_runner::sim::{SimBackend, SimProfile};
use pchase_runner::{Backend, ChainSpec, ChaseRequest, LoadPath, RunnerError};

/// A small GPU: one 4 KiB L1 (64 B lines, 4 ways) for `.ca` loads, a 64 KiB L2.
const TOY: &str = r#"
name = "toy"
seed = 1

[device]
name = "toy GPU"
ordinal = 0
compute_capability = { major = 7, minor = 0 }
sm_count = 4
total_memory_bytes = 1073741824
l2_bytes = 65536
shared_per_sm_bytes = 49152
shared_per_block_bytes = 49152
shared_per_block_optin_bytes = 49152
max_threads_per_block = 1024
warp_size = 32
global_l1_cache_supported = true

[clock]
sm_mhz = 1000.0
overhead_cycles = 10

[shared_memory]
latency = 25

[[cache]]
name = "L1"
size_bytes = 4096
line_bytes = 64
associativity = 4
replacement = { policy = "lru" }
hit_latency = 30
paths = ["global_ca"]

[l2]
size_bytes = 65536
line_bytes = 64
associativity = 16
replacement = { policy = "lru" }
near_latency = 200

[memory]
latency = 500
"#;

fn toy() -> SimProfile {
    SimProfile::from_toml_str(TOY).expect("the toy profile is valid")
}

/// The toy profile with one line of its text replaced.
fn toy_with(old: &str, new: &str) -> Result<SimProfile, RunnerError> {
    assert!(TOY.contains(old), "test setup: `{old}` not in TOY");
    SimProfile::from_toml_str(&TOY.replacen(old, new, 1))
}

fn profile_message(result: Result<SimProfile, RunnerError>) -> String {
    match result {
        Err(RunnerError::Profile(message)) => message,
        other => panic!("expected a profile error, got {other:?}"),
    }
}

fn fine(path: LoadPath, bytes: u64, stride: u32, steps: u32) -> ChaseRequest {
    ChaseRequest::fine(
        path,
        ChainSpec::new(bytes, stride).expect("valid chain"),
        steps,
    )
}

fn run(profile: SimProfile, request: &ChaseRequest) -> Vec<u32> {
    let mut gpu = SimBackend::new(profile).expect("valid profile");
    let run = gpu.chase(request).expect("chase runs");
    run.blocks[0].latencies.clone()
}

/// A copy of `profile` without jitter or outliers, so latencies are exact.
fn quiet(mut profile: SimProfile) -> SimProfile {
    profile.noise = Default::default();
    profile
}
