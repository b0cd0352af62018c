//! The parameter lists of the kernels, each parameter with its meaning.

use crate::kernel::{param, Param, ParamType};

const CHAIN: Param = param(
    "chain",
    ParamType::U64,
    "global pointer to the u32 chain; Texture path: the texture object; Constant path: unused (0)",
);
const BLOCK_STRIDE: Param = param(
    "block_stride",
    ParamType::U64,
    "elements between the chains of consecutive blocks (0: all blocks share one chain)",
);
const SHARED_NODES_ELEMS: Param = param(
    "shared_nodes_elems",
    ParamType::U32,
    "shared paths: chain elements copied into shared memory from the block's offset; others: ignored",
);
pub(super) const WARMUP_STEPS: Param = param(
    "warmup_steps",
    ParamType::U32,
    "untimed dependent loads before the timed pass",
);
pub(super) const STEPS: Param = param("steps", ParamType::U32, "timed dependent loads");
const OUT_LATENCY: Param = param(
    "out_latency",
    ParamType::U64,
    "global pointer to u32[grid * steps]: %clock cycles of each timed load, block b at b * steps",
);
const OUT_INDEX: Param = param(
    "out_index",
    ParamType::U64,
    "global pointer to u32[grid * steps]: the index each timed load returned",
);
const OUT_CYCLES: Param = param(
    "out_cycles",
    ParamType::U64,
    "global pointer to u64[grid]: %clock64 cycles of each block's whole timed pass",
);
const OUT_BLOCK: Param = param(
    "out_block",
    ParamType::U64,
    "global pointer to u32[grid * 2]: per block [%smid, final index]",
);

pub(super) static FINE_PARAMS: [Param; 8] = [
    CHAIN,
    BLOCK_STRIDE,
    SHARED_NODES_ELEMS,
    WARMUP_STEPS,
    STEPS,
    OUT_LATENCY,
    OUT_INDEX,
    OUT_BLOCK,
];

pub(super) static COARSE_PARAMS: [Param; 7] = [
    CHAIN,
    BLOCK_STRIDE,
    SHARED_NODES_ELEMS,
    WARMUP_STEPS,
    STEPS,
    OUT_CYCLES,
    OUT_BLOCK,
];

/// `out_latency` of the cluster chases: one row per cluster.
pub(super) const CLUSTER_OUT_LATENCY: Param = param(
    "out_latency",
    ParamType::U64,
    "global pointer to u32[clusters * steps]: %clock cycles of each timed load, cluster c at c * steps",
);
/// `out_index` of the cluster chases.
pub(super) const CLUSTER_OUT_INDEX: Param = param(
    "out_index",
    ParamType::U64,
    "global pointer to u32[clusters * steps]: the index each timed load returned",
);

pub(super) static DSMEM_PARAMS: [Param; 8] = [
    param(
        "chain",
        ParamType::U64,
        "global pointer to the u32 chain the rank-1 block copies into its shared memory",
    ),
    param(
        "block_stride",
        ParamType::U64,
        "elements between the chains of consecutive clusters (0: all clusters share one chain)",
    ),
    param(
        "shared_nodes_elems",
        ParamType::U32,
        "chain elements the rank-1 block copies into its shared memory",
    ),
    WARMUP_STEPS,
    STEPS,
    CLUSTER_OUT_LATENCY,
    CLUSTER_OUT_INDEX,
    param(
        "out_block",
        ParamType::U64,
        "global pointer to u32[grid * 2]: per block [%smid, final index]; rank-1 blocks write u32::MAX as index",
    ),
];

pub(super) static INIT_CHAIN_PARAMS: [Param; 5] = [
    param(
        "chain",
        ParamType::U64,
        "global pointer to the u32 arrays; array y starts at element y * block_stride",
    ),
    BLOCK_STRIDE,
    param(
        "nodes",
        ParamType::U64,
        "global pointer to u32[grid.y]: the number of nodes of array y",
    ),
    param(
        "stride",
        ParamType::U32,
        "elements between consecutive nodes",
    ),
    param(
        "node_words",
        ParamType::U32,
        "words written per node, from the node on: the next index, then zeros (1: the index only)",
    ),
];

pub(super) static CLOCK_OVERHEAD_PARAMS: [Param; 2] = [
    param("samples", ParamType::U32, "clock pairs to record"),
    param(
        "out",
        ParamType::U64,
        "global pointer to u32[samples]: cycles between the two clock reads",
    ),
];

pub(super) static SM_CLOCK_PARAMS: [Param; 2] = [
    param(
        "spin_cycles",
        ParamType::U64,
        "%clock64 cycles to spin between the two timer reads",
    ),
    param(
        "out",
        ParamType::U64,
        "global pointer to u64[4]: [globaltimer0 ns, clock64_0, globaltimer1 ns, clock64_1]",
    ),
];

pub(super) static PINNED_PARAMS: [Param; 14] = [
    param(
        "chain",
        ParamType::U64,
        "global pointer to the u32 chains; slot s's chain starts at element s * block_stride",
    ),
    param(
        "block_stride",
        ParamType::U64,
        "elements between the chains of consecutive slots",
    ),
    param(
        "sms",
        ParamType::U64,
        "global pointer to u32[slots]: the SM (%smid) each slot runs on; distinct",
    ),
    param("slots", ParamType::U32, "number of slots (wanted SMs)"),
    param(
        "claims",
        ParamType::U64,
        "global pointer to u32[slots + 1], zeroed by the host: slot s's claim flag, then the \
         number of slots claimed so far",
    ),
    param(
        "wait_cycles",
        ParamType::U64,
        "%clock64 cycles a claiming block waits for the other slots before it chases alone",
    ),
    WARMUP_STEPS,
    STEPS,
    param(
        "out_cycles",
        ParamType::U64,
        "global pointer to u64[slots]: %clock64 cycles of each slot's whole timed pass",
    ),
    param(
        "out_slot",
        ParamType::U64,
        "global pointer to u32[slots * 4], zeroed by the host: per slot [1 if it ran, %smid, \
         warp 0's final index, 1 if every slot was claimed before it started]",
    ),
    param(
        "warp_offset_elems",
        ParamType::U64,
        "elements between the start nodes of consecutive warps of a slot (warp w starts at \
         element w * warp_offset_elems of the slot's chain); the block has ntid.x / 32 warps",
    ),
    param(
        "sample_steps",
        ParamType::U32,
        "loads warp 0's first thread times one by one after every warp's timed pass, while the other warps go on chasing",
    ),
    param(
        "out_latency",
        ParamType::U64,
        "global pointer to u32[slots * sample_steps]: the sampled loads' latencies, cycles",
    ),
    param(
        "out_index",
        ParamType::U64,
        "global pointer to u32[slots * sample_steps]: the index each sampled load returned",
    ),
];

pub(super) static MAP_PARAMS: [Param; 9] = [
    param(
        "chain",
        ParamType::U64,
        "global pointer to the u32 arrays; SM s's array starts at element s * block_stride, \
         node k at element k * node_elems holding (k + 1) % lines * node_elems",
    ),
    param(
        "block_stride",
        ParamType::U64,
        "elements between the arrays of consecutive SMs",
    ),
    param("lines", ParamType::U32, "nodes of each SM's array"),
    param(
        "sm_count",
        ParamType::U32,
        "SMs taking part: %smid 0 .. sm_count - 1, one array each",
    ),
    param(
        "reference",
        ParamType::U32,
        "the SM that loads every array twice before the others time theirs",
    ),
    param(
        "claims",
        ParamType::U64,
        "global pointer to u32[sm_count + 4], zeroed by the host: SM s's claim flag, then the \
         number of SMs arrived, the reference's done flag, and the SM whose turn it is",
    ),
    param(
        "wait_ns",
        ParamType::U64,
        "%globaltimer nanoseconds after its arrival that an SM gives up waiting",
    ),
    param(
        "out_latency",
        ParamType::U64,
        "global pointer to u32[sm_count * 2 * lines]: SM s's pass p, node k at \
         (s * 2 + p) * lines + k, cycles",
    ),
    param(
        "out_status",
        ParamType::U64,
        "global pointer to u32[sm_count], zeroed by the host: 1 where the SM timed its array, \
         2 where it gave up waiting for the others, 3 for the reference, 4 for its turn",
    ),
];

/// Parameters of the two-phase kernels. Chain arguments depend on the phase's path (see
/// [`two_phase`](super::two_phase)); a Constant phase's chain argument is an element offset into
/// [`constant_chain`](super::constant_chain), unlike the chase kernels, which ignore theirs.
pub(super) static TWO_PHASE_PARAMS: [Param; 12] = [
    param(
        "chain_a",
        ParamType::U64,
        "chain A (warmed, then re-timed): GlobalCa/GlobalNc: global pointer to the u32 chain; \
         Texture: the texture object; Constant: ELEMENT OFFSET of chain A in memtopo_const_chain",
    ),
    param(
        "block_stride_a",
        ParamType::U64,
        "elements between consecutive blocks' copies of chain A (0: all blocks share one)",
    ),
    param(
        "chain_b",
        ParamType::U64,
        "chain B (loaded in between), as chain_a: global pointer, texture object, or element \
         offset in memtopo_const_chain",
    ),
    param(
        "block_stride_b",
        ParamType::U64,
        "elements between consecutive blocks' copies of chain B (0: all blocks share one)",
    ),
    param(
        "thread_a",
        ParamType::U32,
        "threadIdx.x of the thread that warms and re-times chain A (below blockDim.x)",
    ),
    param(
        "thread_b",
        ParamType::U32,
        "threadIdx.x of the thread that loads chain B (below blockDim.x; may equal thread_a)",
    ),
    param(
        "warmup_a",
        ParamType::U32,
        "untimed dependent loads of chain A from index 0, before the first barrier",
    ),
    param(
        "warmup_b",
        ParamType::U32,
        "untimed dependent loads of chain B from index 0, between the barriers",
    ),
    param(
        "steps",
        ParamType::U32,
        "timed dependent loads of chain A after the second barrier, continuing where its warm-up ended",
    ),
    param(
        "out_latency",
        ParamType::U64,
        "global pointer to u32[grid * steps]: %clock cycles of each timed load of chain A, block b at b * steps",
    ),
    param(
        "out_index",
        ParamType::U64,
        "global pointer to u32[grid * steps]: the index each timed load of chain A returned",
    ),
    param(
        "out_block",
        ParamType::U64,
        "global pointer to u32[grid * 2]: per block [%smid, final index of chain A]",
    ),
];

/// Parameters of `two_phase_block_global_cg` (the L2 line probe): chains A and B by address,
/// node count and node spacing; one block.
pub(super) static TWO_PHASE_BLOCK_PARAMS: [Param; 10] = [
    param(
        "chain_a",
        ParamType::U64,
        "global pointer to chain A (u32 elements; node k at byte k * stride_a, holding the \
         element index of node k + 1): loaded by the block, then re-timed by thread 0",
    ),
    param("nodes_a", ParamType::U32, "nodes of chain A"),
    param("stride_a", ParamType::U32, "bytes between chain A's nodes"),
    param(
        "chain_b",
        ParamType::U64,
        "global pointer to chain B, loaded by the block between A's two passes",
    ),
    param("nodes_b", ParamType::U32, "nodes of chain B"),
    param("stride_b", ParamType::U32, "bytes between chain B's nodes"),
    param(
        "steps",
        ParamType::U32,
        "timed dependent loads of chain A from index 0 by thread 0, after the second barrier",
    ),
    param(
        "out_latency",
        ParamType::U64,
        "global pointer to u32[steps]: %clock cycles of each timed load of chain A",
    ),
    param(
        "out_index",
        ParamType::U64,
        "global pointer to u32[steps]: the index each timed load of chain A returned",
    ),
    param(
        "out_block",
        ParamType::U64,
        "global pointer to u32[2]: [%smid, final index of chain A]",
    ),
];

/// Parameters of the line-indexed chases (`chase_fine_lines_<path>`): as the fine chases',
/// with indices and the block stride in 128-byte lines and no shared-memory copy.
pub(super) static LINES_PARAMS: [Param; 7] = [
    param(
        "chain",
        ParamType::U64,
        "global pointer to the chain; node k's first word holds the line index of node k + 1",
    ),
    param(
        "block_stride",
        ParamType::U64,
        "128-byte lines between the chains of consecutive blocks (0: all blocks share one chain)",
    ),
    WARMUP_STEPS,
    STEPS,
    OUT_LATENCY,
    param(
        "out_index",
        ParamType::U64,
        "global pointer to u32[grid * steps]: the line index each timed load returned",
    ),
    OUT_BLOCK,
];

pub(super) static INIT_CHAIN_LINES_PARAMS: [Param; 4] = [
    param(
        "chain",
        ParamType::U64,
        "global pointer to the chain: node k at line k * stride_lines",
    ),
    param("nodes", ParamType::U32, "nodes of the chain (a multiple of group)"),
    param(
        "stride_lines",
        ParamType::U32,
        "128-byte lines between nodes k and k + 1",
    ),
    param(
        "group",
        ParamType::U32,
        "nodes per group (1: address order): position p of the cycle is node (p % R) * group + p / R with R = nodes / group, and holds the next position's node times stride_lines",
    ),
];
