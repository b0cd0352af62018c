//! The size search with a predicted size (`search::find_size_near`) or a list of
//! candidates (`search::find_size_among`): where the prediction is right it takes one
//! sweep and finds what the full search finds; where it is wrong the full search runs and
//! finds the size where it is.

use std::time::Duration;

use pchase_runner::{
    measure::{
        probe::SizeProbe,
        search::{find_size, find_size_among, find_size_near},
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
pub(crate) fn probe() -> SizeProbe {
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

/// The bytes of an exact size finding; a test failure for any other.
pub(crate) fn exact(finding: &SizeFinding) -> u64 {
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

#[test]
fn the_candidate_in_force_is_singled_out_in_one_launch() {
    let mut full = gpu();
    let mut t = Duration::ZERO;
    let (finding, _) = find_size(&mut full, &probe(), RANGE, 0.01, &mut t).expect("search");
    let truth = exact(&finding);
    // The other configurations' L1 sizes, 8 KiB and more apart, on both sides (the truth
    // listed off by one stride, as a configuration measured in another launch may be).
    let candidates = [
        truth - 64 * 1024,
        truth - 16 * 1024,
        truth + 32,
        truth + 8 * 1024,
    ];
    let mut among = gpu();
    let (finding, _) =
        find_size_among(&mut among, &probe(), RANGE, &candidates, 0.01, &mut t).expect("search");
    assert_eq!(exact(&finding), truth);
    // The candidates' launch, then the window's two.
    assert_eq!(among.chases, 3, "full search: {} launches", full.chases);
    assert!(full.chases > among.chases);
}

#[test]
fn candidates_none_of_which_is_in_force_fall_back_to_the_full_search() {
    let mut full = gpu();
    let mut t = Duration::ZERO;
    let (finding, _) = find_size(&mut full, &probe(), RANGE, 0.01, &mut t).expect("search");
    let truth = exact(&finding);
    for candidates in [
        vec![truth - 32 * 1024, truth + 16 * 1024],
        vec![truth + 8 * 1024],
        vec![],
    ] {
        let mut among = gpu();
        let (finding, _) = find_size_among(&mut among, &probe(), RANGE, &candidates, 0.01, &mut t)
            .expect("search");
        assert_eq!(exact(&finding), truth, "candidates {candidates:?}");
        assert!(
            among.chases > full.chases.min(3),
            "candidates {candidates:?}: {} launches",
            among.chases
        );
    }
}
