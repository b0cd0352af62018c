//! The L2's address map (`l2` fits it, the deep `l2-address` tests it) against simulated
//! L2s: the H100's and H200's measured XOR masks recovered exactly and predicted on lines
//! the fit never saw; a hashed home refused, not fitted.

use pchase_runner::{
    measure::{bench, l2::map::AddressFinding, Measurements},
    sim::{L2Interleave, SimProfile},
};

use crate::pipeline::{measure_only, without};

/// The address map the `l2` benchmark found, or why none.
fn address(m: &Measurements) -> &Result<AddressFinding, String> {
    m.l2.as_ref()
        .and_then(|l2| l2.address.as_ref())
        .expect("two partitions: an address map attempted")
}

#[test]
fn the_hopper_masks_are_recovered_and_predict_fresh_lines() {
    let check = bench::find("l2-address").expect("registered");
    for (name, bits) in [
        ("h100", [12, 13, 16, 17, 19]),
        ("h200", [12, 13, 15, 17, 19]),
    ] {
        let profile = SimProfile::bundled(name).unwrap();
        let m = measure_only(&profile, "l2-address");
        if let Err(why) = check.sim_check(&profile, &m) {
            panic!("{name}: {why}");
        }
        assert!(
            check.sim_check(&profile, &without(&m, check)).is_err(),
            "{name}: the check passes without the prediction"
        );
        let found = address(&m).as_ref().unwrap();
        assert_eq!(found.map.bits, bits, "{name}");
        let (reference, prediction) = found.prediction.expect("tested");
        assert_ne!(
            reference, 0,
            "{name}: the second map's reference is in the other partition"
        );
        assert!(prediction.lines > 10_000, "{name}: {prediction:?}");
        assert!(
            prediction.accuracy().unwrap() >= 0.99,
            "{name}: {prediction:?}"
        );
        // The topology carries it, and every renderer shows it.
        let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
        let map = topo.l2_partitions().unwrap().address_map.as_ref().unwrap();
        assert_eq!(map.bits, bits);
        assert_eq!(map.predicted_lines, Some(prediction.lines as u64));
        assert!(topology::render::table(&topo)
            .contains("L2 home partition: home = XOR of address bits"));
    }
}

#[test]
fn a_hashed_home_is_refused_with_its_reason() {
    let mut profile = SimProfile::bundled("h200").unwrap();
    profile.l2.interleave = L2Interleave::Balanced;
    profile.l2.home_bits = Vec::new();
    profile.l2.home_page_bytes = None;
    profile.l2.set_index = pchase_runner::sim::L2SetIndex::Modulo;
    let m = measure_only(&profile, "l2-address");
    let why = address(&m).as_ref().unwrap_err();
    assert!(why.contains("no XOR of address bits"), "{why}");
    assert!(m.sections["l2-address"]
        .as_ref()
        .unwrap_err()
        .contains("no address map"));
    let check = bench::find("l2-address").unwrap();
    check
        .sim_check(&profile, &m)
        .expect("a refusal is right for a hashed home");
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    let p = topo.l2_partitions().unwrap();
    assert!(p.address_map.is_none());
    assert!(p
        .address_map_not_determined
        .as_ref()
        .unwrap()
        .contains("no XOR"));
}
