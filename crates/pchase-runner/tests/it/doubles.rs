//! The test double the integration tests share: the simulator behind a wrapper that counts
//! chase and pinned launches, keeps what the launches asked for, and can make a pinned
//! launch lose its last slot (as a GPU that never puts a block on a wanted SM).

use pchase_runner::{
    bandwidth::{BandwidthRequest, BandwidthRun},
    sim::{SimBackend, SimProfile},
    Backend, ChaseRequest, ChaseRun, DeviceInfo, PartitionMapRequest, PartitionMapRun,
    PinnedRequest, PinnedRun, RunnerError, TwoPhaseRequest,
};

/// Decides, from the pinned launch's number (from 1), request and run, whether it loses
/// its last slot; it may also alter what the launch reports.
pub(crate) type Lose = Box<dyn FnMut(usize, &PinnedRequest, &mut PinnedRun) -> bool>;

/// A bundled profile's simulator, counting launches; `lose` (where set) drops slots.
pub(crate) struct Hooked {
    pub(crate) sim: SimBackend,
    /// Chase launches so far.
    pub(crate) chases: usize,
    /// Pinned launches so far.
    pub(crate) pinned: usize,
    /// Every chase request: its longest chain's bytes, its stride and its untimed loads.
    pub(crate) chase_log: Vec<(u64, u32, u32)>,
    /// Every pinned request: its first chain's bytes and its timed loads per warp.
    pub(crate) pinned_log: Vec<(u64, u32)>,
    /// Every bandwidth request.
    pub(crate) bandwidth_log: Vec<BandwidthRequest>,
    /// Two-phase launches so far.
    pub(crate) two_phase: usize,
    lose: Option<Lose>,
}

impl Hooked {
    /// The simulator of the bundled profile `name`, every launch as it answers.
    pub(crate) fn bundled(name: &str) -> Self {
        let profile = SimProfile::bundled(name).expect("bundled profile");
        Hooked {
            sim: SimBackend::new(profile).expect("valid profile"),
            chases: 0,
            pinned: 0,
            chase_log: Vec::new(),
            pinned_log: Vec::new(),
            bandwidth_log: Vec::new(),
            two_phase: 0,
            lose: None,
        }
    }

    /// The same, with pinned launches that lose their last slot where `lose` says so.
    pub(crate) fn losing(
        name: &str,
        lose: impl FnMut(usize, &PinnedRequest, &mut PinnedRun) -> bool + 'static,
    ) -> Self {
        Hooked {
            lose: Some(Box::new(lose)),
            ..Hooked::bundled(name)
        }
    }
}

impl Backend for Hooked {
    fn device(&self) -> &DeviceInfo {
        self.sim.device()
    }
    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        self.chases += 1;
        let longest = request.chains.iter().map(|c| c.bytes).max().unwrap_or(0);
        let stride = request.chains.first().map_or(0, |c| c.stride);
        self.chase_log.push((longest, stride, request.warmup_steps));
        self.sim.chase(request)
    }
    fn list_chase(
        &mut self,
        request: &pchase_runner::ListChaseRequest,
    ) -> Result<ChaseRun, RunnerError> {
        self.chases += 1;
        self.sim.list_chase(request)
    }
    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        self.sim.clock_overhead(samples)
    }
    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError> {
        self.two_phase += 1;
        self.sim.two_phase(request)
    }
    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError> {
        let mut run = self.sim.pinned_chase(request)?;
        self.pinned += 1;
        let bytes = request.chains.first().map_or(0, |c| c.bytes);
        self.pinned_log.push((bytes, request.steps));
        if let Some(lose) = self.lose.as_mut() {
            if lose(self.pinned, request, &mut run) {
                run.slots[request.sms.len() - 1] = None;
            }
        }
        Ok(run)
    }
    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        self.sim.partition_map(request)
    }
    fn bandwidth(&mut self, request: &BandwidthRequest) -> Result<BandwidthRun, RunnerError> {
        self.bandwidth_log.push(*request);
        self.sim.bandwidth(request)
    }
    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        self.sim.measure_sm_clock_mhz()
    }
}
