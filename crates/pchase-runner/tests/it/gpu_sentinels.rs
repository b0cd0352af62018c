//! On a GPU: the L2-hit sentinel's 32 KiB chain reads what a 512 KiB one reads. A chase
//! times its loads after one whole pass from the chain's first node, so both time the same
//! first 256 lines; the longer chain only warms up longer. Without a GPU it says that it
//! skipped.

#![cfg(feature = "cuda")]

use pchase_runner::{Backend, ChainSpec, ChaseRequest, LoadPath};

use crate::gpu::gpu_or_skip;

/// The mean of the middle 80 % of one block's 256 timed loads, as the sentinel takes it.
fn l2_hit(gpu: &mut pchase_runner::cuda::CudaBackend, bytes: u64) -> f64 {
    let chain = ChainSpec::new(bytes, 128).unwrap();
    let run = gpu
        .chase(&ChaseRequest::fine(LoadPath::GlobalCg, chain, 256))
        .unwrap();
    let mut samples = run.blocks[0].latencies.clone();
    samples.sort_unstable();
    let middle = &samples[25..231];
    middle.iter().map(|&c| f64::from(c)).sum::<f64>() / middle.len() as f64
}

#[test]
fn the_l2_sentinel_chain_reads_what_a_longer_one_reads() {
    let Some(mut gpu) = gpu_or_skip("the_l2_sentinel_chain_reads_what_a_longer_one_reads") else {
        return;
    };
    let _ = gpu.measure_sm_clock_mhz().unwrap();
    let mut pairs = Vec::new();
    for _ in 0..5 {
        pairs.push((l2_hit(&mut gpu, 32 * 1024), l2_hit(&mut gpu, 512 * 1024)));
    }
    eprintln!("L2 hit, 32 KiB against 512 KiB chain (cycles): {pairs:.1?}");
    for (short, long) in pairs {
        // Well inside the sentinel's own tolerance of 10 % + 2 cycles.
        assert!(
            (short - long).abs() <= 0.03 * long + 2.0,
            "{short:.1} against {long:.1}"
        );
    }
}
