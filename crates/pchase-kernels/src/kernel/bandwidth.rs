//! The bandwidth kernels: streaming reads, writes and copies over global memory
//! and reads of shared memory, each at a fixed vector width and unroll, in their own module
//! `bandwidth` so that a run without bandwidth benchmarks never loads (or JIT-compiles) them.
//!
//! Every kernel walks the same addressing scheme, set by the host: thread `t` of block `b`
//! starts at position `b × block_phase + t × vector` of its block's region (which begins at
//! byte `b × block_stride` of the buffer), and in each of `iterations` iterations loads (or
//! stores) `unroll` vectors at positions `pos + u × ntid × vector`, `u = 0 … unroll − 1`,
//! each taken modulo the region by `& mask` (the region is a power of two), then advances
//! `pos` by `step`. With `block_stride = 0, block_phase = ntid × vector × unroll` and
//! `step = grid × ntid × vector × unroll` this is a grid-stride stream over one buffer;
//! with `block_stride = region, block_phase = 0, step = ntid × vector × unroll` every block
//! re-reads its own region (the L1-resident read). Loaded words are XORed into one
//! register, stored only if it equals a key no real data makes (so no load is dead code).
//!
//! ```
//! use pchase_kernels::bandwidth::{self, BandwidthOp, ReadVariant};
//! let kernel = bandwidth::kernel(BandwidthOp::Read(ReadVariant::Cg), 16, 4).unwrap();
//! assert_eq!(kernel.entry(), "bw_read_cg_v16_u4");
//! assert_eq!(kernel.module().name(), "bandwidth");
//! assert!(kernel.module().loaded_on_demand());
//! // The streaming-store variant exists only at 16 bytes.
//! assert!(bandwidth::kernel(BandwidthOp::Read(ReadVariant::Cs), 4, 1).is_none());
//! ```

use std::fmt;

use crate::kernel::{param, Kernel, KernelKind, Module, Param, ParamType, SharedLayout};
use crate::{ComputeCapability, PtxIsaVersion};

/// Module `bandwidth`: loaded only when a bandwidth benchmark first launches a kernel.
pub(crate) static BANDWIDTH: Module = Module {
    name: "bandwidth",
    file_name: "bandwidth.ptx",
    ptx: include_str!("../../../../ptx/bandwidth.ptx"),
    // ld.global.nc (sm_32), .cs and vector loads: all in ISA 7.0 for sm_50.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_50,
    min_driver_version: 11000,
    on_demand: true,
    description: "streaming reads, writes and copies of global memory and reads of shared memory, for the bandwidth benchmarks",
};

/// The cache operator of a global read (PTX `ld.global.<op>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReadVariant {
    /// `ld.global.ca`: cache at all levels (the L1 where the GPU caches global loads).
    Ca,
    /// `ld.global.nc`: the non-coherent read-only path (texture / read-only cache).
    Nc,
    /// `ld.global.cg`: cache in the L2 only.
    Cg,
    /// `ld.global.cs`: streaming, likely accessed once (evict first).
    Cs,
}

impl ReadVariant {
    /// Every variant, in catalogue order.
    pub const ALL: [ReadVariant; 4] = [
        ReadVariant::Ca,
        ReadVariant::Nc,
        ReadVariant::Cg,
        ReadVariant::Cs,
    ];

    /// The PTX cache operator without the dot (`ca`, `nc`, `cg`, `cs`).
    pub fn name(self) -> &'static str {
        match self {
            ReadVariant::Ca => "ca",
            ReadVariant::Nc => "nc",
            ReadVariant::Cg => "cg",
            ReadVariant::Cs => "cs",
        }
    }
}

/// What a bandwidth kernel does with its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BandwidthOp {
    /// Loads from `src` with this cache operator and XORs every word into an accumulator.
    Read(ReadVariant),
    /// Stores to `dst` (`st.global`, write-back).
    Write,
    /// Loads from `src` through `ld.global.nc` and stores the same vector to `dst` at the
    /// same offset.
    Copy,
    /// Writes the block's dynamic shared memory once, then loads it (`ld.shared`) and XORs
    /// every word into an accumulator.
    SharedRead,
}

impl BandwidthOp {
    /// Every operation, reads first.
    pub const ALL: [BandwidthOp; 7] = [
        BandwidthOp::Read(ReadVariant::Ca),
        BandwidthOp::Read(ReadVariant::Nc),
        BandwidthOp::Read(ReadVariant::Cg),
        BandwidthOp::Read(ReadVariant::Cs),
        BandwidthOp::Write,
        BandwidthOp::Copy,
        BandwidthOp::SharedRead,
    ];

    /// The instruction that moves the data, as reports name it (`ld.global.nc`,
    /// `st.global`, `ld.global.nc + st.global`, `ld.shared`).
    pub fn instruction(self) -> &'static str {
        match self {
            BandwidthOp::Read(ReadVariant::Ca) => "ld.global.ca",
            BandwidthOp::Read(ReadVariant::Nc) => "ld.global.nc",
            BandwidthOp::Read(ReadVariant::Cg) => "ld.global.cg",
            BandwidthOp::Read(ReadVariant::Cs) => "ld.global.cs",
            BandwidthOp::Write => "st.global",
            BandwidthOp::Copy => "ld.global.nc + st.global",
            BandwidthOp::SharedRead => "ld.shared",
        }
    }

    /// Bytes one vector access of `vector_bytes` moves over the memory it measures: a copy
    /// counts its read and its write.
    pub fn bytes_per_access(self, vector_bytes: u32) -> u64 {
        match self {
            BandwidthOp::Copy => 2 * u64::from(vector_bytes),
            _ => u64::from(vector_bytes),
        }
    }

    fn family(self) -> &'static [Kernel] {
        match self {
            BandwidthOp::Read(ReadVariant::Ca) => &READ_CA,
            BandwidthOp::Read(ReadVariant::Nc) => &READ_NC,
            BandwidthOp::Read(ReadVariant::Cg) => &READ_CG,
            BandwidthOp::Read(ReadVariant::Cs) => &READ_CS,
            BandwidthOp::Write => &WRITE,
            BandwidthOp::Copy => &COPY,
            BandwidthOp::SharedRead => &SHARED_READ,
        }
    }
}

impl fmt::Display for BandwidthOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.instruction())
    }
}

/// A bandwidth kernel's shape: what it does, the bytes of each access (4, 8 or 16: `.u32`,
/// `.v2.u32`, `.v4.u32`) and the accesses each thread has in flight per iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BandwidthKernel {
    /// The operation.
    pub op: BandwidthOp,
    /// Bytes per access: 4, 8 or 16.
    pub vector_bytes: u32,
    /// Independent accesses per thread and iteration: 1, 2, 4 or 8.
    pub unroll: u32,
}

/// Vector widths the catalogue has kernels for (bytes).
pub const VECTOR_BYTES: [u32; 3] = [4, 8, 16];
/// Unroll factors the catalogue has kernels for.
pub const UNROLLS: [u32; 4] = [1, 2, 4, 8];

const BLOCK_STRIDE: Param = param(
    "block_stride",
    ParamType::U64,
    "bytes between the regions of consecutive blocks (0: every block walks one region)",
);
const BLOCK_PHASE: Param = param(
    "block_phase",
    ParamType::U32,
    "bytes: block b starts at position b * block_phase of its region",
);
const STEP: Param = param(
    "step",
    ParamType::U32,
    "bytes each thread's position advances per iteration",
);
const MASK: Param = param(
    "mask",
    ParamType::U32,
    "region bytes - 1 (the region is a power of two): positions wrap inside it",
);
const ITERATIONS: Param = param(
    "iterations",
    ParamType::U32,
    "iterations per thread; each moves unroll vectors",
);
const SRC: Param = param(
    "src",
    ParamType::U64,
    "global pointer to the buffer read (region b at b * block_stride)",
);
const DST: Param = param(
    "dst",
    ParamType::U64,
    "global pointer to the buffer written (the same layout as src)",
);
const SINK: Param = param(
    "sink",
    ParamType::U64,
    "global pointer to u32[grid * ntid]: a thread stores its XOR of every loaded word only where it equals 0x7fffffff",
);

static READ_PARAMS: [Param; 7] = [SRC, BLOCK_STRIDE, BLOCK_PHASE, STEP, MASK, ITERATIONS, SINK];
static WRITE_PARAMS: [Param; 6] = [DST, BLOCK_STRIDE, BLOCK_PHASE, STEP, MASK, ITERATIONS];
static COPY_PARAMS: [Param; 7] = [SRC, DST, BLOCK_STRIDE, BLOCK_PHASE, STEP, MASK, ITERATIONS];
static SHARED_PARAMS: [Param; 5] = [
    BLOCK_PHASE,
    STEP,
    param(
        "mask",
        ParamType::U32,
        "dynamic shared bytes - 1 (a power of two): positions wrap inside the block's shared memory",
    ),
    ITERATIONS,
    SINK,
];

const fn bw(entry: &'static str, op: BandwidthOp, vector_bytes: u32, unroll: u32) -> Kernel {
    let params: &'static [Param] = match op {
        BandwidthOp::Read(_) => &READ_PARAMS,
        BandwidthOp::Write => &WRITE_PARAMS,
        BandwidthOp::Copy => &COPY_PARAMS,
        BandwidthOp::SharedRead => &SHARED_PARAMS,
    };
    let shared_layout = match op {
        BandwidthOp::SharedRead => SharedLayout::Buffer,
        _ => SharedLayout::None,
    };
    Kernel {
        module: &BANDWIDTH,
        entry,
        kind: KernelKind::Bandwidth(BandwidthKernel {
            op,
            vector_bytes,
            unroll,
        }),
        params,
        min_capability: ComputeCapability::SM_50,
        shared_layout,
        cluster_dims: None,
    }
}

/// The four unrolls of one (operation, vector width): entries `<prefix>_u1` … `_u8`.
macro_rules! unrolls {
    ($op:expr, $prefix:expr, $vector:literal) => {
        [
            bw(concat!($prefix, "_u1"), $op, $vector, 1),
            bw(concat!($prefix, "_u2"), $op, $vector, 2),
            bw(concat!($prefix, "_u4"), $op, $vector, 4),
            bw(concat!($prefix, "_u8"), $op, $vector, 8),
        ]
    };
}

/// Every vector width and unroll of one operation.
macro_rules! family {
    ($op:expr, $prefix:literal) => {{
        let [a, b, c, d] = unrolls!($op, concat!($prefix, "_v4"), 4);
        let [e, f, g, h] = unrolls!($op, concat!($prefix, "_v8"), 8);
        let [i, j, k, l] = unrolls!($op, concat!($prefix, "_v16"), 16);
        [a, b, c, d, e, f, g, h, i, j, k, l]
    }};
}

static READ_CA: [Kernel; 12] = family!(BandwidthOp::Read(ReadVariant::Ca), "bw_read_ca");
static READ_NC: [Kernel; 12] = family!(BandwidthOp::Read(ReadVariant::Nc), "bw_read_nc");
static READ_CG: [Kernel; 12] = family!(BandwidthOp::Read(ReadVariant::Cg), "bw_read_cg");
// Streaming loads matter for device memory only, where 16-byte accesses are best: one
// width keeps the module small.
static READ_CS: [Kernel; 4] = unrolls!(BandwidthOp::Read(ReadVariant::Cs), "bw_read_cs_v16", 16);
static WRITE: [Kernel; 12] = family!(BandwidthOp::Write, "bw_write");
static COPY: [Kernel; 12] = family!(BandwidthOp::Copy, "bw_copy");
static SHARED_READ: [Kernel; 12] = family!(BandwidthOp::SharedRead, "bw_shared");

/// The module of the bandwidth kernels.
pub fn module() -> &'static Module {
    &BANDWIDTH
}

/// Every bandwidth kernel, by operation (in [`BandwidthOp::ALL`] order), vector width, then
/// unroll.
pub fn kernels() -> impl Iterator<Item = &'static Kernel> + Clone {
    BandwidthOp::ALL
        .into_iter()
        .flat_map(|op| op.family().iter())
}

/// The kernel of this shape, if the catalogue has it (every operation at every width of
/// [`VECTOR_BYTES`] and unroll of [`UNROLLS`], except `ld.global.cs`: 16 bytes only).
pub fn kernel(op: BandwidthOp, vector_bytes: u32, unroll: u32) -> Option<&'static Kernel> {
    op.family().iter().find(|k| {
        matches!(k.kind, KernelKind::Bandwidth(s) if s.vector_bytes == vector_bytes && s.unroll == unroll)
    })
}

/// A module of its own for one bandwidth kernel: the module's header (version, target, the
/// dynamic shared array) and that kernel's entry, cut from the module text. Where a GPU has
/// no cubin of the module ([`Module::cubin`](crate::Module::cubin)), a runner JIT-compiles
/// only the kernels a search visits this way (the driver compiles a whole module at once:
/// all 76 kernels cost some 0.7 s on an H100 without a warm JIT cache). `None` for a kernel
/// of another module.
///
/// ```
/// use pchase_kernels::bandwidth::{self, BandwidthOp};
/// let kernel = bandwidth::kernel(BandwidthOp::Write, 16, 4).unwrap();
/// let ptx = bandwidth::kernel_ptx(kernel).unwrap();
/// assert!(ptx.starts_with("// generated by `cargo xtask ptx`"));
/// assert_eq!(ptx.matches(".entry ").count(), 1);
/// assert!(ptx.contains(".entry bw_write_v16_u4("));
/// ```
pub fn kernel_ptx(kernel: &Kernel) -> Option<String> {
    if !std::ptr::eq(kernel.module, &BANDWIDTH) {
        return None;
    }
    let text = BANDWIDTH.ptx;
    let header_end = text.find("\n.visible .entry ")? + 1;
    let start = text.find(&format!(".visible .entry {}(", kernel.entry))?;
    let end = start + text[start..].find("\n}\n")? + 3;
    Some(format!("{}{}", &text[..header_end], &text[start..end]))
}

/// The shape of a bandwidth kernel (`None` for any other kernel).
pub fn shape_of(kernel: &Kernel) -> Option<BandwidthKernel> {
    match kernel.kind {
        KernelKind::Bandwidth(shape) => Some(shape),
        _ => None,
    }
}
