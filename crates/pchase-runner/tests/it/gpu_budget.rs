//! On a GPU: what the default run leaves out or shortens decides what the full work
//! decided. The L2 sweep's sizes left out hold no near or far hits; the largest size's
//! quarter timed pass reads what a whole one reads; the cold fetch-granularity chase finds
//! the spacing of a chase warmed up over twice the cache. Without a GPU they say that they
//! skipped.

#![cfg(feature = "cuda")]

use std::time::Duration;

use pchase_runner::{
    measure::{l2::sweep, line_from_misses, MeasureOptions, Selection, Session},
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
fn the_largest_sizes_quarter_pass_reads_what_a_whole_one_reads() {
    let Some(mut gpu) = gpu_or_skip("the_largest_sizes_quarter_pass_reads_what_a_whole_one_reads")
    else {
        return;
    };
    let _ = gpu.measure_sm_clock_mhz();
    let overhead = f64::from(gpu.clock_overhead(256).expect("overhead"));
    let l2 = gpu.device().l2_bytes;
    let largest = *sweep::sweep_sizes(l2).last().expect("sizes");
    let mut t = Duration::ZERO;
    let mean = |samples: &[f64]| samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    for _ in 0..2 {
        let quarter = sweep::sweep(&mut *gpu, &[largest], l2, overhead, &mut t).expect("sweep");
        let whole =
            sweep::measure_point(&mut *gpu, largest, sweep::SWEEP_SAMPLES, overhead, &mut t)
                .expect("launch")
                .expect("on SM 0");
        let quarter = &quarter[0];
        eprintln!(
            "{largest} B: mean {:.1} (quarter) against {:.1} (whole), samples {:.1} against {:.1}",
            quarter.mean,
            whole.mean,
            mean(&quarter.samples),
            mean(&whole.samples)
        );
        assert!((quarter.mean / whole.mean - 1.0).abs() < 0.03);
        assert!((mean(&quarter.samples) / mean(&whole.samples) - 1.0).abs() < 0.03);
    }
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
