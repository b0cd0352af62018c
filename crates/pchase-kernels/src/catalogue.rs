//! The catalogue: every module and kernel of the workspace, with the one spelling of each
//! entry name. The generator (`cargo xtask ptx`) writes the PTX from these descriptions, so
//! entry names and parameter lists cannot drift apart from the embedded text.

use crate::kernel::{
    Granularity, Kernel, KernelKind, Module, ModuleGlobal, Param, ParamType, SharedLayout,
};
use crate::{ComputeCapability, Error, LoadPath, PtxIsaVersion};

/// Module `pchase`: every kernel that runs from Maxwell on.
static PCHASE: Module = Module {
    name: "pchase",
    file_name: "pchase.ptx",
    ptx: include_str!("../../../ptx/pchase.ptx"),
    // ISA 7.0 is what CUDA 11.0 drivers JIT; `.target sm_50` lets every GPU from Maxwell on
    // compile it.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_50,
    min_driver_version: 11000,
    description: "single-thread pointer chases over every load path, two-phase cache-sharing probes, chain construction and clock calibration",
};

/// Module `hopper`: kernels that need thread-block clusters.
static HOPPER: Module = Module {
    name: "hopper",
    file_name: "hopper.ptx",
    ptx: include_str!("../../../ptx/hopper.ptx"),
    // mapa, ld.shared::cluster, barrier.cluster and .reqnctapercluster all arrived in ISA 7.8.
    ptx_isa: PtxIsaVersion::new(7, 8),
    min_capability: ComputeCapability::SM_90,
    min_driver_version: 11080,
    description: "pointer chase through distributed shared memory of a thread-block cluster",
};

/// Module `l2map`: kernels whose waits sleep between polls (`nanosleep`, Volta and newer).
static L2MAP: Module = Module {
    name: "l2map",
    file_name: "l2map.ptx",
    ptx: include_str!("../../../ptx/l2map.ptx"),
    // nanosleep arrived in ISA 6.3 for sm_70; 7.0 keeps CUDA 11.0 drivers able to JIT it.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_70,
    min_driver_version: 11000,
    description:
        "the L2 partition map: every SM times its own array after a reference SM loaded them all",
};

static MODULES: [&Module; 4] = [&PCHASE, &HOPPER, &L2MAP, &crate::bandwidth::BANDWIDTH];

/// The 64 KiB constant array the constant-path chases read.
static CONSTANT_CHAIN: ModuleGlobal = ModuleGlobal {
    module: &PCHASE,
    name: "memtopo_const_chain",
    elem: ParamType::U32,
    len: 16384,
};

const fn param(name: &'static str, ty: ParamType, meaning: &'static str) -> Param {
    Param { name, ty, meaning }
}

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
const WARMUP_STEPS: Param = param(
    "warmup_steps",
    ParamType::U32,
    "untimed dependent loads before the timed pass",
);
const STEPS: Param = param("steps", ParamType::U32, "timed dependent loads");
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

static FINE_PARAMS: [Param; 8] = [
    CHAIN,
    BLOCK_STRIDE,
    SHARED_NODES_ELEMS,
    WARMUP_STEPS,
    STEPS,
    OUT_LATENCY,
    OUT_INDEX,
    OUT_BLOCK,
];

static COARSE_PARAMS: [Param; 7] = [
    CHAIN,
    BLOCK_STRIDE,
    SHARED_NODES_ELEMS,
    WARMUP_STEPS,
    STEPS,
    OUT_CYCLES,
    OUT_BLOCK,
];

static DSMEM_PARAMS: [Param; 8] = [
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
    param(
        "out_latency",
        ParamType::U64,
        "global pointer to u32[clusters * steps]: %clock cycles of each timed load, cluster c at c * steps",
    ),
    param(
        "out_index",
        ParamType::U64,
        "global pointer to u32[clusters * steps]: the index each timed load returned",
    ),
    param(
        "out_block",
        ParamType::U64,
        "global pointer to u32[grid * 2]: per block [%smid, final index]; rank-1 blocks write u32::MAX as index",
    ),
];

static INIT_CHAIN_PARAMS: [Param; 5] = [
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

static CLOCK_OVERHEAD_PARAMS: [Param; 2] = [
    param("samples", ParamType::U32, "clock pairs to record"),
    param(
        "out",
        ParamType::U64,
        "global pointer to u32[samples]: cycles between the two clock reads",
    ),
];

static SM_CLOCK_PARAMS: [Param; 2] = [
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

static PINNED_PARAMS: [Param; 14] = [
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

/// Bytes of the pinned chase's shared bookkeeping before its sample timings: the claimed
/// row (u32, then 4 unused), the warps' summed cycles (u64), one final index per warp
/// (`u32[32]`).
pub const PINNED_SHARED_HEADER: u32 = 144;

/// Bytes of the partition map's shared scratch before its timings (the dependent store of
/// each timed load).
pub const MAP_SHARED_HEADER: u32 = 16;

static MAP_PARAMS: [Param; 9] = [
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
/// [`two_phase`]); a Constant phase's chain argument is an element offset into
/// [`constant_chain`], unlike the chase kernels, which ignore theirs.
static TWO_PHASE_PARAMS: [Param; 12] = [
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

const fn chase_kernel(entry: &'static str, path: LoadPath, granularity: Granularity) -> Kernel {
    let shared_layout = match (granularity, path) {
        (Granularity::Fine, LoadPath::Shared) => SharedLayout::TimingsThenChain,
        (Granularity::Fine, _) => SharedLayout::Timings,
        (Granularity::Coarse, LoadPath::Shared) => SharedLayout::Chain,
        (Granularity::Coarse, _) => SharedLayout::None,
    };
    let params: &'static [Param] = match granularity {
        Granularity::Fine => &FINE_PARAMS,
        Granularity::Coarse => &COARSE_PARAMS,
    };
    Kernel {
        module: &PCHASE,
        entry,
        kind: KernelKind::Chase { path, granularity },
        params,
        min_capability: ComputeCapability::SM_50,
        shared_layout,
        cluster_dims: None,
    }
}

/// Chase kernels indexed by `chase_index(path, granularity)`.
static CHASE: [Kernel; 12] = [
    chase_kernel("chase_global_ca", LoadPath::GlobalCa, Granularity::Coarse),
    chase_kernel(
        "chase_fine_global_ca",
        LoadPath::GlobalCa,
        Granularity::Fine,
    ),
    chase_kernel("chase_global_cg", LoadPath::GlobalCg, Granularity::Coarse),
    chase_kernel(
        "chase_fine_global_cg",
        LoadPath::GlobalCg,
        Granularity::Fine,
    ),
    chase_kernel("chase_global_nc", LoadPath::GlobalNc, Granularity::Coarse),
    chase_kernel(
        "chase_fine_global_nc",
        LoadPath::GlobalNc,
        Granularity::Fine,
    ),
    chase_kernel("chase_texture", LoadPath::Texture, Granularity::Coarse),
    chase_kernel("chase_fine_texture", LoadPath::Texture, Granularity::Fine),
    chase_kernel("chase_constant", LoadPath::Constant, Granularity::Coarse),
    chase_kernel("chase_fine_constant", LoadPath::Constant, Granularity::Fine),
    chase_kernel("chase_shared", LoadPath::Shared, Granularity::Coarse),
    chase_kernel("chase_fine_shared", LoadPath::Shared, Granularity::Fine),
];

fn chase_index(path: LoadPath, granularity: Granularity) -> usize {
    let path_index = match path {
        LoadPath::GlobalCa => 0,
        LoadPath::GlobalCg => 1,
        LoadPath::GlobalNc => 2,
        LoadPath::Texture => 3,
        LoadPath::Constant => 4,
        LoadPath::Shared => 5,
    };
    let granularity_index = match granularity {
        Granularity::Coarse => 0,
        Granularity::Fine => 1,
    };
    2 * path_index + granularity_index
}

/// The load paths of the two-phase kernels, in the order of their index in the catalogue:
/// [`two_phase`] has a kernel for every ordered pair of these (25 kernels). `GlobalCg`
/// (L2 only) serves the L2's allocation-line probe.
pub const TWO_PHASE_PATHS: [LoadPath; 5] = [
    LoadPath::GlobalCa,
    LoadPath::GlobalCg,
    LoadPath::GlobalNc,
    LoadPath::Texture,
    LoadPath::Constant,
];

const fn two_phase_kernel(entry: &'static str, first: LoadPath, second: LoadPath) -> Kernel {
    Kernel {
        module: &PCHASE,
        entry,
        kind: KernelKind::TwoPhase { first, second },
        params: &TWO_PHASE_PARAMS,
        min_capability: ComputeCapability::SM_50,
        shared_layout: SharedLayout::Timings,
        cluster_dims: None,
    }
}

/// Two-phase kernels indexed by `two_phase_index(first, second)`: `first` major, both in
/// the order of [`TWO_PHASE_PATHS`].
static TWO_PHASE: [Kernel; 25] = {
    use LoadPath::{Constant, GlobalCa, GlobalCg, GlobalNc, Texture};
    [
        two_phase_kernel("two_phase_global_ca_global_ca", GlobalCa, GlobalCa),
        two_phase_kernel("two_phase_global_ca_global_cg", GlobalCa, GlobalCg),
        two_phase_kernel("two_phase_global_ca_global_nc", GlobalCa, GlobalNc),
        two_phase_kernel("two_phase_global_ca_texture", GlobalCa, Texture),
        two_phase_kernel("two_phase_global_ca_constant", GlobalCa, Constant),
        two_phase_kernel("two_phase_global_cg_global_ca", GlobalCg, GlobalCa),
        two_phase_kernel("two_phase_global_cg_global_cg", GlobalCg, GlobalCg),
        two_phase_kernel("two_phase_global_cg_global_nc", GlobalCg, GlobalNc),
        two_phase_kernel("two_phase_global_cg_texture", GlobalCg, Texture),
        two_phase_kernel("two_phase_global_cg_constant", GlobalCg, Constant),
        two_phase_kernel("two_phase_global_nc_global_ca", GlobalNc, GlobalCa),
        two_phase_kernel("two_phase_global_nc_global_cg", GlobalNc, GlobalCg),
        two_phase_kernel("two_phase_global_nc_global_nc", GlobalNc, GlobalNc),
        two_phase_kernel("two_phase_global_nc_texture", GlobalNc, Texture),
        two_phase_kernel("two_phase_global_nc_constant", GlobalNc, Constant),
        two_phase_kernel("two_phase_texture_global_ca", Texture, GlobalCa),
        two_phase_kernel("two_phase_texture_global_cg", Texture, GlobalCg),
        two_phase_kernel("two_phase_texture_global_nc", Texture, GlobalNc),
        two_phase_kernel("two_phase_texture_texture", Texture, Texture),
        two_phase_kernel("two_phase_texture_constant", Texture, Constant),
        two_phase_kernel("two_phase_constant_global_ca", Constant, GlobalCa),
        two_phase_kernel("two_phase_constant_global_cg", Constant, GlobalCg),
        two_phase_kernel("two_phase_constant_global_nc", Constant, GlobalNc),
        two_phase_kernel("two_phase_constant_texture", Constant, Texture),
        two_phase_kernel("two_phase_constant_constant", Constant, Constant),
    ]
};

fn two_phase_path_index(path: LoadPath) -> Option<usize> {
    TWO_PHASE_PATHS.iter().position(|&p| p == path)
}

static INIT_CHAIN: Kernel = Kernel {
    module: &PCHASE,
    entry: "init_chain",
    kind: KernelKind::InitChain,
    params: &INIT_CHAIN_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::None,
    cluster_dims: None,
};

static CLOCK_OVERHEAD: Kernel = Kernel {
    module: &PCHASE,
    entry: "clock_overhead",
    kind: KernelKind::ClockOverhead,
    params: &CLOCK_OVERHEAD_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::Timings,
    cluster_dims: None,
};

static SM_CLOCK: Kernel = Kernel {
    module: &PCHASE,
    entry: "sm_clock",
    kind: KernelKind::SmClock,
    params: &SM_CLOCK_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::None,
    cluster_dims: None,
};

static CHASE_PINNED_GLOBAL_CG: Kernel = Kernel {
    module: &PCHASE,
    entry: "chase_pinned_global_cg",
    kind: KernelKind::ChasePinned {
        path: LoadPath::GlobalCg,
    },
    params: &PINNED_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::HeaderThenTimings {
        header: PINNED_SHARED_HEADER,
    },
    cluster_dims: None,
};

static L2_PARTITION_MAP: Kernel = Kernel {
    module: &L2MAP,
    entry: "l2_partition_map",
    kind: KernelKind::PartitionMap,
    params: &MAP_PARAMS,
    min_capability: ComputeCapability::SM_70,
    shared_layout: SharedLayout::HeaderThenTimings {
        header: MAP_SHARED_HEADER,
    },
    cluster_dims: None,
};

static CHASE_FINE_DSMEM: Kernel = Kernel {
    module: &HOPPER,
    entry: "chase_fine_dsmem",
    kind: KernelKind::ChaseDistributedShared,
    params: &DSMEM_PARAMS,
    min_capability: ComputeCapability::SM_90,
    shared_layout: SharedLayout::TimingsThenChain,
    cluster_dims: Some([2, 1, 1]),
};

/// The chase kernel for a load path and granularity.
///
/// ```
/// use pchase_kernels::{catalogue, Granularity, LoadPath};
/// let kernel = catalogue::chase(LoadPath::GlobalCa, Granularity::Fine);
/// assert_eq!(kernel.entry(), "chase_fine_global_ca");
/// assert_eq!(kernel.params().len(), 8);
/// ```
pub fn chase(path: LoadPath, granularity: Granularity) -> &'static Kernel {
    &CHASE[chase_index(path, granularity)]
}

/// The two-phase probe for chain A through `first` and chain B through `second`
/// (thesis 4.5 and 4.6): in every block, thread `thread_a` warms chain A, `bar.sync 0`,
/// thread `thread_b` warms chain B, `bar.sync 0`, then thread `thread_a` continues chain A
/// and times `steps` loads fine-grained, with the timed loop of the `chase_fine_<first>`
/// kernel. Every thread of the block reaches both barriers.
///
/// Both paths must be in [`TWO_PHASE_PATHS`] (GlobalCa, GlobalNc, Texture, Constant); for any
/// other path (GlobalCg, Shared) the answer is [`Error::NoTwoPhaseKernel`]. It never panics.
///
/// ```
/// use pchase_kernels::{catalogue, Error, LoadPath};
/// let kernel = catalogue::two_phase(LoadPath::GlobalCa, LoadPath::Texture)?;
/// assert_eq!(kernel.entry(), "two_phase_global_ca_texture");
/// assert_eq!(kernel.param_index("chain_b"), Some(2));
/// assert_eq!(kernel.dynamic_shared_bytes(100, 0)?, 800);
/// assert_eq!(
///     catalogue::two_phase(LoadPath::Shared, LoadPath::GlobalCa).unwrap_err(),
///     Error::NoTwoPhaseKernel { first: LoadPath::Shared, second: LoadPath::GlobalCa }
/// );
/// # Ok::<(), pchase_kernels::Error>(())
/// ```
pub fn two_phase(first: LoadPath, second: LoadPath) -> Result<&'static Kernel, Error> {
    match (two_phase_path_index(first), two_phase_path_index(second)) {
        (Some(a), Some(b)) => Ok(&TWO_PHASE[TWO_PHASE_PATHS.len() * a + b]),
        _ => Err(Error::NoTwoPhaseKernel { first, second }),
    }
}

/// `init_chain`: builds strided chains on the device, one array per `grid.y`.
pub fn init_chain() -> &'static Kernel {
    &INIT_CHAIN
}

/// `clock_overhead`: the cost of the fine kernels' clock/store/clock sequence without a load.
pub fn clock_overhead() -> &'static Kernel {
    &CLOCK_OVERHEAD
}

/// `sm_clock`: `%clock64` and `%globaltimer` at both ends of a spin, for the SM clock rate.
pub fn sm_clock() -> &'static Kernel {
    &SM_CLOCK
}

/// `chase_pinned_global_cg`: coarse `.cg` chases pinned to chosen SMs, one chain per
/// wanted SM, all starting together, each chased by the block's warps at once from
/// evenly spaced nodes (the L2 size sweep: the hardware places ordinary blocks on SMs afresh
/// at every launch, so a sweep could not otherwise keep to one SM); warp 0 can then time
/// further loads one by one while the other warps go on chasing. Launch it with many more blocks than SMs, so that every wanted
/// SM receives one; the dynamic shared memory is `PINNED_SHARED_HEADER` bytes plus 8 per
/// sampled load.
///
/// ```
/// use pchase_kernels::{catalogue, KernelKind, LoadPath};
/// let kernel = catalogue::chase_pinned_global_cg();
/// assert_eq!(kernel.kind(), KernelKind::ChasePinned { path: LoadPath::GlobalCg });
/// assert_eq!(kernel.param_index("sms"), Some(2));
/// ```
pub fn chase_pinned_global_cg() -> &'static Kernel {
    &CHASE_PINNED_GLOBAL_CG
}

/// `l2_partition_map`: which L2 partition serves which SM. One block on every SM; the
/// reference SM loads every SM's array twice, then each SM in SM order times two passes over
/// its own array, one load at a time, sleeping between polls while it waits (Volta and
/// newer).
///
/// ```
/// use pchase_kernels::{catalogue, KernelKind};
/// let kernel = catalogue::l2_partition_map();
/// assert_eq!(kernel.kind(), KernelKind::PartitionMap);
/// assert_eq!(kernel.module().name(), "l2map");
/// ```
pub fn l2_partition_map() -> &'static Kernel {
    &L2_PARTITION_MAP
}

/// `chase_fine_dsmem`: fine-grained chase through the shared memory of the other block of a
/// two-block cluster (Hopper and newer).
pub fn chase_fine_dsmem() -> &'static Kernel {
    &CHASE_FINE_DSMEM
}

/// The module with every kernel that runs from Maxwell on.
pub fn pchase_module() -> &'static Module {
    &PCHASE
}

/// The module with the thread-block-cluster kernels (compute capability 9.0 and newer).
pub fn hopper_module() -> &'static Module {
    &HOPPER
}

/// The module with the L2 partition map (compute capability 7.0 and newer).
pub fn l2map_module() -> &'static Module {
    &L2MAP
}

/// The constant-memory array the `Constant` chases read; fill it before launching them.
pub fn constant_chain() -> &'static ModuleGlobal {
    &CONSTANT_CHAIN
}

/// Every module, `pchase` first.
pub fn modules() -> &'static [&'static Module] {
    &MODULES
}

/// Every kernel of every module, in catalogue order (chases by path and granularity,
/// then `init_chain`, `clock_overhead`, `sm_clock`, the two-phase kernels by
/// (first, second) path, `chase_pinned_global_cg`, `chase_fine_dsmem`, `l2_partition_map`),
/// then the bandwidth kernels ([`crate::bandwidth::kernels`]).
///
/// ```
/// use pchase_kernels::{bandwidth, catalogue};
/// assert_eq!(catalogue::kernels().count(), 43 + bandwidth::kernels().count());
/// ```
pub fn kernels() -> impl Iterator<Item = &'static Kernel> + Clone {
    CHASE
        .iter()
        .chain([&INIT_CHAIN, &CLOCK_OVERHEAD, &SM_CLOCK])
        .chain(TWO_PHASE.iter())
        .chain([
            &CHASE_PINNED_GLOBAL_CG,
            &CHASE_FINE_DSMEM,
            &L2_PARTITION_MAP,
        ])
        .chain(crate::bandwidth::kernels())
}

/// The kernel with this entry name, if the catalogue has one (for tools that read names
/// back, e.g. from `cuobjdump`; code that launches kernels uses the typed functions).
pub fn kernel_by_entry(entry: &str) -> Option<&'static Kernel> {
    kernels().find(|kernel| kernel.entry == entry)
}

/// The kernels of `module`, in catalogue order.
///
/// ```
/// use pchase_kernels::catalogue;
/// let hopper = catalogue::hopper_module();
/// let entries: Vec<_> = catalogue::kernels_of(hopper).map(|k| k.entry()).collect();
/// assert_eq!(entries, [catalogue::chase_fine_dsmem().entry()]);
/// ```
pub fn kernels_of(module: &'static Module) -> impl Iterator<Item = &'static Kernel> {
    kernels().filter(move |kernel| std::ptr::eq(kernel.module(), module))
}
