//! The copy kernels: global memory to shared memory by the tensor memory
//! accelerator (`cp.async.bulk`, its tensor-map form `cp.async.bulk.tensor.2d`), by
//! `cp.async` (4, 8 or 16 bytes per thread, `.ca` or `.cg`) and by the threads' plain loads
//! and stores, all with one launch contract so that their latencies and bandwidths compare
//! size for size.
//!
//! Every kernel runs `warmup_rounds + rounds` rounds. In a round the block copies `depth`
//! regions of `bytes` each into `depth` slots of its dynamic shared memory and waits until
//! they have all landed; thread 0 times the round with `%clock` (issue to completion) and the
//! timed rounds together with `%clock64`. Round `r` of block `b` copies regions
//! `q, q + 1, …, q + depth − 1` (each modulo `regions`) with `q = ((r × grid + b) × depth) mod
//! regions`; region `q` is bytes `q × bytes …` of the source (the tensor form: tile `q` of the
//! 2-D tensor, row-major over tiles). After the last round thread 0 records the last word of
//! the last slot, which the host checks against the source.
//!
//! Two modules, so that each compiles only where it can run: `asynccopy` (sm_80: `cp.async`
//! and the plain copy) and `tma` (sm_90: the bulk copies). Both are loaded the first time one
//! of their kernels is launched ([`Module::loaded_on_demand`]): a run that does not measure
//! copies never JIT-compiles them.
//!
//! ```
//! use pchase_kernels::copy::{self, CopyPath};
//! use pchase_kernels::ComputeCapability;
//! let bulk = copy::kernel(CopyPath::Bulk);
//! assert_eq!(bulk.entry(), "copy_bulk");
//! assert_eq!(bulk.module().name(), "tma");
//! assert!(bulk.check_supported(ComputeCapability::new(8, 0)).is_err());
//! let ca4 = copy::kernel(CopyPath::AsyncCa4);
//! assert_eq!(ca4.module().name(), "asynccopy");
//! // 128 bytes of header (the mbarrier), then the slots.
//! assert_eq!(ca4.dynamic_shared_bytes(0, 1024)?, 128 + 4096);
//! # Ok::<(), pchase_kernels::Error>(())
//! ```

use std::fmt;

use crate::kernel::{param, Kernel, KernelKind, Module, Param, ParamType, SharedLayout};
use crate::{ComputeCapability, PtxIsaVersion};

/// Bytes of every copy kernel's dynamic shared memory before its slots: the mbarrier of the
/// bulk copies (8 bytes), padded so that the slots start 128-byte aligned (the tensor copy's
/// destination must be).
pub const COPY_SHARED_HEADER: u32 = 128;

/// Slots start at multiples of this many bytes (a copy of `bytes` takes
/// `bytes` rounded up to it).
pub const COPY_SLOT_ALIGN: u32 = 128;

/// Module `asynccopy`: `cp.async` and the plain copy (compute capability 8.0).
pub(crate) static ASYNC_COPY: Module = Module {
    name: "asynccopy",
    file_name: "asynccopy.ptx",
    ptx: include_str!("../../../../ptx/asynccopy.ptx"),
    // cp.async, cp.async.commit_group and cp.async.wait_group: ISA 7.0, sm_80.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_80,
    min_driver_version: 11000,
    on_demand: true,
    description: "copies from global to shared memory by cp.async (.ca at 4, 8 and 16 bytes, .cg at 16) and by plain loads and stores, for the copy benchmark",
};

/// Module `tma`: the tensor memory accelerator's bulk copies (compute capability 9.0).
pub(crate) static TMA: Module = Module {
    name: "tma",
    file_name: "tma.ptx",
    ptx: include_str!("../../../../ptx/tma.ptx"),
    // cp.async.bulk, mbarrier expect_tx and fence.proxy.async arrived in ISA 8.0 (sm_90);
    // cvta.param (the tensor map's address) in 7.7.
    ptx_isa: PtxIsaVersion::new(8, 0),
    min_capability: ComputeCapability::SM_90,
    min_driver_version: 12000,
    on_demand: true,
    description: "bulk copies from global to shared memory by the tensor memory accelerator (cp.async.bulk, cp.async.bulk.tensor.2d), completed through an mbarrier, for the copy benchmark",
};

/// How a copy kernel moves data from global to shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CopyPath {
    /// Every thread loads 16 bytes (`ld.global.cg.v4`: from the L2, as a tile read once
    /// would be) and stores them to shared memory (`st.shared.v4`).
    Plain16,
    /// `cp.async.ca.shared.global`, 4 bytes per thread and instruction.
    AsyncCa4,
    /// `cp.async.ca.shared.global`, 8 bytes.
    AsyncCa8,
    /// `cp.async.ca.shared.global`, 16 bytes.
    AsyncCa16,
    /// `cp.async.cg.shared.global`, 16 bytes (bypasses the L1).
    AsyncCg16,
    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`: one thread
    /// issues each region as one bulk copy.
    Bulk,
    /// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`:
    /// one thread issues each tile of a 2-D tensor of 4-byte elements through a tensor map.
    BulkTensor2d,
}

impl CopyPath {
    /// Every path, in catalogue order.
    pub const ALL: [CopyPath; 7] = [
        CopyPath::Plain16,
        CopyPath::AsyncCa4,
        CopyPath::AsyncCa8,
        CopyPath::AsyncCa16,
        CopyPath::AsyncCg16,
        CopyPath::Bulk,
        CopyPath::BulkTensor2d,
    ];

    /// The name in entry names, the topology and messages (`plain_v16`, `cp_async_ca_4`,
    /// `bulk`, `bulk_tensor_2d`).
    pub fn name(self) -> &'static str {
        match self {
            CopyPath::Plain16 => "plain_v16",
            CopyPath::AsyncCa4 => "cp_async_ca_4",
            CopyPath::AsyncCa8 => "cp_async_ca_8",
            CopyPath::AsyncCa16 => "cp_async_ca_16",
            CopyPath::AsyncCg16 => "cp_async_cg_16",
            CopyPath::Bulk => "bulk",
            CopyPath::BulkTensor2d => "bulk_tensor_2d",
        }
    }

    /// Bytes each thread moves per instruction, for the paths where every thread copies;
    /// `None` for the bulk copies (one thread issues a whole region).
    pub fn thread_width(self) -> Option<u32> {
        match self {
            CopyPath::AsyncCa4 => Some(4),
            CopyPath::AsyncCa8 => Some(8),
            CopyPath::Plain16 | CopyPath::AsyncCa16 | CopyPath::AsyncCg16 => Some(16),
            CopyPath::Bulk | CopyPath::BulkTensor2d => None,
        }
    }

    /// Whether the tensor memory accelerator does the copy (`cp.async.bulk`).
    pub fn is_bulk(self) -> bool {
        self.thread_width().is_none()
    }

    /// The oldest compute capability with the path's instructions: 8.0 for `cp.async` (and
    /// the plain copy, which lives in its module), 9.0 for the bulk copies.
    pub fn min_capability(self) -> ComputeCapability {
        kernel(self).min_capability
    }
}

impl fmt::Display for CopyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const SRC: Param = param(
    "src",
    ParamType::U64,
    "global pointer to the source: u32 words, word i holding i",
);
const REGIONS: Param = param(
    "regions",
    ParamType::U32,
    "regions of `bytes` in the source; region q starts at byte q x bytes",
);
const BYTES: Param = param(
    "bytes",
    ParamType::U32,
    "bytes of one copy (one region); a positive multiple of 16",
);
const DEPTH: Param = param(
    "depth",
    ParamType::U32,
    "copies per round, each into its own slot; at most `regions`",
);
const WARMUP_ROUNDS: Param = param("warmup_rounds", ParamType::U32, "untimed rounds first");
const ROUNDS: Param = param("rounds", ParamType::U32, "timed rounds; at least 1");
const OUT_ROUND: Param = param(
    "out_round",
    ParamType::U64,
    "global pointer to u32[grid * rounds]: %clock cycles of each timed round of each block, issue to completion",
);
const OUT_CYCLES: Param = param(
    "out_cycles",
    ParamType::U64,
    "global pointer to u64[grid]: %clock64 cycles of each block's timed rounds",
);
const OUT_BLOCK: Param = param(
    "out_block",
    ParamType::U64,
    "global pointer to u32[grid * 2]: per block [%smid, last word of the last slot after the last round]",
);

static LINEAR_PARAMS: [Param; 9] = [
    SRC,
    REGIONS,
    BYTES,
    DEPTH,
    WARMUP_ROUNDS,
    ROUNDS,
    OUT_ROUND,
    OUT_CYCLES,
    OUT_BLOCK,
];

static TENSOR_PARAMS: [Param; 12] = [
    param(
        "tmap",
        ParamType::TensorMap,
        "the CUtensorMap (cuTensorMapEncodeTiled) of a 2-D tensor of u32 with box_w x box_h boxes, passed by value",
    ),
    param(
        "tiles_per_row",
        ParamType::U32,
        "tiles across the tensor: its width is tiles_per_row x box_w elements",
    ),
    param(
        "tile_rows",
        ParamType::U32,
        "tiles down the tensor: its height is tile_rows x box_h elements; regions = tiles_per_row x tile_rows",
    ),
    param("box_w", ParamType::U32, "tile width in elements (the box's inner dimension)"),
    param("box_h", ParamType::U32, "tile height in elements"),
    param(
        "bytes",
        ParamType::U32,
        "bytes of one tile: box_w x box_h x 4, the transaction count each copy completes",
    ),
    DEPTH,
    WARMUP_ROUNDS,
    ROUNDS,
    OUT_ROUND,
    OUT_CYCLES,
    OUT_BLOCK,
];

const fn copy_kernel(module: &'static Module, entry: &'static str, path: CopyPath) -> Kernel {
    let (params, min_capability): (&'static [Param], ComputeCapability) = match path {
        CopyPath::BulkTensor2d => (&TENSOR_PARAMS, ComputeCapability::SM_90),
        CopyPath::Bulk => (&LINEAR_PARAMS, ComputeCapability::SM_90),
        _ => (&LINEAR_PARAMS, ComputeCapability::SM_80),
    };
    Kernel {
        module,
        entry,
        kind: KernelKind::Copy(path),
        params,
        min_capability,
        shared_layout: SharedLayout::HeaderThenBuffer {
            header: COPY_SHARED_HEADER,
        },
        cluster_dims: None,
    }
}

static KERNELS: [Kernel; 7] = [
    copy_kernel(&ASYNC_COPY, "copy_plain_v16", CopyPath::Plain16),
    copy_kernel(&ASYNC_COPY, "copy_cp_async_ca_4", CopyPath::AsyncCa4),
    copy_kernel(&ASYNC_COPY, "copy_cp_async_ca_8", CopyPath::AsyncCa8),
    copy_kernel(&ASYNC_COPY, "copy_cp_async_ca_16", CopyPath::AsyncCa16),
    copy_kernel(&ASYNC_COPY, "copy_cp_async_cg_16", CopyPath::AsyncCg16),
    copy_kernel(&TMA, "copy_bulk", CopyPath::Bulk),
    copy_kernel(&TMA, "copy_bulk_tensor_2d", CopyPath::BulkTensor2d),
];

/// The kernel of `path`.
pub fn kernel(path: CopyPath) -> &'static Kernel {
    let index = CopyPath::ALL
        .iter()
        .position(|p| *p == path)
        .expect("ALL lists every path");
    &KERNELS[index]
}

/// Every copy kernel, in the order of [`CopyPath::ALL`].
pub fn kernels() -> impl Iterator<Item = &'static Kernel> + Clone {
    KERNELS.iter()
}

/// The module with `cp.async` and the plain copy (compute capability 8.0).
pub fn async_copy_module() -> &'static Module {
    &ASYNC_COPY
}

/// The module with the bulk copies (compute capability 9.0).
pub fn tma_module() -> &'static Module {
    &TMA
}

/// Bytes a slot of `bytes` occupies ([`COPY_SLOT_ALIGN`]-aligned).
///
/// ```
/// assert_eq!(pchase_kernels::copy::slot_bytes(16), 128);
/// assert_eq!(pchase_kernels::copy::slot_bytes(4096), 4096);
/// ```
pub fn slot_bytes(bytes: u32) -> u64 {
    u64::from(bytes).div_ceil(u64::from(COPY_SLOT_ALIGN)) * u64::from(COPY_SLOT_ALIGN)
}

/// The copy path of a kernel (`None` for any other kernel).
pub fn path_of(kernel: &Kernel) -> Option<CopyPath> {
    match kernel.kind {
        KernelKind::Copy(path) => Some(path),
        _ => None,
    }
}
