//! The SMs cluster placement leaves over, placed by contention. The SMs of one GPC share
//! its port to the crossbar: while other SMs of its GPC stream L2 hits, an SM's own stream
//! of L2 hits slows down; SMs of another GPC slow it far less (the probe
//! `pchase_kernels::probes::GPC_CONTENTION`). For every TPC placement left over, one of its
//! SMs streams beside the same number of streaming SMs of each placed GPC in turn, and the
//! GPC whose load slows it most, by a clear margin, is its GPC. The same test on one TPC of
//! every placed GPC checks the method against cluster placement first; the left-over SMs are
//! placed only when every check agrees.
//!
//! The probe reads its SM's role from a control array by `%smid`, and one block per SM is
//! resident (each reserves an SM's shared memory), so a launch of two blocks per SM gives
//! every SM one block to play its role with.

use std::time::Duration;

use pchase_kernels::probes;
use serde::Deserialize;
use topology::{GpcContention, TpcContention};

use super::GPC_CONTENTION;
use crate::{
    backend::{ProbeArg, ProbeLaunch, ProbeModel, SimulatedGpu, SimulatedProbe},
    error::RunnerError,
    measure::Session,
    sim::{deal_sms, ClusterSpec},
};

/// Threads per block: enough 16-byte loads in flight for one SM to draw its full share.
const THREADS: u32 = 1024;
/// 16-byte vectors of the streamed data: 256 KiB, L2-resident.
const DATA_VECTORS: u32 = 1 << 14;
/// Nanoseconds streamed before the counted window and after it.
const WARM_NS: u32 = 20_000;
/// Nanoseconds of the counted window.
const WINDOW_NS: u32 = 100_000;
/// The most streaming SMs taken from each GPC: GPCs load the probe equally, and a GPC of
/// eight SMs (the H100's and H200's smallest by placement) can give them all.
const MAX_LOADERS: usize = 8;
/// A GPC is the probe's when its load slows the probe by at least this fraction...
const MIN_DROP: f64 = 0.05;
/// ...by at least this much more than any other GPC's load...
const MIN_MARGIN: f64 = 0.04;
/// ...and at least this many times as much.
const MIN_RATIO: f64 = 2.0;

/// The SM pairs (TPCs) among `sms`: SMs `2k` and `2k + 1` together where both are there.
fn tpcs(sms: &[u32]) -> Vec<Vec<u32>> {
    let mut sorted = sms.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<Vec<u32>> = Vec::new();
    for sm in sorted {
        match out.last_mut() {
            Some(last) if last.len() == 1 && last[0] ^ 1 == sm => last.push(sm),
            _ => out.push(vec![sm]),
        }
    }
    out
}

/// The GPC whose load slowed the probe most, if it stands out (module docs).
pub(crate) fn decide(drops: &[f64]) -> Option<u32> {
    let mut order: Vec<usize> = (0..drops.len()).collect();
    order.sort_by(|&a, &b| drops[b].total_cmp(&drops[a]));
    let best = *order.first()?;
    let second = order.get(1).map_or(0.0, |&i| drops[i].max(0.0));
    let top = drops[best];
    (top >= MIN_DROP && top - second >= MIN_MARGIN && top >= MIN_RATIO * second)
        .then_some(best as u32)
}

/// One launch: `streaming` SMs stream; the count of 16-byte loads of each SM's window.
fn launch(
    s: &mut Session<'_>,
    streaming: &[u32],
    gpu: &mut Duration,
) -> Result<Vec<u32>, RunnerError> {
    let device = s.backend.device();
    let sms = device.sm_count;
    let shared = u32::try_from(device.shared_per_block_optin_bytes)
        .unwrap_or(u32::MAX)
        .max(16);
    let mut control = vec![0u32; 3 * sms as usize + 2];
    for &sm in streaming {
        if let Some(role) = control.get_mut(sm as usize) {
            *role = 1;
        }
    }
    let request = ProbeLaunch::new(&probes::GPC_CONTENTION, 2 * sms, THREADS)
        .shared(shared)
        .arg("control", ProbeArg::Buffer(control))
        .arg("data", ProbeArg::Buffer(vec![1; 4 * DATA_VECTORS as usize]))
        .arg("data_mask", ProbeArg::U32(DATA_VECTORS - 1))
        .arg("sms", ProbeArg::U32(sms))
        .arg("active", ProbeArg::U32(streaming.len() as u32))
        .arg("warm_ns", ProbeArg::U32(WARM_NS))
        .arg("window_ns", ProbeArg::U32(WINDOW_NS));
    let run = s.backend.probe(&request, &ContentionModel)?;
    *gpu += run.gpu_time;
    let out = &run.buffers[0];
    if out[2 * sms as usize + 1] != 0 {
        return Err(RunnerError::WrongResult(format!(
            "gpc-map contention: the {} streaming SMs did not all start within 50 ms (another kernel on the GPU?)",
            streaming.len()
        )));
    }
    Ok(out[2 * sms as usize + 2..].to_vec())
}

/// The drop of `probe`'s count beside the first `loaders` SMs of each GPC (less `skip`),
/// against its count alone.
fn drops(
    s: &mut Session<'_>,
    probe: u32,
    gpcs: &[Vec<u32>],
    skip: &[u32],
    loaders: usize,
    gpu: &mut Duration,
) -> Result<Vec<f64>, RunnerError> {
    let alone = f64::from(launch(s, &[probe], gpu)?[probe as usize]);
    if alone <= 0.0 {
        return Err(RunnerError::WrongResult(format!(
            "gpc-map contention: SM {probe} counted no loads streaming alone"
        )));
    }
    let mut out = Vec::with_capacity(gpcs.len());
    for gpc in gpcs {
        let mut streaming: Vec<u32> = gpc
            .iter()
            .copied()
            .filter(|sm| !skip.contains(sm))
            .take(loaders)
            .collect();
        streaming.push(probe);
        let counts = launch(s, &streaming, gpu)?;
        out.push(1.0 - f64::from(counts[probe as usize]) / alone);
    }
    Ok(out)
}

/// Places the TPCs of `unassigned` in the GPCs of `gpcs` (module docs); `None` where the
/// device has too few GPCs of at least four SMs to compare.
pub(crate) fn place(
    s: &mut Session<'_>,
    gpcs: &[Vec<u32>],
    unassigned: &[u32],
    gpu: &mut Duration,
) -> Result<Option<GpcContention>, RunnerError> {
    let smallest = gpcs.iter().map(Vec::len).min().unwrap_or(0);
    if gpcs.len() < 2 || smallest < 4 || unassigned.is_empty() {
        return Ok(None);
    }
    let loaders = smallest.min(MAX_LOADERS);
    // A check's probe leaves its own TPC out of its GPC's load; only GPCs that still give
    // the full load are checked (the smallest cannot), so that every check is the test the
    // left-over TPCs get.
    let mut checks = Vec::with_capacity(gpcs.len());
    for (g, gpc) in gpcs.iter().enumerate() {
        let Some(&probe) = gpc.last() else { continue };
        let tpc: Vec<u32> = gpc
            .iter()
            .copied()
            .filter(|&sm| sm | 1 == probe | 1)
            .collect();
        if gpc.len() - tpc.len() < loaders {
            continue;
        }
        let drop_by_gpc = drops(s, probe, gpcs, &tpc, loaders, gpu)?;
        let gpc_found = decide(&drop_by_gpc);
        checks.push(TpcContention {
            sms: tpc,
            expected_gpc: Some(g as u32),
            gpc: gpc_found,
            drop_by_gpc,
        });
    }
    let mut found = GpcContention {
        loaders: loaders as u32,
        checks,
        tpcs: Vec::new(),
    };
    let agrees = found.agrees();
    for tpc in tpcs(unassigned) {
        let drop_by_gpc = drops(s, tpc[0], gpcs, &[], loaders, gpu)?;
        let gpc = if agrees { decide(&drop_by_gpc) } else { None };
        found.tpcs.push(TpcContention {
            sms: tpc,
            expected_gpc: None,
            gpc,
            drop_by_gpc,
        });
    }
    Ok(Some(found))
}

/// The profile's truth for the contention (`[benchmarks.gpc-contention]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Truth {
    /// For each group of at most two SMs in `clusters.gpc_sms` (a TPC clusters of more than
    /// two blocks do not use), in order, the index in `clusters.gpc_sms` of the GPC it is
    /// part of.
    tpc_gpcs: Vec<u32>,
    /// Streaming SMs a GPC's port carries at full speed; more share it.
    port_sms: f64,
}

impl Truth {
    fn of(value: &toml::Value) -> Result<Self, RunnerError> {
        value.clone().try_into().map_err(|e| {
            RunnerError::Profile(format!("benchmarks.{}: {e}", GPC_CONTENTION.info.name))
        })
    }
}

/// The physical GPC of every SM id: the GPC of its group in `clusters.gpc_sms`, or for a
/// group of at most two SMs, the GPC `tpc_gpcs` names.
fn physical_gpcs(gpc_sms: &[u32], tpc_gpcs: &[u32]) -> Result<Vec<u32>, RunnerError> {
    let small: Vec<u32> = (0..gpc_sms.len() as u32)
        .filter(|&g| gpc_sms[g as usize] <= 2)
        .collect();
    if small.len() != tpc_gpcs.len()
        || tpc_gpcs
            .iter()
            .any(|&g| gpc_sms.get(g as usize).is_none_or(|&n| n <= 2))
    {
        return Err(RunnerError::Profile(format!(
            "benchmarks.{}.tpc_gpcs: one GPC of more than two SMs for each of the {} groups of at most two",
            GPC_CONTENTION.info.name,
            small.len()
        )));
    }
    Ok(deal_sms(gpc_sms)
        .into_iter()
        .map(|g| match small.iter().position(|&x| x == g) {
            Some(i) => tpc_gpcs[i],
            None => g,
        })
        .collect())
}

/// The truth's GPC of every SM of a simulated GPU, for the benchmark's check.
pub(crate) fn truth_gpcs(
    spec: &ClusterSpec,
    truth: Option<&toml::Value>,
) -> Result<Option<Vec<u32>>, String> {
    let Some(truth) = truth else { return Ok(None) };
    let truth = Truth::of(truth).map_err(|e| e.to_string())?;
    physical_gpcs(&spec.gpc_sms, &truth.tpc_gpcs)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The simulated GPU's probe: every streaming SM would draw one share of the L2's bandwidth;
/// a GPC's port carries `port_sms` shares, which its streaming SMs split when they ask for
/// more; each SM's count is its share of 64 bytes per cycle over the window, with the
/// profile's noise.
struct ContentionModel;

impl ProbeModel for ContentionModel {
    fn simulate(
        &self,
        gpu: &mut dyn SimulatedGpu,
        launch: &ProbeLaunch,
    ) -> Result<SimulatedProbe, RunnerError> {
        let name = GPC_CONTENTION.info.name;
        let truth = gpu
            .truth(name)
            .ok_or_else(|| {
                RunnerError::Profile(format!(
                    "no model of GPC contention (no [benchmarks.{name}] table)"
                ))
            })
            .and_then(Truth::of)?;
        let gpc_sms = gpu
            .gpc_sms()
            .ok_or_else(|| RunnerError::Profile("the simulated GPU has no clusters table".into()))?
            .to_vec();
        let gpc_of = physical_gpcs(&gpc_sms, &truth.tpc_gpcs)?;
        let sms = launch.u32("sms")? as usize;
        let window = f64::from(launch.u32("window_ns")?);
        let warm = f64::from(launch.u32("warm_ns")?);
        let Some(ProbeArg::Buffer(control)) = launch.value("control") else {
            return Err(RunnerError::InvalidRequest("no control buffer".into()));
        };
        let mut out = control.clone();
        let streaming: Vec<usize> = (0..sms).filter(|&sm| control[sm] == 1).collect();
        let ghz = f64::from(gpu.device().sm_clock_khz.unwrap_or(1_500_000)) / 1e6;
        for &sm in &streaming {
            let gpc = gpc_of.get(sm).copied();
            let sharing = streaming
                .iter()
                .filter(|&&o| gpc_of.get(o).copied() == gpc)
                .count() as f64;
            let share = (truth.port_sms / sharing).min(1.0);
            let loads = 64.0 * window * ghz * share / 16.0;
            let noisy = loads * (1.0 + gpu.noise() as f64 / 1000.0);
            out[2 * sms + 2 + sm] = noisy.max(0.0).round() as u32;
        }
        for sm in 0..sms {
            out[sms + sm] = 1;
        }
        out[2 * sms] = streaming.len() as u32;
        Ok(SimulatedProbe {
            buffers: vec![out, vec![1; 4 * DATA_VECTORS as usize]],
            cycles: ((2.0 * warm + window) * ghz) as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpcs_pair_neighbours_and_keep_strays_alone() {
        assert_eq!(
            tpcs(&[131, 124, 125, 127, 128, 129]),
            vec![vec![124, 125], vec![127], vec![128, 129], vec![131]]
        );
    }

    #[test]
    fn a_gpc_is_chosen_only_by_a_clear_margin() {
        // Its own GPC's eight SMs slow the probe by 28 %, another's by 4 % at most.
        assert_eq!(
            decide(&[0.01, 0.0, 0.0, 0.28, 0.03, 0.0, 0.0, 0.04]),
            Some(3)
        );
        // Two GPCs alike: no choice.
        assert_eq!(decide(&[0.30, 0.28, 0.0]), None);
        // Too small a drop to mean anything.
        assert_eq!(decide(&[0.03, 0.0, 0.0]), None);
        // Large, but not twice the next.
        assert_eq!(decide(&[0.40, 0.25, 0.0]), None);
    }
}
