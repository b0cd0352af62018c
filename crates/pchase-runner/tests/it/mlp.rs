//! Memory-level parallelism (`mlp`, a deep benchmark) against simulated outstanding-request
//! limits per SM and per GPU, and against a profile without limits.

use pchase_runner::{
    measure::{bench, ElementKind, Measurements},
    sim::{MlpSpec, SimProfile},
};

use crate::pipeline::{measure_only, without};

fn check(profile: &SimProfile) -> Measurements {
    let mlp = bench::find("mlp").expect("registered");
    let m = measure_only(profile, "mlp");
    if let Err(why) = mlp.sim_check(profile, &m) {
        panic!("{}: {why}", profile.name);
    }
    assert!(
        mlp.sim_check(profile, &without(&m, mlp)).is_err(),
        "{}: the check passes without results",
        profile.name
    );
    m
}

#[test]
fn odd_limits_per_sm_and_per_gpu_are_recovered() {
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-mlp".into();
    profile.mlp = Some(MlpSpec {
        per_sm: 11,
        per_gpu: 700,
    });
    let m = check(&profile);
    for level in [ElementKind::L2, ElementKind::DeviceMemory] {
        let sm = m
            .mlp
            .iter()
            .find(|(l, f)| *l == level && f.sms == 1)
            .map(|(_, f)| f)
            .expect("one SM");
        assert_eq!(
            sm.saturating_chains, 12,
            "{level}: the first grid point past 11"
        );
        assert!(
            (sm.in_flight - 11.0).abs() < 0.25,
            "{level}: {}",
            sm.in_flight
        );
        let gpu = m
            .mlp
            .iter()
            .find(|(l, f)| *l == level && f.sms > 1)
            .map(|(_, f)| f)
            .expect("the GPU");
        // 700 / 132 SMs = 5.3 chains per SM: saturated from 6.
        assert_eq!(gpu.saturating_chains, 6, "{level}");
        assert!(
            (gpu.in_flight - 700.0).abs() < 14.0,
            "{level}: {}",
            gpu.in_flight
        );
        assert!(!gpu.still_rising);
    }
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    let notes = topo
        .notes
        .iter()
        .filter(|n| n.message.starts_with("memory-level parallelism"))
        .count();
    assert_eq!(notes, 4);
}

#[test]
fn without_limits_every_chain_adds_throughput() {
    let profile = SimProfile::bundled("volta").expect("bundled");
    let m = check(&profile);
    assert!(m.mlp.iter().all(|(_, f)| f.saturating_chains >= 24));
}

#[test]
fn a_limit_above_32_chains_per_sm_is_found_with_several_chains_per_warp() {
    // The H100 still rose at 32 chains per SM; a limit of 90 per SM and 9000 per GPU (68
    // per SM on 132 SMs) must be found past the 32 warps of a block.
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-mlp-deep".into();
    profile.mlp = Some(MlpSpec {
        per_sm: 90,
        per_gpu: 9000,
    });
    let m = check(&profile);
    for level in [ElementKind::L2, ElementKind::DeviceMemory] {
        let find = |one: bool| {
            m.mlp
                .iter()
                .find(|(l, f)| *l == level && (f.sms == 1) == one)
                .map(|(_, f)| f)
                .expect("measured")
        };
        let sm = find(true);
        // 95 % of 90 is 85.5: the first grid point at or past it is 96.
        assert_eq!(sm.saturating_chains, 96, "{level}");
        assert!(
            (sm.in_flight - 90.0).abs() < 1.8,
            "{level}: {}",
            sm.in_flight
        );
        assert!(!sm.still_rising, "{level}");
        let gpu = find(false);
        // 9000 / 132 = 68.2 per SM; 95 % of it is 64.8: the first point past it is 96.
        assert_eq!(gpu.saturating_chains, 96, "{level}");
        assert!(
            (gpu.in_flight - 9000.0).abs() < 180.0,
            "{level}: {}",
            gpu.in_flight
        );
        assert_eq!(gpu.points.last().map(|p| p.chains), Some(256));
    }
}
