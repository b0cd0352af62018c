//! The probe's launches (`pchase_kernels::probes::L2_WAYS`) and its model on the simulated
//! GPU.
//!
//! One block on the measuring SM does the work; the launch puts two blocks on every SM,
//! each reserving an SM's opt-in shared memory so that one is resident per SM, and the first
//! block on the measuring SM claims it. Lines are numbers: line `i` lies `i × line_bytes`
//! into the probe's resident memory (the chain buffer), which keeps its address from launch
//! to launch, so every line keeps its home and its set.

use std::time::Duration;

use pchase_kernels::probes;

use crate::{
    backend::{ProbeArg, ProbeLaunch, ProbeModel, SimulatedGpu, SimulatedProbe},
    error::RunnerError,
    measure::Session,
};

/// Threads of the working block (fewer where the device allows fewer).
const THREADS: u32 = 1024;

/// What the model assumes one SM loads per cycle of the listed lines (each to its own
/// line, most of them from device memory): the simulated launch's time, not a result.
const MODEL_LINES_PER_CYCLE: f64 = 1.0;

/// The probe's launches from one SM over one resident region.
pub(super) struct Prober<'a, 'b> {
    s: &'a mut Session<'b>,
    gpu: &'a mut Duration,
    sm: u32,
    line_bytes: u32,
    region_bytes: u64,
    overhead: f64,
    address: Option<u64>,
    /// Launches so far.
    pub(super) launches: u64,
}

impl<'a, 'b> Prober<'a, 'b> {
    /// A prober on SM `sm` over `region_bytes` of lines of `line_bytes`, subtracting
    /// `overhead` cycles (the clock reads') from every timed load.
    pub(super) fn new(
        s: &'a mut Session<'b>,
        gpu: &'a mut Duration,
        sm: u32,
        line_bytes: u32,
        region_bytes: u64,
        overhead: f64,
    ) -> Self {
        Prober {
            s,
            gpu,
            sm,
            line_bytes,
            region_bytes,
            overhead,
            address: None,
            launches: 0,
        }
    }

    /// The device address of line 0, once a launch ran.
    pub(super) fn address(&self) -> Option<u64> {
        self.address
    }

    /// The bytes of one line.
    pub(super) fn line_bytes(&self) -> u32 {
        self.line_bytes
    }

    /// One launch; the cycles of its timed loads less the clock overhead.
    fn launch(
        &mut self,
        mode: u32,
        lines: &[u32],
        target: u32,
        rounds: u32,
    ) -> Result<Vec<f64>, RunnerError> {
        let device = self.s.backend.device();
        let sms = device.sm_count.max(1);
        let threads = THREADS.min(device.max_threads_per_block.max(32));
        let shared = u32::try_from(device.shared_per_block_optin_bytes)
            .unwrap_or(u32::MAX)
            .max(16);
        let count = u32::try_from(lines.len()).map_err(|_| {
            RunnerError::InvalidRequest(format!("l2-ways: a list of {} lines", lines.len()))
        })?;
        let timed = if mode == 0 { rounds } else { count };
        // A buffer is never empty: an empty list still passes one word, and `count` 0.
        let listed = if lines.is_empty() {
            vec![0]
        } else {
            lines.to_vec()
        };
        let request = ProbeLaunch::new(&probes::L2_WAYS, 2 * sms, threads)
            .shared(shared)
            .arg("out", ProbeArg::Buffer(vec![0; 2 + timed as usize]))
            .arg("data", ProbeArg::Resident(self.region_bytes))
            .arg("lines", ProbeArg::Buffer(listed))
            .arg("count", ProbeArg::U32(count))
            .arg("target", ProbeArg::U32(target))
            .arg("line_bytes", ProbeArg::U32(self.line_bytes))
            .arg("sm", ProbeArg::U32(self.sm))
            .arg("mode", ProbeArg::U32(mode))
            .arg("rounds", ProbeArg::U32(rounds))
            .arg("zero", ProbeArg::U32(0));
        let run = self.s.backend.probe(&request, &WaysModel)?;
        *self.gpu += run.gpu_time;
        self.launches += 1;
        match (self.address, run.resident_address) {
            (_, None) => {
                return Err(RunnerError::WrongResult(
                    "l2-ways: the probe's memory has no address".into(),
                ))
            }
            (Some(before), Some(now)) if before != now => {
                return Err(RunnerError::WrongResult(format!(
                    "l2-ways: the probe's memory moved from {before:#x} to {now:#x} between launches"
                )))
            }
            (_, now) => self.address = now,
        }
        let out = run.buffers.first().ok_or_else(|| {
            RunnerError::WrongResult("l2-ways: the probe returned no buffer".into())
        })?;
        if out.first() != Some(&1) || out.get(1) != Some(&self.sm) {
            return Err(RunnerError::WrongResult(format!(
                "l2-ways: no block of the launch ran on SM {}",
                self.sm
            )));
        }
        Ok(out[2..]
            .iter()
            .map(|&c| (f64::from(c) - self.overhead).max(0.0))
            .collect())
    }

    /// The target's reload after `set`, once per round: cycles.
    pub(super) fn reloads(
        &mut self,
        target: u32,
        set: &[u32],
        rounds: u32,
    ) -> Result<Vec<f64>, RunnerError> {
        self.launch(0, set, target, rounds)
    }

    /// The first load of each of `lines`, one after the other: cycles.
    pub(super) fn first_loads(&mut self, lines: &[u32]) -> Result<Vec<f64>, RunnerError> {
        self.launch(1, lines, 0, 0)
    }
}

/// The simulated GPU's probe: the simulated L2 emptied (as every simulated launch starts),
/// then the kernel's loads in its order through it, from the measuring SM. In mode 0 only
/// the listed lines that share a set with the target are loaded: the others never meet
/// the target's set, under any of the simulator's replacement policies (each a set's own),
/// so leaving them out changes no timing. Each timed load adds the clock overhead and the
/// probe's noise. The launch takes, per round, the target's two loads and the lines at
/// one per cycle, behind one memory latency.
struct WaysModel;

impl ProbeModel for WaysModel {
    fn simulate(
        &self,
        gpu: &mut dyn SimulatedGpu,
        launch: &ProbeLaunch,
    ) -> Result<SimulatedProbe, RunnerError> {
        let (Some(ProbeArg::Buffer(out)), Some(ProbeArg::Buffer(listed))) =
            (launch.value("out"), launch.value("lines"))
        else {
            return Err(RunnerError::InvalidRequest(
                "l2_ways: no out or lines buffer".into(),
            ));
        };
        let mut out = vec![0u32; out.len()];
        let count = launch.u32("count")? as usize;
        let lines = listed.get(..count).ok_or_else(|| {
            RunnerError::InvalidRequest(format!(
                "l2_ways: count {count} beyond the {} listed lines",
                listed.len()
            ))
        })?;
        let sm = launch.u32("sm")?;
        let line_bytes = u64::from(launch.u32("line_bytes")?);
        let rounds = launch.u32("rounds")?;
        let base = gpu.resident_address();
        let address = |line: u32| base + u64::from(line) * line_bytes;
        let overhead = gpu.clock_overhead();
        let timed = |gpu: &mut dyn SimulatedGpu, latency: u32| {
            let noisy = i64::from(latency + overhead) + gpu.noise();
            u32::try_from(noisy.max(0)).unwrap_or(u32::MAX)
        };
        let need = |n: usize| {
            if out.len() < 2 + n {
                Err(RunnerError::InvalidRequest(format!(
                    "l2_ways: an out buffer of {} words for {n} timed loads",
                    out.len()
                )))
            } else {
                Ok(())
            }
        };
        gpu.l2_reset();
        let cycles = match launch.u32("mode")? {
            0 => {
                need(rounds as usize)?;
                let target = address(launch.u32("target")?);
                let sets = gpu.l2_sets(sm, target);
                let meets = |other: [Option<(u32, u64)>; 2]| {
                    other
                        .iter()
                        .flatten()
                        .any(|o| sets.iter().flatten().any(|t| t == o))
                };
                let mut same_set = Vec::new();
                for &line in lines {
                    let a = address(line);
                    if meets(gpu.l2_sets(sm, a)) {
                        same_set.push(a);
                    }
                }
                // The empty L2's first load is a miss: device memory's latency.
                let mut memory = 0;
                for round in 0..rounds as usize {
                    let first = gpu.l2_load(sm, target);
                    memory = memory.max(first);
                    for &a in &same_set {
                        gpu.l2_load(sm, a);
                    }
                    let latency = gpu.l2_load(sm, target);
                    out[2 + round] = timed(gpu, latency);
                }
                f64::from(rounds)
                    * (lines.len() as f64 / MODEL_LINES_PER_CYCLE + 3.0 * f64::from(memory))
            }
            1 => {
                need(lines.len())?;
                let mut cycles = 0.0;
                for (i, &line) in lines.iter().enumerate() {
                    let latency = gpu.l2_load(sm, address(line));
                    out[2 + i] = timed(gpu, latency);
                    cycles += f64::from(latency);
                }
                cycles
            }
            mode => {
                return Err(RunnerError::InvalidRequest(format!(
                    "l2_ways: mode {mode}, not 0 or 1"
                )))
            }
        };
        out[0] = 1;
        out[1] = sm;
        Ok(SimulatedProbe {
            buffers: vec![out, listed.clone()],
            cycles: cycles as u64,
        })
    }
}
