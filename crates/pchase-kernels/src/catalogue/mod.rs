//! The catalogue: every module and kernel of the workspace, with the one spelling of each
//! entry name. The generator (`cargo xtask ptx`) writes the PTX from these descriptions, so
//! entry names and parameter lists cannot drift apart from the embedded text.
//!
//! This file holds the modules and the look-ups; the entries are in `kernels` (the kernel
//! descriptions, indexed by path and granularity or by path pair) and their parameter lists
//! in `params`.

mod cluster;
mod kernels;
pub(crate) mod params;

use crate::kernel::{Granularity, Kernel, Module, ModuleGlobal, ParamType};
use crate::{ComputeCapability, Error, LoadPath, PtxIsaVersion};
pub use cluster::CLUSTER_BLOCK_WORDS;
use cluster::{DSMEM_CLUSTER_CHASE, DSMEM_CLUSTER_STREAM};
use kernels::{
    chase_index, two_phase_path_index, CHASE, CHASE_FINE_DSMEM, CHASE_LINES,
    CHASE_PINNED_GLOBAL_CG, CHASE_PINNED_MULTI, CLOCK_OVERHEAD, INIT_CHAIN, INIT_CHAIN_LINES,
    L2_PARTITION_MAP, SM_CLOCK, TWO_PHASE, TWO_PHASE_BLOCK,
};

/// Module `pchase`: every kernel that runs from Maxwell on.
static PCHASE: Module = Module {
    name: "pchase",
    file_name: "pchase.ptx",
    ptx: include_str!("../../../../ptx/pchase.ptx"),
    // ISA 7.0 is what CUDA 11.0 drivers JIT; `.target sm_50` lets every GPU from Maxwell on
    // compile it.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_50,
    min_driver_version: 11000,
    on_demand: false,
    description: "single-thread pointer chases over every load path, two-phase cache-sharing probes, chain construction and clock calibration",
};

/// Module `hopper`: kernels that need thread-block clusters.
static HOPPER: Module = Module {
    name: "hopper",
    file_name: "hopper.ptx",
    ptx: include_str!("../../../../ptx/hopper.ptx"),
    // mapa, ld.shared::cluster, barrier.cluster and .reqnctapercluster all arrived in ISA 7.8.
    ptx_isa: PtxIsaVersion::new(7, 8),
    min_capability: ComputeCapability::SM_90,
    min_driver_version: 11080,
    on_demand: false,
    description:
        "pointer chases and streams through the distributed shared memory of thread-block clusters",
};

/// Module `l2map`: kernels whose waits sleep between polls (`nanosleep`, Volta and newer).
static L2MAP: Module = Module {
    name: "l2map",
    file_name: "l2map.ptx",
    ptx: include_str!("../../../../ptx/l2map.ptx"),
    // nanosleep arrived in ISA 6.3 for sm_70; 7.0 keeps CUDA 11.0 drivers able to JIT it.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_70,
    min_driver_version: 11000,
    on_demand: false,
    description:
        "the L2 partition map: every SM times its own array after a reference SM loaded them all",
};

static MODULES: [&Module; 8] = [
    &PCHASE,
    &HOPPER,
    &L2MAP,
    &crate::kernel::bandwidth::BANDWIDTH,
    &crate::kernel::copy::ASYNC_COPY,
    &crate::kernel::copy::TMA,
    &crate::icache::ICACHE,
    &crate::probes::PROBES,
];

/// The 64 KiB constant array the constant-path chases read.
static CONSTANT_CHAIN: ModuleGlobal = ModuleGlobal {
    module: &PCHASE,
    name: "memtopo_const_chain",
    elem: ParamType::U32,
    len: 16384,
};

/// Bytes of the pinned chase's shared bookkeeping before its sample timings: the claimed
/// row (u32, then 4 unused), the warps' summed cycles (u64), one final index per warp
/// (`u32[32]`).
pub const PINNED_SHARED_HEADER: u32 = 144;

/// Bytes of the partition map's shared scratch before its timings (the dependent store of
/// each timed load).
pub const MAP_SHARED_HEADER: u32 = 16;

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

/// The load paths of the line-indexed chases ([`chase_lines`]): the L1 path and the L2
/// path, the two a TLB walk measures.
pub const LINES_PATHS: [LoadPath; 2] = [LoadPath::GlobalCa, LoadPath::GlobalCg];

/// Bytes one index of a line-indexed chase counts: node addresses are `chain + 128 × index`.
pub const LINE_UNIT_BYTES: u64 = 128;

/// The fine-grained chase whose indices count 128-byte lines ([`LINE_UNIT_BYTES`]), so one
/// chain spans up to 512 GiB: the TLB walks over all of device memory. Only the paths of
/// [`LINES_PATHS`] have one; any other path is [`Error::NoLinesKernel`].
///
/// ```
/// use pchase_kernels::{catalogue, Error, LoadPath};
/// let kernel = catalogue::chase_lines(LoadPath::GlobalCg)?;
/// assert_eq!(kernel.entry(), "chase_fine_lines_global_cg");
/// assert_eq!(kernel.dynamic_shared_bytes(256, 0)?, 8 * 256);
/// assert_eq!(
///     catalogue::chase_lines(LoadPath::Texture).unwrap_err(),
///     Error::NoLinesKernel { path: LoadPath::Texture }
/// );
/// # Ok::<(), pchase_kernels::Error>(())
/// ```
pub fn chase_lines(path: LoadPath) -> Result<&'static Kernel, Error> {
    LINES_PATHS
        .iter()
        .position(|&p| p == path)
        .map(|i| &CHASE_LINES[i])
        .ok_or(Error::NoLinesKernel { path })
}

/// `init_chain_lines`: builds one strided chain of line indices ([`chase_lines`]).
pub fn init_chain_lines() -> &'static Kernel {
    &INIT_CHAIN_LINES
}

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

/// `two_phase_block_global_cg`: the L2 line probe's two-phase chase, whose block loads
/// chains A and B in address order before thread 0 re-times A.
///
/// ```
/// use pchase_kernels::catalogue;
/// let kernel = catalogue::two_phase_block();
/// assert_eq!(kernel.entry(), "two_phase_block_global_cg");
/// assert!(kernel.param_index("nodes_a").is_some());
/// ```
pub fn two_phase_block() -> &'static Kernel {
    &TWO_PHASE_BLOCK
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

/// The pinned `.cg` chase with `chains` independent chains per warp: 1 is
/// [`chase_pinned_global_cg`], 2, 4 and 8 the `chase_pinned_global_cg_x<n>` kernels; `None`
/// for any other count.
///
/// ```
/// use pchase_kernels::{catalogue, KernelKind};
/// let x4 = catalogue::chase_pinned_global_cg_chains(4).unwrap();
/// assert_eq!(x4.kind(), KernelKind::ChasePinnedMulti { chains: 4 });
/// assert_eq!(x4.params(), catalogue::chase_pinned_global_cg().params());
/// assert!(catalogue::chase_pinned_global_cg_chains(3).is_none());
/// ```
pub fn chase_pinned_global_cg_chains(chains: u32) -> Option<&'static Kernel> {
    match chains {
        1 => Some(&CHASE_PINNED_GLOBAL_CG),
        _ => CHASE_PINNED_MULTI
            .iter()
            .find(|k| k.kind == crate::KernelKind::ChasePinnedMulti { chains }),
    }
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

/// `dsmem_cluster_chase`: rank 0 of every cluster chases, fine-grained, a chain in the
/// shared memory of one rank of its cluster (chosen per cluster, so that one launch covers
/// every rank); every block records `%smid`, `%cluster_ctarank` and `%clusterid.x`. The
/// cluster shape comes from the launch.
///
/// ```
/// use pchase_kernels::{catalogue, KernelKind};
/// let kernel = catalogue::dsmem_cluster_chase();
/// assert_eq!(kernel.kind(), KernelKind::ClusterChase);
/// assert_eq!(kernel.cluster_dims(), None);
/// assert_eq!(kernel.dynamic_shared_bytes(256, 1024)?, 8 * 256 + 4 * 1024);
/// # Ok::<(), pchase_kernels::Error>(())
/// ```
pub fn dsmem_cluster_chase() -> &'static Kernel {
    &DSMEM_CLUSTER_CHASE
}

/// `dsmem_cluster_stream`: every block streams 16-byte loads (or stores) over the shared
/// memory of the next rank of its cluster (or its own); thread 0 times the passes.
pub fn dsmem_cluster_stream() -> &'static Kernel {
    &DSMEM_CLUSTER_STREAM
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
/// (first, second) path, `two_phase_block_global_cg`, `chase_pinned_global_cg`, `chase_fine_dsmem`, `l2_partition_map`,
/// `dsmem_cluster_chase`, `dsmem_cluster_stream`), the pinned chases with 2, 4 and 8 chains
/// per warp, the line-indexed chases and `init_chain_lines`, then the bandwidth kernels
/// ([`crate::bandwidth::kernels`]), then the copy kernels ([`crate::copy::kernels`]), then
/// `icache_ffma` ([`crate::icache`]), then the probes ([`crate::probes::kernels`]).
///
/// ```
/// use pchase_kernels::{bandwidth, catalogue, copy, probes};
/// assert_eq!(
///     catalogue::kernels().count(),
///     53 + bandwidth::kernels().count() + copy::kernels().count() + probes::kernels().count()
/// );
/// ```
pub fn kernels() -> impl Iterator<Item = &'static Kernel> + Clone {
    CHASE
        .iter()
        .chain([&INIT_CHAIN, &CLOCK_OVERHEAD, &SM_CLOCK])
        .chain(TWO_PHASE.iter())
        .chain([
            &TWO_PHASE_BLOCK,
            &CHASE_PINNED_GLOBAL_CG,
            &CHASE_FINE_DSMEM,
            &L2_PARTITION_MAP,
            &DSMEM_CLUSTER_CHASE,
            &DSMEM_CLUSTER_STREAM,
        ])
        .chain(CHASE_PINNED_MULTI.iter())
        .chain(CHASE_LINES.iter())
        .chain([&INIT_CHAIN_LINES])
        .chain(crate::kernel::bandwidth::kernels())
        .chain(crate::kernel::copy::kernels())
        .chain([&crate::icache::ICACHE_FFMA])
        .chain(crate::probes::kernels())
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
/// assert_eq!(
///     entries,
///     ["chase_fine_dsmem", "dsmem_cluster_chase", "dsmem_cluster_stream"]
/// );
/// ```
pub fn kernels_of(module: &'static Module) -> impl Iterator<Item = &'static Kernel> {
    kernels().filter(move |kernel| std::ptr::eq(kernel.module(), module))
}
