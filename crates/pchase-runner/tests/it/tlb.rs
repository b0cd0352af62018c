//! The TLB search (`tlb`, a deep benchmark) against simulated TLBs of one and two levels,
//! and against profiles without one.

use pchase_runner::{
    measure::{bench, MeasureOptions, Measurements, Selection, Session},
    sim::{Associativity, Replacement, SimBackend, SimProfile, TlbLevelSpec, TlbSpec},
    LoadPath,
};

use crate::pipeline::without;

fn level(entries: u32, miss_cycles: u32) -> TlbLevelSpec {
    TlbLevelSpec {
        entries,
        associativity: Associativity::Full,
        replacement: Replacement::Lru,
        miss_cycles,
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
        panic!("{}: {why}", profile.name);
    }
    assert!(
        tlb.sim_check(profile, &without(&m, tlb)).is_err(),
        "{}: the check passes without results",
        profile.name
    );
    m
}

#[test]
fn two_levels_with_odd_entries_are_recovered_exactly_on_both_paths() {
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-two-tlbs".into();
    profile.tlb = Some(TlbSpec {
        page_bytes: 2 << 20,
        levels: vec![level(24, 36), level(700, 180)],
    });
    let m = check(&profile);
    for path in [LoadPath::GlobalCa, LoadPath::GlobalCg] {
        let (_, f) = m.tlb.iter().find(|(p, _)| *p == path).expect("searched");
        assert_eq!(f.page_bytes, Some(2 << 20), "{path}");
        let reach: Vec<u64> = f.levels.iter().map(|l| l.reach_bytes).collect();
        assert_eq!(reach, [48 << 20, 1400 << 20], "{path}");
        // The memory allowed more: the bound lies beyond the second level.
        assert!(f.bound_pages.is_some_and(|p| p > 700), "{path}: {f:?}");
    }
    // Both levels and their miss latencies reach the topology, per path.
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    assert_eq!(topo.tlb.len(), 4);
    assert!(topo
        .tlb
        .iter()
        .all(|l| l.miss_latency.is_some() && l.page_size.is_some()));
    topo.validate().expect("valid");
}

#[test]
fn one_level_of_small_pages_is_recovered_and_the_rest_is_a_bound() {
    let mut profile = SimProfile::bundled("volta").expect("bundled");
    profile.name = "volta-one-tlb".into();
    profile.tlb = Some(TlbSpec {
        page_bytes: 64 << 10,
        levels: vec![level(40, 25)],
    });
    let m = check(&profile);
    for (path, f) in &m.tlb {
        assert_eq!(f.page_bytes, Some(64 << 10), "{path}");
        assert_eq!(f.levels.len(), 1, "{path}");
        assert_eq!(f.levels[0].entries, Some(40), "{path}");
    }
}

#[test]
fn shipped_profiles_without_a_tlb_report_a_bound_only() {
    for name in SimProfile::bundled_names() {
        let profile = SimProfile::bundled(name).expect("bundled");
        let m = check(&profile);
        for (path, f) in &m.tlb {
            assert!(f.levels.is_empty(), "{name} {path}: {f:?}");
        }
        let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
        assert!(topo.tlb.is_empty());
        assert!(
            topo.notes
                .iter()
                .any(|n| n.message.contains("no translation level")),
            "{name}: no bound note"
        );
    }
}
