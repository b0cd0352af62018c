//! The runner's error type.

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
    Vmm(#[from] crate::walk::VmmError),
    /// A simulation profile is malformed.
    #[error("simulation profile: {0}")]
    Profile(String),
}
