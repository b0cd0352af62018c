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

/// Every probe, in the order `cargo xtask ptx` writes them.
static KERNELS: &[&Kernel] = &[&SHARED_BANK_CONFLICTS];

/// The module of the probes.
pub fn module() -> &'static Module {
    &PROBES
}

/// Every probe kernel.
pub fn kernels() -> impl Iterator<Item = &'static Kernel> + Clone {
    KERNELS.iter().copied()
}
