//! The simulated GPU's link to its host ([`crate::host`]): every request takes the time the
//! profile's `[host_link]` rates give it, and a chase's loads the profile's round trip, each
//! with a small fixed wobble (no random numbers: the host link draws none, so that it moves
//! no other benchmark's simulated values).

use std::time::Duration;

use super::{HostLinkSpec, SimBackend};
use crate::{
    backend::LoadPath,
    error::RunnerError,
    host::{
        HostBackend, HostChaseRequest, HostCopyRequest, HostCopyRun, HostDirection, HostMemory,
        HostSmRequest, HostSmRun,
    },
};

/// The relative wobble of timed repeat `k`: within ±0.4 %, mean 0 over five repeats.
fn wobble(k: usize) -> f64 {
    [0.0, 0.004, -0.004, 0.002, -0.002][k % 5]
}

impl SimBackend {
    fn host_spec(&self) -> Result<HostLinkSpec, RunnerError> {
        self.profile.host_link.ok_or_else(|| {
            RunnerError::Profile("no model of the host link (no [host_link] table)".into())
        })
    }
}

/// `bytes` at `gb_per_s`, scaled by `1 + wobble`.
fn time(bytes: u64, gb_per_s: f64, wobble: f64) -> Duration {
    Duration::from_secs_f64(bytes as f64 / (gb_per_s * 1e9) * (1.0 + wobble))
}

impl HostBackend for SimBackend {
    fn host_copy(&mut self, request: &HostCopyRequest) -> Result<HostCopyRun, RunnerError> {
        request.check()?;
        let spec = self.host_spec()?;
        let both = request.directions.len() == 2;
        let rate = |direction| match (request.memory, direction, both) {
            (HostMemory::Pinned, HostDirection::HostToDevice, false) => spec.copy_h2d_gb_per_s,
            (HostMemory::Pinned, HostDirection::DeviceToHost, false) => spec.copy_d2h_gb_per_s,
            (HostMemory::Pinned, HostDirection::HostToDevice, true) => spec.both_h2d_gb_per_s,
            (HostMemory::Pinned, HostDirection::DeviceToHost, true) => spec.both_d2h_gb_per_s,
            (HostMemory::Pageable, HostDirection::HostToDevice, _) => spec.pageable_h2d_gb_per_s,
            (HostMemory::Pageable, HostDirection::DeviceToHost, _) => spec.pageable_d2h_gb_per_s,
        };
        let times = request
            .directions
            .iter()
            .map(|&d| {
                let times = (0..request.repeats as usize)
                    .map(|k| time(request.bytes, rate(d), wobble(k)))
                    .collect();
                (d, times)
            })
            .collect();
        Ok(HostCopyRun { times })
    }

    fn host_sm_copy(&mut self, request: &HostSmRequest) -> Result<HostSmRun, RunnerError> {
        request.check()?;
        let spec = self.host_spec()?;
        crate::bandwidth::check_bandwidth(&request.bandwidth_request(), &self.profile.device)?;
        let kernel = request.shape.kernel()?;
        self.profile.device.check_kernel(kernel)?;
        self.kernels_used.insert(kernel.entry());
        let rate = match request.direction()? {
            HostDirection::HostToDevice => spec.sm_read_gb_per_s,
            HostDirection::DeviceToHost => spec.sm_write_gb_per_s,
        };
        let bytes = request.bytes_per_launch(self.profile.device.sm_count);
        let elapsed = (0..request.repeats as usize)
            .map(|k| {
                self.count_launch();
                time(bytes, rate, wobble(k))
            })
            .collect();
        Ok(HostSmRun {
            elapsed,
            bytes_per_launch: bytes,
        })
    }

    fn host_chase(&mut self, request: &HostChaseRequest) -> Result<Vec<u32>, RunnerError> {
        request.chain()?;
        let spec = self.host_spec()?;
        let kernel =
            crate::backend::ChaseRequest::fine(LoadPath::GlobalCg, request.chain()?, request.steps)
                .kernel();
        self.kernels_used.insert(kernel.entry());
        self.count_launch();
        let cycles = spec.latency_ns * self.profile.clock.sm_mhz / 1000.0;
        let overhead = f64::from(self.profile.clock.overhead_cycles);
        Ok((0..request.steps as usize)
            .map(|k| (cycles + overhead + (k % 5) as f64 - 2.0).round().max(0.0) as u32)
            .collect())
    }
}
