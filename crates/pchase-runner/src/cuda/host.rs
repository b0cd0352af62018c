//! The link to the host ([`crate::host`]) through CUDA: pinned host buffers from
//! `cuMemHostAlloc` (portable and mapped), allocated once and kept; copies by the copy
//! engines with `cuMemcpyHtoDAsync`/`cuMemcpyDtoHAsync`, host to device on the backend's
//! stream and device to host on a second one, each timed by its own stream's events, so
//! that both directions run at once when asked; SM copies: the catalogue's grid-stride
//! bandwidth kernels with mapped host memory (`cuMemHostGetDevicePointer`) as their source
//! or destination; the chase: the fine-grained `.cg` chase kernel over a chain the init
//! kernel writes into mapped host memory, with the L2 flushed between.

use std::{
    os::raw::{c_int, c_uint, c_void},
    ptr,
    time::Duration,
};

use super::{
    driver::{check, device_attribute},
    ffi::{CuResult, DevicePtr, StreamHandle},
    handles::{DeviceBuffer, Event, Stream},
    CudaBackend,
};
use crate::{
    error::RunnerError,
    host::{
        HostBackend, HostChaseRequest, HostCopyRequest, HostCopyRun, HostDirection, HostMemory,
        HostSmRequest, HostSmRun,
    },
};

/// `CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP`.
const HOST_ALLOC_FLAGS: c_uint = 0x01 | 0x02;
/// `CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY`.
const CAN_MAP_HOST_MEMORY: c_int = 19;

// Raw forwarders of cuda-shim (see `super::ffi`): plain integers in and out.
extern "C" {
    #[link_name = "cuda_shim_raw_cuMemHostAlloc"]
    fn cuMemHostAlloc(host: *mut *mut c_void, bytes: usize, flags: c_uint) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemFreeHost"]
    fn cuMemFreeHost(host: *mut c_void) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemHostGetDevicePointer_v2"]
    fn cuMemHostGetDevicePointer(
        device: *mut DevicePtr,
        host: *mut c_void,
        flags: c_uint,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemcpyHtoDAsync_v2"]
    fn cuMemcpyHtoDAsync(
        dst: DevicePtr,
        src: *const c_void,
        bytes: usize,
        stream: StreamHandle,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuMemcpyDtoHAsync_v2"]
    fn cuMemcpyDtoHAsync(
        dst: *mut c_void,
        src: DevicePtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> CuResult;
}

/// Page-locked host memory, mapped into the device's address space; freed on drop.
#[derive(Debug)]
struct PinnedHost {
    host: *mut c_void,
    bytes: usize,
}

impl PinnedHost {
    fn new(bytes: usize) -> Result<PinnedHost, RunnerError> {
        let mut host: *mut c_void = ptr::null_mut();
        // SAFETY: valid out-pointer; the driver owns the allocation until cuMemFreeHost.
        check("cuMemHostAlloc", unsafe {
            cuMemHostAlloc(&mut host, bytes, HOST_ALLOC_FLAGS)
        })?;
        Ok(PinnedHost { host, bytes })
    }

    /// Its address on the device.
    fn device_ptr(&self) -> Result<DevicePtr, RunnerError> {
        let mut device: DevicePtr = 0;
        // SAFETY: a live mapped allocation; flags must be 0.
        check("cuMemHostGetDevicePointer", unsafe {
            cuMemHostGetDevicePointer(&mut device, self.host, 0)
        })?;
        Ok(device)
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc, freed once.
        let code = unsafe { cuMemFreeHost(self.host) };
        if code != super::ffi::SUCCESS {
            log::warn!(
                "freeing pinned host memory failed: {}",
                super::errors::describe(code)
            );
        }
    }
}

/// The buffers of the host-link requests, kept between requests.
#[derive(Debug, Default)]
pub(super) struct HostState {
    /// Pinned host memory copied to the device, read by the SMs and chased.
    source: Option<PinnedHost>,
    /// Pinned host memory copied into and written by the SMs.
    target: Option<PinnedHost>,
    /// Pageable host memory of the pageable copies.
    pageable: Vec<u8>,
    /// The device's end of each direction.
    device: [Option<DeviceBuffer<u32>>; 2],
    /// The stream of the device-to-host copies.
    stream: Option<Stream>,
}

/// `slot` holding pinned host memory of at least `bytes`.
fn pinned(slot: &mut Option<PinnedHost>, bytes: u64) -> Result<&PinnedHost, RunnerError> {
    let bytes = usize::try_from(bytes)
        .map_err(|_| RunnerError::InvalidRequest(format!("{bytes} B of host memory")))?;
    if slot.as_ref().is_none_or(|p| p.bytes < bytes) {
        *slot = None;
        *slot = Some(PinnedHost::new(bytes)?);
    }
    slot.as_ref()
        .ok_or_else(|| RunnerError::InvalidRequest("no pinned host memory".into()))
}

impl CudaBackend {
    /// Whether the device can reach mapped host memory.
    fn check_mapped(&self) -> Result<(), RunnerError> {
        let device = super::device::checked_device(self.info.ordinal)?;
        if device_attribute(device, CAN_MAP_HOST_MEMORY)? == 0 {
            return Err(RunnerError::Unsupported {
                kernel: "mapped host memory",
                needed: "a device that maps host memory".into(),
                found: "none".into(),
            });
        }
        Ok(())
    }

    /// The device buffers of both directions, at least `bytes` each.
    fn host_device_buffers(&mut self, bytes: u64) -> Result<[DevicePtr; 2], RunnerError> {
        let words = usize::try_from(bytes / 4)
            .map_err(|_| RunnerError::InvalidRequest(format!("{bytes} B")))?;
        let mut out = [0; 2];
        for (slot, out) in self.host.device.iter_mut().zip(&mut out) {
            if slot.as_ref().is_none_or(|b| b.len() < words) {
                *slot = None;
                *slot = Some(DeviceBuffer::<u32>::zeroed(words)?);
            }
            *out = slot.as_ref().map_or(0, DeviceBuffer::device_ptr);
        }
        Ok(out)
    }
}

impl HostBackend for CudaBackend {
    fn host_copy(&mut self, request: &HostCopyRequest) -> Result<HostCopyRun, RunnerError> {
        request.check()?;
        let bytes = request.bytes as usize;
        let [to_device, from_device] = self.host_device_buffers(request.bytes)?;
        let (source, target): (*const c_void, *mut c_void) = match request.memory {
            HostMemory::Pinned => (
                pinned(&mut self.host.source, request.bytes)?.host,
                pinned(&mut self.host.target, request.bytes)?.host,
            ),
            HostMemory::Pageable => {
                if self.host.pageable.len() < bytes {
                    self.host.pageable = vec![0x5a; bytes];
                }
                let p = self.host.pageable.as_mut_ptr().cast::<c_void>();
                (p.cast_const(), p)
            }
        };
        if self.host.stream.is_none() {
            self.host.stream = Some(Stream::new()?);
        }
        let second = self
            .host
            .stream
            .as_ref()
            .ok_or_else(|| RunnerError::InvalidRequest("no second stream".into()))?;
        let streams: Vec<(HostDirection, &Stream)> = request
            .directions
            .iter()
            .map(|&d| match d {
                HostDirection::HostToDevice => (d, &self.stream),
                HostDirection::DeviceToHost => (d, second),
            })
            .collect();
        let enqueue = |direction: HostDirection, stream: &Stream| match direction {
            // SAFETY: live buffers of at least `bytes` on both sides; the stream is
            // synchronised before either is freed.
            HostDirection::HostToDevice => check("cuMemcpyHtoDAsync", unsafe {
                cuMemcpyHtoDAsync(to_device, source, bytes, stream.handle())
            }),
            // SAFETY: as above.
            HostDirection::DeviceToHost => check("cuMemcpyDtoHAsync", unsafe {
                cuMemcpyDtoHAsync(target, from_device, bytes, stream.handle())
            }),
        };
        let events: Vec<(Event, Event)> = streams
            .iter()
            .map(|_| Ok((Event::new()?, Event::new()?)))
            .collect::<Result<_, RunnerError>>()?;
        let mut times: Vec<(HostDirection, Vec<Duration>)> =
            streams.iter().map(|(d, _)| (*d, Vec::new())).collect();
        for repeat in 0..=request.repeats {
            for ((direction, stream), (start, _)) in streams.iter().zip(&events) {
                start.record(stream)?;
                enqueue(*direction, stream)?;
            }
            for ((_, stream), (_, stop)) in streams.iter().zip(&events) {
                stop.record(stream)?;
            }
            for (_, stream) in &streams {
                stream.synchronize("cuStreamSynchronize (host copy)")?;
            }
            if repeat > 0 {
                for ((start, stop), (_, out)) in events.iter().zip(&mut times) {
                    out.push(stop.elapsed_since(start)?);
                }
            }
        }
        Ok(HostCopyRun { times })
    }

    fn host_sm_copy(&mut self, request: &HostSmRequest) -> Result<HostSmRun, RunnerError> {
        request.check()?;
        self.check_mapped()?;
        let slot = match request.direction()? {
            HostDirection::HostToDevice => &mut self.host.source,
            HostDirection::DeviceToHost => &mut self.host.target,
        };
        let mapped = pinned(slot, request.bytes)?.device_ptr()?;
        let run = self.run_bandwidth_over(&request.bandwidth_request(), Some(mapped))?;
        Ok(HostSmRun {
            elapsed: run.elapsed,
            bytes_per_launch: run.bytes_per_launch,
        })
    }

    fn host_chase(&mut self, request: &HostChaseRequest) -> Result<Vec<u32>, RunnerError> {
        let chain = request.chain()?;
        self.check_mapped()?;
        let nodes = u32::try_from(chain.nodes())
            .map_err(|_| RunnerError::InvalidRequest("a chain of over 2^32 nodes".into()))?;
        let stride_elems = chain.stride / 4;
        let mapped = pinned(&mut self.host.source, chain.bytes)?.device_ptr()?;
        self.init_chains_at(mapped, 0, &[nodes], stride_elems, 1)?;
        self.flush_l2()?;
        self.warp_chase_at(chain, mapped, 0, request.steps, "host chase")
    }
}
