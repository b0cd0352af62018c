//! The size search with a predicted size (`search::find_size_near`): where the prediction
//! is right it takes one sweep and finds what the full search finds; where it is wrong
//! the full search runs and finds the size where it is.

use std::time::Duration;

use pchase_runner::{
    measure::{
        probe::SizeProbe,
        search::{find_size, find_size_near},
        SearchRange, SizeFinding,
    },
    Carveout, LoadPath,
};

use crate::doubles::Hooked;

fn gpu() -> Hooked {
    Hooked::bundled("h100")
}

/// The L1 at the largest-L1 setting: carveout 0 % and 7 KiB of dynamic shared memory per
/// block (the 8 KiB configuration).
fn probe() -> SizeProbe {
    SizeProbe {
        path: LoadPath::GlobalCa,
        stride: 32,
        carveout: Carveout::Percent(0),
        warmup_passes: 1,
        timed_passes: 2,
        replicas: 8,
        reserve_shared_bytes: 7 * 1024,
    }
}

const RANGE: SearchRange = SearchRange {
    start: 256,
    max: 1 << 20,
};

fn exact(finding: &SizeFinding) -> u64 {
    match finding {
        SizeFinding::Exact { bytes, .. } => *bytes,
        other => panic!("no exact size: {other:?}"),
    }
}

#[test]
fn a_right_prediction_takes_one_sweep_and_finds_the_full_searchs_size() {
    let mut full = gpu();
    let mut t = Duration::ZERO;
    let (finding, _) = find_size(&mut full, &probe(), RANGE, 0.01, &mut t).expect("search");
    let truth = exact(&finding);

    let mut near = gpu();
    let (finding, curve) =
        find_size_near(&mut near, &probe(), RANGE, truth + 96, 0.01, &mut t).expect("search");
    assert_eq!(exact(&finding), truth);
    // The baseline and 25 window sizes at 8 replicas each: two launches on 132 SMs,
    // against the full search's doubling, narrowing and sweep.
    assert_eq!(near.chases, 2, "the window's launches alone");
    assert!(
        full.chases >= 2 * near.chases,
        "full search: {} launches",
        full.chases
    );
    let index = curve.change_index.expect("a change in the window");
    assert_eq!(curve.points[index - 1].bytes, truth);
}

#[test]
fn a_wrong_prediction_falls_back_to_the_full_search() {
    let mut full = gpu();
    let mut t = Duration::ZERO;
    let (finding, _) = find_size(&mut full, &probe(), RANGE, 0.01, &mut t).expect("search");
    let truth = exact(&finding);
    // Predictions 16 KiB too small and too large (a configuration not in force): the
    // window holds no change, and the size is found where it is.
    for predicted in [truth - 16 * 1024, truth + 16 * 1024] {
        let mut near = gpu();
        let (finding, _) =
            find_size_near(&mut near, &probe(), RANGE, predicted, 0.01, &mut t).expect("search");
        assert_eq!(exact(&finding), truth, "predicted {predicted} B");
        assert!(
            near.chases > 1,
            "predicted {predicted} B: the full search ran"
        );
    }
}
