//! Owned driver objects (context, stream, event, device buffer) and the device queries,
//! all through [`super::ffi`]'s integer-typed declarations instead of cust's, whose
//! enum-typed `CUresult` cannot receive a code it does not list (see
//! [`super::errors`]). Each object is released on drop; a failure then is logged.

use std::{
    ffi::{c_void, CStr},
    marker::PhantomData,
    os::raw::{c_char, c_int},
    ptr,
    time::Duration,
};

use super::{
    driver::check,
    errors,
    ffi::{self, ContextHandle, DevicePtr, EventHandle, StreamHandle},
};
use crate::error::RunnerError;

/// `CUDA_ERROR_NO_DEVICE`.
const NO_DEVICE: ffi::CuResult = 100;
/// `CUDA_ERROR_DEVICE_UNAVAILABLE`.
const DEVICE_UNAVAILABLE: ffi::CuResult = 46;

/// Loads and initialises the driver; "no driver" (the library cannot be loaded:
/// `cuda-shim` says why), "no GPU" and "device unavailable" are told apart from other
/// failures.
pub fn init() -> Result<(), RunnerError> {
    cuda_shim::load().map_err(|e| RunnerError::NoDriver(e.to_string()))?;
    // SAFETY: no pointers.
    match unsafe { ffi::cuInit(0) } {
        ffi::SUCCESS => Ok(()),
        NO_DEVICE => Err(RunnerError::NoDevice),
        DEVICE_UNAVAILABLE => Err(RunnerError::DeviceBusy(errors::describe(
            DEVICE_UNAVAILABLE,
        ))),
        code => Err(RunnerError::NoDriver(errors::describe(code))),
    }
}

/// How many devices the driver sees.
pub fn device_count() -> Result<u32, RunnerError> {
    let mut count = 0;
    // SAFETY: valid out-pointer.
    check("cuDeviceGetCount", unsafe {
        ffi::cuDeviceGetCount(&mut count)
    })?;
    Ok(u32::try_from(count).unwrap_or(0))
}

/// The device handle of `ordinal`.
pub fn device(ordinal: u32) -> Result<c_int, RunnerError> {
    let mut device = 0;
    let ordinal = c_int::try_from(ordinal)
        .map_err(|_| RunnerError::InvalidRequest(format!("device index {ordinal}")))?;
    // SAFETY: valid out-pointer.
    check("cuDeviceGet", unsafe {
        ffi::cuDeviceGet(&mut device, ordinal)
    })?;
    Ok(device)
}

/// Reads a NUL-terminated string the driver wrote into `buf`.
fn c_text(buf: &[u8]) -> String {
    CStr::from_bytes_until_nul(buf)
        .map(|s| s.to_string_lossy().trim().to_string())
        .unwrap_or_default()
}

/// The device's name.
pub fn device_name(device: c_int) -> Result<String, RunnerError> {
    let mut buf = [0u8; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL included.
    check("cuDeviceGetName", unsafe {
        ffi::cuDeviceGetName(
            buf.as_mut_ptr().cast::<c_char>(),
            buf.len() as c_int,
            device,
        )
    })?;
    Ok(c_text(&buf))
}

/// The device's memory in bytes.
pub fn device_total_memory(device: c_int) -> Result<u64, RunnerError> {
    let mut bytes = 0usize;
    // SAFETY: valid out-pointer.
    check("cuDeviceTotalMem", unsafe {
        ffi::cuDeviceTotalMem(&mut bytes, device)
    })?;
    Ok(bytes as u64)
}

/// The UUID as NVML spells it: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (the 16 bytes
/// alone do not say whether they name a MIG instance; [`device_uuid`]'s caller tries both
/// prefixes).
pub fn format_uuid(prefix: &str, bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{prefix}-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The 16 bytes of the device's UUID (its MIG instance's under MIG).
pub fn device_uuid(device: c_int) -> Result<[u8; 16], RunnerError> {
    let mut bytes = [0u8; 16];
    // SAFETY: the driver writes 16 bytes.
    check("cuDeviceGetUuid_v2", unsafe {
        ffi::cuDeviceGetUuid_v2(&mut bytes, device)
    })?;
    Ok(bytes)
}

/// The PCI bus id, `domain:bus:device.function` (e.g. `0000:65:00.0`).
pub fn device_pci_bus_id(device: c_int) -> Result<String, RunnerError> {
    let mut buf = [0u8; 64];
    // SAFETY: the driver writes at most `len` bytes, NUL included.
    check("cuDeviceGetPCIBusId", unsafe {
        ffi::cuDeviceGetPCIBusId(
            buf.as_mut_ptr().cast::<c_char>(),
            buf.len() as c_int,
            device,
        )
    })?;
    let id = c_text(&buf);
    if id.is_empty() {
        return Err(RunnerError::Cuda {
            call: "cuDeviceGetPCIBusId",
            message: "the driver returned an empty bus id".into(),
        });
    }
    Ok(id)
}

/// A context of its own on one device, current on the creating thread; destroyed on drop.
#[derive(Debug)]
pub struct Context {
    handle: ContextHandle,
}

impl Context {
    /// Creates the context. `CUDA_ERROR_DEVICE_UNAVAILABLE` (an exclusive-process GPU that
    /// another process holds) is [`RunnerError::DeviceBusy`].
    pub fn new(device: c_int) -> Result<Context, RunnerError> {
        let mut handle: ContextHandle = ptr::null_mut();
        // SAFETY: valid out-pointer; flags 0 (automatic scheduling).
        match unsafe { ffi::cuCtxCreate(&mut handle, 0, device) } {
            ffi::SUCCESS => Ok(Context { handle }),
            DEVICE_UNAVAILABLE => Err(RunnerError::DeviceBusy(errors::describe(
                DEVICE_UNAVAILABLE,
            ))),
            code => Err(RunnerError::Cuda {
                call: "cuCtxCreate",
                message: errors::describe(code),
            }),
        }
    }

    /// The raw handle (to make it current, or to name it as a peer).
    pub fn handle(&self) -> ContextHandle {
        self.handle
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: created by cuCtxCreate, destroyed once, after everything in it.
        let code = unsafe { ffi::cuCtxDestroy(self.handle) };
        if code != ffi::SUCCESS {
            log::warn!("destroying the context failed: {}", errors::describe(code));
        }
    }
}

/// A non-blocking stream; destroyed on drop.
#[derive(Debug)]
pub struct Stream {
    handle: StreamHandle,
}

impl Stream {
    /// A stream that does not synchronise with the legacy default stream.
    pub fn new() -> Result<Stream, RunnerError> {
        let mut handle: StreamHandle = ptr::null_mut();
        // SAFETY: valid out-pointer.
        check("cuStreamCreate", unsafe {
            ffi::cuStreamCreate(&mut handle, ffi::STREAM_NON_BLOCKING)
        })?;
        Ok(Stream { handle })
    }

    /// The raw handle for launches.
    pub fn handle(&self) -> StreamHandle {
        self.handle
    }

    /// Waits for everything queued; `what` names the work in the error.
    pub fn synchronize(&self, what: &'static str) -> Result<(), RunnerError> {
        // SAFETY: a live stream.
        check(what, unsafe { ffi::cuStreamSynchronize(self.handle) })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created by cuStreamCreate, destroyed once.
        let code = unsafe { ffi::cuStreamDestroy(self.handle) };
        if code != ffi::SUCCESS {
            log::warn!("destroying a stream failed: {}", errors::describe(code));
        }
    }
}

/// A timing event; destroyed on drop.
#[derive(Debug)]
pub struct Event {
    handle: EventHandle,
}

impl Event {
    /// A default (timing) event.
    pub fn new() -> Result<Event, RunnerError> {
        let mut handle: EventHandle = ptr::null_mut();
        // SAFETY: valid out-pointer.
        check("cuEventCreate", unsafe {
            ffi::cuEventCreate(&mut handle, ffi::EVENT_DEFAULT)
        })?;
        Ok(Event { handle })
    }

    /// Records the event in `stream`.
    pub fn record(&self, stream: &Stream) -> Result<(), RunnerError> {
        // SAFETY: live event and stream of the current context.
        check("cuEventRecord", unsafe {
            ffi::cuEventRecord(self.handle, stream.handle())
        })
    }

    /// The time from `start` to this event (both recorded and completed).
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration, RunnerError> {
        let mut ms = 0f32;
        // SAFETY: valid out-pointer, live events.
        check("cuEventElapsedTime", unsafe {
            ffi::cuEventElapsedTime(&mut ms, start.handle, self.handle)
        })?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed once.
        let code = unsafe { ffi::cuEventDestroy(self.handle) };
        if code != ffi::SUCCESS {
            log::warn!("destroying an event failed: {}", errors::describe(code));
        }
    }
}

/// The element types a [`DeviceBuffer`] holds: plain integers, any bit pattern valid.
pub trait DeviceWord: Copy + Default + private::Sealed {}
impl DeviceWord for u32 {}
impl DeviceWord for u64 {}
mod private {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// Device memory for `len` values of `T`; freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceWord> {
    ptr: DevicePtr,
    len: usize,
    _type: PhantomData<T>,
}

impl<T: DeviceWord> DeviceBuffer<T> {
    fn bytes(len: usize) -> Result<usize, RunnerError> {
        len.checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| RunnerError::InvalidRequest(format!("buffer of {len} values")))
    }

    /// Memory whose contents are undefined until written (by a kernel or a copy).
    pub fn uninitialized(len: usize) -> Result<DeviceBuffer<T>, RunnerError> {
        let mut ptr = 0;
        // Zero-sized allocations fail in the driver; keep one value.
        let bytes = Self::bytes(len.max(1))?;
        // SAFETY: valid out-pointer.
        check("cuMemAlloc", unsafe { ffi::cuMemAlloc(&mut ptr, bytes) })?;
        Ok(DeviceBuffer {
            ptr,
            len,
            _type: PhantomData,
        })
    }

    /// Memory set to zero.
    pub fn zeroed(len: usize) -> Result<DeviceBuffer<T>, RunnerError> {
        let buffer = Self::uninitialized(len)?;
        // SAFETY: the range is the allocation just made.
        check("cuMemsetD8", unsafe {
            ffi::cuMemsetD8(buffer.ptr, 0, Self::bytes(len.max(1))?)
        })?;
        Ok(buffer)
    }

    /// Memory holding a copy of `values`.
    pub fn from_slice(values: &[T]) -> Result<DeviceBuffer<T>, RunnerError> {
        let buffer = Self::uninitialized(values.len())?;
        if !values.is_empty() {
            // SAFETY: source and destination both hold `values.len()` values of T.
            check("cuMemcpyHtoD", unsafe {
                ffi::cuMemcpyHtoD(
                    buffer.ptr,
                    values.as_ptr().cast::<c_void>(),
                    Self::bytes(values.len())?,
                )
            })?;
        }
        Ok(buffer)
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The device address, for kernel arguments.
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Copies the buffer to a new host vector (synchronous).
    pub fn to_host(&self) -> Result<Vec<T>, RunnerError> {
        let mut host = vec![T::default(); self.len];
        if self.len > 0 {
            // SAFETY: the host vector has room for `len` values; T accepts any bits.
            check("cuMemcpyDtoH", unsafe {
                ffi::cuMemcpyDtoH(
                    host.as_mut_ptr().cast::<c_void>(),
                    self.ptr,
                    Self::bytes(self.len)?,
                )
            })?;
        }
        Ok(host)
    }
}

impl<T: DeviceWord> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc, freed once.
        let code = unsafe { ffi::cuMemFree(self.ptr) };
        if code != ffi::SUCCESS {
            log::warn!("freeing device memory failed: {}", errors::describe(code));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_spelled_as_nvml_does() {
        let bytes = [
            0x8d, 0x3e, 0x1a, 0x52, 0x0b, 0x7c, 0x4f, 0x10, 0x9e, 0x61, 0x00, 0x11, 0x22, 0x33,
            0x44, 0xff,
        ];
        assert_eq!(
            format_uuid("GPU", &bytes),
            "GPU-8d3e1a52-0b7c-4f10-9e61-0011223344ff"
        );
    }
}
