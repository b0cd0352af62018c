//! On a GPU: loads every module, runs the chase for each load path and checks the chain's
//! result. Without a GPU (or without a driver) it says that it skipped.

#![cfg(feature = "cuda")]

use std::{
    io::Write,
    ops::{Deref, DerefMut},
    sync::{Mutex, MutexGuard, PoisonError},
};

use pchase_runner::{
    cuda::CudaBackend, Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath,
    PinnedRequest, PinnedRun, RunnerError,
};

/// The backend on device 0, or `None` with a message saying why the test skips.
///
/// The message goes straight to the process's stderr, past libtest's output capture, so
/// that a run without a GPU shows that these tests skipped.
///
/// The GPU tests take turns (a process-wide lock held as long as the backend lives): run
/// at once, one test's kernels time-slice with another's, and the partition map or a
/// pinned chase that needs every SM, or a clean timing, sees the other test's work (on
/// the H100: a pinned chase at 2700 cycles per L2 hit, the map missing SM 0).
pub(crate) fn gpu_or_skip(test: &str) -> Option<Gpu> {
    gpu_with_or_skip(test, CudaBackend::new)
}

/// The GPU tests' turn, held as long as the guard lives.
pub(crate) fn turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`gpu_or_skip`] with the backend made by `create` from the device index.
pub(crate) fn gpu_with_or_skip(
    test: &str,
    create: impl FnOnce(u32) -> Result<CudaBackend, RunnerError>,
) -> Option<Gpu> {
    let turn = turn();
    match create(0) {
        Ok(backend) => Some(Gpu {
            backend,
            _turn: turn,
        }),
        Err(e @ (RunnerError::NoDevice | RunnerError::NoDriver(_))) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no GPU ({e})");
            None
        }
        Err(e) => panic!("{test}: the GPU is there but the backend failed: {e}"),
    }
}

/// A CUDA backend that holds the GPU tests' turn.
pub(crate) struct Gpu {
    backend: CudaBackend,
    _turn: MutexGuard<'static, ()>,
}

impl Deref for Gpu {
    type Target = CudaBackend;
    fn deref(&self) -> &CudaBackend {
        &self.backend
    }
}

impl DerefMut for Gpu {
    fn deref_mut(&mut self) -> &mut CudaBackend {
        &mut self.backend
    }
}

#[test]
fn every_supported_module_loads() {
    let Some(gpu) = gpu_or_skip("every_supported_module_loads") else {
        return;
    };
    let cc = pchase_kernels::ComputeCapability::from(gpu.device().compute_capability);
    let expected: Vec<&str> = pchase_kernels::catalogue::modules()
        .iter()
        .filter(|m| m.supports(cc) && !m.loaded_on_demand())
        .map(|m| m.name())
        .collect();
    assert_eq!(gpu.loaded_modules(), expected);
    eprintln!(
        "{} (cc {}, {} SMs): loaded {:?}",
        gpu.device().name,
        gpu.device().compute_capability,
        gpu.device().sm_count,
        expected
    );
}

#[test]
fn chase_follows_the_chain_on_every_path() {
    let Some(mut gpu) = gpu_or_skip("chase_follows_the_chain_on_every_path") else {
        return;
    };
    let sms = gpu.device().sm_count;
    for path in LoadPath::ALL {
        for mode in [ChaseMode::Fine, ChaseMode::Coarse] {
            // Two blocks with different sizes: one launch sweeps two array sizes.
            let request = ChaseRequest {
                path,
                mode,
                chains: vec![
                    ChainSpec::new(2048, 32).unwrap(),
                    ChainSpec::new(4096, 32).unwrap(),
                ],
                warmup_steps: 128,
                steps: 256,
                carveout: Carveout::DriverDefault,
                flush_l2: false,
                reserve_shared_bytes: 0,
                written_bytes: 0,
            };
            // The backend verifies every returned index and the final index against the
            // chain, so success here means the kernel followed the chain.
            let run = gpu
                .chase(&request)
                .unwrap_or_else(|e| panic!("{path} {mode:?}: {e}"));
            assert_eq!(run.blocks.len(), 2);
            for block in &run.blocks {
                assert!(block.smid < sms, "{path}: smid {} >= {sms}", block.smid);
                match mode {
                    ChaseMode::Fine => {
                        assert_eq!(block.latencies.len(), 256);
                        assert!(block.latencies.iter().all(|&l| l > 0 && l < 100_000));
                    }
                    ChaseMode::Coarse => {
                        let cycles = block.total_cycles.expect("coarse mode reports cycles");
                        assert!(cycles >= 256, "{path}: {cycles} cycles for 256 loads");
                    }
                }
            }
            let median = |b: &pchase_runner::BlockSamples| {
                let mut l = b.latencies.clone();
                l.sort_unstable();
                l.get(l.len() / 2).copied()
            };
            eprintln!(
                "{path:>9} {mode:?}: smid {:?}, median latency {:?} cycles, total {:?} cycles, {:?}",
                run.blocks.iter().map(|b| b.smid).collect::<Vec<_>>(),
                run.blocks.iter().map(median).collect::<Vec<_>>(),
                run.blocks.iter().map(|b| b.total_cycles).collect::<Vec<_>>(),
                run.gpu_time
            );
        }
    }
    let overhead = gpu.clock_overhead(256).unwrap();
    let mhz = gpu.measure_sm_clock_mhz().unwrap();
    eprintln!("clock overhead {overhead} cycles, SM clock {mhz:.0} MHz");
    assert!(overhead < 1000);
    assert!((100.0..5000.0).contains(&mhz));
}

#[test]
fn bad_device_index_is_a_typed_error() {
    let Some(gpu) = gpu_or_skip("bad_device_index_is_a_typed_error") else {
        return;
    };
    drop(gpu);
    match CudaBackend::new(9999) {
        Err(RunnerError::BadDeviceIndex { index: 9999, .. }) => {}
        other => panic!("expected BadDeviceIndex, got {other:?}"),
    }
}

#[test]
fn without_a_gpu_the_error_says_so() {
    // On a machine without a GPU this is the path users see; on a GPU machine it is
    // vacuous, so it checks the other direction: a working backend.
    match CudaBackend::device_count() {
        Ok(n) => assert!(n > 0),
        Err(e @ (RunnerError::NoDevice | RunnerError::NoDriver(_))) => {
            let text = e.to_string();
            assert!(text.contains("no CUDA"), "unclear message: {text}");
        }
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

#[test]
fn two_phase_probe_follows_chain_a_on_every_pair() {
    let Some(mut gpu) = gpu_or_skip("two_phase_probe_follows_chain_a_on_every_pair") else {
        return;
    };
    let paths = [
        LoadPath::GlobalCa,
        LoadPath::GlobalNc,
        LoadPath::Texture,
        LoadPath::Constant,
    ];
    for first in paths {
        for second in paths {
            let phase = |path, thread| pchase_runner::Phase {
                path,
                chain: ChainSpec::new(1024, 32).unwrap(),
                thread,
                steps: 32,
            };
            let request = pchase_runner::TwoPhaseRequest {
                fill: phase(first, 0),
                evict: phase(second, 32),
                timed_steps: 64,
                blocks: 4,
                threads: 64,
                carveout: Carveout::Percent(0),
                flush_l2: false,
                block_fill: false,
            };
            // The backend checks every re-timed index of chain A.
            let run = gpu
                .two_phase(&request)
                .unwrap_or_else(|e| panic!("{first}/{second}: {e}"));
            assert_eq!(run.blocks.len(), 4);
            assert!(run.blocks.iter().all(|b| b.latencies.len() == 64));
        }
    }
}

/// The L2 line probe's block-filled launch: the block loads 4 MiB of chain A and a sparse
/// chain B, then thread 0 re-times A's first 2048 nodes (the backend checks every index);
/// A fits the L2, so most of them hit it, as after one thread's chase.
#[test]
fn a_block_filled_two_phase_launch_re_times_chain_a() {
    let Some(mut gpu) = gpu_or_skip("a_block_filled_two_phase_launch_re_times_chain_a") else {
        return;
    };
    let whole = |bytes: u64, stride: u32| {
        let chain = ChainSpec::new(bytes, stride).unwrap();
        pchase_runner::Phase {
            path: LoadPath::GlobalCg,
            chain,
            thread: 0,
            steps: u32::try_from(chain.nodes()).unwrap(),
        }
    };
    let request = pchase_runner::TwoPhaseRequest {
        fill: whole(4 << 20, 64),
        evict: whole(1024 * 33 * 128, 33 * 128),
        timed_steps: 2048,
        blocks: 1,
        threads: 1024,
        carveout: Carveout::Percent(0),
        flush_l2: true,
        block_fill: true,
    };
    let run = gpu.two_phase(&request).expect("block-filled launch");
    let mut latencies = run.blocks[0].latencies.clone();
    assert_eq!(latencies.len(), 2048);
    latencies.sort_unstable();
    let median = latencies[latencies.len() / 2];
    eprintln!(
        "block-filled re-timed loads: median {median} cycles, GPU time {:?}",
        run.gpu_time
    );
    // L2 hits (about 200-300 cycles on Volta to Hopper), not device memory (500 and more).
    assert!(median < 450, "median {median} cycles");
}

/// A list chase on the GPU: the backend checks every index against the list; twelve lines
/// scattered over 64 KiB stay in the L1 (`.ca`), so after the warm-up they hit it.
#[test]
fn a_list_chase_follows_its_list_on_the_gpu() {
    let Some(mut gpu) = gpu_or_skip("a_list_chase_follows_its_list_on_the_gpu") else {
        return;
    };
    let request = pchase_runner::ListChaseRequest {
        path: LoadPath::GlobalCa,
        line_bytes: 128,
        lines: vec![40, 3, 511, 17, 260, 99, 7, 300, 128, 64, 450, 5],
        warmup_steps: 24,
        steps: 96,
        carveout: Carveout::Percent(0),
    };
    let run = gpu.list_chase(&request).expect("list chase");
    let mut latencies = run.blocks[0].latencies.clone();
    assert_eq!(latencies.len(), 96);
    latencies.sort_unstable();
    let median = latencies[48];
    // L1 hits (about 30-40 cycles on Volta to Hopper), not L2 hits (200 and more).
    assert!(median < 120, "median {median} cycles");
}

#[test]
fn a_parallel_fill_measures_like_a_single_thread_fill() {
    let Some(mut gpu) = gpu_or_skip("a_parallel_fill_measures_like_a_single_thread_fill") else {
        return;
    };
    // L2-scale arrays, where a fill by thousands of threads leaves the L2 in a different
    // state than one thread's: after the timing thread's own warm-up pass it must not matter.
    for mib in [8u64, 20, 40, 80] {
        let chain = ChainSpec::new(mib << 20, 128).unwrap();
        let nodes = chain.nodes() as u32;
        let request = ChaseRequest {
            path: LoadPath::GlobalCg,
            mode: ChaseMode::Coarse,
            chains: vec![chain],
            warmup_steps: nodes,
            steps: nodes.min(1 << 16),
            carveout: Carveout::Percent(0),
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        // Parallel, single, parallel, single: below the L2's near capacity (20 MiB; the
        // H200's one-SM knee is at 26-28 MiB, the H100's near partition 25 MiB) the mean
        // moves by a few percent between launches whichever fill ran, so the fills may
        // differ by 2 % plus the spread between two launches of the same fill, and no more.
        // At 24 MiB, 1 MiB from the H100's near-partition edge, one H100 (GPU-559f43c7)
        // read 295/294 cycles after parallel fills and 306/302 after single
        // ones: the edge's mixture, not the fill.
        let mut means = [Vec::new(), Vec::new()];
        for single in [false, true, false, true] {
            gpu.set_single_thread_fill(single);
            let run = gpu.chase(&request).unwrap();
            let cycles = run.blocks[0].total_cycles.unwrap() as f64;
            means[usize::from(single)].push(cycles / f64::from(request.steps));
        }
        gpu.set_single_thread_fill(false);
        let average = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let spread = |v: &[f64]| (v[0] - v[1]).abs();
        let (parallel, single) = (average(&means[0]), average(&means[1]));
        let allowed = 0.02 * parallel + spread(&means[0]).max(spread(&means[1]));
        eprintln!(
            "{mib} MiB: parallel fill {:.1?}, single-thread fill {:.1?} cycles per load; difference {:.1}, allowed {allowed:.1}",
            means[0],
            means[1],
            (parallel - single).abs()
        );
        assert!((parallel - single).abs() <= allowed, "{mib} MiB: {means:?}");
    }
}

/// The pinned chase runs each slot on the SM it names, every launch: the first SM, one
/// halfway and the last, with different chain lengths (the backend checks each final
/// index against its chain); a launch that did not start together is repeated, at most
/// four times, as the L2 pair test does.
#[test]
fn pinned_chases_run_on_the_sms_they_name() {
    let Some(mut gpu) = gpu_or_skip("pinned_chases_run_on_the_sms_they_name") else {
        return;
    };
    let count = gpu.device().sm_count;
    let sms = vec![0, count / 2, count - 1];
    let request = PinnedRequest {
        sms: sms.clone(),
        chains: vec![
            ChainSpec::new(64 * 1024, 128).unwrap(),
            ChainSpec::new(1 << 20, 128).unwrap(),
            ChainSpec::new(4 << 20, 128).unwrap(),
        ],
        warmup_steps: 10_000,
        steps: 4096,
        warps: 1,
        sample_steps: 0,
        chains_per_warp: 1,
    };
    for launch in 0..3 {
        let run = (0..4)
            .map(|_| gpu.pinned_chase(&request).expect("pinned chase runs"))
            .find(PinnedRun::complete)
            .unwrap_or_else(|| panic!("launch {launch}: never started together in 4 tries"));
        let ran: Vec<u32> = run.slots.iter().flatten().map(|s| s.sm).collect();
        assert_eq!(ran, sms);
        for slot in run.slots.iter().flatten() {
            let per_load = slot.total_cycles as f64 / 4096.0;
            // An L2 hit (or a DRAM access for the 4 MiB chain's first pass) per load.
            assert!((100.0..2000.0).contains(&per_load), "{slot:?}");
        }
        eprintln!(
            "pinned launch {launch}: {:?}",
            run.slots
                .iter()
                .flatten()
                .map(|s| (s.sm, s.total_cycles / 4096))
                .collect::<Vec<_>>()
        );
    }
    let bad = PinnedRequest {
        sms: vec![count],
        chains: vec![ChainSpec::new(4096, 128).unwrap()],
        warmup_steps: 0,
        steps: 1,
        warps: 1,
        sample_steps: 0,
        chains_per_warp: 1,
    };
    assert!(matches!(
        gpu.pinned_chase(&bad),
        Err(RunnerError::InvalidRequest(_))
    ));
}

/// Several warps per slot and sampled loads: on one SM, an L2-resident array and one four
/// times the L2 size. Every warp's pass and every sample must follow the chain (the backend
/// checks the indices); the resident array's loads are L2 hits, the large one's slower, in
/// the mean and in the samples alike.
#[test]
fn pinned_chases_with_several_warps_sample_their_loads() {
    let Some(mut gpu) = gpu_or_skip("pinned_chases_with_several_warps_sample_their_loads") else {
        return;
    };
    let l2 = gpu.device().l2_bytes;
    let mut means = Vec::new();
    for bytes in [(l2 / 8) / 128 * 128, (4 * l2) / 128 * 128] {
        let chain = ChainSpec::new(bytes, 128).unwrap();
        let nodes = chain.nodes() as u32;
        let request = PinnedRequest {
            sms: vec![0],
            chains: vec![chain],
            warmup_steps: 2 * nodes / 32,
            steps: nodes / 32,
            warps: 32,
            sample_steps: 2048,
            chains_per_warp: 1,
        };
        let run = (0..4)
            .map(|_| gpu.pinned_chase(&request).expect("pinned chase runs"))
            .find(PinnedRun::complete)
            .expect("SM 0 reached in 4 tries");
        let slot = run.slots[0].as_ref().expect("slot");
        let mean = slot.cycles_per_load(&request);
        let mut samples = slot.samples.clone();
        samples.sort_unstable();
        let p50 = samples[samples.len() / 2];
        eprintln!(
            "{bytes} B, 32 warps: {mean:.1} cycles per load, samples p5 {} p50 {p50} p95 {}, {:?}",
            samples[samples.len() / 20],
            samples[samples.len() * 19 / 20],
            run.gpu_time
        );
        assert_eq!(samples.len(), 2048);
        assert!((100.0..3000.0).contains(&mean), "{mean}");
        means.push((mean, f64::from(p50)));
    }
    assert!(means[1].0 > 1.5 * means[0].0, "{means:?}");
    assert!(means[1].1 > 1.5 * means[0].1, "{means:?}");
}

/// The partition map: every SM times its array; the reference's own array comes back at
/// one (near) level; SMs that find a share of their lines far form the other partition(s).
#[test]
fn the_partition_map_reaches_every_sm() {
    let Some(mut gpu) = gpu_or_skip("the_partition_map_reaches_every_sm") else {
        return;
    };
    if gpu.device().compute_capability.major < 7 {
        eprintln!("SKIPPED the_partition_map_reaches_every_sm: needs compute capability 7.0");
        return;
    }
    let request = pchase_runner::PartitionMapRequest {
        reference_sm: 0,
        lines_per_sm: 256,
        line_bytes: 128,
    };
    let run = gpu.partition_map(&request).expect("map runs");
    let count = gpu.device().sm_count as usize;
    assert_eq!(run.sms.len(), count);
    let far_share: Vec<f64> = run
        .sms
        .iter()
        .enumerate()
        .map(|(sm, seen)| {
            let seen = seen
                .as_ref()
                .unwrap_or_else(|| panic!("SM {sm} took no part"));
            assert_eq!(seen.cold.len(), 256);
            let mut warm = seen.warm.clone();
            warm.sort_unstable();
            let threshold = 1.35 * f64::from(warm[warm.len() / 2]);
            seen.cold
                .iter()
                .filter(|&&c| f64::from(c) > threshold)
                .count() as f64
                / 256.0
        })
        .collect();
    eprintln!(
        "partition map ({:?}): far share per SM {:?}",
        run.gpu_time,
        far_share
            .iter()
            .map(|f| (f * 100.0).round() as u32)
            .collect::<Vec<_>>()
    );
    assert!(
        far_share[0] < 0.05,
        "the reference finds its own lines near"
    );
}
