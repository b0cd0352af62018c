//! The simulated GPU: profiles, validation, and chases whose outcome the cache model fixes.

use pchase_runner::sim::{Replacement, SimBackend, SimProfile};
use pchase_runner::{Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath, RunnerError};
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
        assert_eq!(store.store_bytes, 256 * 1024);
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
}
