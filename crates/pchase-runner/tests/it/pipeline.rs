//! The whole measurement pipeline against simulated GPUs whose truth is known: every
//! shipped profile and seeded random hierarchies.

use pchase_runner::{
    measure::{
        carveout::Role,
        l2::{L2Findings, LevelKind},
        Element, MeasureOptions, Measurements, Session, SizeFinding,
    },
    sim::{Associativity, Replacement, SimBackend, SimProfile},
    Backend, ChaseRequest, ChaseRun, DeviceInfo, LoadPath, PartitionMapRequest, PartitionMapRun,
    PinnedRequest, PinnedRun, RunnerError, TwoPhaseRequest,
};

fn measure(profile: &SimProfile) -> Measurements {
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    Session::new(&mut backend, MeasureOptions::default())
        .run()
        .expect("session runs")
}

/// Only `element` of `profile`.
fn measure_only(profile: &SimProfile, element: Element) -> Measurements {
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let options = MeasureOptions {
        only: [element].into_iter().collect(),
        ..MeasureOptions::default()
    };
    Session::new(&mut backend, options)
        .run()
        .expect("session runs")
}

/// The size the size search should find on `path`: the first cache's capacity as a
/// cyclic chase sees it, at the configuration the simulated driver picks for the search's
/// first setting (the largest L1: carveout 0 % and the smallest configuration's shared
/// bytes).
fn true_size(profile: &SimProfile, path: LoadPath) -> Option<u64> {
    let cache = profile.caches_on_path(path).next()?;
    // The constant caches are searched without shared memory (they are outside the
    // store), the others at the largest-L1 setting.
    let first = if path == LoadPath::Constant {
        pchase_runner::measure::carveout::settings_without_shared()[0]
    } else {
        pchase_runner::measure::carveout::settings(&profile.device, false)[0]
    };
    let shared = profile
        .shared_carveout_for(first.carveout, u64::from(first.dynamic_shared_bytes))
        .expect("the largest-L1 setting is accepted");
    Some(cache.effective_bytes_at(shared))
}

fn exact(m: &Measurements, element: Element) -> Option<u64> {
    match &m.element(element)?.sizes.first()?.finding {
        SizeFinding::Exact { bytes, .. } => Some(*bytes),
        SizeFinding::AtLeast { .. } => None,
    }
}

/// Checks every SM-level size, the fetch granularity and the hit latency of `profile`;
/// returns what was measured.
fn check_profile(profile: &SimProfile) -> Measurements {
    let m = measure(profile);
    let name = &profile.name;
    assert_eq!(
        m.l1_caches_global_loads,
        Some(profile.caches_global_loads()),
        "{name}: global-load caching"
    );
    let checks = [
        (Element::L1, LoadPath::GlobalCa),
        (Element::Texture, LoadPath::Texture),
        (Element::ReadOnly, LoadPath::GlobalNc),
        (Element::ConstantL1, LoadPath::Constant),
    ];
    for (element, path) in checks {
        if element == Element::L1 && !profile.caches_global_loads() {
            continue;
        }
        let Some(cache) = profile.caches_on_path(path).next() else {
            // No cache on the path: the session must say so, not report the L2's size.
            let result = m.element(element).expect("element reported");
            assert!(result.sizes.is_empty(), "{name} {element}: {result:?}");
            assert!(
                result.failures.iter().any(|f| f.contains("no SM cache")),
                "{name} {element}: {result:?}"
            );
            continue;
        };
        let truth = true_size(profile, path).expect("cache exists");
        // The largest size each search tries: a cache beyond it may only be a bound.
        let search_max = if path == LoadPath::Constant {
            32 * 1024
        } else {
            2 * 1024 * 1024
        };
        let result = m.element(element).expect("measured");
        let random = matches!(cache.replacement, Replacement::Random);
        if let Some(SizeFinding::AtLeast { bytes, .. }) = result.sizes.first().map(|s| &s.finding) {
            // Random replacement blurs the step so much that the test may reject it; the
            // bound must still be within the documented 1/16 of the truth.
            let honest_blur = random && bytes.abs_diff(truth) <= truth / 16;
            assert!(
                (truth >= search_max && *bytes >= search_max) || honest_blur,
                "{name} {element}: bound {bytes} B where the truth {truth} B was in reach"
            );
            continue;
        }
        let found = exact(&m, element)
            .unwrap_or_else(|| panic!("{name} {element}: no exact size: {:?}", m.element(element)));
        // Exact to one line, except where the cache itself blurs the step (the bias
        // docs/measurement.md states; never below the truth): in a direct-mapped or two-way
        // cache one extra line makes only two or three lines miss per pass, so the first
        // detectable size may lie up to 1/128 of the capacity beyond it; random
        // replacement keeps most lines past capacity, up to 1/16 of it.
        let line = u64::from(cache.line_bytes);
        let low_ways = matches!(cache.associativity, Associativity::Ways(w) if w <= 2);
        let blurred = random || low_ways;
        let tolerance = if random {
            line.max(truth / 16)
        } else if low_ways {
            line.max(truth / 128)
        } else {
            line
        };
        assert!(
            found.abs_diff(truth) <= tolerance && (!blurred || found + line >= truth),
            "{name} {element}: measured {found} B, truth {truth} B (tolerance {tolerance} B)"
        );
        let granularity = result.line.as_ref().map(|l| l.bytes);
        assert_eq!(
            granularity,
            Some(u64::from(cache.sector())),
            "{name} {element}: fetch granularity"
        );
        // The allocation line (tag size), where the step is sharp and the cache has sets:
        // in a fully associative LRU cache filled to capacity, the probe's one evicted
        // line makes every line miss in turn (docs/measurement.md).
        let fully_associative = matches!(cache.associativity, Associativity::Full);
        if !blurred && !fully_associative {
            assert_eq!(
                result.line_bytes.as_ref().map(|l| l.bytes),
                Some(u64::from(cache.line_bytes)),
                "{name} {element}: allocation line"
            );
        }
        let latency = result.latency.expect("latency measured");
        let extra = profile.path_extra_latency.get(&path).copied().unwrap_or(0);
        let expected = f64::from(cache.hit_latency + extra);
        assert!(
            (latency.p50.0 - expected).abs() <= 2.0,
            "{name} {element}: median latency {} cycles, truth {expected}",
            latency.p50.0
        );
    }
    // The constant L1.5: exact where the bank can exceed it, a bound otherwise.
    let l15 = profile.caches_on_path(LoadPath::Constant).nth(1);
    let l15_result = m.element(Element::ConstantL15).expect("reported");
    let l1_exact = exact(&m, Element::ConstantL1).is_some();
    if l15.is_none() && l1_exact {
        assert!(
            l15_result.sizes.is_empty()
                && l15_result
                    .failures
                    .iter()
                    .any(|f| f.contains("no SM cache")),
            "{name}: no constant L1.5, yet {l15_result:?}"
        );
    }
    // The L1.5 search starts at twice the constant L1 (rounded up to a power of two), so
    // only an L1.5 larger than that start, inside the 64 KiB bank, can be found.
    let start = exact(&m, Element::ConstantL1).map(|l1| (2 * l1).next_power_of_two());
    let measurable = |l15: &&pchase_runner::sim::CacheSpec| {
        start.is_some_and(|s| s < 64 * 1024 && l15.effective_bytes_at(0) > s)
    };
    if let Some(l15) = l15.filter(measurable) {
        let truth = l15.effective_bytes_at(0);
        let first = l15_result
            .sizes
            .first()
            .unwrap_or_else(|| panic!("{name}: constant L1.5 not measured: {l15_result:?}"));
        // Two lines: with the simulator's noise the step of a 256-byte-line L1.5 is found
        // up to 1.75 lines late, depending on the seed (kepler, seeds 0-5: 0, 0, 256,
        // 256, 0 and 448 B late), more than the search's stated resolution.
        match &first.finding {
            SizeFinding::Exact { bytes, .. } => assert!(
                bytes.abs_diff(truth) <= 2 * u64::from(l15.line_bytes),
                "{name} constant L1.5: {bytes} B, truth {truth} B"
            ),
            SizeFinding::AtLeast { bytes, .. } => assert!(
                truth >= *bytes && *bytes >= 60 * 1024,
                "{name} constant L1.5: bound {bytes} B, truth {truth} B"
            ),
        }
    }
    let shared = m
        .element(Element::Shared)
        .and_then(|r| r.latency)
        .unwrap_or_else(|| panic!("{name}: shared latency: {:?}", m.element(Element::Shared)));
    assert!(
        (shared.p50.0 - f64::from(profile.shared_memory.latency)).abs() <= 2.0,
        "{name} shared latency {} vs {}",
        shared.p50.0,
        profile.shared_memory.latency
    );
    let memory = m
        .element(Element::DeviceMemory)
        .and_then(|r| r.latency)
        .expect("memory latency");
    assert!(
        (memory.p50.0 - f64::from(profile.memory.latency)).abs() <= 2.0,
        "{name} memory latency {} vs {}",
        memory.p50.0,
        profile.memory.latency
    );
    let l2 = m.l2.as_ref().expect("L2 measured");
    assert_eq!(
        l2.fetch_granularity,
        Some(u64::from(profile.l2.sector())),
        "{name} L2 fetch granularity"
    );
    match &l2.line {
        Ok(line) => assert_eq!(
            line.bytes,
            u64::from(profile.l2.line_bytes),
            "{name} L2 line ({} runs, agreement {:.2})",
            line.runs,
            line.agreement
        ),
        Err(why) => panic!("{name}: no L2 line: {why}"),
    }
    match &l2.sector {
        Ok(sector) => assert_eq!(
            sector.bytes,
            u64::from(profile.l2.sector()),
            "{name} L2 sector ({:?})",
            sector.medians
        ),
        Err(why) => panic!("{name}: no L2 sector: {why}"),
    }
    m
}

#[test]
fn every_shipped_profile_is_recovered_as_before() {
    for name in SimProfile::bundled_names() {
        let profile = SimProfile::bundled(name).expect("bundled profile loads");
        let m = check_profile(&profile);
        crate::golden::compare(name, &profile, &m);
    }
}

#[test]
fn random_hierarchies_are_recovered() {
    // Seeded, so a failure names the seed that reproduces it.
    for seed in 0..6u64 {
        let profile = SimProfile::random(seed);
        let _ = check_profile(&profile);
    }
}

/// Sharing and copies per SM against the profile: two measured SM caches share exactly
/// when the profile lists both paths on one cache, and each cache's copies per SM are the
/// profile's.
fn check_relations(profile: &SimProfile, m: &Measurements) {
    let name = &profile.name;
    let path_of = |e: Element| match e {
        Element::L1 => LoadPath::GlobalCa,
        Element::Texture => LoadPath::Texture,
        Element::ReadOnly => LoadPath::GlobalNc,
        _ => LoadPath::Constant,
    };
    let first_cache = |p: LoadPath| profile.caches_on_path(p).next().map(|c| c.name.clone());
    for (a, b, test) in &m.sharing {
        let truth = first_cache(path_of(*a)) == first_cache(path_of(*b));
        assert_eq!(test.evicted, truth, "{name}: sharing {a}/{b}: {test:?}");
    }
    for (element, copies) in &m.copies {
        let cache = profile
            .caches_on_path(path_of(*element))
            .next()
            .expect("measured caches exist");
        let truth = cache.copies_per_sm;
        let expected = (truth < pchase_runner::measure::COPY_WARPS).then_some(truth);
        assert_eq!(*copies, expected, "{name}: copies of {element}");
    }
}

#[test]
fn relations_of_every_shipped_profile_are_recovered() {
    for name in SimProfile::bundled_names() {
        let profile = SimProfile::bundled(name).expect("bundled");
        let m = measure(&profile);
        assert!(!m.sharing.is_empty(), "{name}: no sharing tested");
        check_relations(&profile, &m);
    }
}

#[test]
fn every_shared_memory_configuration_is_measured_once_with_its_l1() {
    for (name, configs) in [("volta", 5usize), ("h200", 9)] {
        let profile = SimProfile::bundled(name).expect("bundled");
        let m = measure(&profile);
        let cache = profile
            .caches_on_path(LoadPath::GlobalCa)
            .next()
            .expect("an L1");
        let sizes = &m.element(Element::L1).expect("L1 measured").sizes;
        let forced: Vec<_> = sizes.iter().filter(|s| s.config_bytes.is_some()).collect();
        assert_eq!(forced.len(), configs, "{name}: one row per configuration");
        let distinct: std::collections::BTreeSet<_> =
            forced.iter().map(|s| s.config_bytes).collect();
        assert_eq!(distinct.len(), configs, "{name}: no configuration twice");
        for entry in &sizes[..] {
            let shared = profile
                .shared_carveout_for(entry.carveout, u64::from(entry.reserved_shared_bytes))
                .expect("setting fits");
            if let Some(config) = entry.config_bytes {
                assert_eq!(
                    shared, config,
                    "{name}: the simulated driver took the forced one"
                );
            }
            let truth = cache.effective_bytes_at(shared);
            match &entry.finding {
                SizeFinding::Exact { bytes, .. } => assert!(
                    bytes.abs_diff(truth) <= u64::from(cache.line_bytes),
                    "{name}: {entry:?}: truth {truth} B"
                ),
                SizeFinding::AtLeast { .. } => panic!("{name}: a bound at {entry:?}"),
            }
        }
        // The largest L1 comes first; the driver's default is there, and says which it is.
        assert_eq!(sizes[0].role, Role::LargestL1);
        assert!(sizes.iter().any(|s| s.role == Role::DriverDefault));
        let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
        topo.validate().expect("valid");
        let l1 = topo.element(topology::ElementKind::L1Data).expect("L1");
        assert!(l1.carveout_row(topology::CarveoutRole::LargestL1).is_some());
        assert!(l1
            .carveout_row(topology::CarveoutRole::DriverDefault)
            .is_some());
        assert!(
            topo.notes
                .iter()
                .any(|n| n.message.contains("was in force as forced")),
            "{name}: the step check passes"
        );
    }
}

/// The L2 as the simulated H200 has it: two partitions that keep copies of far lines.
/// One SM meets near hits up to a partition's size, then far hits (the far-homed half still
/// in its home) beside memory through the near partition, then memory through either; the
/// map splits the SMs as the profile does, and the map's far level agrees with the sweep's.
#[test]
fn a_two_partition_l2_with_copies_is_recovered() {
    let profile = SimProfile::bundled("h200").expect("bundled");
    let m = measure_only(&profile, Element::L2);
    let l2 = m.l2.clone().expect("L2 measured");
    let kinds: Vec<LevelKind> = l2.levels.iter().map(|l| l.kind).collect();
    assert_eq!(
        kinds,
        vec![
            LevelKind::NearHit,
            LevelKind::FarHit,
            LevelKind::MemoryViaNear,
            LevelKind::MemoryViaFar
        ],
        "{:?}",
        l2.levels
    );
    let near = f64::from(profile.l2.near_latency);
    let far = f64::from(profile.l2.far());
    let p50 = |kind| l2.level(kind).expect("level").distribution.p50;
    assert!((p50(LevelKind::NearHit) - near).abs() <= 3.0);
    assert!((p50(LevelKind::FarHit) - far).abs() <= 3.0);
    let far_share = l2.level(LevelKind::FarHit).expect("far").peak_share();
    assert!((far_share - 0.5).abs() < 0.1, "{far_share}");
    let half = profile.l2.partition_bytes();
    let (near_bytes, measured) = l2.near_capacity.expect("near capacity");
    assert!(measured);
    assert!(
        near_bytes <= half && near_bytes >= half / 10 * 9,
        "near {near_bytes} of {half}"
    );
    let (far_bytes, _) = l2.far_capacity.expect("far capacity");
    assert!(
        far_bytes.abs_diff(half) <= half / 10,
        "far {far_bytes} of {half}"
    );
    assert_eq!(l2.keeps_copies, Some(true));
    let map = l2.map.as_ref().expect("the partition map");
    assert_eq!(map.count, 2);
    assert!(map.partition_of_sm.iter().all(Option::is_some));
    let check = l2.far_check.expect("a far level to check");
    assert!(check.agrees, "{check:?}");
    assert!(l2.unexplained.is_empty(), "{:?}", l2.unexplained);
    assert_eq!(l2.fetch_granularity, Some(u64::from(profile.l2.sector())));
    let line = l2.line.as_ref().expect("the L2 line measured");
    assert_eq!(line.bytes, u64::from(profile.l2.line_bytes), "{line:?}");
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    topo.validate().expect("a valid topology");
    let partitions = topo.l2_partitions().expect("partitions");
    assert_eq!(partitions.near_keeps_far_copies, Some(true));
    assert_eq!(partitions.count.as_ref().map(|c| c.value), Some(2));
}

/// Without copies an SM meets far hits at every size below the L2, and the map groups the
/// SMs by which lines they find near.
#[test]
fn a_two_partition_l2_without_copies_shows_far_hits_from_the_start() {
    let mut profile = SimProfile::bundled("h200").expect("bundled");
    profile.l2.near_keeps_far_copies = false;
    let l2 = measure_only(&profile, Element::L2).l2.expect("L2 measured");
    let far = l2.level(LevelKind::FarHit).expect("far hits");
    assert!(far.share_at(0) > 0.3, "{far:?}");
    assert_eq!(l2.keeps_copies, Some(false));
    assert_eq!(l2.map.as_ref().expect("map").count, 2);
    assert!(l2.far_check.expect("checked").agrees);
}

/// The L2 line probe reads the line, not a constant: the same two-partition L2 with 64 and
/// 256-byte lines (32-byte sectors), and a one-partition L2 of 64-byte lines with LRU and
/// with random replacement.
#[test]
fn the_l2_line_is_read_from_runs_of_misses() {
    let base = SimProfile::bundled("h200").expect("bundled");
    let mut variants = Vec::new();
    for line in [64u32, 256] {
        let mut profile = base.clone();
        profile.l2.line_bytes = line;
        variants.push(profile);
    }
    let single = SimProfile::bundled("volta").expect("bundled");
    let mut random = single.clone();
    random.l2.replacement = pchase_runner::sim::Replacement::Random;
    variants.push(single);
    variants.push(random);
    for profile in variants {
        let l2 = measure_only(&profile, Element::L2).l2.expect("L2 measured");
        let line = l2.line.as_ref().expect("the L2 line measured");
        assert_eq!(
            line.bytes,
            u64::from(profile.l2.line_bytes),
            "{}: {line:?}",
            profile.name
        );
        assert!(line.agreement >= 0.9 && line.runs >= 16, "{line:?}");
    }
}

/// A backend whose pinned launches miss a slot whenever `lose` says so (as a GPU that never
/// puts a block on a wanted SM): the sweep repeats such launches and, where SM 0 is never
/// reached, the L2 benchmark fails with a reason. `lose` may also alter what a launch
/// reports.
/// Decides, from the launch's number (from 1), request and run, whether it loses a slot.
type Lose = Box<dyn FnMut(usize, &PinnedRequest, &mut PinnedRun) -> bool>;

struct Unplaced {
    sim: SimBackend,
    pinned: usize,
    lose: Lose,
}

impl Backend for Unplaced {
    fn device(&self) -> &DeviceInfo {
        self.sim.device()
    }
    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        self.sim.chase(request)
    }
    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        self.sim.clock_overhead(samples)
    }
    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError> {
        self.sim.two_phase(request)
    }
    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError> {
        let mut run = self.sim.pinned_chase(request)?;
        self.pinned += 1;
        if (self.lose)(self.pinned, request, &mut run) {
            run.slots[request.sms.len() - 1] = None;
        }
        Ok(run)
    }
    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        self.sim.partition_map(request)
    }
    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        self.sim.measure_sm_clock_mhz()
    }
}

fn l2_with(
    lose: impl FnMut(usize, &PinnedRequest, &mut PinnedRun) -> bool + 'static,
) -> (L2Findings, usize) {
    let profile = SimProfile::bundled("h200").expect("bundled");
    let mut backend = Unplaced {
        sim: SimBackend::new(profile).expect("valid profile"),
        pinned: 0,
        lose: Box::new(lose),
    };
    let options = MeasureOptions {
        only: [Element::L2].into_iter().collect(),
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut backend, options)
        .run()
        .expect("session runs");
    (m.l2.expect("L2 measured"), backend.pinned)
}

#[test]
fn pinned_launches_that_miss_sm_0_are_repeated_or_fail_the_l2_alone() {
    // Every other launch misses SM 0: each size takes two launches, with the same answers.
    let (clean, clean_launches) = l2_with(|_, _, _| false);
    let (l2, launches) = l2_with(|k, _, _| k % 2 == 1);
    assert_eq!(launches, 2 * clean_launches);
    assert_eq!(
        (l2.near_capacity, l2.far_capacity, l2.keeps_copies),
        (clean.near_capacity, clean.far_capacity, clean.keeps_copies)
    );
    // SM 0 never receives a block: the L2 benchmark fails with a reason, the session
    // goes on (device memory is still measured).
    let mut backend = Unplaced {
        sim: SimBackend::new(SimProfile::bundled("h200").expect("bundled")).expect("valid"),
        pinned: 0,
        lose: Box::new(|_, _, _| true),
    };
    let options = MeasureOptions {
        only: [Element::L2, Element::DeviceMemory].into_iter().collect(),
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut backend, options)
        .run()
        .expect("session runs");
    assert!(m.l2.is_none());
    let failures = &m.element(Element::L2).expect("L2 result").failures;
    assert!(
        failures.iter().any(|f| f.contains("ran on SM 0")),
        "{failures:?}"
    );
    assert!(m
        .element(Element::DeviceMemory)
        .is_some_and(|r| r.latency.is_some()));
}

/// The self-check fires where a sweep size's 32-warp mean is not what its sampled loads
/// give, away from the capacity edges: the timed pass of the 4 MiB array (well inside the
/// near partition) reports half again its cycles.
#[test]
fn a_curve_feature_no_level_explains_fails_the_self_check() {
    let (clean, _) = l2_with(|_, _, _| false);
    assert!(clean.unexplained.is_empty(), "{:?}", clean.unexplained);
    let (l2, _) = l2_with(|_, request, run| {
        let bytes = request.chains[0].bytes;
        if request.sample_steps > 0 && (3 << 20..5 << 20).contains(&bytes) {
            for slot in run.slots.iter_mut().flatten() {
                slot.total_cycles += slot.total_cycles / 2;
            }
        }
        false
    });
    assert!(
        l2.unexplained
            .iter()
            .any(|u| (3 << 20..5 << 20).contains(&u.bytes)),
        "{:?}",
        l2.unexplained
    );
    let m = Measurements {
        l2: Some(l2),
        ..Measurements::default()
    };
    assert!(m.self_check().iter().any(|f| f.starts_with("L2:")));
}

/// Geometry Hopper does not have: three partitions with copies and four without. The map
/// counts them from the far share of the SMs off the reference's partition (1 − 1/P), not
/// from the number of latency levels (which is two either way).
#[test]
fn three_and_four_partitions_are_counted() {
    for (partitions, copies) in [(3u32, true), (4, false)] {
        let mut profile = SimProfile::bundled("h200").expect("bundled");
        profile.l2.partitions = partitions;
        profile.l2.near_keeps_far_copies = copies;
        let l2 = measure_only(&profile, Element::L2).l2.expect("L2 measured");
        let map = l2.map.as_ref().expect("the partition map");
        assert_eq!(
            map.count, partitions,
            "{partitions} partitions, copies {copies}"
        );
        assert_eq!(map.keeps_copies, Some(copies));
        // With copies the reference's partition is told apart; without, no SM's is.
        let told = map.partition_of_sm.iter().filter(|p| p.is_some()).count();
        if copies {
            let own = (0..profile.device.sm_count)
                .filter(|&sm| sm * partitions / profile.device.sm_count == 0)
                .count();
            assert_eq!(told, own, "the reference's partition's SMs");
        } else {
            assert_eq!(told, 0);
        }
    }
}
