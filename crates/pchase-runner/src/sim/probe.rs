//! Probes on the simulated GPU: the benchmark's own [`ProbeModel`] says what the kernel
//! would have written, from what the simulation knows ([`SimulatedGpu`]): the profile's
//! truth for the benchmark (`[benchmarks.<name>]`), the first cache of a load path, the
//! noise of a timed load. The simulator checks the model's buffers against the launch's.

use std::time::Duration;

use pchase_kernels::LoadPath;
use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;

use crate::backend::{ProbeArg, ProbeLaunch, ProbeModel, ProbeRun, SimulatedGpu};
use crate::device::DeviceInfo;
use crate::error::RunnerError;

use super::{SimBackend, GLOBAL_BASE};

impl SimulatedGpu for SimBackend {
    fn device(&self) -> &DeviceInfo {
        &self.profile.device
    }

    fn truth(&self, benchmark: &str) -> Option<&toml::Value> {
        self.profile.benchmarks.get(benchmark)
    }

    fn hit_latency(&self, path: LoadPath) -> Option<u32> {
        if path == LoadPath::Shared {
            return Some(self.profile.shared_memory.latency);
        }
        self.profile
            .caches
            .iter()
            .find(|c| c.paths.contains(&path))
            .map(|c| {
                c.hit_latency
                    + self
                        .profile
                        .path_extra_latency
                        .get(&path)
                        .copied()
                        .unwrap_or(0)
            })
    }

    fn gpc_sms(&self) -> Option<&[u32]> {
        self.profile.clusters.as_ref().map(|c| c.gpc_sms.as_slice())
    }

    fn clock_overhead(&self) -> u32 {
        self.profile.clock.overhead_cycles
    }

    fn resident_address(&self) -> u64 {
        GLOBAL_BASE
    }

    fn l2_reset(&mut self) {
        self.l2.reset();
    }

    fn l2_load(&mut self, sm: u32, address: u64) -> u32 {
        let near = self.near_partition(sm);
        let extra = self
            .profile
            .path_extra_latency
            .get(&LoadPath::GlobalCg)
            .copied()
            .unwrap_or(0);
        // The probe's own random numbers, as its noise: a random replacement here moves
        // no other benchmark's simulated values.
        let rng = Self::probe_stream(&mut self.probe_noise, self.profile.seed);
        extra
            + match self.l2.access(near, address, rng) {
                Some(latency) => latency,
                None => self.profile.memory.latency + self.l2.far_miss_extra(near, address),
            }
    }

    fn l2_sets(&self, sm: u32, address: u64) -> [Option<(u32, u64)>; 2] {
        self.l2.sets(self.near_partition(sm), address)
    }

    fn noise(&mut self) -> i64 {
        let noise = self.profile.noise;
        let rng = Self::probe_stream(&mut self.probe_noise, self.profile.seed);
        Self::noise(
            rng,
            self.jitter.as_ref(),
            noise.outlier_probability,
            noise.outlier_extra_cycles,
        )
    }
}

/// Each probe's random numbers, by entry name, and the probe running.
type ProbeStreams = (
    std::collections::BTreeMap<&'static str, Xoshiro256PlusPlus>,
    Option<&'static str>,
);

impl SimBackend {
    /// The random numbers of the probe running.
    fn probe_stream(streams: &mut ProbeStreams, seed: u64) -> &mut Xoshiro256PlusPlus {
        let (streams, running) = streams;
        let entry = running.unwrap_or_default();
        streams.entry(entry).or_insert_with(|| {
            // FNV-1a of the entry name: each probe's stream is fixed by the profile's seed
            // and its own name.
            let name = entry.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            Xoshiro256PlusPlus::seed_from_u64(seed ^ name)
        })
    }

    /// The near L2 partition of SM `sm`, as a launch places it (`sm × partitions / SMs`).
    fn near_partition(&self, sm: u32) -> usize {
        let sms = self.sms.len().max(1);
        (sm as usize).min(sms - 1) * self.l2.partitions.len() / sms
    }

    /// Runs `launch` on `model` (`Backend::probe`).
    pub(super) fn run_probe(
        &mut self,
        launch: &ProbeLaunch,
        model: &dyn ProbeModel,
    ) -> Result<ProbeRun, RunnerError> {
        launch.check()?;
        let kernel = launch.kernel;
        self.profile.device.check_kernel(kernel)?;
        self.kernels_used.insert(kernel.entry());
        self.count_launch();
        self.probe_noise.1 = Some(kernel.entry());
        let run = model.simulate(self, launch);
        self.probe_noise.1 = None;
        let run = run?;
        let given: Vec<usize> = launch.buffers().iter().map(|b| b.len()).collect();
        let written: Vec<usize> = run.buffers.iter().map(Vec::len).collect();
        if given != written {
            return Err(RunnerError::WrongResult(format!(
                "the model of probe `{}` wrote buffers of {written:?} words for buffers of {given:?}",
                kernel.entry()
            )));
        }
        let resident = launch
            .args
            .iter()
            .any(|(_, v)| matches!(v, ProbeArg::Resident(_)));
        Ok(ProbeRun {
            buffers: run.buffers,
            gpu_time: Duration::from_secs_f64(
                run.cycles as f64 / (self.profile.clock.sm_mhz * 1e6),
            ),
            resident_address: resident.then_some(GLOBAL_BASE),
        })
    }
}
