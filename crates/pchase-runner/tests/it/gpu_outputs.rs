//! On a GPU: the launches whose outputs are regions of the backend's reused buffers (the
//! clock measurements, the cluster chases and streams) report what they report with
//! buffers of their own, launch after launch: a clock reading between chases, cluster
//! launches of growing and shrinking sizes back to back, each checked by the backend against
//! its chain. Without a GPU, or on one without clusters, it says that it skipped.

#![cfg(feature = "cuda")]

use std::io::Write;

use pchase_kernels::catalogue;
use pchase_runner::{
    cluster::{ClusterChaseRequest, ClusterStreamRequest, StreamMode},
    Backend, ChainSpec, ChaseRequest, LoadPath,
};

use crate::gpu::gpu_or_skip;

#[test]
fn clock_readings_between_chases_agree_with_the_long_measurement() {
    let Some(mut gpu) =
        gpu_or_skip("clock_readings_between_chases_agree_with_the_long_measurement")
    else {
        return;
    };
    // Warm: the clock is up before the long measurement that the quick ones are held to.
    let _ = gpu.measure_sm_clock_mhz().unwrap();
    let long = gpu.measure_sm_clock_mhz().unwrap();
    let overhead = gpu.clock_overhead(256).unwrap();
    for _ in 0..8 {
        // A chase fills the outputs buffer with its own results in between.
        let chain = ChainSpec::new(512 * 1024, 128).unwrap();
        gpu.chase(&ChaseRequest::fine(LoadPath::GlobalCg, chain, 256))
            .unwrap();
        let quick = gpu.quick_sm_clock_mhz().unwrap();
        // The quick reading's resolution is a few tenths of a percent.
        assert!(
            (quick - long).abs() <= 0.015 * long,
            "quick {quick:.1} MHz, long {long:.1} MHz"
        );
        let again = gpu.clock_overhead(256).unwrap();
        assert!(
            again.abs_diff(overhead) <= 2,
            "{again} against {overhead} cycles"
        );
    }
    eprintln!("SM clock {long:.1} MHz; clock overhead {overhead} cycles");
}

#[test]
fn cluster_launches_back_to_back_report_every_block() {
    let test = "cluster_launches_back_to_back_report_every_block";
    let Some(mut gpu) = gpu_or_skip(test) else {
        return;
    };
    let sms = gpu.device().sm_count;
    let Some(clusters) = gpu.clusters() else {
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: the GPU has no clusters");
        return;
    };
    let chain = ChainSpec::new(4096, 64).unwrap();
    let needed = catalogue::dsmem_cluster_chase()
        .dynamic_shared_bytes(32, chain.elements() as u32)
        .unwrap();
    // Resident clusters with the larger of the chase's and the stream's shared memory.
    let limits = clusters.cluster_limits(needed.max(64 * 1024)).unwrap();
    // Growing, then shrinking: a launch's outputs never show a larger one's before it.
    for size in [2, 4, 8, 4, 2] {
        let count = limits.active(size);
        assert!(count > 0, "no cluster of {size} can be resident");
        for offset in 0..2 {
            let run = clusters
                .cluster_chase(&ClusterChaseRequest {
                    cluster_size: size,
                    clusters: count,
                    chain,
                    warmup_steps: 8,
                    steps: 32,
                    target_offset: offset,
                })
                .unwrap_or_else(|e| panic!("chase, clusters of {size}: {e}"));
            assert_eq!(run.placements.len(), (count * size) as usize);
            assert_eq!(run.chases.len(), count as usize);
            for chase in &run.chases {
                assert!(chase.source_sm < sms && chase.target_sm < sms);
                assert_eq!(chase.latencies.len(), 32);
                assert!(chase.latencies.iter().all(|&l| l > 0 && l < 100_000));
            }
        }
        let stream = clusters
            .cluster_stream(&ClusterStreamRequest {
                cluster_size: size,
                clusters: count,
                threads: 512,
                bytes: 64 * 1024,
                repeats: 2,
                mode: StreamMode::RemoteRead,
            })
            .unwrap_or_else(|e| panic!("stream, clusters of {size}: {e}"));
        assert_eq!(stream.blocks.len(), (count * size) as usize);
        assert!(stream
            .blocks
            .iter()
            .all(|(p, cycles)| p.sm < sms && p.rank < size && *cycles > 0));
    }
}
