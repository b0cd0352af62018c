//! The runner's error types: [`RunnerError`], and [`VmmError`] for the chunked walk
//! regions of [`crate::walk`], which it wraps.

use thiserror::Error;

/// What can go wrong while running benchmarks.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RunnerError {
    /// No CUDA driver could be loaded or initialised.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// The driver works but reports no GPU.
    #[error("no CUDA-capable GPU found")]
    NoDevice,
    /// The device is taken: an exclusive-process GPU that another process holds
    /// (`CUDA_ERROR_DEVICE_UNAVAILABLE`), or another memtopo measures it.
    #[error("the GPU is busy: {0}")]
    DeviceBusy(String),
    /// The device index is out of range.
    #[error("device {index} does not exist: this machine has {count} CUDA device(s)")]
    BadDeviceIndex {
        /// The index asked for.
        index: u32,
        /// How many devices there are.
        count: u32,
    },
    /// A PTX module failed to load (JIT-compile); `log` is the driver's JIT error log.
    #[error("PTX module `{module}` failed to load: {reason}{}", if log.is_empty() { String::new() } else { format!("\nJIT log:\n{log}") })]
    ModuleLoad {
        /// The catalogue's module name.
        module: &'static str,
        /// The driver's error.
        reason: String,
        /// The JIT compiler's error log.
        log: String,
    },
    /// A kernel needs a newer GPU than this one.
    #[error("kernel `{kernel}` needs compute capability {needed}, the device has {found}")]
    Unsupported {
        /// The kernel's entry name.
        kernel: &'static str,
        /// Minimum compute capability.
        needed: String,
        /// The device's.
        found: String,
    },
    /// A request that cannot be run as asked (sizes, strides, limits).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A CUDA driver call failed.
    #[error("CUDA call {call} failed: {message}")]
    Cuda {
        /// Which call.
        call: &'static str,
        /// The driver's message.
        message: String,
    },
    /// A kernel produced a result that contradicts the chain it was given.
    #[error("chase check failed: {0}")]
    WrongResult(String),
    /// Building or releasing a chunked walk region through the driver's virtual memory
    /// management API failed (`crate::walk`).
    #[error("virtual memory management: {0}")]
    Vmm(#[from] VmmError),
    /// A simulation profile is malformed.
    #[error("simulation profile: {0}")]
    Profile(String),
}

/// Why a chunked region could not be built or released: one variant per driver call of
/// the virtual memory management API, each with the driver's message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum VmmError {
    /// `cuMemGetAllocationGranularity` failed.
    #[error("cuMemGetAllocationGranularity failed: {0}")]
    Granularity(String),
    /// The driver's granularity is unusable (zero, not a power of two, or above 1 GiB).
    #[error("the driver reported an allocation granularity of {0} B")]
    BadGranularity(u64),
    /// `cuMemAddressReserve` failed.
    #[error("cuMemAddressReserve of {bytes} B failed: {message}")]
    Reserve {
        /// The range asked for.
        bytes: u64,
        /// The driver's message.
        message: String,
    },
    /// `cuMemCreate` of one chunk failed (e.g. out of memory).
    #[error("cuMemCreate of chunk {chunk} of {chunks} failed: {message}")]
    Create {
        /// The chunk (from 0).
        chunk: u64,
        /// Chunks wanted.
        chunks: u64,
        /// The driver's message.
        message: String,
    },
    /// `cuMemMap` of one chunk failed.
    #[error("cuMemMap of chunk {chunk} at offset {offset} B failed: {message}")]
    Map {
        /// The physical chunk.
        chunk: u64,
        /// Its place in the reserved range.
        offset: u64,
        /// The driver's message.
        message: String,
    },
    /// `cuMemSetAccess` over the range failed.
    #[error("cuMemSetAccess over {bytes} B failed: {message}")]
    SetAccess {
        /// The range.
        bytes: u64,
        /// The driver's message.
        message: String,
    },
    /// `cuMemUnmap`, `cuMemRelease` or `cuMemAddressFree` failed while tearing down.
    #[error("{call} failed while releasing the chunked region: {message}")]
    Release {
        /// The call.
        call: &'static str,
        /// The driver's message.
        message: String,
    },
}
