//! On a GPU: what the default run leaves out or shortens decides what the full work
//! decided. The L2 sweep's sizes left out hold no near or far hits; the cold fetch-granularity chase finds
//! the spacing of a chase warmed up over twice the cache. Without a GPU they say that they
//! skipped.

#![cfg(feature = "cuda")]

use pchase_runner::{
    measure::{line_from_misses, MeasureOptions, Selection, Session},
    Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath,
};

use crate::{gpu::gpu_or_skip, launch_budget::left_out_sizes_decide_nothing};

#[test]
fn the_l2_sizes_left_out_hold_no_hits() {
    let Some(mut gpu) = gpu_or_skip("the_l2_sizes_left_out_hold_no_hits") else {
        return;
    };
    let options = MeasureOptions {
        only: Selection::named(&["l2"]).expect("registered"),
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut *gpu, options)
        .run()
        .expect("session runs");
    let found = m.l2.as_ref().expect("the L2 measured");
    let overhead = f64::from(m.clock_overhead.unwrap_or(0));
    let name = gpu.device().name.clone();
    left_out_sizes_decide_nothing(&mut *gpu, found, overhead, &name);
}

#[test]
fn the_cold_fetch_granularity_chase_finds_the_warm_ones_spacing() {
    let Some(mut gpu) = gpu_or_skip("the_cold_fetch_granularity_chase_finds_the_warm_ones_spacing")
    else {
        return;
    };
    // Twice a cache of some 240 KiB (the L1 of an H100 or H200), 768 loads timed.
    let chain = ChainSpec::new(2 * 240 * 1024, 4).expect("chain");
    for path in [LoadPath::GlobalCa, LoadPath::GlobalNc, LoadPath::Texture] {
        let spacing = |gpu: &mut pchase_runner::cuda::CudaBackend, warmup_steps: u32| {
            let run = gpu
                .chase(&ChaseRequest {
                    path,
                    mode: ChaseMode::Fine,
                    chains: vec![chain],
                    warmup_steps,
                    steps: 768,
                    carveout: Carveout::Percent(0),
                    flush_l2: false,
                    reserve_shared_bytes: 0,
                    written_bytes: 0,
                })
                .expect("chase");
            line_from_misses(&run.blocks[0].latencies).expect("misses")
        };
        let warm = spacing(&mut gpu, u32::try_from(chain.nodes()).expect("fits"));
        let cold = spacing(&mut gpu, 0);
        eprintln!(
            "{path:?}: {} B cold ({:.2} agreement), {} B warm ({:.2})",
            cold.bytes, cold.agreement, warm.bytes, warm.agreement
        );
        assert_eq!(cold.bytes, warm.bytes, "{path:?}");
    }
}
