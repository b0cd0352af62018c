//! Who a CUDA device is (read without a context) and the facts it reports.

use std::os::raw::c_int;

use super::{driver, ffi, handles, CudaBackend};
use crate::{
    device::{ComputeCapability, DeviceInfo},
    error::RunnerError,
};

/// Who a CUDA device is, read without creating a context (so before any other memtopo
/// or a busy-GPU check could be disturbed by this one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// The ordinal asked for.
    pub ordinal: u32,
    /// The device's name.
    pub name: String,
    /// The UUID's 16 bytes as `GPU-…` (NVML's spelling), if the driver reports it.
    pub uuid: Option<String>,
    /// The PCI bus id, `0000:65:00.0`, if the driver reports it.
    pub pci_bus_id: Option<String>,
    /// The driver's CUDA version, e.g. 12080.
    pub cuda_driver_version: Option<u32>,
}

/// Device `ordinal` after checking that it exists (the driver initialised first).
pub(super) fn checked_device(ordinal: u32) -> Result<c_int, RunnerError> {
    let count = CudaBackend::device_count()?;
    if ordinal >= count {
        return Err(RunnerError::BadDeviceIndex {
            index: ordinal,
            count,
        });
    }
    handles::device(ordinal)
}

/// Finds device `ordinal` and reads its identity; creates no context.
///
/// # Errors
/// No driver, no device, or a bad index.
pub fn identify(ordinal: u32) -> Result<DeviceIdentity, RunnerError> {
    let device = checked_device(ordinal)?;
    Ok(DeviceIdentity {
        ordinal,
        name: handles::device_name(device)?,
        uuid: handles::device_uuid(device)
            .map(|b| handles::format_uuid("GPU", &b))
            .map_err(|e| log::warn!("no GPU UUID: {e}"))
            .ok(),
        pci_bus_id: handles::device_pci_bus_id(device)
            .map_err(|e| log::warn!("no PCI bus id: {e}"))
            .ok(),
        cuda_driver_version: driver::driver_version().ok(),
    })
}

/// Reads the device's facts through the driver API.
pub(super) fn query_device(ordinal: u32, device: c_int) -> Result<DeviceInfo, RunnerError> {
    let attr = |a: c_int| driver::device_attribute(device, a);
    let opt = |a: c_int| attr(a).ok().and_then(|v| u32::try_from(v).ok());
    let bytes = |a: c_int| attr(a).map(|v| v.max(0) as u64);
    Ok(DeviceInfo {
        name: handles::device_name(device)?,
        ordinal,
        compute_capability: ComputeCapability {
            major: attr(ffi::attr::COMPUTE_CAPABILITY_MAJOR)? as u32,
            minor: attr(ffi::attr::COMPUTE_CAPABILITY_MINOR)? as u32,
        },
        sm_count: attr(ffi::attr::MULTIPROCESSOR_COUNT)? as u32,
        sm_clock_khz: opt(ffi::attr::CLOCK_RATE),
        memory_clock_khz: opt(ffi::attr::MEMORY_CLOCK_RATE),
        memory_bus_width_bits: opt(ffi::attr::GLOBAL_MEMORY_BUS_WIDTH),
        total_memory_bytes: handles::device_total_memory(device)?,
        l2_bytes: bytes(ffi::attr::L2_CACHE_SIZE)?,
        persisting_l2_max_bytes: opt(ffi::attr::MAX_PERSISTING_L2_CACHE_SIZE).map(u64::from),
        shared_per_sm_bytes: bytes(ffi::attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        shared_per_block_bytes: bytes(ffi::attr::MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_per_block_optin_bytes: bytes(ffi::attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        reserved_shared_per_block_bytes: opt(ffi::attr::RESERVED_SHARED_MEMORY_PER_BLOCK)
            .map(u64::from),
        registers_per_sm: opt(ffi::attr::MAX_REGISTERS_PER_MULTIPROCESSOR),
        registers_per_block: opt(ffi::attr::MAX_REGISTERS_PER_BLOCK),
        max_threads_per_block: attr(ffi::attr::MAX_THREADS_PER_BLOCK)? as u32,
        max_threads_per_sm: opt(ffi::attr::MAX_THREADS_PER_MULTIPROCESSOR),
        warp_size: attr(ffi::attr::WARP_SIZE)? as u32,
        global_l1_cache_supported: opt(ffi::attr::GLOBAL_L1_CACHE_SUPPORTED).map(|v| v != 0),
        driver_version: driver::driver_version().ok(),
    })
}
