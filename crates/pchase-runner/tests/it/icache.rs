//! The instruction-cache search (`icache`, a deep benchmark) against simulated instruction
//! caches: Volta's published geometry, an unusual two-level profile, a profile without
//! `[icache]` and a GPU that cannot run the kernel.

use pchase_runner::{
    measure::{bench, Measurements},
    sim::{IcacheLevelSpec, IcacheSpec, SimProfile},
};

use crate::pipeline::{measure_only, without};

fn check(profile: &SimProfile) -> Measurements {
    let icache = bench::find("icache").expect("registered");
    let m = measure_only(profile, "icache");
    if let Err(why) = icache.sim_check(profile, &m) {
        panic!("{}: {why}", profile.name);
    }
    assert!(
        icache.sim_check(profile, &without(&m, icache)).is_err(),
        "{}: the check passes without results",
        profile.name
    );
    m
}

fn sizes(m: &Measurements) -> Vec<Option<u64>> {
    m.icache
        .as_ref()
        .expect("measured")
        .levels
        .iter()
        .map(|l| l.size_bytes)
        .collect()
}

#[test]
fn volta_levels_are_recovered_and_reported() {
    let profile = SimProfile::bundled("volta").expect("bundled");
    let m = check(&profile);
    assert_eq!(sizes(&m), [Some(12 << 10), Some(128 << 10), None]);
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    topo.validate().expect("valid");
    assert_eq!(topo.instruction_caches.len(), 3);
    assert_eq!(
        topo.instruction_caches[2].tried_up_to,
        Some(topology::Bytes(1 << 20))
    );
    assert!(topology::render::table(&topo).contains("level 2: 128 KiB"));
}

#[test]
fn two_levels_of_odd_sizes_are_recovered_exactly() {
    let mut profile = SimProfile::bundled("h100").expect("bundled");
    profile.name = "h100-odd-icache".into();
    profile.icache = Some(IcacheSpec {
        levels: vec![
            IcacheLevelSpec {
                bytes: 20 << 10,
                cycles_per_instruction: 1.3,
            },
            // 193 segments of 512 bytes: 96.5 KiB.
            IcacheLevelSpec {
                bytes: 193 * 512,
                cycles_per_instruction: 3.1,
            },
        ],
        beyond_cycles_per_instruction: 9.0,
        loop_bytes: 192,
    });
    let m = check(&profile);
    assert_eq!(sizes(&m), [Some(20 << 10), Some(193 * 512), None]);
    // A level larger than the module is not seen: the last level is a bound.
    profile.icache = Some(IcacheSpec {
        levels: vec![
            IcacheLevelSpec {
                bytes: 48 << 10,
                cycles_per_instruction: 1.0,
            },
            IcacheLevelSpec {
                bytes: 4 << 20,
                cycles_per_instruction: 2.0,
            },
        ],
        beyond_cycles_per_instruction: 6.0,
        loop_bytes: 192,
    });
    let m = check(&profile);
    assert_eq!(sizes(&m), [Some(48 << 10), None]);
}

#[test]
fn without_icache_one_level_and_before_volta_a_reason() {
    let h100 = SimProfile::bundled("h100").expect("bundled");
    assert!(h100.icache.is_none());
    let m = check(&h100);
    assert_eq!(sizes(&m), [None]);
    let maxwell = SimProfile::bundled("maxwell").expect("bundled");
    let m = check(&maxwell);
    assert!(m.icache.is_none());
    assert!(m
        .icache_failure
        .as_deref()
        .is_some_and(|why| why.contains("7.0")));
}
