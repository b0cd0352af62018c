//! The memory of TLB walks ([`crate::walk`]): one plain `cuMemAlloc` ([`PlainRegion`]), or
//! a reserved address range whose places of the allocation granularity are mapped one by
//! one through the virtual memory management API ([`ChunkedRegion`]).
//!
//! A chunked region creates a pool of physical chunks first (`cuMemCreate`; at most
//! [`crate::walk::CHUNKED_POOL_CHUNKS`]), then maps chunk `π(j mod P)` at place `j` of the
//! range (`cuMemMap`, [`ChunkPlan`]), with `π(k) = k·a mod P` ([`ChunkOrder`]), `a` coprime
//! to the pool `P` and neither 1 nor `P − 1`: neighbouring places never get chunks created
//! one after the other, nor one chunk twice, so whatever physical order the driver gave
//! them, the range is not physically contiguous across any chunk boundary, and the GPU's
//! MMU must translate it with pages of at most one chunk. Where the range has more places
//! than the pool, the pool is mapped over and over: the walks see as many distinct virtual
//! pages as before for a few thousand `cuMemCreate` calls instead of one per place. The
//! handles are released once mapped (the mappings keep the memory); access is granted in
//! pieces of at most 16 GiB (`cuMemSetAccess`). Teardown unmaps in the same pieces (one
//! `cuMemUnmap` each, place by place where the driver refuses a piece) and frees the range.
//! Every region counts the driver calls it made ([`VmmCalls`], logged at `-vv`).

use std::os::raw::c_int;

use super::errors;
use super::ffi::{self, CuResult, DevicePtr};
use crate::error::VmmError;

mod plan;
pub use plan::{ChunkOrder, ChunkPlan};

/// How many times a plain region shrinks by an eighth when the memory is short.
const PLAIN_RETRIES: u32 = 8;

fn message(code: CuResult) -> String {
    errors::describe(code)
}

fn prop(device: c_int) -> ffi::MemAllocationProp {
    ffi::MemAllocationProp {
        alloc_type: ffi::MEM_ALLOCATION_TYPE_PINNED,
        requested_handle_types: 0,
        location: ffi::MemLocation {
            location_type: ffi::MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        win32_handle_meta_data: std::ptr::null_mut(),
        alloc_flags: [0; 8],
    }
}

/// The driver's minimum allocation granularity for `device` (2 MiB on current GPUs).
///
/// # Errors
/// [`VmmError::Granularity`] when the call fails, [`VmmError::BadGranularity`] for a value
/// that is zero, not a power of two, or above 1 GiB.
pub fn granularity(device: c_int) -> Result<u64, VmmError> {
    let prop = prop(device);
    let mut granularity = 0usize;
    // SAFETY: valid out-pointer and property struct of the driver's layout.
    let code = unsafe {
        ffi::cuMemGetAllocationGranularity(
            &mut granularity,
            &prop,
            ffi::MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    };
    if code != ffi::SUCCESS {
        return Err(VmmError::Granularity(message(code)));
    }
    let g = granularity as u64;
    if !g.is_power_of_two() || g > 1 << 30 {
        return Err(VmmError::BadGranularity(g));
    }
    Ok(g)
}

/// Bytes one `cuMemSetAccess` or range `cuMemUnmap` covers at most: 16 GiB (one
/// `cuMemSetAccess` over about 1 TiB of 2 MiB mappings ran out of memory on an H100).
const PIECE_BYTES: u64 = 16 << 30;

/// The driver calls of the virtual memory management API one region made, by name: what
/// building it and releasing it cost (each call is an ioctl into the driver, some tens of
/// microseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmmCalls {
    /// `cuMemCreate`: one per physical chunk.
    pub create: u64,
    /// `cuMemMap`: one per place.
    pub map: u64,
    /// `cuMemRelease`: one per physical chunk.
    pub release: u64,
    /// `cuMemSetAccess`: one per piece of at most 16 GiB.
    pub set_access: u64,
    /// `cuMemUnmap`: one per piece of at most 16 GiB, or per place where the driver
    /// refuses a piece.
    pub unmap: u64,
}

impl std::fmt::Display for VmmCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cuMemCreate, {} cuMemMap, {} cuMemRelease, {} cuMemSetAccess, {} cuMemUnmap",
            self.create, self.map, self.release, self.set_access, self.unmap
        )
    }
}

/// A reserved range of separately mapped places, each holding a chunk of a pool; unmapped
/// and freed on drop (a failure then is logged) or by [`ChunkedRegion::release`].
#[derive(Debug)]
pub struct ChunkedRegion {
    base: DevicePtr,
    chunk: u64,
    /// Physical chunks behind the range.
    chunks: u64,
    /// Places of the range (`chunks`, or more where chunks are mapped over and over).
    places: u64,
    /// Places mapped so far (all, once built).
    mapped: u64,
    /// Whether the range is still reserved.
    reserved: bool,
    /// The driver calls made so far.
    calls: VmmCalls,
}

impl ChunkedRegion {
    /// A region of up to `max_bytes` on `device` in places of the minimum granularity, over
    /// a pool of chunks ([`ChunkPlan::new`]); a smaller pool where the memory runs out while
    /// it is created (a sixteenth of those created are given back, as headroom for the
    /// timing buffers).
    ///
    /// # Errors
    /// The [`VmmError`] of the call that failed; what was built before it is torn down.
    pub fn new(device: c_int, max_bytes: u64) -> Result<ChunkedRegion, VmmError> {
        let chunk = granularity(device)?;
        let places = places(max_bytes, chunk)?;
        let mut calls = VmmCalls::default();
        let handles = create(
            device,
            chunk,
            ChunkPlan::new(places).pool(),
            true,
            &mut calls,
        )?;
        let plan = ChunkPlan::with_pool(places, handles.len() as u64);
        build(device, chunk, handles, places, |j| plan.chunk(j), calls)
    }

    /// A range of up to `max_bytes` of virtual addresses whose places of `chunk` bytes (a
    /// multiple of the granularity) hold `pool` physical chunks over and over (place `j`
    /// holds chunk `j mod pool`): more addresses than the memory.
    ///
    /// # Errors
    /// The [`VmmError`] of the call that failed (a chunk size that is no multiple of the
    /// granularity is [`VmmError::BadGranularity`]); what was built before it is torn down.
    pub fn aliased(
        device: c_int,
        max_bytes: u64,
        chunk: u64,
        pool: u64,
    ) -> Result<ChunkedRegion, VmmError> {
        let granule = granularity(device)?;
        if chunk == 0 || chunk % granule != 0 {
            return Err(VmmError::BadGranularity(chunk));
        }
        let places = places(max_bytes, chunk)?;
        if pool == 0 {
            return Err(too_small(max_bytes, chunk));
        }
        let mut calls = VmmCalls::default();
        let handles = create(device, chunk, pool.min(places), false, &mut calls)?;
        let chunks = handles.len() as u64;
        build(device, chunk, handles, places, |j| j % chunks, calls)
    }

    /// The range's first address.
    pub fn base(&self) -> DevicePtr {
        self.base
    }

    /// The range's bytes.
    pub fn bytes(&self) -> u64 {
        self.chunk * self.places
    }

    /// The physical bytes behind it (less than [`ChunkedRegion::bytes`] where its pool is
    /// mapped over and over).
    pub fn backing_bytes(&self) -> u64 {
        self.chunk * self.chunks
    }

    /// The chunk (the allocation granularity, or an aliased region's place).
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk
    }

    /// The driver calls made so far: building it, and releasing it once released.
    pub fn calls(&self) -> VmmCalls {
        self.calls
    }

    /// Unmaps every place and frees the range; returns every driver call the region made.
    ///
    /// # Errors
    /// [`VmmError::Release`] naming the first call that failed (the others still run).
    pub fn release(mut self) -> Result<VmmCalls, VmmError> {
        self.teardown().map(|()| self.calls)
    }

    fn teardown(&mut self) -> Result<(), VmmError> {
        let mut first = None;
        if self.mapped > 0 {
            let (calls, failed) = unmap_places(self.base, self.mapped, self.chunk, |ptr, len| {
                // SAFETY: the range [ptr, ptr + len) lies in the reserved range and consists
                // of whole mapped places (or one place).
                unsafe { ffi::cuMemUnmap(ptr, len as usize) }
            });
            self.calls.unmap += calls;
            first = failed.map(|code| ("cuMemUnmap", code));
        }
        self.mapped = 0;
        if self.reserved {
            // SAFETY: the range was reserved with these bounds and is no longer mapped.
            let code = unsafe { ffi::cuMemAddressFree(self.base, self.bytes() as usize) };
            if code != ffi::SUCCESS && first.is_none() {
                first = Some(("cuMemAddressFree", code));
            }
            self.reserved = false;
        }
        match first {
            None => Ok(()),
            Some((call, code)) => Err(VmmError::Release {
                call,
                message: message(code),
            }),
        }
    }
}

impl Drop for ChunkedRegion {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            log::warn!("{e}");
        }
    }
}

/// Unmaps the first `places` places of `chunk` bytes from `base` through `unmap(address,
/// bytes)`: one call per piece of at most 16 GiB, and place by place within a piece the
/// driver refuses (the API unmaps whole mappings; a driver that takes only one mapping per
/// call still gets every place unmapped). Returns the calls made and the first code of a
/// failing per-place call.
///
/// ```
/// use pchase_runner::cuda::vmm::unmap_places;
/// // 40 GiB of 2 MiB places: three pieces (16, 16 and 8 GiB), one call each.
/// let (calls, failed) = unmap_places(1 << 44, 20_480, 2 << 20, |_, _| 0);
/// assert_eq!((calls, failed), (3, None));
/// // A driver that unmaps one mapping per call: each piece refused, then place by place.
/// let one_at_a_time = |_: u64, len: u64| u32::from(len != 2 << 20);
/// let (calls, failed) = unmap_places(1 << 44, 20_480, 2 << 20, one_at_a_time);
/// assert_eq!((calls, failed), (3 + 20_480, None));
/// ```
pub fn unmap_places(
    base: DevicePtr,
    places: u64,
    chunk: u64,
    mut unmap: impl FnMut(DevicePtr, u64) -> CuResult,
) -> (u64, Option<CuResult>) {
    let per_piece = (PIECE_BYTES / chunk).max(1);
    let (mut calls, mut first) = (0, None);
    let mut at = 0;
    while at < places {
        let count = per_piece.min(places - at);
        let start = base + at * chunk;
        let whole = count > 1 && {
            calls += 1;
            let code = unmap(start, count * chunk);
            if code != ffi::SUCCESS {
                log::debug!(
                    "cuMemUnmap of {count} places at once: {}; unmapping them one by one",
                    message(code)
                );
            }
            code == ffi::SUCCESS
        };
        if !whole {
            for j in 0..count {
                calls += 1;
                let code = unmap(start + j * chunk, chunk);
                if code != ffi::SUCCESS && first.is_none() {
                    first = Some(code);
                }
            }
        }
        at += count;
    }
    (calls, first)
}

/// The places of `chunk` bytes in `max_bytes`; at least one, or [`too_small`].
fn places(max_bytes: u64, chunk: u64) -> Result<u64, VmmError> {
    match max_bytes / chunk {
        0 => Err(too_small(max_bytes, chunk)),
        n => Ok(n),
    }
}

/// The error of a range that holds no chunk.
fn too_small(max_bytes: u64, chunk: u64) -> VmmError {
    VmmError::Reserve {
        bytes: max_bytes,
        message: format!("smaller than one chunk of {chunk} B"),
    }
}

/// `wanted` physical chunks of `chunk` bytes; where `shrink`, fewer when the memory runs
/// out (a sixteenth of those created given back, as headroom for the timing buffers).
fn create(
    device: c_int,
    chunk: u64,
    wanted: u64,
    shrink: bool,
    calls: &mut VmmCalls,
) -> Result<Vec<u64>, VmmError> {
    let prop = prop(device);
    let mut handles: Vec<u64> = Vec::with_capacity(wanted as usize);
    for k in 0..wanted {
        let mut handle = 0u64;
        calls.create += 1;
        // SAFETY: valid out-pointer and property struct.
        let code = unsafe { ffi::cuMemCreate(&mut handle, chunk as usize, &prop, 0) };
        if code == ffi::SUCCESS {
            handles.push(handle);
            continue;
        }
        if shrink && code == ffi::ERROR_OUT_OF_MEMORY && k >= 16 {
            let keep = handles.len() - handles.len() / 16;
            release_handles(&handles[keep..]);
            calls.release += (handles.len() - keep) as u64;
            handles.truncate(keep);
            log::info!(
                "chunked region: memory ran out after {k} chunks of {chunk} B; a pool of {keep}"
            );
            break;
        }
        release_handles(&handles);
        return Err(VmmError::Create {
            chunk: k,
            chunks: wanted,
            message: message(code),
        });
    }
    Ok(handles)
}

/// Reserves `places` places of `chunk` bytes, maps place `j` to `handles[physical(j)]`,
/// releases the handles (the mappings hold the memory) and grants access in pieces of at
/// most 16 GiB.
fn build(
    device: c_int,
    chunk: u64,
    handles: Vec<u64>,
    places: u64,
    physical: impl Fn(u64) -> u64,
    calls: VmmCalls,
) -> Result<ChunkedRegion, VmmError> {
    let started = std::time::Instant::now();
    let prop = prop(device);
    let chunks = handles.len() as u64;
    let bytes = places * chunk;
    let mut base: DevicePtr = 0;
    // SAFETY: valid out-pointer; no fixed address asked for.
    let code = unsafe { ffi::cuMemAddressReserve(&mut base, bytes as usize, chunk as usize, 0, 0) };
    if code != ffi::SUCCESS {
        release_handles(&handles);
        return Err(VmmError::Reserve {
            bytes,
            message: message(code),
        });
    }
    let mut region = ChunkedRegion {
        base,
        chunk,
        chunks,
        places,
        mapped: 0,
        reserved: true,
        calls,
    };
    for j in 0..places {
        let chunk_index = physical(j);
        let offset = j * chunk;
        region.calls.map += 1;
        // SAFETY: the place lies in the reserved range; the handle is a live chunk of
        // exactly one chunk's size.
        let code = unsafe {
            ffi::cuMemMap(
                base + offset,
                chunk as usize,
                0,
                handles[chunk_index as usize],
                0,
            )
        };
        if code != ffi::SUCCESS {
            release_handles(&handles);
            return Err(VmmError::Map {
                chunk: chunk_index,
                offset,
                message: message(code),
            });
        }
        region.mapped = j + 1;
    }
    for &handle in &handles {
        region.calls.release += 1;
        // SAFETY: each handle is released once.
        let code = unsafe { ffi::cuMemRelease(handle) };
        if code != ffi::SUCCESS {
            return Err(VmmError::Release {
                call: "cuMemRelease",
                message: message(code),
            });
        }
    }
    let access = ffi::MemAccessDesc {
        location: prop.location,
        flags: ffi::MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    let piece = PIECE_BYTES.max(chunk) / chunk * chunk;
    let mut at = 0;
    while at < bytes {
        let len = piece.min(bytes - at);
        region.calls.set_access += 1;
        // SAFETY: the range is mapped; one descriptor.
        let code = unsafe { ffi::cuMemSetAccess(base + at, len as usize, &access, 1) };
        if code != ffi::SUCCESS {
            return Err(VmmError::SetAccess {
                bytes,
                message: message(code),
            });
        }
        at += len;
    }
    log::debug!(
        "chunked region of {bytes} B ({places} places of {chunk} B over {chunks} chunks) built in {:.1} ms: {}",
        started.elapsed().as_secs_f64() * 1e3,
        region.calls
    );
    Ok(region)
}

/// Releases chunk handles while tearing down after a failure; errors are logged.
fn release_handles(handles: &[u64]) {
    for &handle in handles {
        // SAFETY: each handle is live and released once.
        let code = unsafe { ffi::cuMemRelease(handle) };
        if code != ffi::SUCCESS {
            log::warn!("cuMemRelease while tearing down: {}", message(code));
        }
    }
}

/// One plain `cuMemAlloc` of up to the asked bytes; freed on drop.
#[derive(Debug)]
pub struct PlainRegion {
    ptr: DevicePtr,
    bytes: u64,
}

impl PlainRegion {
    /// `max_bytes`, or an eighth less each time the memory is short (up to eight times).
    ///
    /// # Errors
    /// [`crate::RunnerError::Cuda`] for any other failure, or the last out-of-memory one.
    pub fn new(max_bytes: u64) -> Result<PlainRegion, crate::RunnerError> {
        let mut bytes = max_bytes;
        for attempt in 0..=PLAIN_RETRIES {
            let mut ptr: DevicePtr = 0;
            // SAFETY: valid out-pointer.
            let code = unsafe { ffi::cuMemAlloc(&mut ptr, bytes as usize) };
            if code == ffi::SUCCESS {
                return Ok(PlainRegion { ptr, bytes });
            }
            if code != ffi::ERROR_OUT_OF_MEMORY || attempt == PLAIN_RETRIES {
                return Err(crate::RunnerError::Cuda {
                    call: "cuMemAlloc",
                    message: format!("{bytes} B: {}", message(code)),
                });
            }
            bytes -= (bytes / 8).max(2 << 20);
            bytes &= !((2u64 << 20) - 1);
        }
        unreachable!("the last attempt returns")
    }

    /// The allocation's first address.
    pub fn base(&self) -> DevicePtr {
        self.ptr
    }

    /// Its bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for PlainRegion {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc and freed once.
        let code = unsafe { ffi::cuMemFree(self.ptr) };
        if code != ffi::SUCCESS {
            log::warn!("cuMemFree of the walk region: {}", message(code));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_have_the_driver_layout() {
        use std::mem::{offset_of, size_of};
        assert_eq!(
            size_of::<ffi::MemAllocationProp>(),
            size_of::<cust::sys::CUmemAllocationProp>()
        );
        assert_eq!(
            offset_of!(ffi::MemAllocationProp, win32_handle_meta_data),
            offset_of!(cust::sys::CUmemAllocationProp, win32HandleMetaData)
        );
        assert_eq!(
            size_of::<ffi::MemAccessDesc>(),
            size_of::<cust::sys::CUmemAccessDesc>()
        );
        assert_eq!(
            ffi::MEM_ACCESS_FLAGS_PROT_READWRITE,
            cust::sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE as c_int
        );
        assert_eq!(
            ffi::MEM_LOCATION_TYPE_DEVICE,
            cust::sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE as c_int
        );
        assert_eq!(
            ffi::MEM_ALLOCATION_TYPE_PINNED,
            cust::sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED as c_int
        );
        assert_eq!(
            ffi::ERROR_OUT_OF_MEMORY,
            cust::sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY as CuResult
        );
    }
}
