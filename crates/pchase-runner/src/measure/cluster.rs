//! What the cluster benchmarks found, and the analysis that needs no GPU: the
//! GPCs inferred from cluster placement, latency per addressed rank, bandwidth per SM.
//!
//! A cluster always runs inside one GPC, so SMs that ever share a cluster are in one GPC;
//! joining those pairs over several launches (union-find) gives the GPCs. The inference is
//! only as complete as the launches' placements: an SM that never shares a cluster with
//! another of its GPC stays alone, and the map says so (`unplaced`).
//!
//! ```
//! use pchase_runner::cluster::ClusterPlacement;
//! use pchase_runner::measure::cluster::gpcs_from_placements;
//! let p = |block, sm, cluster| ClusterPlacement { block, sm, rank: block % 2, cluster };
//! // Two launches of clusters of two: {0, 4} and {4, 8} share clusters, {2, 6} too.
//! let launches = [vec![p(0, 0, 0), p(1, 4, 0), p(2, 2, 1), p(3, 6, 1)], vec![p(0, 4, 0), p(1, 8, 0)]];
//! let gpcs = gpcs_from_placements(launches.iter().map(|l| l.as_slice()));
//! assert_eq!(gpcs, [vec![0, 4, 8], vec![2, 6]]);
//! ```

use std::collections::{BTreeMap, BTreeSet};

use topology::LatencySummary;

use crate::cluster::{ClusterChase, ClusterLimits, ClusterPlacement};

/// The GPC map inferred from cluster placement.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpcMap {
    /// The SMs of each GPC, ascending, GPCs ordered by their lowest SM: groups of SMs that
    /// shared clusters, at least one of more than two blocks.
    pub gpcs: Vec<Vec<u32>>,
    /// SMs whose GPC placement did not tell: they never shared a cluster of more than two
    /// blocks (a TPC pair that every larger cluster size left over), so which GPC they
    /// belong to, or whether they form one of their own, is open.
    pub unassigned: Vec<u32>,
    /// Whether two independent halves of the launches gave the same map.
    pub consistent: bool,
    /// Cluster launches the map is built from.
    pub launches: u32,
    /// Median DSMEM latency (cycles, without the clock overhead) of the chases inside each
    /// GPC, in the order of `gpcs`; `None` where none ran there.
    pub dsmem_median_by_gpc: Vec<Option<f64>>,
    /// The SMs placement left over, placed by contention at the GPCs' ports (`gpcs` and
    /// `unassigned` stay cluster placement's); `None` where nothing was left over.
    pub contention: Option<topology::GpcContention>,
}

/// DSMEM at one cluster size.
#[derive(Debug, Clone, PartialEq)]
pub struct DsmemAtSize {
    /// Blocks per cluster.
    pub cluster_size: u32,
    /// Every timed load of every chase of this size (rank 0 reading another rank; its own
    /// shared memory in a cluster of one), without the clock overhead.
    pub latency: LatencySummary,
    /// Median latency per addressed rank.
    pub by_rank: Vec<(u32, f64)>,
    /// Median bytes per SM cycle one block reads from the next rank (clusters of two and
    /// more).
    pub read_bytes_per_cycle: Option<f64>,
    /// Median bytes per SM cycle one block writes to the next rank.
    pub write_bytes_per_cycle: Option<f64>,
}

/// Everything the cluster benchmarks found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterFindings {
    /// Why clusters are not applicable on this device (compute capability below 9.0).
    pub not_applicable: Option<String>,
    /// Resident clusters per size.
    pub limits: Option<ClusterLimits>,
    /// The GPC map (benchmark `gpc-map`).
    pub gpc: Option<GpcMap>,
    /// DSMEM latency and bandwidth per cluster size (benchmark `dsmem`).
    pub dsmem: Vec<DsmemAtSize>,
    /// Bytes per SM cycle one block reads from its own shared memory with the same 16-byte
    /// generic loads (for comparison with the remote reads).
    pub local_read_bytes_per_cycle: Option<f64>,
    /// What failed, with the step.
    pub failures: Vec<String>,
}

fn find(parent: &mut BTreeMap<u32, u32>, x: u32) -> u32 {
    let mut root = x;
    while let Some(&p) = parent.get(&root) {
        if p == root {
            break;
        }
        root = p;
    }
    // Path compression.
    let mut node = x;
    while node != root {
        let next = parent[&node];
        parent.insert(node, root);
        node = next;
    }
    root
}

/// The groups of SMs that shared a cluster in any of `launches` (transitively), each
/// ascending, ordered by their lowest SM. SMs of no launch are absent.
pub fn gpcs_from_placements<'a>(
    launches: impl IntoIterator<Item = &'a [ClusterPlacement]>,
) -> Vec<Vec<u32>> {
    let mut parent: BTreeMap<u32, u32> = BTreeMap::new();
    for launch in launches {
        let mut first_of: BTreeMap<u32, u32> = BTreeMap::new();
        for p in launch {
            parent.entry(p.sm).or_insert(p.sm);
            match first_of.get(&p.cluster) {
                Some(&other) => {
                    let (a, b) = (find(&mut parent, other), find(&mut parent, p.sm));
                    if a != b {
                        parent.insert(a.max(b), a.min(b));
                    }
                }
                None => {
                    first_of.insert(p.cluster, p.sm);
                }
            }
        }
    }
    let sms: Vec<u32> = parent.keys().copied().collect();
    let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for sm in sms {
        let root = find(&mut parent, sm);
        groups.entry(root).or_default().push(sm);
    }
    let mut out: Vec<Vec<u32>> = groups.into_values().collect();
    out.sort_by_key(|g| g[0]);
    out
}

/// Splits `groups` (from [`gpcs_from_placements`] over `launches`) into the GPCs and the
/// SMs whose GPC is undetermined: a group whose SMs never shared a cluster of more than two
/// blocks is one TPC that larger clusters left over, not shown to be a GPC.
///
/// ```
/// use pchase_runner::cluster::ClusterPlacement;
/// use pchase_runner::measure::cluster::{gpcs_from_placements, split_undetermined};
/// let p = |block, sm, cluster| ClusterPlacement { block, sm, rank: 0, cluster };
/// // A cluster of four on SMs 0-3, a cluster of two on SMs 8 and 9.
/// let launch = vec![p(0, 0, 0), p(1, 1, 0), p(2, 2, 0), p(3, 3, 0), p(4, 8, 1), p(5, 9, 1)];
/// let groups = gpcs_from_placements([launch.as_slice()]);
/// let (gpcs, open) = split_undetermined(groups, [launch.as_slice()]);
/// assert_eq!(gpcs, [vec![0, 1, 2, 3]]);
/// assert_eq!(open, [8, 9]);
/// ```
pub fn split_undetermined<'a>(
    groups: Vec<Vec<u32>>,
    launches: impl IntoIterator<Item = &'a [ClusterPlacement]>,
) -> (Vec<Vec<u32>>, Vec<u32>) {
    // The largest cluster each SM was part of.
    let mut largest: BTreeMap<u32, usize> = BTreeMap::new();
    for launch in launches {
        let mut sizes: BTreeMap<u32, usize> = BTreeMap::new();
        for p in launch {
            *sizes.entry(p.cluster).or_default() += 1;
        }
        for p in launch {
            let size = sizes[&p.cluster];
            let entry = largest.entry(p.sm).or_default();
            *entry = (*entry).max(size);
        }
    }
    let mut gpcs = Vec::new();
    let mut open = Vec::new();
    for group in groups {
        let biggest = group
            .iter()
            .filter_map(|sm| largest.get(sm))
            .max()
            .copied()
            .unwrap_or(0);
        if biggest > 2 {
            gpcs.push(group);
        } else {
            open.extend(group);
        }
    }
    open.sort_unstable();
    (gpcs, open)
}

/// The median of `values` (`None` for none).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Median latency (cycles less `overhead`) per addressed rank over `chases`.
pub fn latency_by_rank(chases: &[ClusterChase], overhead: f64) -> Vec<(u32, f64)> {
    let mut by: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for c in chases {
        by.entry(c.target_rank).or_default().extend(
            c.latencies
                .iter()
                .map(|&v| (f64::from(v) - overhead).max(0.0)),
        );
    }
    by.into_iter()
        .filter_map(|(rank, mut v)| median(&mut v).map(|m| (rank, m)))
        .collect()
}

/// Median DSMEM latency of the chases inside each GPC of `gpcs` (by the reader's SM).
pub fn median_by_gpc(
    gpcs: &[Vec<u32>],
    chases: &[ClusterChase],
    overhead: f64,
) -> Vec<Option<f64>> {
    gpcs.iter()
        .map(|gpc| {
            let members: BTreeSet<u32> = gpc.iter().copied().collect();
            let mut values: Vec<f64> = chases
                .iter()
                .filter(|c| c.target_rank != 0 && members.contains(&c.source_sm))
                .flat_map(|c| {
                    c.latencies
                        .iter()
                        .map(|&v| (f64::from(v) - overhead).max(0.0))
                })
                .collect();
            median(&mut values)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chase(source_sm: u32, target_rank: u32, latencies: Vec<u32>) -> ClusterChase {
        ClusterChase {
            cluster: 0,
            source_sm,
            target_rank,
            target_sm: source_sm + 1,
            latencies,
        }
    }

    #[test]
    fn singletons_stay_apart_and_chains_join() {
        let p = |block, sm, cluster| ClusterPlacement {
            block,
            sm,
            rank: 0,
            cluster,
        };
        let one = [p(0, 7, 0), p(1, 3, 1)];
        let two = [p(0, 3, 0), p(1, 5, 0), p(2, 9, 0)];
        let gpcs = gpcs_from_placements([&one[..], &two[..]]);
        assert_eq!(gpcs, [vec![3, 5, 9], vec![7]]);
    }

    #[test]
    fn ranks_and_gpcs_get_their_medians() {
        let chases = [
            chase(0, 1, vec![200, 210, 220]),
            chase(4, 2, vec![230, 230]),
            chase(9, 1, vec![190]),
        ];
        let by_rank = latency_by_rank(&chases, 10.0);
        assert_eq!(by_rank, [(1, 195.0), (2, 220.0)]);
        let gpcs = vec![vec![0, 4], vec![9], vec![12]];
        assert_eq!(
            median_by_gpc(&gpcs, &chases, 0.0),
            [Some(220.0), Some(190.0), None]
        );
        assert_eq!(median(&mut []), None);
    }
}
