//! The sets benchmark (`sets`, deep) against simulated caches whose organisation is the
//! profile's truth: the bundled profiles, the `odd` fixture (a two-way L1, a direct-mapped
//! constant L1, a four-way L1.5) and the `hashed` fixture (an XOR-folded four-way tree-PLRU
//! L1, a six-way constant L1, a three-way random L1.5).

use std::path::PathBuf;

use pchase_runner::{
    measure::{bench, report, ElementKind, MeasureOptions, Measurements, Selection, Session},
    sim::{SimBackend, SimProfile},
};
use topology::{ReplacementPolicy, SetMapping};

use crate::pipeline::without;

fn fixture(name: &str) -> SimProfile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/geometry")
        .join(format!("{name}.toml"));
    SimProfile::load(&path).expect("fixture profile loads")
}

/// Runs `sets` alone and checks it against the profile, with teeth.
fn check(profile: &SimProfile) -> Measurements {
    let sets = bench::find("sets").expect("registered");
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let options = MeasureOptions {
        only: Selection::named(&["sets"]).expect("registered"),
        carveout_table: false,
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut backend, options).run().expect("runs");
    if let Err(why) = sets.sim_check(profile, &m) {
        panic!("{}: {why}", profile.name);
    }
    assert!(
        sets.sim_check(profile, &without(&m, sets)).is_err(),
        "{}: the check passes without results",
        profile.name
    );
    m
}

#[test]
fn a_hashed_tree_plru_l1_a_six_way_and_a_three_way_random_cache_are_recovered() {
    let profile = fixture("hashed");
    let m = check(&profile);
    let topo = report::to_topology(&profile.device, &m, "test");
    topo.validate().expect("valid");
    let l1 = topo
        .element(ElementKind::L1Data)
        .and_then(|e| e.geometry.as_ref())
        .expect("L1 geometry");
    assert_eq!(l1.replacement, Some(ReplacementPolicy::TreePlru));
    assert!(matches!(l1.set_mapping, Some(SetMapping::Hashed { .. })));
    let c1 = topo
        .element(ElementKind::ConstantL1)
        .and_then(|e| e.geometry.as_ref())
        .expect("constant L1 geometry");
    assert_eq!(c1.associativity.map(|c| c.value), Some(6));
    assert_eq!(c1.replacement, Some(ReplacementPolicy::Lru));
    let c15 = topo
        .element(ElementKind::ConstantL15)
        .and_then(|e| e.geometry.as_ref())
        .expect("constant L1.5 geometry");
    assert_eq!(c15.associativity.map(|c| c.value), Some(3));
    assert_eq!(c15.replacement, Some(ReplacementPolicy::Random));
    // Every output shows it.
    let table = topology::render::table(&topo);
    assert!(table.contains("128 sets × 4 ways"), "{table}");
    assert!(topology::render::markdown(&topo).contains("tree PLRU"));
}

#[test]
fn odd_and_direct_mapped_caches_of_the_odd_fixture_are_recovered() {
    let profile = fixture("odd");
    let m = check(&profile);
    let topo = report::to_topology(&profile.device, &m, "test");
    topo.validate().expect("valid");
    let c1 = topo
        .element(ElementKind::ConstantL1)
        .and_then(|e| e.geometry.as_ref())
        .expect("constant L1 geometry");
    assert_eq!(c1.associativity.map(|c| c.value), Some(1));
    let l1 = topo
        .element(ElementKind::L1Data)
        .and_then(|e| e.geometry.as_ref())
        .expect("L1 geometry");
    assert!(matches!(l1.set_mapping, Some(SetMapping::Modulo { .. })));
}

#[test]
fn bundled_profiles_are_recovered_or_said_to_be_out_of_reach() {
    for name in SimProfile::bundled_names() {
        let profile = SimProfile::bundled(name).expect("bundled");
        let m = check(&profile);
        let topo = report::to_topology(&profile.device, &m, "test");
        topo.validate().expect("valid");
        // The L1.5s of 128 KiB do not overflow within the 64 KiB bank: said so.
        if let Some(g) = topo
            .element(ElementKind::ConstantL15)
            .and_then(|e| e.geometry.as_ref())
        {
            assert!(
                g.associativity.is_some() || g.not_determined.is_some(),
                "{name}: {g:?}"
            );
        }
    }
}

#[test]
fn profiles_refuse_tree_plru_of_odd_ways_and_a_folded_index_of_odd_sets() {
    use pchase_runner::sim::{Replacement, SetIndex};
    let mut six_way_plru = fixture("hashed");
    six_way_plru.caches[1].replacement = Replacement::TreePlru;
    let err = six_way_plru.validate().expect_err("6 ways are no tree");
    assert!(err.to_string().contains("tree PLRU"), "{err}");
    let mut folded = fixture("odd");
    // The odd fixture's L1 has 384 sets at its 32 KiB configuration.
    folded.caches[0].set_index = SetIndex::XorFold;
    let err = folded.validate().expect_err("384 sets do not fold");
    assert!(err.to_string().contains("xor-fold"), "{err}");
    assert!(fixture("hashed").validate().is_ok());
}

/// Four XOR-hashed sets of 128 ways with a victim among the 24 oldest lines: the first
/// overflow names no fixed set, the reduction finds one, and the topology states 4 sets of
/// 128 ways, the index's masks (the fold's even and odd bits) and the miss shares past the
/// ways beside LRU's and a uniformly random victim's.
#[test]
fn four_xor_hashed_sets_with_a_victim_among_the_oldest_are_recovered() {
    let profile = fixture("quarters");
    let m = check(&profile);
    let found = m
        .sets
        .iter()
        .find(|s| s.element == ElementKind::L1Data)
        .expect("L1 searched");
    let reduction = found
        .finding
        .reduction
        .as_ref()
        .expect("reduced to one set");
    assert!(reduction.set_lines.len() > 128);
    let topo = report::to_topology(&profile.device, &m, "test");
    topo.validate().expect("valid");
    let l1 = topo
        .element(ElementKind::L1Data)
        .and_then(|e| e.geometry.as_ref())
        .expect("L1 geometry");
    assert_eq!(l1.associativity.map(|c| c.value), Some(128));
    assert_eq!(l1.sets.map(|c| c.value), Some(4));
    match &l1.set_mapping {
        Some(SetMapping::Hashed { description }) => {
            assert!(description.contains("XOR hash"), "{description}")
        }
        other => panic!("{other:?}"),
    }
    match &l1.replacement {
        Some(ReplacementPolicy::Other(what)) => {
            assert!(what.contains("neither LRU/FIFO nor"), "{what}")
        }
        other => panic!("{other:?}"),
    }
}

/// After the L1's own benchmark (fetch granularity 32 B, allocation line 128 B on the
/// simulated H100, as on the GPU), the sets search steps by the allocation line: what one
/// tag covers, so what a set holds.
#[test]
fn the_sets_search_steps_by_the_allocation_line() {
    let profile = SimProfile::bundled("h100").expect("bundled");
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let options = MeasureOptions {
        only: Selection::named(&["l1", "sets"]).expect("registered"),
        carveout_table: false,
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut backend, options).run().expect("runs");
    let l1 = m.element(ElementKind::L1Data).expect("L1 measured");
    assert_eq!(
        l1.line.as_ref().map(|l| l.bytes),
        Some(32),
        "fetch granularity"
    );
    assert_eq!(
        l1.line_bytes.as_ref().map(|l| l.bytes),
        Some(128),
        "allocation line"
    );
    let sets = m
        .sets
        .iter()
        .find(|s| s.element == ElementKind::L1Data)
        .expect("L1 searched");
    assert_eq!(sets.line_bytes, 128);
}

/// On the `quarters` fixture the reduction chases fewer lists than dropping its 545 lines
/// one at a time would alone, and the whole benchmark stays within a few hundred launches,
/// with the geometry of the fixture.
#[test]
fn the_reduction_needs_fewer_chases_than_lines() {
    let profile = fixture("quarters");
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let options = MeasureOptions {
        only: Selection::named(&["sets"]).expect("registered"),
        carveout_table: false,
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut backend, options).run().expect("runs");
    let found = m
        .sets
        .iter()
        .find(|s| s.element == ElementKind::L1Data)
        .expect("L1 searched");
    assert_eq!(
        (found.finding.ways, found.finding.sets),
        (Some(128), Some(4))
    );
    let reduction = found.finding.reduction.as_ref().expect("reduced");
    assert_eq!(
        reduction.set_lines.len(),
        129,
        "one set, one line over its ways"
    );
    let start = found.finding.capacity_lines.expect("capacity") + 1 + 32;
    assert!(
        u64::from(found.finding.probes) < start,
        "{} chases from {start} lines",
        found.finding.probes
    );
    // 300 here (213 chases, the capacity search's included); dropping line by line took a
    // launch or more for each of the 545 lines alone.
    assert!(backend.launches() < 400, "{} launches", backend.launches());
}
