//! The GPC map: which SMs form each GPC, inferred from where the hardware places
//! the blocks of thread-block clusters (a cluster never spans GPCs), checked by the DSMEM
//! latency inside each GPC, and joined with the L2 partition map in the report. The SMs
//! placement leaves over (TPCs no cluster of more than two blocks uses) are placed by
//! contention at the GPCs' ports ([`contention`]).

use std::time::Duration;

use pchase_kernels::catalogue;
use topology::Topology;

use super::{Benchmark, Info};
use crate::{
    backend::ChainSpec,
    cluster::{ClusterChaseRequest, ClusterPlacement},
    error::RunnerError,
    measure::{
        cluster::{gpcs_from_placements, median_by_gpc, split_undetermined, GpcMap},
        Measurements, Session,
    },
    sim::SimProfile,
};

pub(super) mod contention;
pub(super) mod report;

/// The GPC-map benchmark.
pub(crate) struct GpcMapBench {
    info: Info,
}

/// The GPC map.
pub(crate) static GPC_MAP: GpcMapBench = GpcMapBench {
    info: Info {
        name: "gpc-map",
        summary: "GPCs: which SMs form each GPC, from thread-block cluster placement (%smid, %cluster_ctarank, %clusterid), checked by DSMEM latency; compute capability 9.0+",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || vec![catalogue::dsmem_cluster_chase()],
    },
};

/// Launches of each cluster size the map is built from: two, so that the two halves
/// (first and second launch of every size) can be compared.
const LAUNCHES_PER_SIZE: u32 = 2;

/// Timed loads per cluster in the map's launches (the DSMEM check per GPC).
const MAP_STEPS: u32 = 32;

/// Dynamic shared memory the map's chase needs: the timings and a 4 KiB chain.
pub(super) fn chase_chain() -> Result<ChainSpec, RunnerError> {
    ChainSpec::new(4096, 64)
}

fn map(s: &mut Session<'_>, gpu: &mut Duration) -> Result<GpcMap, RunnerError> {
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    let chain = chase_chain()?;
    let needed = catalogue::dsmem_cluster_chase()
        .dynamic_shared_bytes(MAP_STEPS, chain.elements() as u32)
        .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
    let Some(clusters) = s.backend.clusters() else {
        return Err(RunnerError::InvalidRequest(
            "the backend offers no clusters".into(),
        ));
    };
    let limits = clusters.cluster_limits(needed)?;
    // Every size from the largest down to 2, powers of two or not: the largest shows the
    // GPCs most directly; smaller ones reach the SMs a GPC too small for the largest cluster
    // holds, and sizes such as 3, 6 or 9 fill a GPC of 18 SMs that 4, 8 and 16 leave one
    // TPC of (H100: SMs 120-131 stayed out of every power-of-two cluster above 2).
    let sizes: Vec<u32> = limits
        .active_clusters
        .iter()
        .filter(|(size, n)| *size >= 2 && *n > 0)
        .map(|(size, _)| *size)
        .rev()
        .collect();
    if sizes.is_empty() {
        return Err(RunnerError::WrongResult(
            "no cluster of two or more blocks can be resident".into(),
        ));
    }
    let mut halves: [Vec<Vec<ClusterPlacement>>; 2] = [Vec::new(), Vec::new()];
    let mut chases = Vec::new();
    let mut launches = 0;
    for &size in &sizes {
        for turn in 0..LAUNCHES_PER_SIZE {
            let run = clusters.cluster_chase(&ClusterChaseRequest {
                cluster_size: size,
                clusters: limits.active(size),
                chain,
                warmup_steps: 8,
                steps: MAP_STEPS,
                target_offset: turn,
            })?;
            *gpu += run.gpu_time;
            launches += 1;
            halves[turn as usize % 2].push(run.placements);
            chases.extend(run.chases);
        }
    }
    let all = || halves.iter().flatten().map(Vec::as_slice);
    let (gpcs, unassigned) = split_undetermined(gpcs_from_placements(all()), all());
    let half = |h: &Vec<Vec<ClusterPlacement>>| {
        let launches = || h.iter().map(Vec::as_slice);
        split_undetermined(gpcs_from_placements(launches()), launches())
    };
    let (first, second) = (half(&halves[0]), half(&halves[1]));
    let dsmem_median_by_gpc = median_by_gpc(&gpcs, &chases, overhead);
    let result = GpcMap {
        consistent: first == second && first.0 == gpcs,
        gpcs,
        unassigned,
        launches,
        dsmem_median_by_gpc,
        contention: None,
    };
    s.results.clusters.limits = Some(limits);
    Ok(result)
}

impl Benchmark for GpcMapBench {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        if report::not_applicable(s) {
            return;
        }
        let step = format!("{} placement", self.info.name);
        match s.timed(&step, map) {
            Ok(found) => s.results.clusters.gpc = Some(found),
            Err(e) => s.results.clusters.failures.push(format!("{step}: {e}")),
        }
    }

    fn expected_steps(
        &self,
        device: &crate::device::DeviceInfo,
        _options: &crate::measure::MeasureOptions,
        _plan: &[&'static dyn Benchmark],
    ) -> u64 {
        report::expected_steps(device)
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        report::write_gpcs(measured, topo);
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let Some(spec) = &profile.clusters else {
            return report::check_not_applicable(m);
        };
        let found = m
            .clusters
            .gpc
            .as_ref()
            .ok_or_else(|| format!("no GPC map: {:?}", m.clusters.failures))?;
        let gpc_of = spec.sm_gpcs();
        let mut truth: Vec<Vec<u32>> = vec![Vec::new(); spec.gpc_sms.len()];
        for (sm, g) in gpc_of.iter().enumerate() {
            truth[*g as usize].push(sm as u32);
        }
        truth.sort_by_key(|g| g[0]);
        // A group of two SMs (one TPC) never holds a cluster of more than two, so placement
        // cannot tell it from a TPC that larger clusters left over: its SMs are "not told"
        // (the H100's and H200's SMs 124-131, four such pairs).
        let (pairs, truth): (Vec<Vec<u32>>, Vec<Vec<u32>>) =
            truth.into_iter().partition(|g| g.len() <= 2);
        let mut open: Vec<u32> = pairs.into_iter().flatten().collect();
        open.sort_unstable();
        let mut unassigned = found.unassigned.clone();
        unassigned.sort_unstable();
        if unassigned != open {
            return Err(format!(
                "SMs left unassigned: {:?}, truth {open:?}",
                found.unassigned
            ));
        }
        if found.gpcs != truth {
            return Err(format!(
                "GPC map {:?}, truth {truth:?}",
                found.gpcs.iter().map(Vec::len).collect::<Vec<_>>()
            ));
        }
        for median in found.dsmem_median_by_gpc.iter().flatten() {
            if (median - f64::from(spec.dsmem_latency)).abs() > 3.0 {
                return Err(format!(
                    "DSMEM latency inside a GPC {median} cycles, truth {}",
                    spec.dsmem_latency
                ));
            }
        }
        Ok(())
    }
}

/// The contention benchmark: the SMs cluster placement left over, placed by contention at
/// the GPCs' ports ([`contention`]); `--deep`.
pub(crate) struct GpcContentionBench {
    info: Info,
}

/// Placement of the left-over SMs by contention.
pub(crate) static GPC_CONTENTION: GpcContentionBench = GpcContentionBench {
    info: Info {
        name: "gpc-contention",
        summary: "the SMs cluster placement leaves over (TPCs no cluster of more than two blocks uses), placed in their GPCs by contention at the GPCs' ports: one SM's stream of L2 hits beside each GPC's streaming SMs; checked on one TPC of every placed GPC",
        element: None,
        needs: &["gpc-map"],
        automatic: false,
        deep: true,
        kernels: || vec![&pchase_kernels::probes::GPC_CONTENTION],
    },
};

impl Benchmark for GpcContentionBench {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        if report::not_applicable(s) {
            return;
        }
        let Some(found) = &s.results.clusters.gpc else {
            return;
        };
        if found.unassigned.is_empty() {
            return;
        }
        let (gpcs, left) = (found.gpcs.clone(), found.unassigned.clone());
        let step = self.info.name.to_string();
        match s.timed(&step, |s, gpu| contention::place(s, &gpcs, &left, gpu)) {
            Ok(placed) => {
                if let Some(map) = s.results.clusters.gpc.as_mut() {
                    map.contention = placed;
                }
            }
            Err(e) => s.results.clusters.failures.push(format!("{step}: {e}")),
        }
    }

    fn expected_steps(
        &self,
        device: &crate::device::DeviceInfo,
        _options: &crate::measure::MeasureOptions,
        _plan: &[&'static dyn Benchmark],
    ) -> u64 {
        report::expected_steps(device)
    }

    fn report(&self, _measured: &Measurements, _topo: &mut Topology) {
        // `gpc-map`'s report writes the GPCs with the SMs placed here.
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let Some(spec) = &profile.clusters else {
            return report::check_not_applicable(m);
        };
        let found = m
            .clusters
            .gpc
            .as_ref()
            .ok_or_else(|| format!("no GPC map: {:?}", m.clusters.failures))?;
        check_contention(spec, profile.benchmarks.get(self.info.name), found)
    }
}

/// The left-over TPCs must be placed in the GPC the profile's truth puts them in, and every
/// check must have found its own GPC.
fn check_contention(
    spec: &crate::sim::ClusterSpec,
    truth: Option<&toml::Value>,
    found: &GpcMap,
) -> Result<(), String> {
    let Some(physical) = contention::truth_gpcs(spec, truth)? else {
        return Ok(());
    };
    let Some(placed) = &found.contention else {
        return Err(format!(
            "the SMs {:?} placement left over were not tested by contention",
            found.unassigned
        ));
    };
    if !placed.agrees() {
        return Err(format!("a contention check disagreed: {:?}", placed.checks));
    }
    for tpc in &placed.tpcs {
        let truth = physical[tpc.sms[0] as usize];
        let expected = found
            .gpcs
            .iter()
            .position(|g| physical[g[0] as usize] == truth)
            .map(|i| i as u32);
        if tpc.gpc != expected {
            return Err(format!(
                "TPC {:?} placed in GPC {:?} by contention, truth {expected:?} (drops {:?})",
                tpc.sms, tpc.gpc, tpc.drop_by_gpc
            ));
        }
    }
    Ok(())
}
