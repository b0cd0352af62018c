//! What the API says about the device.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Only for doc links: the JSON schema's descriptions are these doc comments, so a link
// keeps its short form there and resolves through this import.
#[cfg(doc)]
use crate::quantity::Conditions;
use crate::units::{Bytes, Megahertz};

/// A CUDA compute capability, e.g. 9.0.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct ComputeCapability {
    /// The major version (the architecture generation).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl ComputeCapability {
    /// A compute capability.
    pub const fn new(major: u32, minor: u32) -> Self {
        ComputeCapability { major, minor }
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Limits reported by the API. All optional: a simulated device may not have them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    /// Shared memory per SM, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_per_sm_bytes: Option<Bytes>,
    /// Shared memory a block may use without opting in, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_per_block_bytes: Option<Bytes>,
    /// Shared memory a block may use after opting in, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_per_block_optin_bytes: Option<Bytes>,
    /// Shared memory the system reserves per block, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_shared_memory_per_block_bytes: Option<Bytes>,
    /// Total constant memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_constant_memory_bytes: Option<Bytes>,
    /// The largest persisting-L2 set-aside, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persisting_l2_max_bytes: Option<Bytes>,
    /// 32-bit registers per SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers_per_sm: Option<u32>,
    /// 32-bit registers per block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers_per_block: Option<u32>,
    /// Threads per SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads_per_sm: Option<u32>,
    /// Threads per block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_threads_per_block: Option<u32>,
    /// Resident blocks per SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_blocks_per_sm: Option<u32>,
    /// Threads per warp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warp_size: Option<u32>,
}

/// What the API says about the device. Every value here has provenance `api`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeviceInfo {
    /// The marketing name, e.g. `"NVIDIA H200"`.
    pub name: String,
    /// The compute capability.
    pub compute_capability: ComputeCapability,
    /// The number of streaming multiprocessors.
    pub sm_count: u32,
    /// CUDA cores per SM, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_per_sm: Option<u32>,
    /// The nominal (boost) SM clock in MHz. Nanoseconds use the *measured* clock
    /// of [`Conditions::sm_clock_mhz`] and fall back to this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<Megahertz>,
    /// The memory clock in MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_mhz: Option<Megahertz>,
    /// Device memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<Bytes>,
    /// The memory bus width in bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus_width_bits: Option<u32>,
    /// The L2 size the API reports, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_bytes: Option<Bytes>,
    /// The kernel driver release, e.g. `"550.54.15"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// `cudaDriverGetVersion`, e.g. 12020 for CUDA 12.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_api_version: Option<u32>,
    /// `cudaRuntimeGetVersion`, e.g. 12020.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_runtime_version: Option<u32>,
    /// Per-SM and per-block limits.
    #[serde(default)]
    pub limits: Limits,
}

impl DeviceInfo {
    /// Device information with the three values every topology needs; the rest
    /// start empty and are set field by field.
    pub fn new(
        name: impl Into<String>,
        compute_capability: ComputeCapability,
        sm_count: u32,
    ) -> Self {
        DeviceInfo {
            name: name.into(),
            compute_capability,
            sm_count,
            cores_per_sm: None,
            sm_clock_mhz: None,
            memory_clock_mhz: None,
            memory_bytes: None,
            memory_bus_width_bits: None,
            l2_bytes: None,
            driver_version: None,
            cuda_driver_api_version: None,
            cuda_runtime_version: None,
            limits: Limits::default(),
        }
    }
}
