//! On a GPU: the bandwidth module loads whole from its cubin on the first request (or, with
//! no cubin for the GPU, its kernels one by one, each on its first request), every operation
//! runs, and what it reports is physically possible (device memory below the API's peak,
//! the L1 and shared memory below 128 B per clock per SM). Without a GPU it says it skipped.

#![cfg(feature = "cuda")]

use pchase_runner::{
    bandwidth::{BandwidthOp, BandwidthRequest, BandwidthShape, RegionLayout},
    cuda::{CudaBackend, ModuleCode},
    measure::bandwidth::{api_memory_peak, BandwidthLevel, LevelPlan, FINAL_LAUNCH},
    Backend,
};

use crate::gpu::gpu_or_skip;

#[test]
fn every_bandwidth_level_runs_within_what_the_hardware_allows() {
    let Some(mut gpu) = gpu_or_skip("every_bandwidth_level_runs_within_what_the_hardware_allows")
    else {
        return;
    };
    assert!(!gpu.loaded_modules().contains(&"bandwidth"));
    assert!(gpu.loaded_bandwidth_kernels().is_empty());
    assert!(!gpu.bandwidth_module_loaded());
    let device = gpu.device().clone();
    let mhz = gpu.measure_sm_clock_mhz().expect("clock");
    for level in BandwidthLevel::ALL {
        let plan = LevelPlan::new(level, &device, mhz, None, None).expect("plan");
        let request = plan.request(plan.seed, device.sm_count, FINAL_LAUNCH, 3, true);
        let run = gpu.bandwidth(&request).expect("bandwidth launch");
        assert_eq!(run.elapsed.len(), 3);
        let best = run.best_bytes_per_second().expect("timed");
        let per_sm_clock = best / (mhz * 1e6 * f64::from(device.sm_count));
        eprintln!(
            "{level}: {:.1} GB/s ({per_sm_clock:.1} B/clk/SM) with {}",
            best / 1e9,
            plan.seed
        );
        match level {
            BandwidthLevel::L1 | BandwidthLevel::Shared => {
                // 3 % over 128 B/clk/SM allows for the clock measured before, not during.
                assert!(per_sm_clock < 132.0, "{level}: {per_sm_clock} B/clk/SM");
            }
            BandwidthLevel::MemoryRead
            | BandwidthLevel::MemoryWrite
            | BandwidthLevel::MemoryCopy => {
                // At or under the peak: launches timed with a host wait after each, or
                // back to back over one buffer, came out at 100.6 %.
                let peak = api_memory_peak(&device).expect("the API states the memory");
                assert!(best <= peak, "{level}: {best} B/s over the peak {peak}");
            }
            BandwidthLevel::L2Near | BandwidthLevel::L2 | BandwidthLevel::L2Write => {
                assert!(per_sm_clock < 256.0, "{level}: {per_sm_clock} B/clk/SM");
            }
        }
        assert!(best > 1e9, "{level}: {best} B/s is implausibly slow");
    }
    // From its cubin the module loaded whole, once; from its PTX only the kernels launched
    // were compiled, each alone.
    let loaded = gpu.loaded_bandwidth_kernels();
    if from_cubin(&gpu) {
        assert!(gpu.bandwidth_module_loaded());
        assert!(loaded.is_empty(), "{loaded:?}");
    } else {
        assert!(!gpu.bandwidth_module_loaded());
        assert!(
            !loaded.is_empty() && loaded.len() <= BandwidthLevel::ALL.len(),
            "{loaded:?}"
        );
    }
    assert!(!gpu.loaded_modules().contains(&"bandwidth"));
}

/// Whether module `bandwidth` was loaded from a cubin (once, whole).
fn from_cubin(gpu: &CudaBackend) -> bool {
    let loads: Vec<ModuleCode> = gpu
        .module_loads()
        .iter()
        .filter(|(name, _)| *name == "bandwidth")
        .map(|(_, code)| *code)
        .collect();
    match loads[..] {
        [ModuleCode::Cubin(_)] => true,
        _ => {
            assert!(
                loads.iter().all(|c| matches!(c, ModuleCode::Ptx(_))),
                "{loads:?}"
            );
            false
        }
    }
}

#[test]
fn every_bandwidth_kernel_launches() {
    let Some(mut gpu) = gpu_or_skip("every_bandwidth_kernel_launches") else {
        return;
    };
    for kernel in pchase_kernels::bandwidth::kernels() {
        let shape = pchase_kernels::bandwidth::shape_of(kernel).expect("bandwidth kernel");
        let shared = shape.op == BandwidthOp::SharedRead;
        let request = BandwidthRequest {
            shape: BandwidthShape {
                op: shape.op,
                vector_bytes: shape.vector_bytes,
                unroll: shape.unroll,
                blocks_per_sm: 2,
                threads: 256,
            },
            layout: if shared {
                RegionLayout::PerBlock
            } else {
                RegionLayout::GridStride
            },
            region_bytes: if shared { 16 << 10 } else { 16 << 20 },
            iterations: 4,
            repetitions: 1,
            warm_up: true,
        };
        let run = gpu
            .bandwidth(&request)
            .unwrap_or_else(|e| panic!("{}: {e}", kernel.entry()));
        assert!(run.best_bytes_per_second().is_some(), "{}", kernel.entry());
    }
    let separately = if from_cubin(&gpu) {
        0
    } else {
        pchase_kernels::bandwidth::kernels().count()
    };
    assert_eq!(gpu.loaded_bandwidth_kernels().len(), separately);
}

/// A level that reads data a cache keeps (the L1, shared memory, the L2) reads as fast
/// without an untimed launch, right after a request of its own with one, as with it: the
/// search warms such a level up once (`BandwidthLevel::reads_cached_data`). Not the L2's
/// near-partition read, whose launches move between rates 12–13 % apart.
#[test]
fn cached_data_needs_no_untimed_launch_after_the_levels_first_request() {
    let Some(mut gpu) =
        gpu_or_skip("cached_data_needs_no_untimed_launch_after_the_levels_first_request")
    else {
        return;
    };
    let device = gpu.device().clone();
    let mhz = gpu.measure_sm_clock_mhz().expect("clock");
    for level in BandwidthLevel::ALL
        .into_iter()
        .filter(|l| l.reads_cached_data() && *l != BandwidthLevel::L2Near)
    {
        let plan = LevelPlan::new(level, &device, mhz, None, None).expect("plan");
        let best = |gpu: &mut CudaBackend, warm_up: bool| {
            let request = plan.request(plan.seed, device.sm_count, FINAL_LAUNCH, 3, warm_up);
            gpu.bandwidth(&request)
                .expect("bandwidth launch")
                .best_bytes_per_second()
                .expect("timed")
        };
        let with = best(&mut gpu, true);
        let without = best(&mut gpu, false);
        eprintln!(
            "{level}: {:.1} GB/s after an untimed launch, {:.1} without",
            with / 1e9,
            without / 1e9
        );
        assert!(
            (without / with - 1.0).abs() < 0.01,
            "{level}: {without} against {with} B/s"
        );
    }
}
