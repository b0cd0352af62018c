//! The error type of the kernel catalogue.

use crate::{ComputeCapability, LoadPath};

/// What can go wrong when a caller asks the catalogue about a launch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kernel needs a newer GPU than the one it was asked about.
    #[error(
        "kernel `{entry}` needs compute capability {required} or newer, the device has {found}"
    )]
    UnsupportedCapability {
        /// Entry name of the kernel.
        entry: &'static str,
        /// The oldest compute capability the kernel runs on.
        required: ComputeCapability,
        /// The compute capability that was asked about.
        found: ComputeCapability,
    },
    /// The dynamic shared memory a launch would need does not fit in 32 bits
    /// (the launch API takes the byte count as `u32`).
    #[error(
        "kernel `{entry}` with {steps} steps and {shared_chain_elems} shared chain elements \
         needs more than u32::MAX bytes of dynamic shared memory"
    )]
    SharedMemoryOverflow {
        /// Entry name of the kernel.
        entry: &'static str,
        /// Timed steps (or samples) requested.
        steps: u32,
        /// Chain elements requested in shared memory.
        shared_chain_elems: u32,
    },
    /// There is no two-phase kernel for this pair of load paths: the catalogue has one for
    /// every ordered pair of [`catalogue::TWO_PHASE_PATHS`](crate::catalogue::TWO_PHASE_PATHS).
    #[error(
        "no two-phase kernel for the load paths {first} then {second}; \
         both must be one of global_ca, global_nc, texture, constant"
    )]
    NoTwoPhaseKernel {
        /// The path asked for chain A.
        first: LoadPath,
        /// The path asked for chain B.
        second: LoadPath,
    },
    /// An instruction-fetch module of no segment or of more than the most allowed.
    #[error("an instruction-fetch module has 1 to {max} segments, asked for {segments}")]
    CodeSize {
        /// Segments asked for.
        segments: u32,
        /// The most allowed ([`crate::icache::MAX_SEGMENTS`]).
        max: u32,
    },
    /// There is no line-indexed chase for this load path: the catalogue has one for each
    /// of [`catalogue::LINES_PATHS`](crate::catalogue::LINES_PATHS).
    #[error("no line-indexed chase for the load path {path}; it must be global_ca or global_cg")]
    NoLinesKernel {
        /// The path asked for.
        path: LoadPath,
    },
    /// An embedded cubin does not decompress to its recorded image (a damaged build).
    #[error("the embedded sm_{}{} cubin of module `{module}` is damaged: {reason}", capability.major, capability.minor)]
    CorruptCubin {
        /// The module.
        module: &'static str,
        /// The architecture of the cubin.
        capability: ComputeCapability,
        /// What is wrong with it.
        reason: String,
    },
}
