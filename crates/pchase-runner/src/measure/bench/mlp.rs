//! Memory-level parallelism: latency and throughput against the number of independent
//! chains (warps) per SM, on one SM and on every SM, at the L2 and at device memory
//! ([`crate::measure::mlp`] has the analysis). Deep: not in the default run.

use std::time::Duration;

use pchase_kernels::catalogue;
use topology::{ElementKind, Note, NoteSeverity, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::{ChainSpec, ChaseRequest, LoadPath, PinnedRequest},
    error::RunnerError,
    measure::{
        mlp::{analyse, MlpFinding, MlpPoint},
        Measurements, Session,
    },
    sim::SimProfile,
};

/// The memory-level-parallelism benchmark.
pub(crate) struct Mlp {
    info: Info,
}

/// Memory-level parallelism.
pub(crate) static MLP: Mlp = Mlp {
    info: Info {
        name: "mlp",
        summary: "memory-level parallelism at the L2 and device memory: latency and throughput against 1-256 chains per SM, one SM and the GPU (deep)",
        element: None,
        needs: &[],
        automatic: false,
        deep: true,
        kernels: || {
            let mut kernels: Vec<_> = [1, 2, 4, 8]
                .iter()
                .filter_map(|&k| catalogue::chase_pinned_global_cg_chains(k))
                .collect();
            kernels.push(catalogue::chase(
                LoadPath::GlobalCg,
                pchase_kernels::Granularity::Fine,
            ));
            kernels
        },
    },
};

/// Chain counts per SM tried: 1 to 32 with one chain per warp, then up to 256 with 2, 4 or
/// 8 chains per warp (the H100 still rose at 32), denser where limits usually are.
const CHAINS: [u32; 16] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256];
/// The most chains per SM.
const MAX_CHAINS: u32 = CHAINS[CHAINS.len() - 1];
/// Timed steps of every chain up to 32 chains; beyond, fewer, so that every slot makes as
/// many loads as at 32 ([`steps`]).
const STEPS: u32 = 256;

/// Warps and chains per warp for `chains` chains per SM: one per warp up to 32, then the
/// fewest chains per warp (2, 4, 8) that keep the warps at 32 or below.
fn shape(chains: u32) -> (u32, u32) {
    let per_warp = [1, 2, 4, 8]
        .into_iter()
        .find(|k| chains % k == 0 && chains / k <= 32)
        .unwrap_or(8);
    (chains.div_ceil(per_warp), per_warp)
}

/// Timed steps of each chain at `chains` per SM.
fn steps(chains: u32) -> u32 {
    (STEPS * 32 / chains.max(32)).max(32)
}
/// Untimed loads of every warp before its timed ones, on the device-memory chains.
const MEMORY_WARMUP: u32 = 16;
/// Launches tried until every slot ran together.
const TRIES: u32 = 4;

/// One launch: `chains` warps on each SM of `sms`, their mean cycles per load.
fn point(
    s: &mut Session<'_>,
    level: ElementKind,
    sms: &[u32],
    chains: u32,
    gpu: &mut Duration,
) -> Result<MlpPoint, RunnerError> {
    let device = s.backend.device().clone();
    let slots = sms.len() as u64;
    let (warps, per_warp) = shape(chains);
    let steps = steps(chains);
    let (chain, warmup) = if level == ElementKind::L2 {
        // A quarter of the L2 over all slots, one node per line (at least two per chain):
        // every load an L2 hit after the warm-up, in which the chains (starting spread
        // over the chain) load every node once between them.
        let least = (16 << 10).max(256 * u64::from(chains));
        let bytes = (device.l2_bytes / 4 / slots).clamp(least, least.max(1 << 20)) / 128 * 128;
        let chain = ChainSpec::new(bytes, 128)?;
        let per_chain = chain.nodes().div_ceil(u64::from(chains));
        (chain, u32::try_from(per_chain).unwrap_or(u32::MAX))
    } else {
        // Every chain's loads on their own 512-byte steps, never repeated, after an L2
        // flush: each one a miss.
        let nodes = u64::from(chains) * u64::from(MEMORY_WARMUP + steps);
        (ChainSpec::new(nodes * 512, 512)?, MEMORY_WARMUP)
    };
    let request = PinnedRequest {
        sms: sms.to_vec(),
        chains: vec![chain; sms.len()],
        warmup_steps: warmup,
        steps,
        warps,
        sample_steps: 0,
        chains_per_warp: per_warp,
    };
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    for _ in 0..TRIES {
        if level == ElementKind::DeviceMemory {
            // A one-load chase whose launch flushes the L2 first.
            let mut flush = ChaseRequest::fine(LoadPath::GlobalCg, ChainSpec::new(128, 128)?, 1);
            flush.flush_l2 = true;
            flush.warmup_steps = 0;
            *gpu += s.backend.chase(&flush)?.gpu_time;
        }
        let run = s.backend.pinned_chase(&request)?;
        *gpu += run.gpu_time;
        if !run.complete() {
            continue;
        }
        let latencies: Vec<f64> = run
            .slots
            .iter()
            .flatten()
            .map(|slot| slot.cycles_per_load(&request) - overhead / f64::from(steps))
            .collect();
        let latency = latencies.iter().sum::<f64>() / latencies.len().max(1) as f64;
        return Ok(MlpPoint { chains, latency });
    }
    Err(RunnerError::WrongResult(format!(
        "{TRIES} launches of {chains} chains on {} SMs never ran together",
        sms.len()
    )))
}

/// The points of one level and scope, and their analysis.
fn curve(
    s: &mut Session<'_>,
    level: ElementKind,
    sms: &[u32],
    gpu: &mut Duration,
) -> Result<MlpFinding, RunnerError> {
    let points = CHAINS
        .iter()
        .map(|&w| point(s, level, sms, w, gpu))
        .collect::<Result<Vec<_>, _>>()?;
    let count = u32::try_from(sms.len()).unwrap_or(u32::MAX);
    analyse(&points, count)
        .ok_or_else(|| RunnerError::WrongResult("no positive latency to analyse".into()))
}

impl Benchmark for Mlp {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let all: Vec<u32> = (0..s.backend.device().sm_count).collect();
        for level in [ElementKind::L2, ElementKind::DeviceMemory] {
            for (scope, sms) in [("SM", vec![0u32]), ("GPU", all.clone())] {
                let step = format!("{} {level} {scope}", self.info.name);
                match s.timed(&step, |s, gpu| curve(s, level, &sms, gpu)) {
                    Ok(f) => {
                        log::info!(
                            "{step}: unloaded {:.1} cycles, saturates at {} chains per SM, {:.3} loads/cycle, {:.1} in flight{}",
                            f.unloaded_latency,
                            f.saturating_chains,
                            f.max_throughput,
                            f.in_flight,
                            if f.still_rising { " (still rising: bounds)" } else { "" }
                        );
                        s.results.mlp.push((level, f));
                    }
                    Err(e) => s.fail(level, format!("{step}: {e}")),
                }
            }
        }
    }

    fn expected_steps(
        &self,
        _: &crate::device::DeviceInfo,
        _: &super::super::MeasureOptions,
        _: &[&'static dyn Benchmark],
    ) -> u64 {
        4
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        for (level, f) in &measured.mlp {
            let scope = if f.sms == 1 {
                "one SM".to_owned()
            } else {
                format!("the GPU ({} SMs)", f.sms)
            };
            let bound = if f.still_rising { "at least " } else { "" };
            topo.notes.push(Note {
                severity: NoteSeverity::Info,
                element: Some(*level),
                quantity: None,
                message: format!(
                    "memory-level parallelism of {scope}: {bound}{:.1} loads in flight at saturation (Little's law: {:.4} loads/cycle × {:.1} cycles unloaded), reached at {bound}{} chains per SM; latency {:.1} cycles at 1 chain, {:.1} at {}",
                    f.in_flight,
                    f.max_throughput,
                    f.unloaded_latency,
                    f.saturating_chains,
                    f.unloaded_latency,
                    f.points.last().map_or(0.0, |p| p.latency),
                    f.points.last().map_or(0, |p| p.chains),
                ),
            });
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let sm_count = profile.device.sm_count;
        for level in [ElementKind::L2, ElementKind::DeviceMemory] {
            for sms in [1, sm_count] {
                let f = m
                    .mlp
                    .iter()
                    .find(|(l, f)| *l == level && f.sms == sms)
                    .map(|(_, f)| f)
                    .ok_or_else(|| format!("mlp {level} on {sms} SMs: not measured"))?;
                // The limit the profile sets for this scope, if the chains reach it.
                let reachable = f64::from(MAX_CHAINS) * f64::from(sms);
                let limit = profile.mlp.map(|mlp| {
                    (f64::from(mlp.per_sm) * f64::from(sms)).min(f64::from(mlp.per_gpu))
                });
                match limit {
                    Some(limit) if limit <= reachable => {
                        if (f.in_flight - limit).abs() > (0.02 * limit).max(0.5) {
                            return Err(format!(
                                "mlp {level} on {sms} SMs: {:.2} in flight, truth {limit}",
                                f.in_flight
                            ));
                        }
                    }
                    _ => {
                        if (f.in_flight - reachable).abs() > 0.02 * reachable {
                            return Err(format!(
                                "mlp {level} on {sms} SMs: {:.2} in flight without a limit below {reachable}",
                                f.in_flight
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
