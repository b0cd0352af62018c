//! The probes: small kernels of one benchmark each, in module `probes`, launched through the
//! runner's generic probe request (`pchase_runner::ProbeLaunch`) rather than a request type of
//! their own.
//!
//! A probe is declared here once — its entry name, parameters and the oldest compute
//! capability it runs on — and its PTX body is written by its template in `cargo xtask ptx`
//! (`xtask/src/ptx/probes.rs`), which finds the template by the entry name. The module is
//! loaded when a probe is first launched ([`Module::loaded_on_demand`]), so a benchmark that
//! does not run costs no JIT time. Adding a probe adds one `static` and one line of
//! `KERNELS` here; `docs/architecture.md` ("Adding a benchmark") walks through it.
//!
//! ```
//! use pchase_kernels::{catalogue, probes, KernelKind};
//! for kernel in probes::kernels() {
//!     assert_eq!(kernel.kind(), KernelKind::Probe);
//!     assert!(std::ptr::eq(kernel.module(), probes::module()));
//!     let found = catalogue::kernel_by_entry(kernel.entry()).expect("in the catalogue");
//!     assert!(std::ptr::eq(found, kernel));
//! }
//! ```

use crate::kernel::{param, Kernel, KernelKind, Module, ParamType, SharedLayout};
use crate::{ComputeCapability, PtxIsaVersion};

/// Module `probes`: one small kernel per benchmark that keeps no request type of its own.
pub(crate) static PROBES: Module = Module {
    name: "probes",
    file_name: "probes.ptx",
    ptx: include_str!("../../../ptx/probes.ptx"),
    // ISA 7.0 is what CUDA 11.0 drivers JIT; a probe that needs a newer GPU says so in its
    // own `min_capability`.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_50,
    min_driver_version: 11000,
    on_demand: true,
    description: "small kernels of one benchmark each, launched through the generic probe request",
};

/// `shared_bank_conflicts`: one warp, each thread a dependent chain of loads from its own
/// word of shared memory, the words `stride_bytes` apart, timed as a whole by `%clock64`; the
/// shared-memory bank conflicts benchmark (`shared-banks`).
pub static SHARED_BANK_CONFLICTS: Kernel = Kernel {
    module: &PROBES,
    entry: "shared_bank_conflicts",
    kind: KernelKind::Probe,
    params: &[
        param(
            "out",
            ParamType::U64,
            "global pointer to u32[2 + threads]: the cycles of the timed loads (u64, thread 0), then each thread's final byte offset",
        ),
        param(
            "stride_bytes",
            ParamType::U32,
            "bytes between the words of consecutive threads (0: one word for all), a multiple of 4",
        ),
        param(
            "loads",
            ParamType::U32,
            "timed loads per thread, a positive multiple of 8",
        ),
    ],
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::Buffer,
    cluster_dims: None,
};

/// `gpc_contention`: one block per SM (the launch reserves an SM's whole shared memory),
/// each taking its role from `control` by its `%smid`; the active blocks meet at a barrier,
/// then every thread streams 16-byte L2 hits (`ld.global.cg.v4`) from `data` for
/// `warm_ns + window_ns + warm_ns` of `%globaltimer` and counts the loads of the window. Blocks
/// of one GPC share its port to the crossbar, so an SM's count falls when other SMs of its
/// GPC stream beside it; the GPC-map benchmark (`gpc-map`) places the SMs cluster placement
/// leaves over by it. Compute capability 9.0: only there does cluster placement leave SMs
/// over for it to place.
pub static GPC_CONTENTION: Kernel = Kernel {
    module: &PROBES,
    entry: "gpc_contention",
    kind: KernelKind::Probe,
    params: &[
        param(
            "control",
            ParamType::U64,
            "global pointer to u32[3 sms + 2]: each SM's role (0 idle, 1 streams), each SM's claim (0 before), the blocks at the barrier, the barrier's timeout flag, then each SM's 16-byte loads in the window (out)",
        ),
        param(
            "data",
            ParamType::U64,
            "global pointer to the L2-resident bytes streamed, (data_mask + 1) × 16 of them",
        ),
        param(
            "data_mask",
            ParamType::U32,
            "16-byte vectors in data, less one; a power of two less one",
        ),
        param("sms", ParamType::U32, "the SM count (the length of each part of control)"),
        param("active", ParamType::U32, "blocks that must meet at the barrier (SMs of role 1)"),
        param("warm_ns", ParamType::U32, "nanoseconds streamed before the window and after it"),
        param("window_ns", ParamType::U32, "nanoseconds of the counted window"),
    ],
    min_capability: ComputeCapability::SM_90,
    shared_layout: SharedLayout::Buffer,
    cluster_dims: None,
};

/// `l2_ways`: the first block on SM `sm` claims it (`atom.cas` on `out[0]`; every other
/// block leaves), so one block of the launch runs, there. In mode 0, `rounds` times: thread 0
/// loads the target line, then the block's threads load every line of `lines` once
/// (`ld.global.cg`, the list itself read `ld.global.cs` so that it crowds no set), then
/// thread 0 times a reload of the target with `%clock64`; a miss means the lines evicted
/// it. The reload's address depends on the target's first load through `zero`, so the two
/// cannot be merged into one. In mode 1 thread 0 times the first load of each listed line in
/// turn (after other lines flushed them: a miss through the line's home partition). The
/// L2-ways benchmark (`l2-ways`) reduces a set of lines that evicts a target to a minimal one
/// with it.
pub static L2_WAYS: Kernel = Kernel {
    module: &PROBES,
    entry: "l2_ways",
    kind: KernelKind::Probe,
    params: &[
        param(
            "out",
            ParamType::U64,
            "global pointer to u32[2 + n] (0 before): the claim, the SM that ran, then the cycles of each timed load (mode 0: the reloads, n = rounds; mode 1: the lines' loads, n = count)",
        ),
        param(
            "data",
            ParamType::U64,
            "global pointer to the lines' memory: line i at i × line_bytes",
        ),
        param(
            "lines",
            ParamType::U64,
            "global pointer to u32[count]: the line numbers to load (mode 0) or time (mode 1)",
        ),
        param("count", ParamType::U32, "lines in `lines`"),
        param("target", ParamType::U32, "mode 0: the target's line number"),
        param("line_bytes", ParamType::U32, "bytes per line"),
        param("sm", ParamType::U32, "the SM (`%smid`) that runs the block"),
        param("mode", ParamType::U32, "0: evict the target; 1: time each line's load"),
        param("rounds", ParamType::U32, "mode 0: target, lines and timed reload, this many times"),
        param("zero", ParamType::U32, "0: ties the target's reload to its first load"),
    ],
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::Buffer,
    cluster_dims: None,
};

/// Every probe, in the order `cargo xtask ptx` writes them.
static KERNELS: &[&Kernel] = &[&SHARED_BANK_CONFLICTS, &GPC_CONTENTION, &L2_WAYS];

/// The module of the probes.
pub fn module() -> &'static Module {
    &PROBES
}

/// Every probe kernel.
pub fn kernels() -> impl Iterator<Item = &'static Kernel> + Clone {
    KERNELS.iter().copied()
}
