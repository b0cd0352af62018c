//! The size search with a predicted size (`search::find_size_near`): where the prediction
//! is right it takes one sweep and finds what the full search finds; where it is wrong
//! the full search runs and finds the size where it is.

use std::time::Duration;

use pchase_runner::{
    bandwidth::{BandwidthRequest, BandwidthRun},
    measure::{
        probe::SizeProbe,
        search::{find_size, find_size_near},
        SearchRange, SizeFinding,
    },
    sim::{SimBackend, SimProfile},
    Backend, Carveout, ChaseRequest, ChaseRun, DeviceInfo, LoadPath, PartitionMapRequest,
    PartitionMapRun, PinnedRequest, PinnedRun, RunnerError, TwoPhaseRequest,
};

/// The simulator, counting chase launches.
struct Counting {
    sim: SimBackend,
    chases: usize,
}

impl Backend for Counting {
    fn device(&self) -> &DeviceInfo {
        self.sim.device()
    }
    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        self.chases += 1;
        self.sim.chase(request)
    }
    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        self.sim.clock_overhead(samples)
    }
    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError> {
        self.sim.two_phase(request)
    }
    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError> {
        self.sim.pinned_chase(request)
    }
    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        self.sim.partition_map(request)
    }
    fn bandwidth(&mut self, request: &BandwidthRequest) -> Result<BandwidthRun, RunnerError> {
        self.sim.bandwidth(request)
    }
    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        self.sim.measure_sm_clock_mhz()
    }
}

fn gpu() -> Counting {
    Counting {
        sim: SimBackend::new(SimProfile::bundled("h100").expect("bundled")).expect("valid"),
        chases: 0,
    }
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
