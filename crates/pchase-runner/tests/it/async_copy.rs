//! Copies to shared memory (`async-copy`, a deep benchmark) against the simulated paths of
//! the bundled Hopper profiles, an Ampere (cp.async without the bulk copies) and the
//! profiles of GPUs older than both.

use pchase_kernels::copy::CopyPath;
use pchase_runner::{
    measure::{bench, report, Measurements},
    sim::SimProfile,
};

use crate::pipeline::{measure_only, without};

fn check(profile: &SimProfile) -> Measurements {
    let copies = bench::find("async-copy").expect("registered");
    let m = measure_only(profile, "async-copy");
    if let Err(why) = copies.sim_check(profile, &m) {
        panic!("{}: {why}", profile.name);
    }
    assert!(
        copies.sim_check(profile, &without(&m, copies)).is_err(),
        "{}: the check passes without results",
        profile.name
    );
    m
}

#[test]
fn every_bundled_profile_is_recovered_or_not_applicable() {
    for name in SimProfile::bundled_names() {
        let profile = SimProfile::bundled(name).expect("bundled");
        let m = check(&profile);
        let topo = report::to_topology(&profile.device, &m, "test");
        topo.validate().expect("valid topology");
        let hopper = profile.device.compute_capability.major >= 9;
        assert_eq!(
            m.copies_to_shared.paths.len(),
            if hopper { 7 } else { 0 },
            "{name}"
        );
        if hopper {
            let section = topo.copies_to_shared.as_ref().expect("section");
            assert!(section.not_applicable.is_empty());
            let tensor = m.copies_to_shared.path(CopyPath::BulkTensor2d).unwrap();
            assert_eq!(tensor.sizes[0].tile, Some((8, 8)));
            let text = topology::render::table(&topo);
            assert!(text.contains("TMA bulk"), "{text}");
        } else {
            assert_eq!(m.copies_to_shared.not_applicable.len(), 7, "{name}");
            let notes: Vec<&str> = topo
                .notes
                .iter()
                .map(|n| n.message.as_str())
                .filter(|m| m.starts_with("not applicable: "))
                .collect();
            // One sentence per family: plain, cp.async, bulk.
            assert_eq!(notes.len(), 3, "{notes:?}");
            assert!(notes
                .iter()
                .any(|m| m.starts_with("not applicable: cp.async (")));
        }
    }
}

#[test]
fn an_ampere_has_cp_async_but_not_the_bulk_copies() {
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "ampere-like".into();
    profile.device.compute_capability.major = 8;
    profile.clusters = None;
    let copies = profile.copies.as_mut().expect("h100 has copies");
    copies.paths.remove("bulk");
    copies.paths.remove("bulk_tensor_2d");
    let m = check(&profile);
    let measured: Vec<CopyPath> = m.copies_to_shared.paths.iter().map(|p| p.path).collect();
    assert_eq!(measured, CopyPath::ALL[..5]);
    let lacking: Vec<CopyPath> = m
        .copies_to_shared
        .not_applicable
        .iter()
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(lacking, [CopyPath::Bulk, CopyPath::BulkTensor2d]);
    // A profile that lists a path the device cannot have is refused.
    let mut wrong = SimProfile::bundled("h100").unwrap();
    wrong.device.compute_capability.major = 8;
    wrong.clusters = None;
    let err = wrong.validate().unwrap_err().to_string();
    assert!(err.contains("copies.paths.bulk"), "{err}");
}

#[test]
fn a_profile_without_copies_fails_the_benchmark_not_the_session() {
    let mut profile = SimProfile::bundled("h200").expect("bundled");
    profile.copies = None;
    let m = measure_only(&profile, "async-copy");
    assert!(m.copies_to_shared.paths.is_empty());
    assert_eq!(
        m.copies_to_shared.failures.len(),
        7,
        "{:?}",
        m.copies_to_shared.failures
    );
    let topo = report::to_topology(&profile.device, &m, "test");
    assert!(topo
        .notes
        .iter()
        .any(|n| n.message.contains("describes no copies")));
}
