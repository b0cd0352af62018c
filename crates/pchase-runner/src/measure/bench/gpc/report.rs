//! The cluster benchmarks' part of the topology (schema 1.5): the GPCs joined with the L2
//! partition map, DSMEM per cluster size, and "not applicable" on devices without clusters.

use std::collections::BTreeSet;

use topology::{
    ClusterResidency, Clusters, Cycles, DsmemAtSize, Gpc, Latency, Note, NoteSeverity, RankLatency,
    Topology,
};

use crate::measure::{Measurements, Session};

/// Records, once, that the device has no clusters; true when that is so (the benchmark then
/// has nothing to run).
pub(crate) fn not_applicable(s: &mut Session<'_>) -> bool {
    if s.backend.clusters().is_some() {
        return false;
    }
    if s.results.clusters.not_applicable.is_none() {
        let cc = s.backend.device().compute_capability;
        s.results.clusters.not_applicable = Some(format!(
            "not applicable: thread-block clusters (distributed shared memory, the GPC map from cluster placement) need compute capability 9.0, the device has {cc}"
        ));
    }
    true
}

/// Progress steps of a cluster benchmark on `device`: one where clusters exist, none where
/// it only records "not applicable".
pub(crate) fn expected_steps(device: &crate::device::DeviceInfo) -> u64 {
    let cc = pchase_kernels::ComputeCapability::from(device.compute_capability);
    u64::from(pchase_kernels::catalogue::hopper_module().supports(cc))
}

/// A simulated GPU without clusters must have been found "not applicable".
pub(crate) fn check_not_applicable(m: &Measurements) -> Result<(), String> {
    match &m.clusters.not_applicable {
        Some(_) => Ok(()),
        None => Err("a GPU without clusters was not reported as not applicable".into()),
    }
}

/// The note for a device without clusters (written once, by whichever benchmark reports
/// first), and the topology's cluster section otherwise.
fn section<'t>(m: &Measurements, topo: &'t mut Topology) -> Option<&'t mut Clusters> {
    if let Some(reason) = &m.clusters.not_applicable {
        if !topo.notes.iter().any(|n| &n.message == reason) {
            topo.add_note(Note {
                severity: NoteSeverity::Info,
                element: None,
                quantity: None,
                message: reason.clone(),
            });
        }
        return None;
    }
    for failure in &m.clusters.failures {
        if !topo.notes.iter().any(|n| &n.message == failure) {
            topo.warn(None, failure.clone());
        }
    }
    let clusters = topo.clusters.get_or_insert_with(Clusters::default);
    if clusters.residency.is_empty() {
        if let Some(limits) = &m.clusters.limits {
            clusters.residency = limits
                .active_clusters
                .iter()
                .map(|&(cluster_size, clusters)| ClusterResidency {
                    cluster_size,
                    clusters,
                })
                .collect();
        }
    }
    Some(clusters)
}

/// The GPC map, each GPC with the L2 partitions its SMs are nearest to.
pub(crate) fn write_gpcs(m: &Measurements, topo: &mut Topology) {
    let sm_partition: Vec<Option<u32>> = topo
        .l2_partitions()
        .map(|p| p.sm_partition.clone())
        .unwrap_or_default();
    let Some(clusters) = section(m, topo) else {
        return;
    };
    let Some(map) = &m.clusters.gpc else {
        return;
    };
    clusters.gpc_map_consistent = Some(map.consistent);
    // The left-over TPCs contention placed join their GPC; the rest stay unassigned.
    let mut by_contention: Vec<Vec<u32>> = vec![Vec::new(); map.gpcs.len()];
    for tpc in map.contention.iter().flat_map(|c| &c.tpcs) {
        if let Some(list) = tpc.gpc.and_then(|g| by_contention.get_mut(g as usize)) {
            list.extend(&tpc.sms);
        }
    }
    clusters.unassigned_sms = map
        .unassigned
        .iter()
        .copied()
        .filter(|sm| !by_contention.iter().flatten().any(|s| s == sm))
        .collect();
    clusters.contention = map.contention.clone();
    clusters.gpcs = map
        .gpcs
        .iter()
        .zip(by_contention)
        .enumerate()
        .map(|(g, (placed, added))| {
            let mut sms = placed.clone();
            sms.extend(&added);
            sms.sort_unstable();
            let partitions: BTreeSet<u32> = sms
                .iter()
                .filter_map(|&sm| sm_partition.get(sm as usize).copied().flatten())
                .collect();
            let mut sms_by_contention = added;
            sms_by_contention.sort_unstable();
            Gpc {
                sms,
                sms_by_contention,
                l2_partitions: partitions.into_iter().collect(),
                dsmem_p50: map
                    .dsmem_median_by_gpc
                    .get(g)
                    .copied()
                    .flatten()
                    .map(Cycles),
            }
        })
        .collect();
    if let Some(c) = map.contention.as_ref().filter(|c| !c.agrees()) {
        let wrong: Vec<String> = c
            .checks
            .iter()
            .filter(|k| k.gpc != k.expected_gpc)
            .map(|k| {
                format!(
                    "TPC {:?} (GPC {:?}, found {:?})",
                    k.sms, k.expected_gpc, k.gpc
                )
            })
            .collect();
        topo.warn(
            None,
            format!(
                "gpc-map contention: the test disagreed with cluster placement on {}; the left-over SMs stay unassigned",
                wrong.join(", ")
            ),
        );
    }
}

/// DSMEM latency and bandwidth per cluster size.
pub(crate) fn write_dsmem(m: &Measurements, topo: &mut Topology) {
    let Some(clusters) = section(m, topo) else {
        return;
    };
    clusters.dsmem = m
        .clusters
        .dsmem
        .iter()
        .map(|d| DsmemAtSize {
            cluster_size: d.cluster_size,
            latency: Latency::measured(d.latency),
            latency_by_rank: d
                .by_rank
                .iter()
                .map(|&(rank, p50)| RankLatency {
                    rank,
                    p50: Cycles(p50),
                })
                .collect(),
            read_bytes_per_cycle: d.read_bytes_per_cycle,
            write_bytes_per_cycle: d.write_bytes_per_cycle,
        })
        .collect();
    clusters.local_read_bytes_per_cycle = m.clusters.local_read_bytes_per_cycle;
}
