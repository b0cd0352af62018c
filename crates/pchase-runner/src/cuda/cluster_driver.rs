//! The driver calls of cluster launches, which cust 0.3.2's bindings (CUDA 11) lack:
//! `cuLaunchKernelEx` and `cuOccupancyMaxActiveClusters` (CUDA 12.0). They are looked up at
//! run time through `cuGetProcAddress`, which the shim forwards (`docs/building.md`), and
//! declared here with the driver's layouts and plain integers, as `ffi` does for the rest.

use std::{
    ffi::{c_void, CString},
    os::raw::{c_char, c_int},
    ptr,
};

use super::{
    driver::{arg_pointers, check, Arg, LoadedFunction},
    ffi::{CuResult, FunctionHandle, StreamHandle},
};
use crate::error::RunnerError;

extern "C" {
    #[link_name = "cuda_shim_raw_cuGetProcAddress"]
    fn cuGetProcAddress(
        symbol: *const c_char,
        pfn: *mut *mut c_void,
        cuda_version: c_int,
        flags: u64,
    ) -> CuResult;
}

/// `CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`.
pub const FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: c_int = 14;

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
const LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: u32 = 4;

/// The CUDA version whose ABI of the looked-up functions we declare (12.0).
const PROC_VERSION: c_int = 12000;

/// `CUlaunchAttribute`: the id, padding to 8 bytes, a 64-byte value union (here the cluster
/// dimension in its first three words).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct LaunchAttribute {
    id: u32,
    _pad: u32,
    value: [u32; 16],
}

/// `CUlaunchConfig`.
#[repr(C)]
#[derive(Debug)]
pub struct LaunchConfig {
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    stream: StreamHandle,
    attrs: *mut LaunchAttribute,
    num_attrs: u32,
}

type LaunchKernelEx = unsafe extern "C" fn(
    config: *const LaunchConfig,
    f: FunctionHandle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult;

type OccupancyMaxActiveClusters = unsafe extern "C" fn(
    clusters: *mut c_int,
    f: FunctionHandle,
    config: *const LaunchConfig,
) -> CuResult;

/// The driver's function `name`, as of CUDA 12.0's ABI.
pub(super) fn proc_address(name: &'static str) -> Result<*mut c_void, RunnerError> {
    let symbol = CString::new(name).expect("entry point names have no NUL");
    let mut pfn: *mut c_void = ptr::null_mut();
    // SAFETY: valid NUL-terminated name and out-pointer; flags 0 is CU_GET_PROC_ADDRESS_DEFAULT.
    check("cuGetProcAddress", unsafe {
        cuGetProcAddress(symbol.as_ptr(), &mut pfn, PROC_VERSION, 0)
    })?;
    if pfn.is_null() {
        return Err(RunnerError::Cuda {
            call: "cuGetProcAddress",
            message: format!("the driver has no `{name}` (it needs CUDA 12.0 or newer)"),
        });
    }
    Ok(pfn)
}

/// One cluster launch's shape: `clusters` clusters of `cluster_size` blocks in x.
#[derive(Debug, Clone, Copy)]
pub struct ClusterShape {
    /// Blocks per cluster.
    pub cluster_size: u32,
    /// Clusters in the grid.
    pub clusters: u32,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block.
    pub shared_bytes: u32,
}

impl ClusterShape {
    fn attribute(&self) -> LaunchAttribute {
        let mut value = [0u32; 16];
        value[0] = self.cluster_size;
        value[1] = 1;
        value[2] = 1;
        LaunchAttribute {
            id: LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            _pad: 0,
            value,
        }
    }

    fn config(&self, stream: StreamHandle, attribute: &mut LaunchAttribute) -> LaunchConfig {
        LaunchConfig {
            grid: [self.cluster_size * self.clusters, 1, 1],
            block: [self.threads, 1, 1],
            shared_bytes: self.shared_bytes,
            stream,
            attrs: attribute,
            num_attrs: 1,
        }
    }
}

/// Allows cluster sizes above the portable 8 for `function` where the device does; a
/// device that does not answers with an error, which the caller treats as "8 at most".
pub fn allow_non_portable(function: &LoadedFunction) -> Result<(), RunnerError> {
    function.set_attribute(FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
}

/// How many clusters of `shape.cluster_size` blocks can be resident at once.
pub fn max_active_clusters(
    function: &LoadedFunction,
    shape: ClusterShape,
    stream: StreamHandle,
) -> Result<u32, RunnerError> {
    let pfn = proc_address("cuOccupancyMaxActiveClusters")?;
    // SAFETY: the driver's cuOccupancyMaxActiveClusters has this signature (CUDA 12.0).
    let occupancy: OccupancyMaxActiveClusters = unsafe { std::mem::transmute(pfn) };
    let mut attribute = shape.attribute();
    let config = shape.config(stream, &mut attribute);
    let mut clusters: c_int = 0;
    // SAFETY: the config and its attribute live across the call and have the driver's layout
    // (checked by the size test).
    check("cuOccupancyMaxActiveClusters", unsafe {
        occupancy(&mut clusters, function.handle(), &config)
    })?;
    Ok(u32::try_from(clusters).unwrap_or(0))
}

/// Launches `function` with `args` (by name, checked against the catalogue) in clusters.
pub fn launch_clusters(
    function: &LoadedFunction,
    shape: ClusterShape,
    stream: StreamHandle,
    args: &[(&str, Arg)],
) -> Result<(), RunnerError> {
    let pfn = proc_address("cuLaunchKernelEx")?;
    // SAFETY: the driver's cuLaunchKernelEx has this signature (CUDA 12.0).
    let launch: LaunchKernelEx = unsafe { std::mem::transmute(pfn) };
    let mut ordered = function.ordered(args)?;
    let mut pointers = arg_pointers(&mut ordered);
    let mut attribute = shape.attribute();
    let config = shape.config(stream, &mut attribute);
    // SAFETY: each pointer refers to a value of the type the PTX declares, in order; the
    // config, its attribute and the arguments outlive the call.
    check("cuLaunchKernelEx", unsafe {
        launch(
            &config,
            function.handle(),
            pointers.as_mut_ptr(),
            ptr::null_mut(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_have_the_driver_layout() {
        // sizeof(CUlaunchAttribute) and sizeof(CUlaunchConfig) in CUDA 12's cuda.h (x86-64).
        assert_eq!(std::mem::size_of::<LaunchAttribute>(), 72);
        assert_eq!(std::mem::align_of::<LaunchAttribute>(), 8);
        assert_eq!(std::mem::size_of::<LaunchConfig>(), 56);
        assert_eq!(std::mem::offset_of!(LaunchConfig, stream), 32);
        assert_eq!(std::mem::offset_of!(LaunchConfig, num_attrs), 48);
        assert_eq!(std::mem::offset_of!(LaunchAttribute, value), 8);
    }

    #[test]
    fn the_cluster_attribute_carries_the_shape() {
        let shape = ClusterShape {
            cluster_size: 4,
            clusters: 3,
            threads: 32,
            shared_bytes: 0,
        };
        let mut attribute = shape.attribute();
        assert_eq!(attribute.id, 4);
        assert_eq!(&attribute.value[..3], &[4, 1, 1]);
        let config = shape.config(ptr::null_mut(), &mut attribute);
        assert_eq!(config.grid, [12, 1, 1]);
        assert_eq!(config.num_attrs, 1);
    }
}
