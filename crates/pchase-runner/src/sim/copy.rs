//! The simulator's copies from global to shared memory: blocks placed as every
//! launch places them (block `b` on SM `b mod sm_count`), rounds timed by the profile's
//! per-path model ([`CopyPathSpec::round_cycles`]) with the clock overhead and the jitter,
//! and the word the kernel leaves in the last slot, so the checks run as on a GPU.

use super::*;
use crate::copy::{CopyBlock, CopyRequest, CopyRun};

impl SimBackend {
    /// Runs a [`CopyRequest`] against the profile's `[copies]`.
    pub(super) fn run_copy(&mut self, request: &CopyRequest) -> Result<CopyRun, RunnerError> {
        request.check()?;
        let device = &self.profile.device;
        let cc = pchase_kernels::ComputeCapability::from(device.compute_capability);
        if cc < request.path.min_capability() {
            return Err(RunnerError::Unsupported {
                kernel: request.kernel().entry(),
                needed: request.path.min_capability().to_string(),
                found: device.compute_capability.to_string(),
            });
        }
        let spec = *self
            .profile
            .copies
            .as_ref()
            .and_then(|c| c.path(request.path))
            .ok_or_else(|| {
                RunnerError::Profile(format!(
                    "the profile describes no copies through {} (add it to [copies.paths])",
                    request.path
                ))
            })?;
        let shared = request.shared_bytes();
        if shared > device.shared_per_block_optin_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "{shared} B of shared memory per block, the device allows {}",
                device.shared_per_block_optin_bytes
            )));
        }
        let sm_count = device.sm_count;
        let per_sm = request.grid.div_ceil(sm_count);
        let reserved = device.reserved_shared_per_block_bytes.unwrap_or(0);
        if u64::from(per_sm) * (shared + reserved) > device.shared_per_sm_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "{per_sm} blocks of {shared} B per SM do not fit its {} B of shared memory",
                device.shared_per_sm_bytes
            )));
        }
        if request.threads > device.max_threads_per_block {
            return Err(RunnerError::InvalidRequest(format!(
                "{} threads per block",
                request.threads
            )));
        }
        self.kernels_used.insert(request.kernel().entry());
        self.count_launch();
        let overhead = f64::from(self.profile.clock.overhead_cycles);
        let stdev = self.profile.noise.jitter_stdev_cycles;
        let mut blocks = Vec::with_capacity(request.grid as usize);
        let mut longest = 0.0f64;
        for b in 0..request.grid {
            let sm = b % sm_count;
            // The blocks on this SM: those with the same remainder.
            let on_sm = (request.grid - sm).div_ceil(sm_count).max(1);
            let ideal = spec.round_cycles(request.bytes, request.depth, on_sm);
            let mut rounds = Vec::with_capacity(request.rounds as usize);
            let mut total = 0.0;
            for _ in 0..request.rounds {
                let jitter = match self.jitter.as_ref() {
                    Some(normal) => normal.sample(&mut self.rng),
                    None => 0.0,
                };
                let cycles = (ideal + jitter).max(1.0);
                total += cycles;
                rounds.push((cycles + overhead).round() as u32);
            }
            // A fraction of a percent of spread between blocks, from the jitter.
            let spread = 1.0 + stdev * 1e-3 * self.rng.random::<f64>();
            let cycles = (total * spread).round().max(1.0) as u64;
            longest = longest.max(ideal * f64::from(request.warmup_rounds + request.rounds));
            blocks.push(CopyBlock { sm, cycles, rounds });
        }
        let gpu_time =
            LAUNCH_OVERHEAD + Duration::from_secs_f64(longest / (self.profile.clock.sm_mhz * 1e6));
        Ok(CopyRun { blocks, gpu_time })
    }
}
