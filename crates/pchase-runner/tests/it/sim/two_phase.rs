//! The two-phase probe: misses exactly where two paths or two threads share a cache.

use pchase_runner::sim::Replacement;
use pchase_runner::sim::{CacheSpec, SimBackend, SimProfile, CONSTANT_BANK_BYTES};
use pchase_runner::{Backend, Carveout, ChainSpec, LoadPath, Phase, RunnerError, TwoPhaseRequest};

use super::*;

/// The paths that go through SM caches: the ones the two-phase probe compares.
pub(super) const SM_CACHE_PATHS: [LoadPath; 4] = [
    LoadPath::GlobalCa,
    LoadPath::GlobalNc,
    LoadPath::Texture,
    LoadPath::Constant,
];

/// A chain over three quarters of the lines `cache` keeps for a cyclic chase at
/// `shared_bytes` of shared memory, one node per line. Two such chains overflow the cache;
/// one fits in it.
pub(super) fn three_quarters_of(cache: &CacheSpec, shared_bytes: u64) -> ChainSpec {
    let line = cache.line_bytes;
    let lines = cache.effective_bytes_at(shared_bytes) / u64::from(line);
    ChainSpec::new((lines * 3 / 4).max(1) * u64::from(line), line).expect("valid chain")
}

/// A phase over `chain` through `path` by `thread`, warming with one full pass.
pub(super) fn pass(path: LoadPath, chain: ChainSpec, thread: u32) -> Phase {
    Phase {
        path,
        chain,
        thread,
        steps: u32::try_from(chain.nodes()).unwrap(),
    }
}

/// The probe of `fill` then `evict` on one block, re-timing one full pass over chain A.
pub(super) fn probe(fill: Phase, evict: Phase) -> TwoPhaseRequest {
    TwoPhaseRequest {
        fill,
        evict,
        timed_steps: fill.steps,
        blocks: 1,
        threads: fill.thread.max(evict.thread) + 1,
        carveout: Carveout::Percent(100),
        flush_l2: false,
        block_fill: false,
    }
}

/// The fine-grained sample of a hit in `cache` through `path`, without noise.
pub(super) fn hit_sample(profile: &SimProfile, cache: &CacheSpec, path: LoadPath) -> u32 {
    cache.hit_latency
        + profile.path_extra_latency.get(&path).copied().unwrap_or(0)
        + profile.clock.overhead_cycles
}

/// Re-timed loads of chain A that did not hit `cache` (the first SM cache on its path).
pub(super) fn misses(profile: &SimProfile, cache: &CacheSpec, request: &TwoPhaseRequest) -> usize {
    let mut gpu = SimBackend::new(profile.clone()).expect("valid profile");
    let run = gpu.two_phase(request).expect("two-phase probe runs");
    assert_eq!(run.blocks.len(), request.blocks as usize);
    let hit = hit_sample(profile, cache, request.fill.path);
    let block = &run.blocks[0];
    assert_eq!(block.latencies.len(), request.timed_steps as usize);
    block.latencies.iter().filter(|&&l| l != hit).count()
}

#[test]
fn two_phase_misses_when_both_paths_use_one_physical_cache() {
    // Volta: `.ca` loads and texture fetches both go through the unified L1.
    let volta = quiet(SimProfile::bundled("volta").unwrap());
    let l1 = volta.unified_cache().unwrap().clone();
    let shared = volta
        .shared_carveout_for(Carveout::Percent(100), 8 * 1024)
        .unwrap();
    let chain = three_quarters_of(&l1, shared);
    for (first, second) in [
        (LoadPath::Texture, LoadPath::GlobalCa),
        (LoadPath::GlobalCa, LoadPath::Texture),
    ] {
        let request = probe(pass(first, chain, 0), pass(second, chain, 0));
        // LRU over each set: B's lines are newer than all of A's, and re-chasing A from its
        // start evicts A's surviving lines before it reaches them, so the whole pass misses
        // the L1 and is served by the L2.
        assert_eq!(
            misses(&volta, &l1, &request),
            request.timed_steps as usize,
            "{first} filled, {second} evicted"
        );
        let mut gpu = SimBackend::new(volta.clone()).unwrap();
        let l2_sample = volta.l2.near_latency
            + volta.path_extra_latency.get(&first).copied().unwrap_or(0)
            + volta.clock.overhead_cycles;
        let run = gpu.two_phase(&request).unwrap();
        assert!(
            run.blocks[0].latencies.iter().all(|&l| l == l2_sample),
            "{:?} vs {l2_sample}",
            run.blocks[0].latencies
        );
        // Without the evicting phase the same pass hits.
        let mut no_evict = request;
        no_evict.evict.steps = 0;
        assert_eq!(misses(&volta, &l1, &no_evict), 0);
    }
}

#[test]
fn two_phase_does_not_miss_when_the_paths_use_separate_caches() {
    // Kepler: the L1 serves only `.ca` loads, the texture caches texture and `.nc` loads.
    let kepler = quiet(SimProfile::bundled("kepler").unwrap());
    let l1 = kepler
        .caches_on_path(LoadPath::GlobalCa)
        .next()
        .unwrap()
        .clone();
    let texture = kepler
        .caches_on_path(LoadPath::Texture)
        .next()
        .unwrap()
        .clone();
    let shared = kepler
        .shared_carveout_for(Carveout::Percent(100), 8 * 1024)
        .unwrap();
    // The evicting chain is twice the other cache: it would flush it completely.
    let flush =
        |cache: &CacheSpec| ChainSpec::new(2 * cache.size_at(shared), cache.line_bytes).unwrap();
    let l1_first = probe(
        pass(LoadPath::GlobalCa, three_quarters_of(&l1, shared), 0),
        pass(LoadPath::Texture, flush(&l1), 0),
    );
    assert_eq!(misses(&kepler, &l1, &l1_first), 0);
    let texture_first = probe(
        pass(LoadPath::Texture, three_quarters_of(&texture, shared), 0),
        pass(LoadPath::GlobalCa, flush(&texture), 0),
    );
    assert_eq!(misses(&kepler, &texture, &texture_first), 0);
    // ... while the read-only path shares the texture cache.
    let read_only = probe(
        pass(LoadPath::Texture, three_quarters_of(&texture, shared), 0),
        pass(LoadPath::GlobalNc, three_quarters_of(&texture, shared), 0),
    );
    assert_eq!(
        misses(&kepler, &texture, &read_only),
        read_only.timed_steps as usize
    );
}

#[test]
fn two_phase_misses_exactly_when_the_first_caches_of_the_paths_are_one() {
    // Every ordered pair of SM-cache paths on the bundled profiles: the truth is whether
    // the profile lists the fill path's first cache for the evict path too.
    for name in ["kepler", "maxwell", "volta", "h100"] {
        let profile = quiet(SimProfile::bundled(name).unwrap());
        let shared = profile
            .shared_carveout_for(Carveout::Percent(100), 8 * 4096)
            .unwrap();
        let mut pairs_sharing = 0;
        for fill in SM_CACHE_PATHS {
            let Some(cache) = profile.caches_on_path(fill).next() else {
                continue; // Maxwell's `.ca` loads have no SM cache.
            };
            for evict in SM_CACHE_PATHS {
                let shares = cache.serves(evict);
                if shares {
                    // The evicting chain reaches the cache on its first pass only if it is
                    // the evict path's first cache too (true of every bundled profile).
                    assert_eq!(profile.caches_on_path(evict).next(), Some(cache));
                }
                let chain = three_quarters_of(cache, shared);
                let request = probe(pass(fill, chain, 0), pass(evict, chain, 0));
                let missed = misses(&profile, cache, &request);
                let all = request.timed_steps as usize;
                let lru = matches!(
                    cache.replacement,
                    Replacement::Lru | Replacement::EarlyMiss { .. }
                );
                // Under LRU every re-timed line of A was evicted; a victim drawn among the
                // older lines (the Hopper profiles) leaves some of them.
                if shares && !lru {
                    assert!(
                        missed >= all / 4 && missed <= all,
                        "{name}: {fill} through `{}`, then {evict}: {missed} of {all}",
                        cache.name
                    );
                } else {
                    assert_eq!(
                        missed,
                        if shares { all } else { 0 },
                        "{name}: {fill} through `{}`, then {evict}",
                        cache.name
                    );
                }
                pairs_sharing += usize::from(shares);
            }
        }
        assert!(pairs_sharing >= 4, "{name}: every path shares with itself");
    }
}

#[test]
fn threads_share_a_cache_copy_exactly_when_their_warps_map_to_one() {
    // Kepler has four texture caches and four constant L1s per SM, Maxwell two texture
    // caches: thread 32 k uses copy k % copies.
    for (name, path, copies) in [
        ("kepler", LoadPath::Texture, 4),
        ("kepler", LoadPath::Constant, 4),
        ("maxwell", LoadPath::Texture, 2),
        ("maxwell", LoadPath::GlobalNc, 2),
    ] {
        let profile = quiet(SimProfile::bundled(name).unwrap());
        let cache = profile.caches_on_path(path).next().unwrap().clone();
        assert_eq!(cache.copies_per_sm, copies);
        let shared = profile
            .shared_carveout_for(Carveout::Percent(100), 8 * 4096)
            .unwrap();
        let chain = three_quarters_of(&cache, shared);
        for k in 0..9u32 {
            assert_eq!(cache.copy_for_thread(32 * k, 32), k % copies);
            let request = probe(pass(path, chain, 0), pass(path, chain, 32 * k));
            let expected = if k % copies == 0 {
                request.timed_steps as usize
            } else {
                0
            };
            assert_eq!(
                misses(&profile, &cache, &request),
                expected,
                "{name} {path}: threads 0 and {}",
                32 * k
            );
        }
        // Threads of one warp share its copy.
        let same_warp = probe(pass(path, chain, 0), pass(path, chain, 31));
        assert_eq!(
            misses(&profile, &cache, &same_warp),
            same_warp.timed_steps as usize
        );
    }
}

#[test]
fn one_copy_per_sm_is_shared_by_every_warp() {
    let volta = quiet(SimProfile::bundled("volta").unwrap());
    let l1 = volta.unified_cache().unwrap().clone();
    assert_eq!(l1.copies_per_sm, 1);
    let shared = volta
        .shared_carveout_for(Carveout::Percent(100), 8 * 1024)
        .unwrap();
    let chain = three_quarters_of(&l1, shared);
    for thread in [1, 32, 64, 96, 1023] {
        let request = probe(
            pass(LoadPath::GlobalCa, chain, 0),
            pass(LoadPath::GlobalCa, chain, thread),
        );
        assert_eq!(misses(&volta, &l1, &request), request.timed_steps as usize);
    }
}

#[test]
fn two_phase_indices_blocks_and_sms_follow_the_kernel() {
    let profile = toy();
    let mut gpu = SimBackend::new(profile).unwrap();
    let chain_a = ChainSpec::new(1024, 64).unwrap(); // 16 nodes, 16 elements apart
    let chain_b = ChainSpec::new(2048, 128).unwrap();
    let request = TwoPhaseRequest {
        fill: Phase {
            path: LoadPath::GlobalCa,
            chain: chain_a,
            thread: 0,
            steps: 5,
        },
        evict: Phase {
            path: LoadPath::GlobalCa,
            chain: chain_b,
            thread: 64,
            steps: 7,
        },
        timed_steps: 40,
        blocks: 6,
        threads: 65,
        carveout: Carveout::DriverDefault,
        flush_l2: false,
        block_fill: false,
    };
    let run = gpu.two_phase(&request).unwrap();
    assert_eq!(run.blocks.len(), 6);
    let expected: Vec<u32> = (0..40).map(|k| ((5 + k + 1) % 16) * 16).collect();
    for block in &run.blocks {
        assert_eq!(
            block.indices, expected,
            "chain A continues after its warm-up"
        );
        assert_eq!(block.final_index, ((5 + 40) % 16) * 16);
        assert_eq!(block.latencies.len(), 40);
        assert_eq!(block.total_cycles, None);
    }
    let smids: Vec<u32> = run.blocks.iter().map(|b| b.smid).collect();
    assert_eq!(smids, [0, 1, 2, 3, 0, 1], "block b on SM b % 4");
    assert!(run.gpu_time.as_nanos() > 0);
    assert_eq!(gpu.last_shared_carveout_bytes(), Some(49152));
}

#[test]
fn two_phase_starts_cold_at_every_launch() {
    let profile = quiet(toy());
    let mut gpu = SimBackend::new(profile).unwrap();
    let chain = ChainSpec::new(1024, 64).unwrap();
    let mut request = probe(
        pass(LoadPath::GlobalCa, chain, 0),
        pass(LoadPath::GlobalCa, chain, 0),
    );
    request.fill.steps = 0;
    request.evict.steps = 0;
    for _ in 0..2 {
        let run = gpu.two_phase(&request).unwrap();
        assert!(
            run.blocks[0].latencies.iter().all(|&l| l == 500 + 10),
            "nothing warmed: device memory serves every load"
        );
    }
}

#[test]
fn bad_two_phase_requests_are_typed_errors() {
    let mut gpu = SimBackend::new(toy()).unwrap();
    let chain = ChainSpec::new(1024, 64).unwrap();
    let good = probe(
        pass(LoadPath::GlobalCa, chain, 0),
        pass(LoadPath::GlobalCa, chain, 32),
    );
    assert!(gpu.two_phase(&good).is_ok());
    let constant_half = ChainSpec::new(40 * 1024, 64).unwrap();
    let huge = ChainSpec::new(768 << 20, 64).unwrap();
    let bad_cases: Vec<(&str, TwoPhaseRequest)> = vec![
        (
            "threads not above the evict thread",
            TwoPhaseRequest {
                threads: 32,
                ..good
            },
        ),
        (
            "threads not above the fill thread",
            TwoPhaseRequest {
                fill: Phase {
                    thread: 40,
                    ..good.fill
                },
                ..good
            },
        ),
        ("no block", TwoPhaseRequest { blocks: 0, ..good }),
        (
            "no timed step",
            TwoPhaseRequest {
                timed_steps: 0,
                ..good
            },
        ),
        (
            "more threads than a block has",
            TwoPhaseRequest {
                threads: 1025,
                ..good
            },
        ),
        (
            "a path without an SM cache kernel",
            TwoPhaseRequest {
                evict: Phase {
                    path: LoadPath::Shared,
                    ..good.evict
                },
                ..good
            },
        ),
        (
            "constant chains that fit the bank alone but not together",
            probe(
                pass(LoadPath::Constant, constant_half, 0),
                pass(LoadPath::Constant, constant_half, 0),
            ),
        ),
        (
            "constant chains of several blocks beyond the bank",
            TwoPhaseRequest {
                blocks: 2,
                ..probe(
                    pass(LoadPath::Constant, constant_half, 0),
                    pass(LoadPath::GlobalCa, chain, 0),
                )
            },
        ),
        (
            "global chains beyond device memory",
            probe(
                pass(LoadPath::GlobalCa, huge, 0),
                pass(LoadPath::GlobalNc, huge, 0),
            ),
        ),
        (
            "a stride that is not a multiple of 4",
            TwoPhaseRequest {
                fill: Phase {
                    chain: ChainSpec {
                        bytes: 1020,
                        stride: 30,
                    },
                    ..good.fill
                },
                ..good
            },
        ),
        (
            "an empty chain",
            TwoPhaseRequest {
                evict: Phase {
                    chain: ChainSpec {
                        bytes: 0,
                        stride: 64,
                    },
                    ..good.evict
                },
                ..good
            },
        ),
        (
            "timings beyond shared memory",
            TwoPhaseRequest {
                timed_steps: 8192,
                ..good
            },
        ),
        (
            "a carveout over 100 %",
            TwoPhaseRequest {
                carveout: Carveout::Percent(101),
                ..good
            },
        ),
    ];
    // The block-filled variant: one block, both phases .cg, whole passes.
    let block = TwoPhaseRequest {
        block_fill: true,
        ..probe(
            pass(LoadPath::GlobalCg, chain, 0),
            pass(LoadPath::GlobalCg, chain, 0),
        )
    };
    assert!(gpu.two_phase(&block).is_ok());
    let mut bad_cases = bad_cases;
    bad_cases.extend([
        (
            "block fill on two blocks",
            TwoPhaseRequest { blocks: 2, ..block },
        ),
        (
            "block fill through the L1",
            TwoPhaseRequest {
                fill: pass(LoadPath::GlobalCa, chain, 0),
                ..block
            },
        ),
        (
            "block fill of part of a chain",
            TwoPhaseRequest {
                evict: Phase {
                    steps: 5,
                    ..block.evict
                },
                ..block
            },
        ),
    ]);
    for (why, request) in bad_cases {
        assert!(
            matches!(gpu.two_phase(&request), Err(RunnerError::InvalidRequest(_))),
            "{why}: {request:?}"
        );
    }
    // One constant chain per block that fits the bank with the other path's chain in global
    // memory is accepted.
    let fits = probe(
        pass(
            LoadPath::Constant,
            ChainSpec::new(CONSTANT_BANK_BYTES, 64).unwrap(),
            0,
        ),
        pass(LoadPath::Texture, huge, 0),
    );
    assert!(gpu
        .two_phase(&TwoPhaseRequest {
            timed_steps: 16,
            ..fits
        })
        .is_ok());
}

#[test]
fn two_phase_is_deterministic_for_a_seed() {
    let profile = SimProfile::bundled("kepler").unwrap();
    assert!(profile.noise.jitter_stdev_cycles > 0.0);
    let texture = profile
        .caches_on_path(LoadPath::Texture)
        .next()
        .unwrap()
        .clone();
    let chain = three_quarters_of(&texture, 0);
    let request = TwoPhaseRequest {
        blocks: 3,
        ..probe(
            pass(LoadPath::Texture, chain, 0),
            pass(LoadPath::GlobalNc, chain, 32),
        )
    };
    let once = |profile: SimProfile| {
        let mut gpu = SimBackend::new(profile).unwrap();
        gpu.two_phase(&request).unwrap()
    };
    let a = once(profile.clone());
    assert_eq!(a, once(profile.clone()));
    let mut reseeded = profile;
    reseeded.seed += 1;
    let b = once(reseeded);
    assert_ne!(a.blocks[0].latencies, b.blocks[0].latencies);
    assert_eq!(a.blocks[0].indices, b.blocks[0].indices);
}
