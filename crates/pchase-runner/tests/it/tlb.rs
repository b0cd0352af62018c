//! The TLB search (`tlb`, a deep benchmark) against simulated TLBs of one and two levels,
//! in a plain allocation of large pages and in separately mapped 2 MiB chunks, and against
//! profiles without one.

use pchase_runner::{
    measure::{bench, tlb::TlbSearch, MeasureOptions, Measurements, Selection, Session},
    sim::{Associativity, Replacement, SimBackend, SimProfile, TlbLevelSpec, TlbSpec},
    walk::WalkAllocation,
    LoadPath,
};

use crate::pipeline::without;

fn level(entries: u32, miss_cycles: u32) -> TlbLevelSpec {
    TlbLevelSpec {
        entries,
        associativity: Associativity::Full,
        replacement: Replacement::Lru,
        miss_cycles,
        entry_bytes: None,
    }
}

/// The L1 and the TLBs of `profile`: the L1's size bounds the L1 path's walks.
fn measure_tlb(profile: &SimProfile) -> Measurements {
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let options = MeasureOptions {
        only: Selection::named(&["l1", "tlb"]).expect("registered"),
        carveout_table: false,
        ..MeasureOptions::default()
    };
    Session::new(&mut backend, options).run().expect("runs")
}

fn check(profile: &SimProfile) -> Measurements {
    let tlb = bench::find("tlb").expect("registered");
    let m = measure_tlb(profile);
    if let Err(why) = tlb.sim_check(profile, &m) {
        let failures: Vec<_> = m.elements.iter().flat_map(|(_, e)| &e.failures).collect();
        panic!("{}: {why}; failures {failures:?}", profile.name);
    }
    assert!(
        tlb.sim_check(profile, &without(&m, tlb)).is_err(),
        "{}: the check passes without results",
        profile.name
    );
    m
}

fn search(m: &Measurements, path: LoadPath, allocation: WalkAllocation) -> &TlbSearch {
    m.tlb
        .iter()
        .find(|s| s.path == path && s.region.allocation == allocation)
        .expect("searched")
}

#[test]
fn two_levels_with_odd_entries_are_recovered_exactly_on_both_paths() {
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-two-tlbs".into();
    profile.tlb = Some(TlbSpec::new(2 << 20, vec![level(24, 36), level(700, 180)]));
    let m = check(&profile);
    for path in [LoadPath::GlobalCa, LoadPath::GlobalCg] {
        for allocation in WalkAllocation::ALL {
            let f = &search(&m, path, allocation).finding;
            assert_eq!(f.entry_bytes(), Some(2 << 20), "{path}");
            let reach: Vec<u64> = f.levels.iter().map(|l| l.reach_bytes).collect();
            assert_eq!(reach, [48 << 20, 1400 << 20], "{path}");
            // The memory allowed more: the bound lies beyond the second level.
            assert!(f.bound_pages.is_some_and(|p| p > 700), "{path}: {f:?}");
        }
    }
    // Both levels and their miss latencies reach the topology, per path and allocation.
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    assert_eq!(topo.tlb.len(), 12);
    assert!(topo
        .tlb
        .iter()
        .all(|l| l.miss_latency.is_some() && l.entries.is_some() && l.allocation.is_some()));
    topo.validate().expect("valid");
}

#[test]
fn large_pages_of_a_plain_allocation_and_small_pages_of_chunks_are_both_recovered() {
    // Hopper-like: cuMemAlloc maps 512 MiB pages, the chunked region 2 MiB ones; the same
    // two levels translate both.
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-large-pages".into();
    profile.tlb = Some(TlbSpec::new(512 << 20, vec![level(16, 40), level(64, 150)]));
    let m = check(&profile);
    for path in [LoadPath::GlobalCa, LoadPath::GlobalCg] {
        let plain = search(&m, path, WalkAllocation::Plain);
        assert_eq!(plain.finding.entry_bytes(), Some(512 << 20), "{path}");
        let reach: Vec<u64> = plain.finding.levels.iter().map(|l| l.reach_bytes).collect();
        assert_eq!(reach, [8 << 30, 32 << 30], "{path}");
        // The walks went past 16 GiB, as far as 32-bit element indices reach.
        assert!(plain.finding.bound_bytes.is_some_and(|b| b > 32 << 30));
        let chunked = search(&m, path, WalkAllocation::Chunked);
        assert_eq!(chunked.region.chunk_bytes, Some(2 << 20));
        assert_eq!(chunked.finding.entry_bytes(), Some(2 << 20), "{path}");
        let reach: Vec<u64> = chunked
            .finding
            .levels
            .iter()
            .map(|l| l.reach_bytes)
            .collect();
        assert_eq!(reach, [32 << 20, 128 << 20], "{path}");
    }
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    assert!(topo
        .notes
        .iter()
        .any(|n| n.message.contains("one cuMemAlloc")
            && n.message.contains("one level-1 entry maps 512.0 MiB")));
    let text = topology::render::table(&topo);
    assert!(text.contains("TLB"), "{text}");
}

#[test]
fn entries_of_16_mib_over_2_mib_pages_are_the_same_in_both_allocations() {
    // The H100's L2 path as measured by scripts/gpu/tlb_regions.cu: 16 entries
    // that each map 16 MiB of virtual addresses, +10 cycles, over 2 MiB pages whether one
    // cuMemAlloc or separately mapped chunks.
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-16-mib-entries".into();
    let mut first = level(16, 10);
    first.entry_bytes = Some(16 << 20);
    profile.tlb = Some(TlbSpec::new(2 << 20, vec![first]));
    let m = check(&profile);
    for allocation in WalkAllocation::ALL {
        let f = &search(&m, LoadPath::GlobalCg, allocation).finding;
        assert_eq!(f.entry_bytes(), Some(16 << 20), "{allocation}");
        assert_eq!(f.levels[0].entries, Some(16), "{allocation}");
        assert_eq!(f.levels[0].reach_bytes, 256 << 20, "{allocation}");
        let check = f.order_check().expect("the order test fits");
        assert!(check.confirms(), "{allocation}: {check:?}");
    }
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    let said = |what: &str| topo.notes.iter().any(|n| n.message.contains(what));
    assert!(said("TLB on the global_cg path: the levels are the same in one cuMemAlloc and in separately mapped chunks of 2.0 MiB (16 entries of 16.0 MiB)"));
    assert!(said("more than a page of at most 2.0 MiB"));
    assert!(topo
        .notes
        .iter()
        .all(|n| n.severity != topology::NoteSeverity::Warning || !n.message.contains("TLB")));
}

#[test]
fn three_levels_beyond_the_memory_are_recovered_in_the_aliased_region() {
    // The H100's L2 path as measured by scripts/gpu/tlb_alias.cu (992 GiB of
    // aliased addresses; the tool walks 496 GiB): 16 entries of 16 MiB (+10 cycles), about 2048 of 32 MiB (+88),
    // about 4096 of 64 MiB (+351). One cuMemAlloc of the simulated 80 GB reaches level 2
    // (2049 x 32 MiB = 64 GiB) but not level 3 (4097 x 64 MiB = 256 GiB).
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-three-tlbs".into();
    let spanned = |entries, miss, span: u64| TlbLevelSpec {
        entry_bytes: Some(span),
        ..level(entries, miss)
    };
    profile.tlb = Some(TlbSpec::new(
        2 << 20,
        vec![
            spanned(16, 10, 16 << 20),
            spanned(2048, 88, 32 << 20),
            spanned(4096, 351, 64 << 20),
        ],
    ));
    let m = check(&profile);
    let aliased = &search(&m, LoadPath::GlobalCg, WalkAllocation::Aliased).finding;
    let shape: Vec<(Option<u64>, Option<u64>)> = aliased
        .levels
        .iter()
        .map(|l| (l.entries, l.entry_bytes))
        .collect();
    // Level 3 overflows at 64 MiB, the largest stride whose walk of 4097 nodes fits the
    // 496 GiB (128 MiB would need 512 GiB): no larger stride repeats it, and the order test
    // (groups 64 MiB apart, every grouped load missing) tells its span.
    assert_eq!(
        shape,
        [
            (Some(16), Some(16 << 20)),
            (Some(2048), Some(32 << 20)),
            (Some(4096), Some(64 << 20))
        ]
    );
    assert!(aliased
        .levels
        .iter()
        .all(|l| l.order_check.is_some_and(|c| c.confirms())));
    // In one cuMemAlloc level 2 overflows only at 32 MiB, the largest stride whose walk
    // fits 2049 nodes; the order test tells its span there too. Level 3 is out of reach.
    let plain = &search(&m, LoadPath::GlobalCg, WalkAllocation::Plain).finding;
    assert_eq!(plain.levels.len(), 2, "{:?}", plain.levels);
    assert_eq!(plain.levels[1].entries, Some(2048));
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    assert!(topo.notes.iter().any(|n| n
        .message
        .contains("the aliased region's walks over 496.0 GiB found 16 entries of 16.0 MiB, 2048 entries of 32.0 MiB, 4096 entries of 64.0 MiB (level 3 beyond the reach of walks in the memory)")));
    topo.validate().expect("valid");
}

#[test]
fn one_level_of_small_pages_is_recovered_and_the_rest_is_a_bound() {
    let mut profile = SimProfile::bundled("volta").expect("bundled");
    profile.name = "volta-one-tlb".into();
    profile.tlb = Some(TlbSpec::new(64 << 10, vec![level(40, 25)]));
    let m = check(&profile);
    for s in &m.tlb {
        assert_eq!(s.finding.entry_bytes(), Some(64 << 10), "{}", s.path);
        assert_eq!(s.finding.levels.len(), 1, "{}", s.path);
        assert_eq!(s.finding.levels[0].entries, Some(40), "{}", s.path);
    }
}

#[test]
fn shipped_profiles_report_their_tlbs_or_a_bound_only() {
    for name in SimProfile::bundled_names() {
        let profile = SimProfile::bundled(name).expect("bundled");
        let m = check(&profile);
        let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
        let Some(spec) = &profile.tlb else {
            for s in &m.tlb {
                assert!(s.finding.levels.is_empty(), "{name} {}: {s:?}", s.path);
            }
            assert!(topo.tlb.is_empty());
            assert!(
                topo.notes
                    .iter()
                    .any(|n| n.message.contains("no translation level")),
                "{name}: no bound note"
            );
            continue;
        };
        // The h100 profile holds the H100's measured TLBs: the L1 path's walks, whose
        // lines hit the L1, see none of them; the L2 path's aliased walks see all three.
        assert!(!spec.sm_hits_translated, "{name}");
        for s in m.tlb.iter().filter(|s| s.path == LoadPath::GlobalCa) {
            assert!(
                s.finding.levels.is_empty(),
                "{name} {}: {s:?}",
                s.region.allocation
            );
        }
        let aliased = &search(&m, LoadPath::GlobalCg, WalkAllocation::Aliased).finding;
        assert_eq!(aliased.levels.len(), spec.levels.len(), "{name}");
        assert!(topo.notes.iter().any(|n| n
            .message
            .contains("loads that hit the L1 are not translated")));
    }
}

#[test]
fn a_third_level_dealt_to_two_halves_by_address_is_not_taken_for_entries_twice_as_large() {
    // The H100's third L2-path level (scripts/gpu/tlb_fill.cu): 32 MiB entries
    // in two sets by address bit 25. Walks 64 MiB apart overflow it at 4340, as 4339
    // entries of 64 MiB would; the walk of twice the nodes 32 MiB apart tells them apart.
    let profile = SimProfile::bundled("h100").expect("bundled");
    let spec = profile.tlb.clone().expect("the h100 profile has TLBs");
    assert_eq!(spec.levels[2].associativity, Associativity::Ways(4339));
    let m = check(&profile);
    let aliased = &search(&m, LoadPath::GlobalCg, WalkAllocation::Aliased).finding;
    let third = &aliased.levels[2];
    assert_eq!(
        (third.entries, third.entry_bytes, third.interleave),
        (Some(8678), Some(32 << 20), 2)
    );
    assert_eq!(third.reach_bytes, 8678 * (32 << 20));
    // The first two levels are not dealt.
    assert!(aliased.levels[..2].iter().all(|l| l.interleave == 1));
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    let level = topo
        .tlb
        .iter()
        .find(|l| l.level == 3 && l.allocation.as_deref() == Some("aliased"))
        .expect("level 3 in the topology");
    assert_eq!((level.entries, level.interleave), (Some(8678), Some(2)));
    assert!(topo.notes.iter().any(|n| n.message.contains(
        "its 8678 entries are dealt by address to 2 groups of 4339: walks 64.0 MiB apart fill one group and overflow at 4340 nodes"
    )));
    topo.validate().expect("valid");
}
