//! Geometry unlike the GPUs the tool was built on, recovered from simulated GPUs whose
//! truth is the profile: `tests/geometry/odd.toml` (7 SMs, a two-way L1, four two-way
//! texture caches per SM, a direct-mapped constant L1 with two copies, 256-byte constant
//! L1.5 lines, an L2 of three partitions without copies) and `tests/geometry/quad.toml`
//! (11 SMs, one four-way texture cache, three two-way constant L1s, 128-byte L1.5 lines, an
//! L2 of four partitions with copies). Every registered benchmark's simulator check must
//! pass, and the topology every output is rendered from must carry the profile's values.

use std::path::PathBuf;

use pchase_runner::{
    measure::{bench::REGISTRY, report, ElementKind, MeasureOptions, Session},
    sim::{SimBackend, SimProfile},
    LoadPath,
};
use topology::Topology;

fn fixture(name: &str) -> SimProfile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/geometry")
        .join(format!("{name}.toml"));
    SimProfile::load(&path).expect("fixture profile loads")
}

/// Measures `profile`, checks every benchmark against its truth, and returns the topology.
fn recovered(profile: &SimProfile) -> Topology {
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let m = Session::new(&mut backend, MeasureOptions::default())
        .run()
        .expect("session runs");
    // The deep benchmarks (`--deep`) are not in a default session.
    for benchmark in REGISTRY.iter().filter(|b| !b.info().deep) {
        if let Err(why) = benchmark.sim_check(profile, &m) {
            panic!("{}: {}: {why}", profile.name, benchmark.info().name);
        }
    }
    report::to_topology(&profile.device, &m, "geometry")
}

/// The count per SM the topology reports for `element`, and the truth: the copies of the
/// first cache on `path`.
fn copies(topo: &Topology, profile: &SimProfile, element: ElementKind, path: LoadPath) {
    let found = topo
        .element(element)
        .and_then(|e| e.count_per_sm.as_ref())
        .map(|c| c.value);
    let truth = profile.caches_on_path(path).next().map(|c| c.copies_per_sm);
    assert_eq!(found, truth, "{}: copies per SM of {element}", profile.name);
}

/// The constant L1.5's fetch granularity and line in the topology, and the truth.
fn l15_line(topo: &Topology, profile: &SimProfile) {
    let l15 = profile
        .caches_on_path(LoadPath::Constant)
        .nth(1)
        .expect("an L1.5");
    let element = topo
        .element(ElementKind::ConstantL15)
        .expect("L1.5 reported");
    let value = |s: Option<&topology::Size>| s.map(|s| s.bound.lower().0);
    assert_eq!(
        value(element.line_size.as_ref()),
        Some(u64::from(l15.line_bytes)),
        "{}: L1.5 line",
        profile.name
    );
    assert_eq!(
        value(element.fetch_granularity.as_ref()),
        Some(u64::from(l15.sector())),
        "{}: L1.5 fetch granularity",
        profile.name
    );
}

/// The L2's partition count as every output gets it (the topology's field, from the map).
fn partition_count(topo: &Topology) -> Option<u32> {
    topo.l2_partitions()
        .and_then(|p| p.count.as_ref())
        .map(|c| c.value)
}

#[test]
fn three_partitions_without_copies_two_ways_and_an_odd_sm_count_are_recovered() {
    let profile = fixture("odd");
    let topo = recovered(&profile);
    assert_eq!(partition_count(&topo), Some(profile.l2.partitions));
    let partitions = topo.l2_partitions().expect("partitions");
    assert_eq!(partitions.near_keeps_far_copies, Some(false));
    copies(&topo, &profile, ElementKind::L1Data, LoadPath::GlobalCa);
    copies(&topo, &profile, ElementKind::Texture, LoadPath::Texture);
    copies(&topo, &profile, ElementKind::ConstantL1, LoadPath::Constant);
    l15_line(&topo, &profile);
    // The rendered table names the far side as two partitions.
    let table = topology::render::table(&topo);
    assert!(table.contains("far partition ×2"), "{table}");
}

#[test]
fn four_partitions_with_copies_and_128_byte_l15_lines_are_recovered() {
    let profile = fixture("quad");
    let topo = recovered(&profile);
    assert_eq!(partition_count(&topo), Some(profile.l2.partitions));
    copies(&topo, &profile, ElementKind::Texture, LoadPath::Texture);
    copies(&topo, &profile, ElementKind::ConstantL1, LoadPath::Constant);
    l15_line(&topo, &profile);
}

/// The bundled `kepler` profile's constant L1.5 has 256-byte lines behind 64-byte constant-L1
/// lines; it was reported with the L1's 64 B.
#[test]
fn the_kepler_constant_l15_line_is_its_own() {
    let profile = SimProfile::bundled("kepler").expect("bundled");
    let topo = recovered(&profile);
    l15_line(&topo, &profile);
}
