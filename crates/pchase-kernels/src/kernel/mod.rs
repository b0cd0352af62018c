//! The typed description of PTX modules, kernels and their parameters, and the kernel
//! families whose descriptions carry a shape of their own: [`bandwidth`] and [`copy`]. A
//! [`KernelKind`] names those shapes, and each family builds its kernels from the types
//! here, so they live together, under the types they extend. The other families
//! (`icache`, `probes`) and the catalogue only use these types.

pub mod bandwidth;
pub mod copy;

use crate::{ComputeCapability, Error, LoadPath, PtxIsaVersion};
use bandwidth::BandwidthKernel;

/// One PTX module: a file under `ptx/`, embedded in this crate.
#[derive(Debug)]
pub struct Module {
    pub(crate) name: &'static str,
    pub(crate) file_name: &'static str,
    pub(crate) ptx: &'static str,
    pub(crate) ptx_isa: PtxIsaVersion,
    pub(crate) min_capability: ComputeCapability,
    pub(crate) min_driver_version: u32,
    /// See [`Module::loaded_on_demand`].
    pub(crate) on_demand: bool,
    pub(crate) description: &'static str,
}

impl Module {
    /// Short name of the module (`pchase`, `hopper`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// File name of the module under the workspace's `ptx/` directory.
    pub fn file_name(&self) -> &'static str {
        self.file_name
    }

    /// The PTX text, ready for `cuModuleLoadData` (append a NUL byte for the C API); the
    /// machine code of a GPU's exact architecture, where memtopo ships it, is
    /// [`Module::cubin`].
    pub fn ptx(&self) -> &'static str {
        self.ptx
    }

    /// The PTX ISA version the module declares with `.version`.
    pub fn ptx_isa(&self) -> PtxIsaVersion {
        self.ptx_isa
    }

    /// The oldest compute capability the module can be JIT-compiled for (its `.target`).
    pub fn min_capability(&self) -> ComputeCapability {
        self.min_capability
    }

    /// The oldest driver that can JIT the module, in `cuDriverGetVersion` encoding
    /// (`1000 * major + 10 * minor`, so CUDA 11.0 is `11000`).
    pub fn min_driver_version(&self) -> u32 {
        self.min_driver_version
    }

    /// One sentence on what the module holds.
    pub fn description(&self) -> &'static str {
        self.description
    }

    /// Whether a runner loads the module's kernels only when each is first launched, not
    /// when it starts: the bandwidth module, whole from its cubin ([`Module::cubin`]) where
    /// the GPU has one, else kernel by kernel ([`crate::bandwidth::kernel_ptx`]), so that
    /// only the shapes a search visits are JIT-compiled.
    ///
    /// The copy modules (`asynccopy`, `tma`) are loaded whole, the first time one of their
    /// kernels is launched, for the same reason: only the copy benchmark needs them. The
    /// instruction-fetch module too: the runner generates it at the size it needs
    /// ([`crate::icache::module_ptx`]) and loads that when the benchmark first launches it.
    /// The probes are loaded whole on first use too: each belongs to one benchmark.
    pub fn loaded_on_demand(&self) -> bool {
        self.on_demand
    }

    /// Whether a device of compute capability `device` can load the module.
    pub fn supports(&self, device: ComputeCapability) -> bool {
        device >= self.min_capability
    }
}

/// A parameter of a kernel description: its name in the PTX, its type and what it means.
pub(crate) const fn param(name: &'static str, ty: ParamType, meaning: &'static str) -> Param {
    Param { name, ty, meaning }
}

/// The PTX type of a kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// `.u32`: counts and steps.
    U32,
    /// `.u64`: device pointers, texture objects, element strides, cycle counts.
    U64,
    /// `.align 64 .b8 [128]`: an opaque `CUtensorMap` passed by value (the
    /// `__grid_constant__` form); the kernel takes its address with `cvta.param`.
    TensorMap,
}

impl ParamType {
    /// The PTX spelling of the type (`.u32`, `.u64`, `.align 64 .b8` for the tensor map,
    /// whose declaration adds the array size: [`ParamType::declaration`]).
    pub fn ptx(self) -> &'static str {
        match self {
            ParamType::U32 => ".u32",
            ParamType::U64 => ".u64",
            ParamType::TensorMap => ".align 64 .b8",
        }
    }

    /// Size of the parameter in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            ParamType::U32 => 4,
            ParamType::U64 => 8,
            ParamType::TensorMap => 128,
        }
    }

    /// The declaration in an entry's parameter list, without `.param`.
    ///
    /// ```
    /// use pchase_kernels::ParamType;
    /// assert_eq!(ParamType::U32.declaration("param_steps"), ".u32 param_steps");
    /// assert_eq!(
    ///     ParamType::TensorMap.declaration("param_tmap"),
    ///     ".align 64 .b8 param_tmap[128]"
    /// );
    /// ```
    pub fn declaration(self, name: &str) -> String {
        match self {
            ParamType::TensorMap => format!("{} {name}[{}]", self.ptx(), self.size_bytes()),
            _ => format!("{} {name}", self.ptx()),
        }
    }
}

/// One kernel parameter, in launch order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    pub(crate) name: &'static str,
    pub(crate) ty: ParamType,
    pub(crate) meaning: &'static str,
}

impl Param {
    /// The parameter's name (the PTX parameter is `param_<name>`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The parameter's PTX type.
    pub fn ty(&self) -> ParamType {
        self.ty
    }

    /// What the caller passes, with its unit.
    pub fn meaning(&self) -> &'static str {
        self.meaning
    }
}

/// Whether a chase kernel times each load or the whole pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Granularity {
    /// One `%clock64` interval around the whole timed pass.
    Coarse,
    /// One `%clock` interval around every load, recorded with the loaded index.
    Fine,
}

impl Granularity {
    /// Both granularities.
    pub const ALL: [Granularity; 2] = [Granularity::Coarse, Granularity::Fine];
}

/// What a kernel does; the generator picks its PTX template from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelKind {
    /// Single-thread pointer chase through one load path.
    Chase {
        /// The load instruction used.
        path: LoadPath,
        /// Per-load or whole-pass timing.
        granularity: Granularity,
    },
    /// Fine-grained chase through the shared memory of another CTA of the same cluster.
    ChaseDistributedShared,
    /// Fine-grained chase by rank 0 of every cluster through the shared memory of a rank
    /// chosen per cluster; the cluster shape comes from the launch (`cuLaunchKernelEx`),
    /// and every block records its SM, rank and cluster.
    ClusterChase,
    /// Every thread of every block streams 16-byte loads or stores over another rank's (or
    /// its own) shared memory; thread 0 times the passes.
    ClusterStream,
    /// Fine-grained single-thread chase whose indices count 128-byte lines, not 4-byte
    /// elements: one block's chain may span up to 512 GiB (the TLB walks over all of device
    /// memory). The timed loop is the `Chase` kernels' but for the address
    /// computation before the first clock read.
    ChaseLines {
        /// The load instruction used (`GlobalCa` or `GlobalCg`).
        path: LoadPath,
    },
    /// Parallel construction of strided chains.
    InitChain,
    /// Parallel construction of one strided chain whose indices count 128-byte lines.
    InitChainLines,
    /// Back-to-back clock reads with the fine kernels' shared store, no load.
    ClockOverhead,
    /// `%clock64` against `%globaltimer`, to measure the real SM clock.
    SmClock,
    /// The sharing / caches-per-SM probe: one thread of the block warms chain A through
    /// `first`, another (after a barrier) warms chain B through `second`, and (after a second
    /// barrier) the first thread re-times chain A, fine-grained, through `first`.
    TwoPhase {
        /// The path of chain A: warmed, then re-timed.
        first: LoadPath,
        /// The path of chain B, loaded between the two passes over chain A.
        second: LoadPath,
    },
    /// The L2 line probe's two-phase chase: every thread of one block loads chain A's
    /// nodes in address order through `ld.global.cg`, then chain B's likewise; after a
    /// barrier thread 0 chases chain A from index 0 and times each load, fine-grained.
    TwoPhaseBlock,
    /// Coarse chases pinned to chosen SMs: every block reads `%smid`; the first block on
    /// each wanted SM claims its slot, waits (bounded) until every slot is claimed, then
    /// chases the slot's chain; all other blocks leave at once.
    ChasePinned {
        /// The load instruction used.
        path: LoadPath,
    },
    /// The pinned `.cg` chase with `chains` independent chains per warp, all chased by its
    /// first thread, one load of each per step (no sampled loads): memory-level parallelism
    /// past one chain per warp.
    ChasePinnedMulti {
        /// Independent chains per warp: 2, 4 or 8.
        chains: u32,
    },
    /// The L2 partition map: one block per SM; a reference SM loads every SM's array, then
    /// each SM in turn times two passes over its own array, fine-grained.
    PartitionMap,
    /// A bandwidth kernel: streaming accesses of one shape (`crate::bandwidth`).
    Bandwidth(BandwidthKernel),
    /// A copy from global to shared memory in rounds (`crate::copy`).
    Copy(copy::CopyPath),
    /// Straight-line multiply-adds entered at a chosen segment and run in a loop, one warp
    /// (`crate::icache`): the instruction caches.
    InstructionFetch,
    /// A probe of module `probes` (`crate::probes`): a kernel of one benchmark, whose PTX
    /// template `cargo xtask ptx` finds by its entry name.
    Probe,
}

/// How a kernel's dynamic shared memory is laid out; every array holds `u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SharedLayout {
    /// The kernel uses no dynamic shared memory.
    None,
    /// `[latency; steps][index; steps]`.
    Timings,
    /// `[chain; shared_chain_elems]`.
    Chain,
    /// `[latency; steps][index; steps][chain; shared_chain_elems]`.
    TimingsThenChain,
    /// A header of `header` bytes (the kernel's own bookkeeping), then
    /// `[latency; steps][index; steps]`.
    HeaderThenTimings {
        /// Bytes before the timings; a multiple of 16.
        header: u32,
    },
    /// One buffer the launch sizes (the bandwidth kernels' shared region): its bytes are
    /// passed to [`Kernel::dynamic_shared_bytes`] as `4 * shared_chain_elems`.
    Buffer,
    /// A header of `header` bytes (the copy kernels' mbarrier, padded), then a buffer the
    /// launch sizes (their slots), passed as `4 * shared_chain_elems` like
    /// [`SharedLayout::Buffer`].
    HeaderThenBuffer {
        /// Bytes before the buffer; a multiple of 16.
        header: u32,
    },
}

impl SharedLayout {
    /// Byte offset of the chain copy, when the layout has one.
    pub fn chain_offset_bytes(self, steps: u32) -> Option<u64> {
        match self {
            SharedLayout::Chain => Some(0),
            SharedLayout::TimingsThenChain => Some(8 * u64::from(steps)),
            SharedLayout::None
            | SharedLayout::Timings
            | SharedLayout::HeaderThenTimings { .. }
            | SharedLayout::Buffer
            | SharedLayout::HeaderThenBuffer { .. } => None,
        }
    }

    fn bytes(self, steps: u32, shared_chain_elems: u32) -> u64 {
        let timings = 8 * u64::from(steps);
        let chain = 4 * u64::from(shared_chain_elems);
        match self {
            SharedLayout::None => 0,
            SharedLayout::Timings => timings,
            SharedLayout::Chain => chain,
            SharedLayout::TimingsThenChain => timings + chain,
            SharedLayout::HeaderThenTimings { header } => u64::from(header) + timings,
            SharedLayout::Buffer => chain,
            SharedLayout::HeaderThenBuffer { header } => u64::from(header) + chain,
        }
    }
}

/// One kernel entry of a module, with its launch contract.
#[derive(Debug)]
pub struct Kernel {
    pub(crate) module: &'static Module,
    pub(crate) entry: &'static str,
    pub(crate) kind: KernelKind,
    pub(crate) params: &'static [Param],
    pub(crate) min_capability: ComputeCapability,
    pub(crate) shared_layout: SharedLayout,
    pub(crate) cluster_dims: Option<[u32; 3]>,
}

impl Kernel {
    /// The module the kernel lives in.
    pub fn module(&self) -> &'static Module {
        self.module
    }

    /// The PTX entry name, for `Module::get_function`.
    pub fn entry(&self) -> &'static str {
        self.entry
    }

    /// What the kernel does.
    pub fn kind(&self) -> KernelKind {
        self.kind
    }

    /// The parameters in launch order.
    pub fn params(&self) -> &'static [Param] {
        self.params
    }

    /// The oldest compute capability the kernel runs on.
    pub fn min_capability(&self) -> ComputeCapability {
        self.min_capability
    }

    /// The layout of the kernel's dynamic shared memory.
    pub fn shared_layout(&self) -> SharedLayout {
        self.shared_layout
    }

    /// The thread-block cluster shape compiled into the kernel (`.reqnctapercluster`), if any:
    /// grid.x must then be a multiple of `cluster_dims[0]`. The kernels of kinds
    /// [`KernelKind::ClusterChase`] and [`KernelKind::ClusterStream`] have none: their
    /// launch gives the shape.
    pub fn cluster_dims(&self) -> Option<[u32; 3]> {
        self.cluster_dims
    }

    /// Checks that a device of compute capability `device` can run the kernel.
    ///
    /// ```
    /// use pchase_kernels::{catalogue, ComputeCapability, Error};
    /// let dsmem = catalogue::chase_fine_dsmem();
    /// assert!(dsmem.check_supported(ComputeCapability::new(9, 0)).is_ok());
    /// assert!(matches!(
    ///     dsmem.check_supported(ComputeCapability::new(8, 0)),
    ///     Err(Error::UnsupportedCapability { .. })
    /// ));
    /// ```
    pub fn check_supported(&self, device: ComputeCapability) -> Result<(), Error> {
        if device >= self.min_capability {
            Ok(())
        } else {
            Err(Error::UnsupportedCapability {
                entry: self.entry,
                required: self.min_capability,
                found: device,
            })
        }
    }

    /// Bytes of dynamic shared memory a launch needs (the `shared_mem_bytes` launch argument).
    ///
    /// `steps` is the timed step count (for `clock_overhead`: the sample count);
    /// `shared_chain_elems` the number of chain elements copied into shared memory
    /// (`shared_nodes_elems` of the shared-path and cluster kernels; ignored by kernels
    /// without a chain copy). Fine kernels need `8 * steps` for the latency and index
    /// arrays, plus `4 * shared_chain_elems` on the shared paths; the two-phase kernels need
    /// `8 * steps` (the timings of chain A's timed pass).
    ///
    /// ```
    /// use pchase_kernels::{catalogue, Granularity, LoadPath};
    /// let fine_shared = catalogue::chase(LoadPath::Shared, Granularity::Fine);
    /// assert_eq!(fine_shared.dynamic_shared_bytes(256, 1024)?, 8 * 256 + 4 * 1024);
    /// let coarse_l1 = catalogue::chase(LoadPath::GlobalCa, Granularity::Coarse);
    /// assert_eq!(coarse_l1.dynamic_shared_bytes(256, 1024)?, 0);
    /// # Ok::<(), pchase_kernels::Error>(())
    /// ```
    pub fn dynamic_shared_bytes(&self, steps: u32, shared_chain_elems: u32) -> Result<u32, Error> {
        u32::try_from(self.shared_layout.bytes(steps, shared_chain_elems)).map_err(|_| {
            Error::SharedMemoryOverflow {
                entry: self.entry,
                steps,
                shared_chain_elems,
            }
        })
    }

    /// Index of the parameter called `name` in the launch order.
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|param| param.name == name)
    }
}

/// A module-scope variable the host fills before launching (through `cuModuleGetGlobal`).
#[derive(Debug)]
pub struct ModuleGlobal {
    pub(crate) module: &'static Module,
    pub(crate) name: &'static str,
    pub(crate) elem: ParamType,
    pub(crate) len: usize,
}

impl ModuleGlobal {
    /// The module that declares the variable.
    pub fn module(&self) -> &'static Module {
        self.module
    }

    /// The symbol name, for `cuModuleGetGlobal`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The element type.
    pub fn elem(&self) -> ParamType {
        self.elem
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the variable has no elements (never, for catalogue globals).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * self.elem.size_bytes()
    }
}
