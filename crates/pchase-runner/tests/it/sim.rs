//! The simulated GPU: profiles, validation, and chases whose outcome the cache model fixes.

use pchase_runner::sim::{
    CacheSpec, Replacement, SimBackend, SimProfile, CONSTANT_BANK_BYTES, SIM_MEMORY_BUDGET,
};
use pchase_runner::{
    Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath, Phase, PinnedRequest,
    RunnerError, TwoPhaseRequest,
};
use proptest::prelude::*;

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

#[test]
fn every_bundled_profile_loads_and_round_trips() {
    let names: Vec<&str> = SimProfile::bundled_names().collect();
    assert_eq!(names, ["kepler", "maxwell", "volta", "h100", "h200"]);
    for name in names {
        let profile = SimProfile::bundled(name).expect("bundled profile is valid");
        assert_eq!(profile.name, name);
        let text = profile.to_toml_string().expect("serialises");
        assert_eq!(
            SimProfile::from_toml_str(&text).expect("re-parses"),
            profile
        );
        let shipped = format!(
            "{}/../../examples/profiles/{name}.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        assert_eq!(SimProfile::load(&shipped).expect("file loads"), profile);
    }
}

#[test]
fn bundled_profiles_state_what_the_issue_asks() {
    let kepler = SimProfile::bundled("kepler").unwrap();
    let texture = kepler.caches_on_path(LoadPath::Texture).next().unwrap();
    assert_eq!(
        (texture.size_bytes, texture.copies_per_sm),
        (Some(12288), 4)
    );
    let l1 = kepler.caches_on_path(LoadPath::GlobalCa).next().unwrap();
    assert!(!l1.serves(LoadPath::Texture), "Kepler's L1 is separate");
    assert_eq!(
        l1.size_at(
            kepler
                .shared_carveout_for(Carveout::DriverDefault, 0)
                .unwrap()
        ),
        16384
    );

    let maxwell = SimProfile::bundled("maxwell").unwrap();
    assert!(!maxwell.caches_global_loads());
    assert_eq!(maxwell.device.global_l1_cache_supported, Some(false));
    assert_eq!(
        maxwell
            .caches_on_path(LoadPath::Texture)
            .next()
            .unwrap()
            .copies_per_sm,
        2
    );

    let volta = SimProfile::bundled("volta").unwrap();
    let unified = volta.unified_cache().unwrap();
    assert!(matches!(unified.replacement, Replacement::EarlyMiss { .. }));
    assert!([LoadPath::GlobalCa, LoadPath::GlobalNc, LoadPath::Texture]
        .iter()
        .all(|&p| unified.serves(p)));

    for (name, l2) in [("h100", 50u64 << 20), ("h200", 60 << 20)] {
        let hopper = SimProfile::bundled(name).unwrap();
        assert_eq!(hopper.device.sm_count, 132);
        assert_eq!(hopper.l2.size_bytes, l2);
        assert_eq!(hopper.l2.partitions, 2);
        assert!(hopper.l2.far() > hopper.l2.near_latency);
        let store = hopper.unified_cache().unwrap().unified.as_ref().unwrap();
        // Measured: L1 + shared = 249 KiB; the profile keeps 248 so 16 ways divide it.
        assert_eq!(store.store_bytes, 248 * 1024);
        assert_eq!(store.shared_carveouts_bytes.last(), Some(&(228 * 1024)));
    }
}

#[test]
fn unknown_bundled_name_lists_the_known_ones() {
    let message = profile_message(SimProfile::bundled("fermi"));
    assert!(
        message.contains("fermi") && message.contains("volta"),
        "{message}"
    );
}

/// A profile whose caches would take more host memory than the budget is refused before
/// anything is allocated: a 1 GiB "L2" per partition is fine, a 64 MiB constant cache on
/// each of 132 SMs (four copies) is not.
#[test]
fn a_profile_beyond_the_memory_budget_is_refused() {
    let h200 = SimProfile::bundled("h200").unwrap();
    assert!(h200.model_bytes() < SIM_MEMORY_BUDGET / 100);
    let mut huge = h200.clone();
    let cache = huge
        .caches
        .iter_mut()
        .find(|c| c.unified.is_none())
        .expect("a constant cache");
    cache.size_bytes = Some(64 << 20);
    cache.copies_per_sm = 4;
    assert!(huge.model_bytes() > SIM_MEMORY_BUDGET);
    let message = match SimBackend::new(huge) {
        Err(RunnerError::Profile(message)) => message,
        other => panic!("expected a profile error, got {other:?}"),
    };
    assert!(
        message.contains("host memory") && message.contains("budget"),
        "{message}"
    );
}

#[test]
fn validation_names_the_bad_field() {
    let cases = [
        (
            "line_bytes = 64\nassociativity = 4",
            "line_bytes = 48\nassociativity = 4",
            "line_bytes",
        ),
        ("size_bytes = 4096", "size_bytes = 4000", "size_bytes"),
        ("l2_bytes = 65536", "l2_bytes = 131072", "l2.size_bytes"),
        (
            r#"paths = ["global_ca"]"#,
            r#"paths = ["global_ac"]"#,
            "unknown load path `global_ac`",
        ),
        (r#"paths = ["global_ca"]"#, r#"paths = ["shared"]"#, "paths"),
        (r#"paths = ["global_ca"]"#, "paths = []", "paths"),
        (
            r#"replacement = { policy = "lru" }
hit_latency = 30"#,
            r#"replacement = { policy = "early-miss", reserved_ways = 4 }
hit_latency = 30"#,
            "reserved_ways",
        ),
        ("hit_latency = 30", "hit_latency = 0", "hit_latency"),
        ("sm_count = 4", "sm_count = 0", "device.sm_count"),
        ("sm_mhz = 1000.0", "sm_mhz = -1.0", "clock.sm_mhz"),
        (
            "global_l1_cache_supported = true",
            "global_l1_cache_supported = false",
            "global_l1_cache_supported",
        ),
        (
            "near_latency = 200",
            "near_latency = 200\npartitions = 3",
            "l2.partitions",
        ),
        ("seed = 1", "seed = 1\ncolour = \"red\"", "colour"),
        (
            "associativity = 4",
            "associativity = \"many\"",
            "associativity",
        ),
    ];
    for (old, new, field) in cases {
        let message = profile_message(toy_with(old, new));
        assert!(
            message.contains(field),
            "`{new}`: `{message}` does not name `{field}`"
        );
    }
}

#[test]
fn load_reports_a_missing_file() {
    let message = profile_message(SimProfile::load("/nonexistent/profile.toml"));
    assert!(message.contains("/nonexistent/profile.toml"), "{message}");
}

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

/// The paths that go through SM caches: the ones the two-phase probe compares.
const SM_CACHE_PATHS: [LoadPath; 4] = [
    LoadPath::GlobalCa,
    LoadPath::GlobalNc,
    LoadPath::Texture,
    LoadPath::Constant,
];

/// A chain over three quarters of the lines `cache` keeps for a cyclic chase at
/// `shared_bytes` of shared memory, one node per line. Two such chains overflow the cache;
/// one fits in it.
fn three_quarters_of(cache: &CacheSpec, shared_bytes: u64) -> ChainSpec {
    let line = cache.line_bytes;
    let lines = cache.effective_bytes_at(shared_bytes) / u64::from(line);
    ChainSpec::new((lines * 3 / 4).max(1) * u64::from(line), line).expect("valid chain")
}

/// A phase over `chain` through `path` by `thread`, warming with one full pass.
fn pass(path: LoadPath, chain: ChainSpec, thread: u32) -> Phase {
    Phase {
        path,
        chain,
        thread,
        steps: u32::try_from(chain.nodes()).unwrap(),
    }
}

/// The probe of `fill` then `evict` on one block, re-timing one full pass over chain A.
fn probe(fill: Phase, evict: Phase) -> TwoPhaseRequest {
    TwoPhaseRequest {
        fill,
        evict,
        timed_steps: fill.steps,
        blocks: 1,
        threads: fill.thread.max(evict.thread) + 1,
        carveout: Carveout::Percent(100),
        flush_l2: false,
    }
}

/// The fine-grained sample of a hit in `cache` through `path`, without noise.
fn hit_sample(profile: &SimProfile, cache: &CacheSpec, path: LoadPath) -> u32 {
    cache.hit_latency
        + profile.path_extra_latency.get(&path).copied().unwrap_or(0)
        + profile.clock.overhead_cycles
}

/// Re-timed loads of chain A that did not hit `cache` (the first SM cache on its path).
fn misses(profile: &SimProfile, cache: &CacheSpec, request: &TwoPhaseRequest) -> usize {
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
                let expected = if shares {
                    request.timed_steps as usize
                } else {
                    0
                };
                assert_eq!(
                    missed, expected,
                    "{name}: {fill} through `{}`, then {evict}",
                    cache.name
                );
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

#[test]
fn random_profiles_cover_copies_and_shared_and_separate_paths() {
    let (mut several_copies, mut shared_cache, mut separate_caches) = (0, 0, 0);
    for seed in 0..200 {
        let profile = SimProfile::random(seed);
        several_copies += usize::from(profile.caches.iter().any(|c| c.copies_per_sm > 1));
        let first = |path| profile.caches_on_path(path).next();
        for (i, p) in SM_CACHE_PATHS.iter().enumerate() {
            for q in &SM_CACHE_PATHS[i + 1..] {
                match (first(*p), first(*q)) {
                    (Some(a), Some(b)) if a == b => shared_cache += 1,
                    (Some(_), Some(_)) => separate_caches += 1,
                    _ => {}
                }
            }
        }
    }
    assert!(several_copies > 50, "{several_copies} of 200 profiles");
    assert!(
        shared_cache > 50 && separate_caches > 50,
        "{shared_cache} shared, {separate_caches} separate pairs"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_profiles_are_valid_and_their_first_levels_hit(seed in any::<u64>()) {
        let profile = SimProfile::random(seed);
        prop_assert!(profile.validate().is_ok(), "{:?}", profile.validate());
        let text = profile.to_toml_string().unwrap();
        prop_assert_eq!(&SimProfile::from_toml_str(&text).unwrap(), &profile);

        let profile = quiet(profile);
        let steps = 64u32;
        let shared = profile.shared_carveout_for(Carveout::DriverDefault, 8 * u64::from(steps)).unwrap();
        let mut gpu = SimBackend::new(profile.clone()).unwrap();
        for path in LoadPath::ALL {
            let Some(first) = profile.caches_on_path(path).next() else { continue };
            let bytes = first.effective_bytes_at(shared);
            if path == LoadPath::Constant && bytes > 64 * 1024 {
                continue;
            }
            let run = gpu.chase(&fine(path, bytes, first.line_bytes, steps)).unwrap();
            let expected = first.hit_latency
                + profile.path_extra_latency.get(&path).copied().unwrap_or(0)
                + profile.clock.overhead_cycles;
            let block = &run.blocks[0];
            prop_assert!(block.latencies.iter().all(|&l| l == expected),
                "{:?} through `{}`: {:?}, expected {}", path, first.name, block.latencies, expected);
            let nodes = bytes / u64::from(first.line_bytes);
            let final_node = (nodes + u64::from(steps)) % nodes;
            prop_assert_eq!(u64::from(block.final_index), final_node * u64::from(first.line_bytes / 4));
        }
    }

    #[test]
    fn random_profiles_show_a_copy_shared_exactly_when_the_warps_map_to_one(
        seed in any::<u64>(),
        k in 0..8u32,
    ) {
        let profile = quiet(SimProfile::random(seed));
        for path in SM_CACHE_PATHS {
            let Some(cache) = profile.caches_on_path(path).next() else { continue };
            // The largest carveout gives the smallest L1, whatever the timings need.
            let shared = profile.shared_carveout_for(Carveout::Percent(100), 0).unwrap();
            let chain = three_quarters_of(cache, shared);
            let mut request = probe(pass(path, chain, 0), pass(path, chain, 32 * k));
            request.carveout = Carveout::Percent(100);
            if path == LoadPath::Constant
                && 2 * chain.bytes.next_multiple_of(128) > CONSTANT_BANK_BYTES
            {
                continue;
            }
            let missed = misses(&profile, cache, &request);
            if k % cache.copies_per_sm != 0 {
                // Chain A fits the fill thread's copy, which the evict thread never touches.
                prop_assert_eq!(missed, 0, "{} `{}` thread {}", path, cache.name, 32 * k);
            } else if cache.replacement != Replacement::Random {
                // Together the chains overflow some set; LRU there evicts a line of A.
                prop_assert!(missed > 0, "{} `{}` thread {}", path, cache.name, 32 * k);
            }
        }
    }

    #[test]
    fn random_profiles_show_sharing_exactly_when_one_cache_serves_both_paths(seed in any::<u64>()) {
        let profile = quiet(SimProfile::random(seed));
        let shared = profile.shared_carveout_for(Carveout::Percent(100), 0).unwrap();
        for fill in SM_CACHE_PATHS {
            let Some(cache) = profile.caches_on_path(fill).next() else { continue };
            for evict in SM_CACHE_PATHS {
                let shares = cache.serves(evict);
                if shares && profile.caches_on_path(evict).next() != Some(cache) {
                    // A nearer cache on the evict path may keep its loads from reaching
                    // this one: no exact prediction.
                    continue;
                }
                let chain = three_quarters_of(cache, shared);
                let constant_chains = [fill, evict]
                    .iter()
                    .filter(|&&p| p == LoadPath::Constant)
                    .count() as u64;
                if constant_chains * chain.bytes.next_multiple_of(128) > CONSTANT_BANK_BYTES {
                    continue;
                }
                let mut request = probe(pass(fill, chain, 0), pass(evict, chain, 0));
                request.carveout = Carveout::Percent(100);
                let missed = misses(&profile, cache, &request);
                if !shares {
                    prop_assert_eq!(missed, 0, "{} `{}` then {}", fill, cache.name, evict);
                } else if cache.replacement != Replacement::Random {
                    prop_assert!(missed > 0, "{} `{}` then {}", fill, cache.name, evict);
                }
            }
        }
    }
}

/// A chain written after the flush hits the L2 exactly where the write covered whole
/// sectors; bad `written_bytes` are typed errors.
#[test]
fn a_written_chain_hits_where_whole_sectors_were_written() {
    let profile = SimProfile::bundled("h200").expect("bundled");
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
