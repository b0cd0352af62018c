//! The thread-block-cluster kernels of module `hopper` whose cluster shape is chosen at
//! launch: the chase through any rank's shared memory, which also records where
//! each block of each cluster ran (the GPC map), and the streaming kernel for the
//! bandwidth of distributed shared memory.

use super::params::{CLUSTER_OUT_INDEX, CLUSTER_OUT_LATENCY, STEPS, WARMUP_STEPS};
use super::HOPPER;
use crate::kernel::{Kernel, KernelKind, Param, ParamType, SharedLayout};
use crate::ComputeCapability;

const fn param(name: &'static str, ty: ParamType, meaning: &'static str) -> Param {
    Param { name, ty, meaning }
}

/// Words per block in `out_block` of both cluster kernels:
/// `[%smid, %cluster_ctarank, %clusterid.x, word]`.
pub const CLUSTER_BLOCK_WORDS: u32 = 4;

static CLUSTER_CHASE_PARAMS: [Param; 8] = [
    param(
        "chain",
        ParamType::U64,
        "global pointer to the u32 chain every block copies into its shared memory",
    ),
    param(
        "shared_nodes_elems",
        ParamType::U32,
        "chain elements each block copies into its shared memory",
    ),
    WARMUP_STEPS,
    STEPS,
    param(
        "target_offset",
        ParamType::U32,
        "rank 0 of cluster c chases rank 1 + (c + target_offset) mod (size - 1); rank 0 itself in clusters of one block",
    ),
    CLUSTER_OUT_LATENCY,
    CLUSTER_OUT_INDEX,
    param(
        "out_block",
        ParamType::U64,
        "global pointer to u32[grid * 4]: per block [%smid, %cluster_ctarank, %clusterid.x, target rank (rank 0) or u32::MAX]",
    ),
];

static CLUSTER_STREAM_PARAMS: [Param; 5] = [
    param(
        "bytes",
        ParamType::U32,
        "bytes of each block's shared region; a multiple of 16 x blockDim.x",
    ),
    param(
        "repeats",
        ParamType::U32,
        "passes over the target's region inside the timed interval",
    ),
    param(
        "mode",
        ParamType::U32,
        "bit 0: write (st.v4) instead of read (ld.v4); bit 1: the block's own region instead of rank (rank + 1) mod size",
    ),
    param(
        "out_cycles",
        ParamType::U64,
        "global pointer to u64[grid]: %clock64 cycles of each block's timed passes (thread 0, between barriers)",
    ),
    param(
        "out_block",
        ParamType::U64,
        "global pointer to u32[grid * 4]: per block [%smid, %cluster_ctarank, %clusterid.x, XOR of the words read]",
    ),
];

pub(super) static DSMEM_CLUSTER_CHASE: Kernel = Kernel {
    module: &HOPPER,
    entry: "dsmem_cluster_chase",
    kind: KernelKind::ClusterChase,
    params: &CLUSTER_CHASE_PARAMS,
    min_capability: ComputeCapability::SM_90,
    shared_layout: SharedLayout::TimingsThenChain,
    cluster_dims: None,
};

pub(super) static DSMEM_CLUSTER_STREAM: Kernel = Kernel {
    module: &HOPPER,
    entry: "dsmem_cluster_stream",
    kind: KernelKind::ClusterStream,
    params: &CLUSTER_STREAM_PARAMS,
    min_capability: ComputeCapability::SM_90,
    shared_layout: SharedLayout::Chain,
    cluster_dims: None,
};
