//! Chases on the simulator: capacity and replacement, carveouts, sectors, partitions,
//! written chains and pinned chases.

use pchase_runner::sim::{SimBackend, SimProfile};
use pchase_runner::{
    Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath, PinnedRequest, RunnerError,
};

use super::*;

#[test]
fn an_array_that_fits_hits_and_one_that_exceeds_misses() {
    let fits = run(quiet(toy()), &fine(LoadPath::GlobalCa, 4096, 64, 128));
    assert_eq!(fits.len(), 128);
    assert!(fits.iter().all(|&l| l == 30 + 10), "{fits:?}");
    // One set too many lines for LRU: a cyclic chase misses every load in L1, hits L2.
    let exceeds = run(quiet(toy()), &fine(LoadPath::GlobalCa, 8192, 64, 128));
    assert!(exceeds.iter().all(|&l| l == 200 + 10), "{exceeds:?}");
    // .cg bypasses the L1 entirely.
    let cg = run(quiet(toy()), &fine(LoadPath::GlobalCg, 1024, 64, 32));
    assert!(cg.iter().all(|&l| l == 210), "{cg:?}");
    // Larger than the L2: device memory.
    let memory = run(quiet(toy()), &fine(LoadPath::GlobalCa, 256 * 1024, 64, 64));
    assert!(memory.iter().all(|&l| l == 510), "{memory:?}");
}

#[test]
fn cold_caches_at_every_launch() {
    let mut gpu = SimBackend::new(quiet(toy())).unwrap();
    let mut request = fine(LoadPath::GlobalCa, 1024, 64, 16);
    request.warmup_steps = 0;
    for _ in 0..2 {
        let latencies = gpu.chase(&request).unwrap().blocks.remove(0).latencies;
        assert!(
            latencies.iter().all(|&l| l == 510),
            "first pass misses: {latencies:?}"
        );
    }
}

/// Hits of a chase over the toy L1 made fully associative with `policy`, one line over
/// capacity.
fn hits_one_line_over_capacity(policy: &str) -> usize {
    let profile = quiet(
        toy_with(
            "associativity = 4\nreplacement = { policy = \"lru\" }",
            &format!("associativity = \"full\"\nreplacement = {{ policy = \"{policy}\" }}"),
        )
        .unwrap(),
    );
    let latencies = run(profile, &fine(LoadPath::GlobalCa, 4096 + 64, 64, 2000));
    latencies.iter().filter(|&&l| l == 40).count()
}

#[test]
fn lru_thrashes_at_capacity_and_random_replacement_keeps_most_lines() {
    assert_eq!(hits_one_line_over_capacity("lru"), 0);
    // Random replacement evicts a random line per miss; a cyclic chase of n + 1 lines
    // over n ways then hits most of the time (expected hit rate well above one half).
    let random = hits_one_line_over_capacity("random");
    assert!(random > 1000, "random replacement hit {random} of 2000");
}

#[test]
fn early_miss_starts_missing_at_the_documented_capacity() {
    // 4 KiB, 64 B lines, 4 ways => 16 sets; one reserved way leaves 3 KiB usable.
    let profile = quiet(
        toy_with(
            r#"replacement = { policy = "lru" }
hit_latency = 30"#,
            r#"replacement = { policy = "early-miss", reserved_ways = 1 }
hit_latency = 30"#,
        )
        .unwrap(),
    );
    let effective = profile.caches[0].effective_bytes_at(0);
    assert_eq!(effective, 3072);
    let fits = run(
        profile.clone(),
        &fine(LoadPath::GlobalCa, effective, 64, 480),
    );
    assert!(fits.iter().all(|&l| l == 40), "{fits:?}");
    // One line more: the set that gets four lines misses all four on every pass (LRU over
    // its three usable ways), every other set still hits.
    let nodes = effective / 64 + 1;
    let over = run(
        profile,
        &fine(LoadPath::GlobalCa, effective + 64, 64, 49 * 10),
    );
    let misses = over.iter().filter(|&&l| l != 40).count() as u64;
    assert_eq!(misses, 4 * (over.len() as u64 / nodes), "{over:?}");
}

#[test]
fn the_volta_l1_misses_early_and_grows_with_the_carveout() {
    let volta = quiet(SimProfile::bundled("volta").unwrap());
    let l1 = volta.unified_cache().unwrap().clone();
    let hit = l1.hit_latency + volta.clock.overhead_cycles;
    let default_shared = volta
        .shared_carveout_for(Carveout::DriverDefault, 8 * 256)
        .unwrap();
    assert_eq!(l1.size_at(default_shared), 32 * 1024);
    assert_eq!(l1.effective_bytes_at(default_shared), 24 * 1024);

    let mut gpu = SimBackend::new(volta.clone()).unwrap();
    let at = |gpu: &mut SimBackend, bytes: u64, carveout: Carveout| {
        let mut request = fine(LoadPath::GlobalCa, bytes, 32, 256);
        request.carveout = carveout;
        let latencies = gpu.chase(&request).unwrap().blocks.remove(0).latencies;
        latencies.iter().filter(|&&l| l == hit).count()
    };
    assert_eq!(at(&mut gpu, 24 * 1024, Carveout::DriverDefault), 256);
    assert_eq!(gpu.last_shared_carveout_bytes(), Some(96 * 1024));
    assert_eq!(
        at(&mut gpu, 32 * 1024, Carveout::DriverDefault),
        0,
        "at 32 KiB every set thrashes"
    );
    // With no shared memory the L1 has 128 KiB, 96 KiB of it usable.
    assert_eq!(at(&mut gpu, 64 * 1024, Carveout::Percent(0)), 256);
    assert_eq!(
        gpu.last_shared_carveout_bytes(),
        Some(8 * 1024),
        "the timing arrays need shared memory"
    );
    assert_eq!(at(&mut gpu, 64 * 1024, Carveout::DriverDefault), 0);
}

#[test]
fn sectors_fill_separately_from_lines() {
    // First pass over a fresh array with a 32 B stride: with 32 B sectors in 64 B lines
    // every load misses; with whole-line fills every second load hits.
    let mut request = fine(LoadPath::GlobalCa, 2048, 32, 64);
    request.warmup_steps = 0;
    let sectored = toy_with(
        "line_bytes = 64\nassociativity = 4",
        "line_bytes = 64\nsector_bytes = 32\nassociativity = 4",
    )
    .unwrap();
    let l1_hits = |latencies: Vec<u32>| latencies.iter().filter(|&&l| l == 40).count();
    assert_eq!(l1_hits(run(quiet(sectored), &request)), 0);
    assert_eq!(l1_hits(run(quiet(toy()), &request)), 32);
}

#[test]
fn indices_and_final_index_follow_the_chain() {
    let mut gpu = SimBackend::new(toy()).unwrap();
    let chain = ChainSpec::new(1024, 64).unwrap(); // 16 nodes, 16 elements apart
    let mut request = ChaseRequest::fine(LoadPath::GlobalCa, chain, 40);
    request.chains = vec![chain, ChainSpec::new(2048, 128).unwrap(), chain];
    request.warmup_steps = 3;
    let run = gpu.chase(&request).unwrap();
    assert_eq!(run.blocks.len(), 3);
    for (block, (nodes, stride)) in run.blocks.iter().zip([(16u32, 16u32), (16, 32), (16, 16)]) {
        let expected: Vec<u32> = (0..40).map(|k| ((3 + k + 1) % nodes) * stride).collect();
        assert_eq!(block.indices, expected);
        assert_eq!(block.final_index, ((3 + 40) % nodes) * stride);
        assert_eq!(block.latencies.len(), 40);
        assert_eq!(block.total_cycles, None);
    }
    let smids: Vec<u32> = run.blocks.iter().map(|b| b.smid).collect();
    assert_eq!(smids, [0, 1, 2]);
    assert!(run.gpu_time.as_nanos() > 0);
}

#[test]
fn coarse_mode_reports_the_total_of_the_timed_pass() {
    let mut gpu = SimBackend::new(quiet(toy())).unwrap();
    let mut request = fine(LoadPath::GlobalCa, 2048, 64, 100);
    request.mode = ChaseMode::Coarse;
    let block = gpu.chase(&request).unwrap().blocks.remove(0);
    // 100 L1 hits of 30 cycles, bracketed by one clock overhead.
    assert_eq!(block.total_cycles, Some(100 * 30 + 10));
    assert!(block.latencies.is_empty() && block.indices.is_empty());
    assert_eq!(block.final_index, (100 % 32) * 16);
}

#[test]
fn shared_loads_take_the_shared_latency() {
    let latencies = run(quiet(toy()), &fine(LoadPath::Shared, 4096, 4, 64));
    assert!(latencies.iter().all(|&l| l == 25 + 10), "{latencies:?}");
}

#[test]
fn requests_that_do_not_fit_are_refused() {
    let mut gpu = SimBackend::new(toy()).unwrap();
    let too_much_constant = fine(LoadPath::Constant, 128 * 1024, 64, 8);
    assert!(matches!(
        gpu.chase(&too_much_constant),
        Err(RunnerError::InvalidRequest(_))
    ));
    let too_much_shared = fine(LoadPath::Shared, 48 * 1024, 64, 8);
    assert!(matches!(
        gpu.chase(&too_much_shared),
        Err(RunnerError::InvalidRequest(_))
    ));
    let mut bad_percent = fine(LoadPath::GlobalCa, 1024, 64, 8);
    bad_percent.carveout = Carveout::Percent(101);
    assert!(matches!(
        gpu.chase(&bad_percent),
        Err(RunnerError::InvalidRequest(_))
    ));
    assert!(matches!(
        gpu.clock_overhead(0),
        Err(RunnerError::InvalidRequest(_))
    ));
}

#[test]
fn a_fixed_seed_gives_identical_runs_and_another_seed_differs() {
    let request = fine(LoadPath::GlobalCa, 8192, 64, 512);
    let profile = SimProfile::bundled("h100").unwrap();
    assert!(profile.noise.jitter_stdev_cycles > 0.0);
    let once = |profile: SimProfile| {
        let mut gpu = SimBackend::new(profile).unwrap();
        let run = gpu.chase(&request).unwrap();
        (
            run,
            gpu.clock_overhead(101).unwrap(),
            gpu.measure_sm_clock_mhz().unwrap(),
        )
    };
    let (a, b) = (once(profile.clone()), once(profile.clone()));
    assert_eq!(a.0, b.0);
    assert_eq!((a.1, a.2), (b.1, b.2));
    let mut reseeded = profile;
    reseeded.seed += 1;
    assert_ne!(
        once(reseeded).0.blocks[0].latencies,
        a.0.blocks[0].latencies
    );
}

#[test]
fn clock_overhead_and_sm_clock_come_from_the_profile() {
    let profile = SimProfile::bundled("volta").unwrap();
    let (overhead, mhz) = (profile.clock.overhead_cycles, profile.clock.sm_mhz);
    let mut gpu = SimBackend::new(profile).unwrap();
    // Jitter of 1 cycle: the median of many readings is the overhead itself.
    assert_eq!(gpu.clock_overhead(1001).unwrap(), overhead);
    let measured = gpu.measure_sm_clock_mhz().unwrap();
    assert!((measured - mhz).abs() < mhz * 0.01, "{measured} vs {mhz}");
}

#[test]
fn two_l2_partitions_serve_near_and_far_lines() {
    let two = |copies: bool| {
        quiet(
            toy_with(
                "near_latency = 200",
                &format!("partitions = 2\nnear_latency = 200\nfar_latency = 300\nnear_keeps_far_copies = {copies}"),
            )
            .unwrap(),
        )
    };
    // 16 KiB: beyond the 4 KiB L1, within one 32 KiB partition.
    let request = fine(LoadPath::GlobalCa, 16 * 1024, 64, 512);
    let plain = run(two(false), &request);
    let near = plain.iter().filter(|&&l| l == 210).count();
    let far = plain.iter().filter(|&&l| l == 310).count();
    assert_eq!(near + far, 512, "{plain:?}");
    assert!(
        near > 100 && far > 100,
        "lines spread over both partitions: {near} near, {far} far"
    );
    // With copies the warm-up pass put every far line in the near partition too.
    let copied = run(two(true), &request);
    assert!(copied.iter().all(|&l| l == 210), "{copied:?}");
}

/// A chain written after the flush hits the L2 exactly where the write covered whole
/// sectors; bad `written_bytes` are typed errors.
#[test]
fn a_written_chain_hits_where_whole_sectors_were_written() {
    let mut profile = SimProfile::bundled("h200").expect("bundled");
    // Without TLBs: a cold chain's first load would pay every level's miss on top of its L2
    // hit, and this test is about the L2's write coverage only.
    profile.tlb = None;
    let sector = profile.l2.sector();
    let mut sim = SimBackend::new(quiet(profile.clone())).expect("valid");
    let chain = ChainSpec::new(64 * 4096, 4096).unwrap();
    let mut request = ChaseRequest {
        warmup_steps: 0,
        flush_l2: true,
        carveout: Carveout::Percent(0),
        ..ChaseRequest::fine(LoadPath::GlobalCg, chain, 64)
    };
    let memory = profile.memory.latency;
    for written in [4, sector / 2, sector, 2 * sector, 4096] {
        request.written_bytes = written;
        let run = sim.chase(&request).expect("runs");
        let latencies = &run.blocks[0].latencies;
        let hits = latencies.iter().filter(|&&l| l < memory).count();
        if written >= sector {
            assert_eq!(hits, 64, "{written} B written: {latencies:?}");
        } else {
            assert_eq!(hits, 0, "{written} B written: {latencies:?}");
        }
    }
    for (written, flush, path) in [
        (6, true, LoadPath::GlobalCg),
        (8192, true, LoadPath::GlobalCg),
        (32, false, LoadPath::GlobalCg),
        (32, true, LoadPath::Texture),
    ] {
        let bad = ChaseRequest {
            written_bytes: written,
            flush_l2: flush,
            path,
            ..request.clone()
        };
        assert!(
            matches!(sim.chase(&bad), Err(RunnerError::InvalidRequest(_))),
            "{written} B, flush {flush}, {path}"
        );
    }
}

/// Pinned chases run each slot on the SM it names and report what the chain gives; bad
/// requests are typed errors.
#[test]
fn pinned_chases_run_where_asked_and_reject_bad_requests() {
    let mut sim = SimBackend::new(quiet(toy())).expect("valid");
    let chain = ChainSpec::new(8192, 64).expect("chain");
    let request = PinnedRequest {
        sms: vec![3, 1],
        chains: vec![chain, ChainSpec::new(4096, 64).expect("chain")],
        warmup_steps: 128,
        steps: 100,
        warps: 1,
        sample_steps: 0,
        chains_per_warp: 1,
    };
    let run = sim.pinned_chase(&request).expect("runs");
    assert!(run.complete());
    let slots: Vec<_> = run.slots.iter().flatten().collect();
    assert_eq!(slots.iter().map(|s| s.sm).collect::<Vec<_>>(), [3, 1]);
    // 228 loads from index 0 of 128 and of 64 nodes, 16 elements apart.
    assert_eq!(slots[0].final_index, (228 % 128) * 16);
    assert_eq!(slots[1].final_index, (228 % 64) * 16);
    // Warm arrays inside the L2 (8 KiB, 4 KiB of 64 KiB), not the L1 (.cg): 200 cycles a
    // load, plus one clock overhead of 10.
    assert_eq!(slots[0].total_cycles, 100 * 200 + 10);
    let bad = |change: fn(&mut PinnedRequest)| {
        let mut r = request.clone();
        change(&mut r);
        SimBackend::new(toy()).expect("valid").pinned_chase(&r)
    };
    for (what, change) in [
        (
            "no SM",
            (|r: &mut PinnedRequest| r.sms.clear()) as fn(&mut PinnedRequest),
        ),
        ("one chain too few", |r| {
            r.chains.pop();
        }),
        ("SM 4 of 4", |r| r.sms[0] = 4),
        ("the same SM twice", |r| r.sms[1] = 3),
        ("no timed step", |r| r.steps = 0),
        ("two strides", |r| {
            r.chains[1] = ChainSpec::new(4096, 128).expect("chain")
        }),
    ] {
        assert!(
            matches!(bad(change), Err(RunnerError::InvalidRequest(_))),
            "{what}"
        );
    }
}

/// A list chase visits its lines in the list's order: five lines of one set of the toy L1
/// (4 ways, 16 sets of 64-byte lines: lines 16 apart share a set) miss on every load under
/// LRU, four of them hit, and lines of five different sets hit; the final index is the
/// node after the last load.
#[test]
fn a_list_chase_follows_its_list() {
    let mut gpu = SimBackend::new(quiet(toy())).expect("valid profile");
    let chase = |gpu: &mut SimBackend, lines: Vec<u64>| {
        let request = pchase_runner::ListChaseRequest {
            path: LoadPath::GlobalCa,
            line_bytes: 64,
            lines,
            warmup_steps: 10,
            steps: 20,
            carveout: pchase_runner::Carveout::DriverDefault,
        };
        let run = gpu.list_chase(&request).expect("list chase");
        let block = &run.blocks[0];
        assert_eq!(block.latencies.len(), 20);
        // Element of the line after the 30 loads, relative to the smallest line listed.
        let first = *request.lines.iter().min().unwrap();
        let next = request.line_of_load(20);
        assert_eq!(u64::from(block.final_index), (next - first) * 16);
        block.latencies.clone()
    };
    let set: Vec<u64> = vec![3, 19, 35, 51, 67];
    let misses = |v: &[u32]| v.iter().filter(|&&c| c > 100).count();
    assert_eq!(
        misses(&chase(&mut gpu, set.clone())),
        20,
        "five lines of one 4-way set"
    );
    assert_eq!(
        misses(&chase(&mut gpu, set[..4].to_vec())),
        0,
        "four of them"
    );
    assert_eq!(
        misses(&chase(&mut gpu, vec![7, 2, 9, 4, 5])),
        0,
        "five sets"
    );
    // Bad lists are typed errors.
    for (lines, why) in [(vec![1], "one line"), (vec![2, 2], "a line twice")] {
        let request = pchase_runner::ListChaseRequest {
            path: LoadPath::GlobalCa,
            line_bytes: 64,
            lines,
            warmup_steps: 0,
            steps: 4,
            carveout: pchase_runner::Carveout::DriverDefault,
        };
        assert!(
            matches!(
                gpu.list_chase(&request),
                Err(RunnerError::InvalidRequest(_))
            ),
            "{why}"
        );
    }
}
