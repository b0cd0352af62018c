//! Runs pointer-chase micro-benchmarks on a GPU — a real one through CUDA, or a
//! simulated one whose truth is known — and searches over array sizes.
//!
//! The [`Backend`] trait is the boundary: `cuda::CudaBackend` (feature `cuda`, on by
//! default) owns a CUDA context through `cust`; [`sim::SimBackend`] executes the same
//! requests against a cache model configured by a TOML profile. Everything above the trait
//! is generic and tested on the simulated GPU.
//!
//! ```
//! use pchase_runner::{Backend, ChainSpec, ChaseRequest, LoadPath};
//! # fn main() -> Result<(), pchase_runner::RunnerError> {
//! let chain = ChainSpec::new(4096, 64)?;
//! assert_eq!(chain.nodes(), 64);
//! let request = ChaseRequest::fine(LoadPath::GlobalCa, chain, 128);
//! assert_eq!(request.warmup_steps, 64);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod backend;
pub mod bandwidth;
mod chain;
pub mod cluster;
pub mod copy;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod error;
pub mod host;
pub mod icache;
pub mod measure;
pub mod peer;
pub mod sim;
pub mod walk;

pub use backend::{
    Backend, BlockSamples, Carveout, ChainSpec, ChaseMode, ChaseRequest, ChaseRun,
    ListChaseRequest, LoadPath, PartitionMapRequest, PartitionMapRun, Phase, PinnedRequest,
    PinnedRun, PinnedSlot, ProbeArg, ProbeLaunch, ProbeModel, ProbeRun, SimulatedGpu,
    SimulatedProbe, SmLineLatencies, TwoPhaseRequest, PINNED_MAX_SAMPLES,
};
pub use device::{ComputeCapability, DeviceInfo};
pub use error::RunnerError;
