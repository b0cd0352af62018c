//! Thread-block clusters (schema 1.5): the GPCs, distributed shared memory's
//! latency and bandwidth per cluster size. Absent on GPUs without clusters (compute
//! capability below 9.0), where a note says why. Since schema 1.11 a GPC also holds the SMs
//! placed by contention at the GPCs' ports (TPCs no cluster of more than two blocks uses),
//! with the test's evidence in [`Clusters::contention`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::Latency;
use crate::units::Cycles;

/// How many clusters of one size can be resident at once (one block per SM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterResidency {
    /// Blocks per cluster.
    pub cluster_size: u32,
    /// Clusters resident at once (`cuOccupancyMaxActiveClusters`); 0: the size cannot launch.
    pub clusters: u32,
}

/// One GPC: the SMs that share clusters, and those placed in it by contention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gpc {
    /// Its SMs (`%smid`), ascending: those cluster placement put together and those
    /// `sms_by_contention` names.
    pub sms: Vec<u32>,
    /// The SMs of `sms` placed by contention rather than by cluster placement (schema 1.11).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sms_by_contention: Vec<u32>,
    /// The L2 partitions (as numbered by the L2 partition map) its SMs are served by
    /// nearest; empty without a partition map.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub l2_partitions: Vec<u32>,
    /// Median latency of a load from another SM's shared memory inside this GPC, cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsmem_p50: Option<Cycles>,
}

/// The median latency of loads from one rank of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankLatency {
    /// The rank read (`%cluster_ctarank` of the target block).
    pub rank: u32,
    /// Median cycles.
    pub p50: Cycles,
}

/// Distributed shared memory at one cluster size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DsmemAtSize {
    /// Blocks per cluster; 1 is a block reading its own shared memory through the cluster
    /// window.
    pub cluster_size: u32,
    /// Latency of one load by rank 0 from another rank's shared memory (fine-grained chase).
    pub latency: Latency,
    /// Median latency per rank read: whether it matters which SM of the cluster is addressed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_by_rank: Vec<RankLatency>,
    /// Bytes per SM cycle one block reads from the next rank's shared memory, every block of
    /// every resident cluster reading at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes_per_cycle: Option<f64>,
    /// Bytes per SM cycle one block writes to the next rank's shared memory, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes_per_cycle: Option<f64>,
}

/// One TPC's contention test (schema 1.11): how much each GPC's streaming SMs slowed the
/// stream of L2 hits of one of its SMs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TpcContention {
    /// The TPC's SMs; the first streamed beside each GPC's.
    pub sms: Vec<u32>,
    /// For a check, the GPC (index in `gpcs`) cluster placement put it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_gpc: Option<u32>,
    /// The GPC (index in `gpcs`) whose load slowed it most by a clear margin, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpc: Option<u32>,
    /// For each GPC in the order of `gpcs`, the fraction its load took off the SM's stream.
    pub drop_by_gpc: Vec<f64>,
}

/// The contention test behind `Gpc::sms_by_contention` (schema 1.11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpcContention {
    /// Streaming SMs taken from each GPC beside a probe (a check's own TPC left out).
    pub loaders: u32,
    /// One TPC of each GPC cluster placement built that gives the full load without it,
    /// tested the same way.
    pub checks: Vec<TpcContention>,
    /// The TPCs cluster placement left over; placed only when every check found its GPC.
    pub tpcs: Vec<TpcContention>,
}

impl GpcContention {
    /// Whether the test is to be believed: at least one check ran, and every check found
    /// the GPC cluster placement put its TPC in. Left-over TPCs are placed only then.
    ///
    /// ```
    /// use topology::{GpcContention, TpcContention};
    /// let check = |found| TpcContention {
    ///     sms: vec![14, 15],
    ///     expected_gpc: Some(3),
    ///     gpc: found,
    ///     drop_by_gpc: vec![0.0; 8],
    /// };
    /// let mut test = GpcContention { loaders: 8, checks: vec![check(Some(3))], tpcs: vec![] };
    /// assert!(test.agrees());
    /// test.checks.push(check(None));
    /// assert!(!test.agrees());
    /// test.checks.clear();
    /// assert!(!test.agrees(), "no check, no trust");
    /// ```
    pub fn agrees(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.gpc == c.expected_gpc)
    }
}

/// Thread-block clusters, GPCs and distributed shared memory (schema 1.5).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Clusters {
    /// Resident clusters per cluster size tried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub residency: Vec<ClusterResidency>,
    /// The GPCs inferred from cluster placement, ordered by their lowest SM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpcs: Vec<Gpc>,
    /// SMs whose GPC neither cluster placement (they never shared a cluster of more than
    /// two blocks) nor contention told; with any, the number of GPCs is a lower bound.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unassigned_sms: Vec<u32>,
    /// The contention test of the SMs cluster placement left over (schema 1.11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<GpcContention>,
    /// Whether two independent halves of the placement launches gave the same GPCs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpc_map_consistent: Option<bool>,
    /// DSMEM latency and bandwidth per cluster size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dsmem: Vec<DsmemAtSize>,
    /// Bytes per SM cycle a block reads from its own shared memory with the same 16-byte
    /// loads, for comparison with `dsmem`'s remote reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_read_bytes_per_cycle: Option<f64>,
}

impl Clusters {
    /// The largest cluster size with a resident cluster.
    pub fn max_cluster_size(&self) -> Option<u32> {
        self.residency
            .iter()
            .filter(|r| r.clusters > 0)
            .map(|r| r.cluster_size)
            .max()
    }

    /// Checks that no SM is in two GPCs and every bandwidth is a positive number.
    ///
    /// ```
    /// use topology::{Clusters, Gpc};
    /// let gpc = |sms: Vec<u32>| Gpc { sms, sms_by_contention: vec![], l2_partitions: vec![], dsmem_p50: None };
    /// let mut c = Clusters { gpcs: vec![gpc(vec![0, 2]), gpc(vec![1, 3])], ..Default::default() };
    /// assert!(c.check().is_ok());
    /// c.gpcs.push(gpc(vec![2]));
    /// assert!(c.check().unwrap_err().contains("SM 2"));
    /// ```
    ///
    /// # Errors
    /// A sentence naming the field.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for (g, gpc) in self.gpcs.iter().enumerate() {
            for sm in &gpc.sms {
                if !seen.insert(*sm) {
                    return Err(format!("clusters.gpcs[{g}]: SM {sm} is in two GPCs"));
                }
            }
        }
        if let Some(sm) = self.unassigned_sms.iter().find(|sm| seen.contains(*sm)) {
            return Err(format!("clusters.unassigned_sms: SM {sm} is also in a GPC"));
        }
        for (g, gpc) in self.gpcs.iter().enumerate() {
            if let Some(sm) = gpc
                .sms_by_contention
                .iter()
                .find(|sm| !gpc.sms.contains(sm))
            {
                return Err(format!(
                    "clusters.gpcs[{g}].sms_by_contention: SM {sm} is not among its SMs"
                ));
            }
        }
        let tests = self
            .contention
            .iter()
            .flat_map(|c| c.checks.iter().chain(&c.tpcs));
        for test in tests {
            let mut named = test.gpc.into_iter().chain(test.expected_gpc);
            if let Some(g) = named.find(|&g| g as usize >= self.gpcs.len()) {
                return Err(format!(
                    "clusters.contention: TPC {:?} names GPC {g} of {}",
                    test.sms,
                    self.gpcs.len()
                ));
            }
            if test.drop_by_gpc.len() != self.gpcs.len()
                || test.drop_by_gpc.iter().any(|d| !d.is_finite())
            {
                return Err(format!(
                    "clusters.contention: TPC {:?} needs one finite drop per GPC",
                    test.sms
                ));
            }
        }
        let rates = self.dsmem.iter().flat_map(|d| {
            [d.read_bytes_per_cycle, d.write_bytes_per_cycle]
                .into_iter()
                .flatten()
        });
        for rate in rates.chain(self.local_read_bytes_per_cycle) {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(format!(
                    "clusters: bandwidth {rate} is not a positive number"
                ));
            }
        }
        Ok(())
    }
}
