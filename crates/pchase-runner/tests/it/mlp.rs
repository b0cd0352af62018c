//! Memory-level parallelism (`mlp`, a deep benchmark) against simulated outstanding-request
//! limits per SM and per GPU, and against a profile without limits.

use pchase_runner::{
    measure::{bench, ElementKind, MeasureOptions, Measurements, Selection, Session},
    sim::{MlpSpec, SimBackend, SimProfile},
};

use crate::pipeline::without;

fn measure_mlp(profile: &SimProfile) -> Measurements {
    let mut backend = SimBackend::new(profile.clone()).expect("valid profile");
    let options = MeasureOptions {
        only: Selection::named(&["mlp"]).expect("registered"),
        ..MeasureOptions::default()
    };
    Session::new(&mut backend, options).run().expect("runs")
}

fn check(profile: &SimProfile) -> Measurements {
    let mlp = bench::find("mlp").expect("registered");
    let m = measure_mlp(profile);
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
