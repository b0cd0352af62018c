//! The memory of TLB walks ([`crate::walk`]): one plain `cuMemAlloc` ([`PlainRegion`]), or
//! a reserved address range backed by separate physical chunks of the allocation
//! granularity through the virtual memory management API ([`ChunkedRegion`]).
//!
//! A chunked region creates every chunk first (`cuMemCreate`), then maps chunk
//! `π(j) = j·a mod n` at place `j` of the range (`cuMemMap`, [`ChunkOrder`]), with `a`
//! coprime to `n` and neither 1 nor `n − 1`: neighbouring places never get chunks created
//! one after the other,
//! so whatever physical order the driver gave them, the range is not physically contiguous
//! across any chunk boundary, and the GPU's MMU must translate it with pages of at most one
//! chunk. The handles are released once mapped (the mappings keep the memory); access is
//! granted over the whole range (`cuMemSetAccess`). Teardown unmaps chunk by chunk and frees
//! the range.

use std::os::raw::c_int;

use super::errors;
use super::ffi::{self, CuResult, DevicePtr};
use crate::error::VmmError;

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

/// Which chunk each place of a chunked region gets: `j·a mod n` with the smallest
/// `a ≥ 0.618·n` coprime to `n` that is neither 1 nor `n − 1`; where no such `a` exists
/// (`n` of 4 or 6), the odd chunks, then the even ones. From 4 chunks on, neighbouring places
/// never get chunks created one after the other.
///
/// ```
/// use pchase_runner::cuda::vmm::ChunkOrder;
/// let order = ChunkOrder::new(1000);
/// // Neighbouring places never hold chunks created one after the other.
/// assert!((0..999).all(|j| order.chunk(j + 1).abs_diff(order.chunk(j)) != 1));
/// let four = ChunkOrder::new(4);
/// assert_eq!((0..4).map(|j| four.chunk(j)).collect::<Vec<_>>(), [1, 3, 0, 2]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ChunkOrder {
    n: u64,
    multiplier: Option<u64>,
}

impl ChunkOrder {
    /// The order of `n` chunks.
    pub fn new(n: u64) -> ChunkOrder {
        fn gcd(a: u64, b: u64) -> u64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        let start = ((n as f64 * 0.618) as u64).max(2);
        let multiplier = (start..n.saturating_sub(1))
            .chain(2..start.min(n.saturating_sub(1)))
            .find(|&a| gcd(a, n) == 1);
        ChunkOrder { n, multiplier }
    }

    /// The chunk (in creation order) mapped at place `j` (below `n`).
    pub fn chunk(&self, j: u64) -> u64 {
        match self.multiplier {
            Some(a) => j * a % self.n,
            None => {
                let odds = self.n / 2;
                if j < odds {
                    2 * j + 1
                } else {
                    2 * (j - odds)
                }
            }
        }
    }
}

/// A reserved range of separately mapped chunks; unmapped and freed on drop (a failure
/// then is logged) or by [`ChunkedRegion::release`].
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
}

impl ChunkedRegion {
    /// A region of up to `max_bytes` on `device` in chunks of the minimum granularity;
    /// fewer chunks where the memory runs out while they are created (a sixteenth of those
    /// created are given back, as headroom for the timing buffers).
    ///
    /// # Errors
    /// The [`VmmError`] of the call that failed; what was built before it is torn down.
    pub fn new(device: c_int, max_bytes: u64) -> Result<ChunkedRegion, VmmError> {
        let chunk = granularity(device)?;
        let wanted = places(max_bytes, chunk)?;
        let handles = create(device, chunk, wanted, true)?;
        let chunks = handles.len() as u64;
        let order = ChunkOrder::new(chunks);
        build(device, chunk, handles, chunks, |j| order.chunk(j))
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
        let handles = create(device, chunk, pool.min(places), false)?;
        let chunks = handles.len() as u64;
        build(device, chunk, handles, places, |j| j % chunks)
    }

    /// The range's first address.
    pub fn base(&self) -> DevicePtr {
        self.base
    }

    /// The range's bytes.
    pub fn bytes(&self) -> u64 {
        self.chunk * self.places
    }

    /// The physical bytes behind it (less than [`ChunkedRegion::bytes`] where aliased).
    pub fn backing_bytes(&self) -> u64 {
        self.chunk * self.chunks
    }

    /// The chunk (the allocation granularity).
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk
    }

    /// Unmaps every chunk and frees the range.
    ///
    /// # Errors
    /// [`VmmError::Release`] naming the first call that failed (the others still run).
    pub fn release(mut self) -> Result<(), VmmError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), VmmError> {
        let mut first = None;
        for j in 0..self.mapped {
            // SAFETY: place j was mapped with one chunk.
            let code = unsafe { ffi::cuMemUnmap(self.base + j * self.chunk, self.chunk as usize) };
            if code != ffi::SUCCESS && first.is_none() {
                first = Some(("cuMemUnmap", code));
            }
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

/// Releases chunk handles while tearing down after a failure; errors are logged.
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
fn create(device: c_int, chunk: u64, wanted: u64, shrink: bool) -> Result<Vec<u64>, VmmError> {
    let prop = prop(device);
    let mut handles: Vec<u64> = Vec::with_capacity(wanted as usize);
    for k in 0..wanted {
        let mut handle = 0u64;
        // SAFETY: valid out-pointer and property struct.
        let code = unsafe { ffi::cuMemCreate(&mut handle, chunk as usize, &prop, 0) };
        if code == ffi::SUCCESS {
            handles.push(handle);
            continue;
        }
        if shrink && code == ffi::ERROR_OUT_OF_MEMORY && k >= 16 {
            let keep = handles.len() - handles.len() / 16;
            release_handles(&handles[keep..]);
            handles.truncate(keep);
            log::info!(
                "chunked region: memory ran out after {k} chunks of {chunk} B; using {keep}"
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
/// most 16 GiB (one call over about 1 TiB of 2 MiB mappings ran out of memory on an H100).
fn build(
    device: c_int,
    chunk: u64,
    handles: Vec<u64>,
    places: u64,
    physical: impl Fn(u64) -> u64,
) -> Result<ChunkedRegion, VmmError> {
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
    };
    for j in 0..places {
        let chunk_index = physical(j);
        let offset = j * chunk;
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
    let piece = (16u64 << 30).max(chunk) / chunk * chunk;
    let mut at = 0;
    while at < bytes {
        let len = piece.min(bytes - at);
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
    Ok(region)
}

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

    #[test]
    fn the_chunk_order_is_a_permutation_without_created_neighbours() {
        for n in [4u64, 5, 6, 7, 8, 9, 64, 4097, 37_888] {
            let order = ChunkOrder::new(n);
            let mut seen = vec![false; n as usize];
            for j in 0..n {
                seen[order.chunk(j) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "{n}: not a permutation");
            assert!(
                (0..n - 1).all(|j| order.chunk(j + 1).abs_diff(order.chunk(j)) != 1),
                "{n}"
            );
        }
        // One to three chunks: every chunk once.
        for n in 1..4u64 {
            let order = ChunkOrder::new(n);
            let mut chunks: Vec<u64> = (0..n).map(|j| order.chunk(j)).collect();
            chunks.sort_unstable();
            assert_eq!(chunks, (0..n).collect::<Vec<_>>());
        }
    }
}
