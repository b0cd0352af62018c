//! The whole measurement pipeline against simulated GPUs whose truth is known: every
//! shipped profile and seeded random hierarchies.

use pchase_runner::{
    measure::{
        bench::{Benchmark, REGISTRY},
        carveout::Role,
        l2::{L2Findings, LevelKind},
        ElementKind, MeasureOptions, Measurements, Selection, Session, SizeFinding,
    },
    sim::{L2Interleave, SimBackend, SimProfile},
    LoadPath, PinnedRequest, PinnedRun,
};

use crate::doubles::Hooked;

fn measure(profile: &SimProfile) -> Measurements {
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    Session::new(&mut backend, MeasureOptions::default())
        .run()
        .expect("session runs")
}

/// Only `element` of `profile`.
pub(crate) fn measure_only(profile: &SimProfile, benchmark: &str) -> Measurements {
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let options = MeasureOptions {
        only: Selection::named(&[benchmark]).expect("registered"),
        ..MeasureOptions::default()
    };
    Session::new(&mut backend, options)
        .run()
        .expect("session runs")
}

/// Measures `profile` and checks every registered benchmark's result against its truth
/// ([`Benchmark::sim_check`]); returns what was measured.
fn check_profile(profile: &SimProfile) -> Measurements {
    check_benchmarks(profile, REGISTRY.iter().copied().filter(|b| !b.info().deep))
}

/// Measures `profile` and checks `benchmarks`' results against its truth.
fn check_benchmarks<'a>(
    profile: &SimProfile,
    benchmarks: impl Iterator<Item = &'a dyn Benchmark>,
) -> Measurements {
    let m = measure(profile);
    for benchmark in benchmarks {
        if let Err(why) = benchmark.sim_check(profile, &m) {
            panic!("{}: {}: {why}", profile.name, benchmark.info().name);
        }
    }
    m
}

/// `m` without what `benchmark` measured.
pub(crate) fn without(m: &Measurements, benchmark: &dyn Benchmark) -> Measurements {
    let mut m = m.clone();
    match benchmark.info().element {
        Some(element) => {
            m.elements.retain(|(e, _)| *e != element);
            if element == ElementKind::L1Data {
                m.l1_caches_global_loads = None;
            }
            if element == ElementKind::L2 {
                m.l2 = None;
            }
        }
        None => match benchmark.info().name {
            "gpc-map" => {
                m.clusters.gpc = None;
                m.clusters.not_applicable = None;
            }
            "dsmem" => {
                m.clusters.dsmem.clear();
                m.clusters.local_read_bytes_per_cycle = None;
                m.clusters.not_applicable = None;
            }
            "async-copy" => m.copies_to_shared = Default::default(),
            "l2-ways" => m.l2_ways = None,
            "l2-address" => {
                if let Some(Some(Ok(found))) = m.l2.as_mut().map(|l| l.address.as_mut()) {
                    found.prediction = None;
                }
            }
            _ => {
                m.sharing.clear();
                m.copies.clear();
                m.bandwidth.clear();
                m.tlb.clear();
                m.mlp.clear();
                m.icache = None;
                m.icache_failure = None;
                m.sets.clear();
                m.sections.clear();
            }
        },
    }
    m
}

#[test]
fn every_shipped_profile_is_recovered_as_before() {
    for name in SimProfile::bundled_names() {
        let profile = SimProfile::bundled(name).expect("bundled profile loads");
        let m = check_profile(&profile);
        crate::golden::compare(name, &profile, &m);
        // Each benchmark's check has teeth: without its results it fails.
        for benchmark in REGISTRY.iter().filter(|b| !b.info().deep) {
            let applies = !(benchmark.info().element == Some(ElementKind::ConstantL15)
                && profile.caches_on_path(LoadPath::Constant).nth(1).is_none());
            if applies {
                assert!(
                    benchmark
                        .sim_check(&profile, &without(&m, *benchmark))
                        .is_err(),
                    "{name}: {}'s simulator check passes without its results",
                    benchmark.info().name
                );
            }
        }
    }
}

#[test]
fn random_hierarchies_are_recovered() {
    // Seeded, so a failure names the seed that reproduces it.
    for seed in 0..6u64 {
        let profile = SimProfile::random(seed);
        // The elements' own quantities; the relations are checked on the shipped profiles
        // only: on random-1 the eviction probe does not see the L1 and the texture path
        // share their cache (docs/simulator.md, "known gaps").
        let _ = check_benchmarks(
            &profile,
            REGISTRY
                .iter()
                .copied()
                .filter(|b| b.info().element.is_some()),
        );
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
        let sizes = &m.element(ElementKind::L1Data).expect("L1 measured").sizes;
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

/// The searches after the first one start from what is known: the driver's default (one of
/// the configurations measured) and the texture and read-only caches (one store with the
/// L1) each take less simulated GPU time than the first, full search (the texture and
/// read-only caches a third of it), and find the sizes the profile has.
#[test]
fn searches_after_the_first_start_from_what_is_known() {
    let profile = SimProfile::bundled("h200").expect("bundled");
    let m = measure(&profile);
    let gpu = |name: &str| {
        m.timings
            .iter()
            .find(|t| t.benchmark == name)
            .unwrap_or_else(|| panic!("no timing {name}"))
            .gpu
    };
    let first = gpu("l1 size (8 KiB shared config)");
    for (later, share) in [
        ("l1 size (driver default)", 1),
        ("texture size (8 KiB shared config)", 3),
        ("readonly size (8 KiB shared config)", 3),
    ] {
        assert!(
            gpu(later) * share < first,
            "{later}: {:?} against the first search's {first:?}",
            gpu(later)
        );
    }
    let l1 = m.element(ElementKind::L1Data).expect("L1");
    let default = l1
        .sizes
        .iter()
        .find(|s| s.role == Role::DriverDefault)
        .expect("driver default");
    let config = profile
        .shared_carveout_for(default.carveout, u64::from(default.reserved_shared_bytes))
        .expect("fits");
    let cache = profile
        .caches_on_path(LoadPath::GlobalCa)
        .next()
        .expect("an L1");
    match default.finding {
        SizeFinding::Exact { bytes, .. } => {
            assert!(bytes.abs_diff(cache.effective_bytes_at(config)) <= u64::from(cache.line_bytes))
        }
        ref other => panic!("driver default: {other:?}"),
    }
    let bytes = |finding: &SizeFinding| match finding {
        SizeFinding::Exact { bytes, .. } => *bytes,
        other => panic!("{other:?}"),
    };
    for kind in [ElementKind::Texture, ElementKind::ReadOnly] {
        let found = &m.element(kind).expect("measured").sizes[0].finding;
        assert_eq!(
            bytes(found),
            bytes(&l1.sizes[0].finding),
            "{kind:?}: one store with the L1"
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
    let m = measure_only(&profile, "l2");
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
    let l2 = measure_only(&profile, "l2").l2.expect("L2 measured");
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
        let l2 = measure_only(&profile, "l2").l2.expect("L2 measured");
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

// Pinned launches that miss a slot whenever `lose` says so (as a GPU that never puts a
// block on a wanted SM): the sweep repeats such launches and, where SM 0 is never reached,
// the L2 benchmark fails with a reason (`crate::doubles::Hooked`).

fn l2_with(
    lose: impl FnMut(usize, &PinnedRequest, &mut PinnedRun) -> bool + 'static,
) -> (L2Findings, usize) {
    let mut backend = Hooked::losing("h200", lose);
    let options = MeasureOptions {
        only: Selection::named(&["l2"]).unwrap(),
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
    let mut backend = Hooked::losing("h200", |_, _, _| true);
    let options = MeasureOptions {
        only: Selection::named(&["l2", "memory"]).unwrap(),
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut backend, options)
        .run()
        .expect("session runs");
    assert!(m.l2.is_none());
    let failures = &m.element(ElementKind::L2).expect("L2 result").failures;
    assert!(
        failures.iter().any(|f| f.contains("ran on SM 0")),
        "{failures:?}"
    );
    assert!(m
        .element(ElementKind::DeviceMemory)
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
        // The masked interleave models two partitions only.
        profile.l2.interleave = L2Interleave::Balanced;
        profile.l2.home_bits.clear();
        profile.l2.home_page_bytes = None;
        profile.l2.set_index = pchase_runner::sim::L2SetIndex::Modulo;
        let l2 = measure_only(&profile, "l2").l2.expect("L2 measured");
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

#[test]
fn every_benchmark_launches_only_the_kernels_it_declares() {
    let volta = SimProfile::bundled("volta").expect("bundled");
    // The cluster benchmarks launch nothing on Volta ("not applicable"): they run on the
    // Hopper profile, where their kernels exist.
    let hopper = SimProfile::bundled("h100").expect("bundled");
    for benchmark in REGISTRY {
        let name = benchmark.info().name;
        let selection = Selection::named(&[name]).expect("registered");
        let plan = pchase_runner::measure::bench::plan(&selection);
        let kernels: Vec<_> = plan.iter().flat_map(|b| (b.info().kernels)()).collect();
        let declared: std::collections::BTreeSet<&str> =
            kernels.iter().map(|k| k.entry()).collect();
        let cc = volta.device.compute_capability;
        let runs_on_volta = kernels.iter().any(|k| k.check_supported(cc.into()).is_ok());
        let profile = if runs_on_volta { &volta } else { &hopper };
        let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
        let options = MeasureOptions {
            only: selection,
            ..MeasureOptions::default()
        };
        Session::new(&mut backend, options).run().expect("runs");
        let used = backend.kernels_used();
        assert!(!used.is_empty(), "{name}: launched nothing");
        let undeclared: Vec<&&str> = used.iter().filter(|k| !declared.contains(*k)).collect();
        assert!(
            undeclared.is_empty(),
            "{name} (with {plan:?}) launched {undeclared:?}, which it does not declare"
        );
    }
}
