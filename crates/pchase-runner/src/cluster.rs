//! Thread-block clusters (compute capability 9.0 and newer): the requests a backend that can
//! launch clusters answers, and what they return.
//!
//! A backend offers them through [`Backend::clusters`](crate::Backend::clusters); a device
//! without clusters answers `None`, and the benchmarks record "not applicable" instead of a
//! failure.
//!
//! ```
//! use pchase_runner::cluster::{chaser_target, ClusterPlacement};
//! // Rank 0 of cluster 5 of size 4, offset 0, chases rank 1 + 5 mod 3 = 3.
//! assert_eq!(chaser_target(5, 0, 4), 3);
//! // A cluster of one reads its own shared memory through the cluster window.
//! assert_eq!(chaser_target(5, 0, 1), 0);
//! let placement = ClusterPlacement { block: 3, sm: 17, rank: 1, cluster: 1 };
//! assert_eq!(placement.rank, 1);
//! ```

use std::time::Duration;

use pchase_kernels::{catalogue, Kernel};

use crate::{chain::ChainSpec, error::RunnerError};

/// The largest cluster size any CUDA device allows without opting in (the portable limit).
pub const PORTABLE_CLUSTER_SIZE: u32 = 8;

/// The largest cluster size a Hopper allows with
/// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`.
pub const NON_PORTABLE_CLUSTER_SIZE: u32 = 16;

/// Every cluster size the limits are asked for: 1 to 16. Sizes that are not powers of two
/// matter for the GPC map: in a GPC of 18 SMs, clusters of 4, 8 or 16 always leave one TPC
/// out, clusters of 3, 6 or 9 fill it.
pub const CLUSTER_SIZES: std::ops::RangeInclusive<u32> = 1..=NON_PORTABLE_CLUSTER_SIZE;

/// The rank that rank 0 of cluster `cluster` chases in a launch with `offset` and clusters of
/// `size` blocks: `1 + (cluster + offset) mod (size - 1)`, or 0 (its own) for `size` 1.
/// The kernel computes the same and reports it; this is for planning launches.
pub fn chaser_target(cluster: u32, offset: u32, size: u32) -> u32 {
    if size <= 1 {
        0
    } else {
        1 + cluster.wrapping_add(offset) % (size - 1)
    }
}

/// What a device allows for the cluster kernels, at one shared-memory size per block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLimits {
    /// For each cluster size tried ([`CLUSTER_SIZES`]), how many such clusters can be resident
    /// at once (`cuOccupancyMaxActiveClusters`); 0 where the size cannot be launched.
    pub active_clusters: Vec<(u32, u32)>,
}

impl ClusterLimits {
    /// The largest cluster size with at least one resident cluster.
    pub fn max_size(&self) -> Option<u32> {
        self.active_clusters
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(s, _)| *s)
            .max()
    }

    /// How many clusters of `size` can be resident at once (0 if not launchable).
    pub fn active(&self, size: u32) -> u32 {
        self.active_clusters
            .iter()
            .find(|(s, _)| *s == size)
            .map_or(0, |(_, n)| *n)
    }
}

/// Where one block of a cluster launch ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterPlacement {
    /// The block (`%ctaid.x`).
    pub block: u32,
    /// Its SM (`%smid`).
    pub sm: u32,
    /// Its rank in the cluster (`%cluster_ctarank`).
    pub rank: u32,
    /// Its cluster (`%clusterid.x`).
    pub cluster: u32,
}

/// A launch of `dsmem_cluster_chase`: `clusters` clusters of `cluster_size` blocks, one
/// block per SM (each block reserves more than half of an SM's shared memory); every block
/// copies the chain into its shared memory; rank 0 of each cluster chases the copy of rank
/// [`chaser_target`]`(cluster, target_offset, cluster_size)` and times `steps` loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterChaseRequest {
    /// Blocks per cluster: 1 to 16.
    pub cluster_size: u32,
    /// Clusters in the launch; at most the resident count ([`ClusterLimits::active`]).
    pub clusters: u32,
    /// The chain each block holds in its shared memory.
    pub chain: ChainSpec,
    /// Untimed loads before the timed ones.
    pub warmup_steps: u32,
    /// Timed loads of each chasing rank.
    pub steps: u32,
    /// Rotates which rank each cluster's rank 0 chases.
    pub target_offset: u32,
}

impl ClusterChaseRequest {
    /// The kernel this request launches.
    pub fn kernel(&self) -> &'static Kernel {
        catalogue::dsmem_cluster_chase()
    }
}

/// The fine-grained chase of one cluster's rank 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterChase {
    /// The cluster.
    pub cluster: u32,
    /// The SM of rank 0 (the reader).
    pub source_sm: u32,
    /// The rank it read.
    pub target_rank: u32,
    /// The SM of that rank.
    pub target_sm: u32,
    /// Cycles of each timed load, with the clock overhead.
    pub latencies: Vec<u32>,
}

/// The result of a [`ClusterChaseRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterChaseRun {
    /// Every block of the launch.
    pub placements: Vec<ClusterPlacement>,
    /// One per cluster.
    pub chases: Vec<ClusterChase>,
    /// Device time of the launch.
    pub gpu_time: Duration,
}

/// What the threads of a [`ClusterStreamRequest`] do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamMode {
    /// 16-byte loads from the next rank's shared memory.
    RemoteRead,
    /// 16-byte stores to the next rank's shared memory.
    RemoteWrite,
    /// 16-byte loads from the block's own shared memory (through the same generic address
    /// form), for comparison.
    LocalRead,
}

impl StreamMode {
    /// The kernel's `mode` word.
    pub fn word(self) -> u32 {
        match self {
            StreamMode::RemoteRead => 0,
            StreamMode::RemoteWrite => 1,
            StreamMode::LocalRead => 2,
        }
    }

    /// Every mode.
    pub const ALL: [StreamMode; 3] = [
        StreamMode::RemoteRead,
        StreamMode::RemoteWrite,
        StreamMode::LocalRead,
    ];
}

/// A launch of `dsmem_cluster_stream`: `clusters` clusters of `cluster_size` blocks of
/// `threads` threads, one block per SM; every block streams over the shared memory of rank
/// `(rank + 1) mod size` (or its own), `bytes` per pass, `repeats` passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterStreamRequest {
    /// Blocks per cluster: 1 to 16.
    pub cluster_size: u32,
    /// Clusters in the launch; at most the resident count.
    pub clusters: u32,
    /// Threads per block; a multiple of 32.
    pub threads: u32,
    /// Bytes of each block's region; a multiple of `16 × threads`.
    pub bytes: u32,
    /// Passes inside the timed interval.
    pub repeats: u32,
    /// Read, write, or local read.
    pub mode: StreamMode,
}

impl ClusterStreamRequest {
    /// The kernel this request launches.
    pub fn kernel(&self) -> &'static Kernel {
        catalogue::dsmem_cluster_stream()
    }

    /// Bytes one block moves in its timed interval.
    pub fn bytes_per_block(&self) -> u64 {
        u64::from(self.bytes) * u64::from(self.repeats)
    }
}

/// The result of a [`ClusterStreamRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStreamRun {
    /// Every block with its timed interval in cycles.
    pub blocks: Vec<(ClusterPlacement, u64)>,
    /// Device time of the launch.
    pub gpu_time: Duration,
}

/// Checks the shape of a cluster launch against the device and the kernel's rules.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_cluster_shape(cluster_size: u32, clusters: u32) -> Result<(), RunnerError> {
    if !(1..=NON_PORTABLE_CLUSTER_SIZE).contains(&cluster_size) {
        return Err(RunnerError::InvalidRequest(format!(
            "cluster size {cluster_size} is outside 1..={NON_PORTABLE_CLUSTER_SIZE}"
        )));
    }
    if clusters == 0 {
        return Err(RunnerError::InvalidRequest(
            "a cluster launch needs at least one cluster".into(),
        ));
    }
    Ok(())
}

/// Checks a [`ClusterStreamRequest`]'s sizes.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_stream(request: &ClusterStreamRequest) -> Result<(), RunnerError> {
    check_cluster_shape(request.cluster_size, request.clusters)?;
    if request.threads == 0 || request.threads % 32 != 0 || request.threads > 1024 {
        return Err(RunnerError::InvalidRequest(format!(
            "{} threads per block is not a multiple of 32 up to 1024",
            request.threads
        )));
    }
    let slab = 16 * request.threads;
    if request.bytes == 0 || request.bytes % slab != 0 {
        return Err(RunnerError::InvalidRequest(format!(
            "{} B per block is not a positive multiple of 16 B x {} threads",
            request.bytes, request.threads
        )));
    }
    Ok(())
}

/// What a backend that launches thread-block clusters answers.
pub trait ClusterBackend {
    /// How many clusters of each size ([`CLUSTER_SIZES`]) can be resident with `shared_bytes`
    /// of dynamic shared memory per block and one block per SM.
    ///
    /// # Errors
    /// A [`RunnerError`] when the query itself fails.
    fn cluster_limits(&mut self, shared_bytes: u32) -> Result<ClusterLimits, RunnerError>;

    /// Runs a [`ClusterChaseRequest`].
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails.
    fn cluster_chase(
        &mut self,
        request: &ClusterChaseRequest,
    ) -> Result<ClusterChaseRun, RunnerError>;

    /// Runs a [`ClusterStreamRequest`].
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails.
    fn cluster_stream(
        &mut self,
        request: &ClusterStreamRequest,
    ) -> Result<ClusterStreamRun, RunnerError>;
}

/// Shared memory per block that keeps one block per SM: more than half of what an SM has
/// (and at least `needed`), at most what a block may have.
pub fn one_block_per_sm_shared(needed: u64, per_sm: u64, per_block_optin: u64) -> Option<u32> {
    let half = per_sm / 2 + 1024;
    let bytes = needed.max(half).div_ceil(1024) * 1024;
    if bytes > per_block_optin {
        None
    } else {
        u32::try_from(bytes).ok()
    }
}
