//! The profile's thread-block clusters: the GPCs, distributed shared memory's
//! latency and bandwidth. A profile without a `[clusters]` table models a GPU without
//! clusters (compute capability below 9.0), where the cluster benchmarks are "not
//! applicable".

use serde::{Deserialize, Serialize};

use crate::cluster::NON_PORTABLE_CLUSTER_SIZE;
use crate::error::RunnerError;

/// Clusters, GPCs and distributed shared memory of a simulated GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// SMs of each GPC, in GPC order; they add up to the device's SM count. SM ids are dealt
    /// to the GPCs two at a time (one TPC), round robin over the GPCs that still have room,
    /// so consecutive ids are not one GPC (as on real GPUs).
    pub gpc_sms: Vec<u32>,
    /// The largest cluster size a launch may have (8 portable, 16 where the non-portable
    /// size is allowed); at most the smallest GPC that must hold one.
    pub max_cluster_size: u32,
    /// Cycles of a load from another rank's shared memory (without the clock overhead).
    pub dsmem_latency: u32,
    /// Cycles of a load from the block's own shared memory through the cluster window
    /// (cluster of one).
    pub self_latency: u32,
    /// Bytes per SM cycle one block reads from another rank's shared memory.
    pub read_bytes_per_cycle: f64,
    /// Bytes per SM cycle one block writes to another rank's shared memory.
    pub write_bytes_per_cycle: f64,
    /// Bytes per SM cycle one block reads from its own shared memory (16-byte loads).
    pub local_bytes_per_cycle: f64,
}

/// The GPC of every SM id when GPCs of `gpc_sms` SMs are dealt SM ids two at a time (one
/// TPC), round robin over the GPCs that still have room ([`ClusterSpec::gpc_sms`]).
///
/// ```
/// assert_eq!(pchase_runner::sim::deal_sms(&[4, 2]), [0, 0, 1, 1, 0, 0]);
/// ```
pub fn deal_sms(gpc_sms: &[u32]) -> Vec<u32> {
    let total: u32 = gpc_sms.iter().sum();
    let mut left = gpc_sms.to_vec();
    let mut out = Vec::with_capacity(total as usize);
    while out.len() < total as usize {
        for (g, room) in left.iter_mut().enumerate() {
            let take = (*room).min(2);
            *room -= take;
            out.extend(std::iter::repeat_n(g as u32, take as usize));
        }
    }
    out
}

impl ClusterSpec {
    /// The GPC of every SM id (`result[sm]`), by the dealing rule of [`ClusterSpec::gpc_sms`].
    ///
    /// ```
    /// use pchase_runner::sim::ClusterSpec;
    /// let spec = ClusterSpec {
    ///     gpc_sms: vec![4, 2],
    ///     max_cluster_size: 2,
    ///     dsmem_latency: 180,
    ///     self_latency: 32,
    ///     read_bytes_per_cycle: 32.0,
    ///     write_bytes_per_cycle: 32.0,
    ///     local_bytes_per_cycle: 128.0,
    /// };
    /// assert_eq!(spec.sm_gpcs(), [0, 0, 1, 1, 0, 0]);
    /// ```
    pub fn sm_gpcs(&self) -> Vec<u32> {
        deal_sms(&self.gpc_sms)
    }

    /// How many clusters of `size` fit the GPCs at once, one block per SM.
    pub fn active_clusters(&self, size: u32) -> u32 {
        if size == 0 || size > self.max_cluster_size {
            return 0;
        }
        self.gpc_sms.iter().map(|n| n / size).sum()
    }

    /// Checks every field against a device of `sm_count` SMs.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] naming the field.
    pub fn validate(&self, sm_count: u32) -> Result<(), RunnerError> {
        let err = |m: String| Err(RunnerError::Profile(format!("clusters.{m}")));
        if self.gpc_sms.is_empty() || self.gpc_sms.contains(&0) {
            return err("gpc_sms: needs at least one GPC, each with at least one SM".into());
        }
        let total: u32 = self.gpc_sms.iter().sum();
        if total != sm_count {
            return err(format!(
                "gpc_sms: the GPCs hold {total} SMs, the device has {sm_count}"
            ));
        }
        let largest = self.gpc_sms.iter().copied().max().unwrap_or(0);
        if !self.max_cluster_size.is_power_of_two()
            || self.max_cluster_size > NON_PORTABLE_CLUSTER_SIZE
            || self.max_cluster_size > largest
        {
            return err(format!(
                "max_cluster_size: {} is not a power of two up to {NON_PORTABLE_CLUSTER_SIZE} and up to the largest GPC ({largest} SMs)",
                self.max_cluster_size
            ));
        }
        if self.dsmem_latency == 0 || self.self_latency == 0 {
            return err("dsmem_latency / self_latency: must be positive".into());
        }
        for (name, value) in [
            ("read_bytes_per_cycle", self.read_bytes_per_cycle),
            ("write_bytes_per_cycle", self.write_bytes_per_cycle),
            ("local_bytes_per_cycle", self.local_bytes_per_cycle),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return err(format!("{name}: {value} is not a positive number"));
            }
        }
        Ok(())
    }
}
