//! Facts about a device that its API reports (or a simulation profile states).

use serde::{Deserialize, Serialize};

use crate::error::RunnerError;

/// A compute capability, e.g. 9.0 for Hopper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ComputeCapability {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl From<ComputeCapability> for pchase_kernels::ComputeCapability {
    fn from(cc: ComputeCapability) -> Self {
        pchase_kernels::ComputeCapability::new(cc.major, cc.minor)
    }
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Device facts from the driver API; `None` where the driver did not report one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Ordinal of the device on its machine.
    pub ordinal: u32,
    /// Compute capability.
    pub compute_capability: ComputeCapability,
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// The nominal (maximum) SM clock in kHz.
    pub sm_clock_khz: Option<u32>,
    /// The memory clock in kHz.
    pub memory_clock_khz: Option<u32>,
    /// Memory bus width in bits.
    pub memory_bus_width_bits: Option<u32>,
    /// Total device memory in bytes.
    pub total_memory_bytes: u64,
    /// L2 size in bytes.
    pub l2_bytes: u64,
    /// Maximum persisting-L2 size in bytes.
    pub persisting_l2_max_bytes: Option<u64>,
    /// Shared memory per SM in bytes.
    pub shared_per_sm_bytes: u64,
    /// Shared memory per block without opt-in, in bytes.
    pub shared_per_block_bytes: u64,
    /// Shared memory per block with opt-in (the largest dynamic allocation), in bytes.
    pub shared_per_block_optin_bytes: u64,
    /// Shared memory the system reserves per block, in bytes.
    pub reserved_shared_per_block_bytes: Option<u64>,
    /// 32-bit registers per SM.
    pub registers_per_sm: Option<u32>,
    /// 32-bit registers per block.
    pub registers_per_block: Option<u32>,
    /// Maximum threads per block.
    pub max_threads_per_block: u32,
    /// Maximum threads per SM.
    pub max_threads_per_sm: Option<u32>,
    /// Warp size.
    pub warp_size: u32,
    /// Whether L1 caches global loads, as the driver reports it.
    pub global_l1_cache_supported: Option<bool>,
    /// Driver version as the driver reports it (e.g. 13000 for 13.0).
    pub driver_version: Option<u32>,
}

impl DeviceInfo {
    /// Refuses `kernel` on a GPU below its compute capability, as the driver would refuse
    /// to load it: [`RunnerError::Unsupported`] naming what it needs and what the GPU has.
    pub(crate) fn check_kernel(&self, kernel: &pchase_kernels::Kernel) -> Result<(), RunnerError> {
        kernel
            .check_supported(self.compute_capability.into())
            .map_err(|_| RunnerError::Unsupported {
                kernel: kernel.entry(),
                needed: kernel.min_capability().to_string(),
                found: self.compute_capability.to_string(),
            })
    }
}
