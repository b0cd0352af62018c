//! The few driver entry points this crate calls directly, declared with plain integers.
//!
//! cust 0.3.2's bindings declare attribute and error codes as Rust enums. A code the
//! bindings do not list (an attribute newer than CUDA 11, or an error such as
//! `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` that cust maps to `UnknownError`) cannot be passed
//! or received through such an enum soundly, so these declarations use `c_int`/`c_uint`.
//! They bind the `cuda-shim` crate's raw forwarders, which load the driver at run time and
//! return its codes untouched (`docs/building.md`).

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// `CUresult`.
pub type CuResult = c_uint;
/// `CUdeviceptr`.
pub type DevicePtr = u64;
/// `CUmodule`.
pub type ModuleHandle = *mut c_void;
/// `CUfunction`.
pub type FunctionHandle = *mut c_void;
/// `CUstream`.
pub type StreamHandle = *mut c_void;

/// `CUDA_SUCCESS`.
pub const SUCCESS: CuResult = 0;

/// `CU_JIT_INFO_LOG_BUFFER`.
pub const JIT_INFO_LOG_BUFFER: c_int = 3;
/// `CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES`.
pub const JIT_INFO_LOG_BUFFER_SIZE_BYTES: c_int = 4;
/// `CU_JIT_ERROR_LOG_BUFFER`.
pub const JIT_ERROR_LOG_BUFFER: c_int = 5;
/// `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
pub const JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub const FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: c_int = 8;
/// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`.
pub const FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: c_int = 9;

/// `CU_DEVICE_ATTRIBUTE_*` values used by [`super::CudaBackend`].
#[allow(missing_docs)]
pub mod attr {
    use std::os::raw::c_int;
    pub const MAX_THREADS_PER_BLOCK: c_int = 1;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: c_int = 8;
    pub const WARP_SIZE: c_int = 10;
    pub const MAX_REGISTERS_PER_BLOCK: c_int = 12;
    pub const CLOCK_RATE: c_int = 13;
    pub const MULTIPROCESSOR_COUNT: c_int = 16;
    pub const MEMORY_CLOCK_RATE: c_int = 36;
    pub const GLOBAL_MEMORY_BUS_WIDTH: c_int = 37;
    pub const L2_CACHE_SIZE: c_int = 38;
    pub const MAX_THREADS_PER_MULTIPROCESSOR: c_int = 39;
    pub const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
    pub const COMPUTE_CAPABILITY_MINOR: c_int = 76;
    pub const MAXIMUM_TEXTURE1D_LINEAR_WIDTH: c_int = 69;
    pub const GLOBAL_L1_CACHE_SUPPORTED: c_int = 79;
    pub const MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: c_int = 81;
    pub const MAX_REGISTERS_PER_MULTIPROCESSOR: c_int = 82;
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: c_int = 97;
    pub const MAX_PERSISTING_L2_CACHE_SIZE: c_int = 108;
    pub const RESERVED_SHARED_MEMORY_PER_BLOCK: c_int = 111;
}

/// `CUDA_RESOURCE_DESC` for a linear resource (the union's `linear` member, padded to
/// the union's 128 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ResourceDescLinear {
    /// [`RESOURCE_TYPE_LINEAR`].
    pub res_type: c_int,
    /// Padding to the union's 8-byte alignment.
    pub _pad0: c_int,
    /// Device pointer.
    pub dev_ptr: DevicePtr,
    /// `CUarray_format`: [`AD_FORMAT_UNSIGNED_INT32`].
    pub format: c_int,
    /// Channels.
    pub num_channels: c_uint,
    /// Bytes.
    pub size_in_bytes: usize,
    /// The rest of the union (`int reserved[32]` = 128 bytes in all).
    pub _reserved: [u8; 128 - 24],
    /// Flags (must be 0).
    pub flags: c_uint,
    /// Tail padding to the struct's alignment.
    pub _pad1: c_uint,
}

/// `CUDA_TEXTURE_DESC`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TextureDesc {
    /// `CUaddress_mode` per dimension.
    pub address_mode: [c_int; 3],
    /// `CUfilter_mode`.
    pub filter_mode: c_int,
    /// `CU_TRSF_*` flags.
    pub flags: c_uint,
    /// Maximum anisotropy.
    pub max_anisotropy: c_uint,
    /// Mipmap filter mode.
    pub mipmap_filter_mode: c_int,
    /// Mipmap level bias.
    pub mipmap_level_bias: f32,
    /// Minimum mipmap level clamp.
    pub min_mipmap_level_clamp: f32,
    /// Maximum mipmap level clamp.
    pub max_mipmap_level_clamp: f32,
    /// Border colour.
    pub border_color: [f32; 4],
    /// Reserved.
    pub reserved: [c_int; 12],
}

/// `CU_RESOURCE_TYPE_LINEAR`.
pub const RESOURCE_TYPE_LINEAR: c_int = 0x02;
/// `CU_AD_FORMAT_UNSIGNED_INT32`.
pub const AD_FORMAT_UNSIGNED_INT32: c_int = 0x03;

/// `CU_TRSF_READ_AS_INTEGER`: return the raw integer, not a normalised float.
pub const TRSF_READ_AS_INTEGER: c_uint = 0x01;

/// `CUcontext`.
pub type ContextHandle = *mut c_void;
/// `CUevent`.
pub type EventHandle = *mut c_void;

/// `CU_STREAM_NON_BLOCKING`.
pub const STREAM_NON_BLOCKING: c_uint = 0x1;
/// `CU_EVENT_DEFAULT`.
pub const EVENT_DEFAULT: c_uint = 0x0;

/// `CUmemAllocationProp` (CUDA 10.2 on; the layout a test compares with cust_raw's).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAllocationProp {
    /// `CUmemAllocationType`: [`MEM_ALLOCATION_TYPE_PINNED`].
    pub alloc_type: c_int,
    /// `CUmemAllocationHandleType`: 0, no shareable handle.
    pub requested_handle_types: c_int,
    /// Where the memory lives.
    pub location: MemLocation,
    /// Windows only; null.
    pub win32_handle_meta_data: *mut c_void,
    /// `allocFlags`: compression type, GPUDirect RDMA, usage, reserved; all 0.
    pub alloc_flags: [u8; 8],
}

/// `CUmemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemLocation {
    /// `CUmemLocationType`: [`MEM_LOCATION_TYPE_DEVICE`].
    pub location_type: c_int,
    /// The device ordinal.
    pub id: c_int,
}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAccessDesc {
    /// The device given access.
    pub location: MemLocation,
    /// `CUmemAccess_flags`: [`MEM_ACCESS_FLAGS_PROT_READWRITE`].
    pub flags: c_int,
}

/// `CU_MEM_ALLOCATION_TYPE_PINNED`.
pub const MEM_ALLOCATION_TYPE_PINNED: c_int = 1;
/// `CU_MEM_LOCATION_TYPE_DEVICE`.
pub const MEM_LOCATION_TYPE_DEVICE: c_int = 1;
/// `CU_MEM_ACCESS_FLAGS_PROT_READWRITE`.
pub const MEM_ACCESS_FLAGS_PROT_READWRITE: c_int = 3;
/// `CU_MEM_ALLOC_GRANULARITY_MINIMUM`.
pub const MEM_ALLOC_GRANULARITY_MINIMUM: c_int = 0;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const ERROR_OUT_OF_MEMORY: CuResult = 2;

// The virtual memory management API (`crate::walk`'s chunked regions).
extern "C" {
    #[link_name = "cuda_shim_raw_cuMemGetAllocationGranularity"]
    pub fn cuMemGetAllocationGranularity(
        granularity: *mut usize,
        prop: *const MemAllocationProp,
        option: c_int,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemAddressReserve"]
    pub fn cuMemAddressReserve(
        ptr: *mut DevicePtr,
        size: usize,
        alignment: usize,
        addr: DevicePtr,
        flags: u64,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemAddressFree"]
    pub fn cuMemAddressFree(ptr: DevicePtr, size: usize) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemCreate"]
    pub fn cuMemCreate(
        handle: *mut u64,
        size: usize,
        prop: *const MemAllocationProp,
        flags: u64,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemRelease"]
    pub fn cuMemRelease(handle: u64) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemMap"]
    pub fn cuMemMap(
        ptr: DevicePtr,
        size: usize,
        offset: usize,
        handle: u64,
        flags: u64,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemUnmap"]
    pub fn cuMemUnmap(ptr: DevicePtr, size: usize) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemSetAccess"]
    pub fn cuMemSetAccess(
        ptr: DevicePtr,
        size: usize,
        desc: *const MemAccessDesc,
        count: usize,
    ) -> CuResult;
}

// Every call returns `CUresult` as a plain integer: a code this crate has never heard of
// is a value like any other, not an invalid enum discriminant.
// Defined by the cuda-shim crate under `cuda_shim_raw_<symbol>` (cuda_shim::RAW_PREFIX):
// it forwards each to the driver loaded at run time and returns the driver's code untouched.
extern "C" {
    #[link_name = "cuda_shim_raw_cuInit"]
    pub fn cuInit(flags: c_uint) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDeviceGetCount"]
    pub fn cuDeviceGetCount(count: *mut c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDeviceGet"]
    pub fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDeviceGetName"]
    pub fn cuDeviceGetName(name: *mut c_char, len: c_int, device: c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDeviceTotalMem_v2"]
    pub fn cuDeviceTotalMem(bytes: *mut usize, device: c_int) -> CuResult;
    /// The MIG instance's UUID under MIG, else the GPU's (CUDA 11.4+, driver R470+).
    #[link_name = "cuda_shim_raw_cuDeviceGetUuid_v2"]
    pub fn cuDeviceGetUuid_v2(uuid: *mut [u8; 16], device: c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDeviceGetPCIBusId"]
    pub fn cuDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, device: c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxCreate_v2"]
    pub fn cuCtxCreate(context: *mut ContextHandle, flags: c_uint, device: c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxDestroy_v2"]
    pub fn cuCtxDestroy(context: ContextHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxGetCurrent"]
    pub fn cuCtxGetCurrent(context: *mut ContextHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxSetCurrent"]
    pub fn cuCtxSetCurrent(context: ContextHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxPushCurrent_v2"]
    pub fn cuCtxPushCurrent(context: ContextHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxPopCurrent_v2"]
    pub fn cuCtxPopCurrent(context: *mut ContextHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxSynchronize"]
    pub fn cuCtxSynchronize() -> CuResult;
    #[link_name = "cuda_shim_raw_cuStreamCreate"]
    pub fn cuStreamCreate(stream: *mut StreamHandle, flags: c_uint) -> CuResult;
    #[link_name = "cuda_shim_raw_cuStreamSynchronize"]
    pub fn cuStreamSynchronize(stream: StreamHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuStreamDestroy_v2"]
    pub fn cuStreamDestroy(stream: StreamHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuEventCreate"]
    pub fn cuEventCreate(event: *mut EventHandle, flags: c_uint) -> CuResult;
    #[link_name = "cuda_shim_raw_cuEventRecord"]
    pub fn cuEventRecord(event: EventHandle, stream: StreamHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuEventElapsedTime"]
    pub fn cuEventElapsedTime(ms: *mut f32, start: EventHandle, end: EventHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuEventDestroy_v2"]
    pub fn cuEventDestroy(event: EventHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemAlloc_v2"]
    pub fn cuMemAlloc(ptr: *mut DevicePtr, bytes: usize) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemFree_v2"]
    pub fn cuMemFree(ptr: DevicePtr) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemsetD8_v2"]
    pub fn cuMemsetD8(ptr: DevicePtr, value: u8, count: usize) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemsetD32Async"]
    pub fn cuMemsetD32Async(
        ptr: DevicePtr,
        value: c_uint,
        count: usize,
        stream: StreamHandle,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemcpyHtoDAsync_v2"]
    pub fn cuMemcpyHtoDAsync(
        dst: DevicePtr,
        src: *const c_void,
        bytes: usize,
        stream: StreamHandle,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemcpyHtoD_v2"]
    pub fn cuMemcpyHtoD(dst: DevicePtr, src: *const c_void, bytes: usize) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemcpyDtoH_v2"]
    pub fn cuMemcpyDtoH(dst: *mut c_void, src: DevicePtr, bytes: usize) -> CuResult;
    #[link_name = "cuda_shim_raw_cuGetErrorName"]
    pub fn cuGetErrorName(error: CuResult, name: *mut *const c_char) -> CuResult;
    #[link_name = "cuda_shim_raw_cuGetErrorString"]
    pub fn cuGetErrorString(error: CuResult, text: *mut *const c_char) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDriverGetVersion"]
    pub fn cuDriverGetVersion(version: *mut c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDeviceGetAttribute"]
    pub fn cuDeviceGetAttribute(value: *mut c_int, attribute: c_int, device: c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuModuleLoadDataEx"]
    pub fn cuModuleLoadDataEx(
        module: *mut ModuleHandle,
        image: *const c_void,
        num_options: c_uint,
        options: *mut c_int,
        option_values: *mut *mut c_void,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuModuleUnload"]
    pub fn cuModuleUnload(module: ModuleHandle) -> CuResult;
    #[link_name = "cuda_shim_raw_cuModuleGetFunction"]
    pub fn cuModuleGetFunction(
        function: *mut FunctionHandle,
        module: ModuleHandle,
        name: *const c_char,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuModuleGetGlobal_v2"]
    pub fn cuModuleGetGlobal(
        ptr: *mut DevicePtr,
        bytes: *mut usize,
        module: ModuleHandle,
        name: *const c_char,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuFuncSetAttribute"]
    pub fn cuFuncSetAttribute(function: FunctionHandle, attribute: c_int, value: c_int)
        -> CuResult;
    #[allow(clippy::too_many_arguments)]
    #[link_name = "cuda_shim_raw_cuLaunchKernel"]
    pub fn cuLaunchKernel(
        function: FunctionHandle,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_bytes: c_uint,
        stream: StreamHandle,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemcpyDtoD_v2"]
    pub fn cuMemcpyDtoD(dst: DevicePtr, src: DevicePtr, bytes: usize) -> CuResult;
    #[link_name = "cuda_shim_raw_cuTexObjectCreate"]
    pub fn cuTexObjectCreate(
        texture: *mut u64,
        resource: *const ResourceDescLinear,
        texture_desc: *const TextureDesc,
        view: *const c_void,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuTexObjectDestroy"]
    pub fn cuTexObjectDestroy(texture: u64) -> CuResult;
}
