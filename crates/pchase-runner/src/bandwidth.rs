//! Bandwidth requests: one launch shape of one streaming kernel, timed over
//! several repetitions, and what every backend requires of it.
//!
//! A request names the kernel's operation, vector width and unroll (a catalogue entry of
//! `pchase_kernels::bandwidth`), the grid as blocks per SM and threads per block, and how the
//! buffer is walked: every block its own power-of-two region ([`RegionLayout::PerBlock`]: the
//! L1 and shared-memory reads), or all blocks one region in a grid stride
//! ([`RegionLayout::GridStride`]: the L2 and device memory). The backend times each
//! repetition with events; bytes moved follow from the shape alone.
//!
//! ```
//! use pchase_runner::bandwidth::{BandwidthRequest, BandwidthShape, RegionLayout};
//! use pchase_runner::bandwidth::{BandwidthOp, ReadVariant};
//! let shape = BandwidthShape {
//!     op: BandwidthOp::Read(ReadVariant::Cg),
//!     vector_bytes: 16,
//!     unroll: 4,
//!     blocks_per_sm: 2,
//!     threads: 1024,
//! };
//! let request = BandwidthRequest {
//!     shape,
//!     layout: RegionLayout::GridStride,
//!     region_bytes: 1 << 30,
//!     iterations: 2,
//!     repetitions: 3,
//!     warm_up: true,
//! };
//! // 264 blocks × 1024 threads × 4 loads of 16 B, twice.
//! assert_eq!(request.bytes_per_launch(132), 264 * 1024 * 4 * 16 * 2);
//! assert_eq!(request.kernel()?.entry(), "bw_read_cg_v16_u4");
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

use std::{fmt, time::Duration};

use topology::ElementKind;

pub use pchase_kernels::bandwidth::{BandwidthOp, ReadVariant};
use pchase_kernels::{bandwidth, Kernel};

use crate::{device::DeviceInfo, error::RunnerError};

/// The most blocks per SM a request may ask for (the resident limit of every architecture
/// from Maxwell on is at least 16).
pub const MAX_BLOCKS_PER_SM: u32 = 16;

/// The most timed repetitions of one request.
pub const MAX_REPETITIONS: u32 = 64;

/// A level whose bandwidth is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BandwidthLevel {
    /// Global reads served by the L1 (each block re-reads its region).
    L1,
    /// Shared-memory reads.
    Shared,
    /// Reads of a buffer small enough for the near L2 partition to hold.
    L2Near,
    /// Reads of a buffer spread over the whole L2.
    L2,
    /// Writes to a buffer spread over the whole L2 (it stays resident: the L2 writes back).
    L2Write,
    /// Device-memory reads.
    MemoryRead,
    /// Device-memory writes.
    MemoryWrite,
    /// Device-memory copies (bytes read plus bytes written).
    MemoryCopy,
}

impl BandwidthLevel {
    /// Every level, from the SM outwards.
    pub const ALL: [BandwidthLevel; 8] = [
        BandwidthLevel::L1,
        BandwidthLevel::Shared,
        BandwidthLevel::L2Near,
        BandwidthLevel::L2,
        BandwidthLevel::L2Write,
        BandwidthLevel::MemoryRead,
        BandwidthLevel::MemoryWrite,
        BandwidthLevel::MemoryCopy,
    ];

    /// The element whose bandwidth it is.
    pub fn element(self) -> ElementKind {
        match self {
            BandwidthLevel::L1 => ElementKind::L1Data,
            BandwidthLevel::Shared => ElementKind::SharedMemory,
            BandwidthLevel::L2Near | BandwidthLevel::L2 | BandwidthLevel::L2Write => {
                ElementKind::L2
            }
            _ => ElementKind::DeviceMemory,
        }
    }

    /// The key of its slot in the element's bandwidths.
    pub fn key(self) -> &'static str {
        match self {
            BandwidthLevel::L1 | BandwidthLevel::Shared | BandwidthLevel::L2 => "read",
            BandwidthLevel::L2Near => "read_near_partition",
            BandwidthLevel::MemoryRead => "read",
            BandwidthLevel::MemoryWrite | BandwidthLevel::L2Write => "write",
            BandwidthLevel::MemoryCopy => "copy",
        }
    }

    /// Whether bytes per clock per SM is its natural unit (SM-local levels).
    pub fn per_sm(self) -> bool {
        matches!(self, BandwidthLevel::L1 | BandwidthLevel::Shared)
    }

    /// Whether its launches read data a cache keeps from one launch to the next (the L1's
    /// regions in the L2, shared memory's source, the L2's buffers): then a request right
    /// after another of the level needs no untimed launch to find it there.
    pub fn reads_cached_data(self) -> bool {
        matches!(
            self,
            BandwidthLevel::L1
                | BandwidthLevel::Shared
                | BandwidthLevel::L2Near
                | BandwidthLevel::L2
        )
    }
}

impl fmt::Display for BandwidthLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BandwidthLevel::L1 => "L1 read",
            BandwidthLevel::Shared => "shared read",
            BandwidthLevel::L2Near => "L2 near-partition read",
            BandwidthLevel::L2 => "L2 read",
            BandwidthLevel::L2Write => "L2 write",
            BandwidthLevel::MemoryRead => "memory read",
            BandwidthLevel::MemoryWrite => "memory write",
            BandwidthLevel::MemoryCopy => "memory copy",
        })
    }
}

/// Everything the tuner varies: the kernel (operation, vector width, unroll) and the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BandwidthShape {
    /// What the kernel does, with its instruction variant.
    pub op: BandwidthOp,
    /// Bytes per access: 4, 8 or 16.
    pub vector_bytes: u32,
    /// Accesses each thread has in flight per iteration: 1, 2, 4 or 8.
    pub unroll: u32,
    /// Blocks per SM: the grid is this times the SM count.
    pub blocks_per_sm: u32,
    /// Threads per block.
    pub threads: u32,
}

impl BandwidthShape {
    /// The grid: blocks per SM times SMs.
    pub fn blocks(&self, sm_count: u32) -> u32 {
        self.blocks_per_sm.saturating_mul(sm_count)
    }

    /// Bytes one iteration of one block moves (a copy counts its reads and its writes).
    pub fn block_iteration_bytes(&self) -> u64 {
        u64::from(self.threads)
            * u64::from(self.unroll)
            * self.op.bytes_per_access(self.vector_bytes)
    }

    /// The catalogue kernel of this shape.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] where the catalogue has none (e.g. `ld.global.cs` at
    /// 4 bytes).
    pub fn kernel(&self) -> Result<&'static Kernel, RunnerError> {
        bandwidth::kernel(self.op, self.vector_bytes, self.unroll).ok_or_else(|| {
            RunnerError::InvalidRequest(format!(
                "no bandwidth kernel for {} at {} B unrolled {}",
                self.op, self.vector_bytes, self.unroll
            ))
        })
    }
}

impl fmt::Display for BandwidthShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} B ×{}, {} block(s)/SM × {} threads",
            self.op, self.vector_bytes, self.unroll, self.blocks_per_sm, self.threads
        )
    }
}

/// How the blocks of a launch walk the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegionLayout {
    /// Block `b` re-reads its own region, at byte `b × region_bytes` of the buffer (shared
    /// memory: the block's own dynamic shared memory).
    PerBlock,
    /// One region for the whole grid, walked in a grid stride: consecutive blocks take
    /// consecutive chunks of `threads × vector × unroll` bytes.
    GridStride,
}

/// One timed launch shape of a bandwidth kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandwidthRequest {
    /// The kernel and grid.
    pub shape: BandwidthShape,
    /// How the buffer is walked.
    pub layout: RegionLayout,
    /// Bytes of each region (per block or for the grid): a power of two from 4 KiB to 2 GiB;
    /// for shared memory the dynamic shared memory of each block.
    pub region_bytes: u64,
    /// Iterations of every thread; each moves `unroll` vectors.
    pub iterations: u32,
    /// Timed launches.
    pub repetitions: u32,
    /// One untimed launch first, which brings the data into the cache under test and the
    /// clocks up; `false` where the launches just before left both so (the same level's
    /// data, read again).
    pub warm_up: bool,
}

impl BandwidthRequest {
    /// The catalogue kernel that runs this request (both backends ask here).
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] where the catalogue has no kernel of the shape.
    pub fn kernel(&self) -> Result<&'static Kernel, RunnerError> {
        self.shape.kernel()
    }

    /// Bytes one launch moves (reads, writes, or both for a copy).
    pub fn bytes_per_launch(&self, sm_count: u32) -> u64 {
        u64::from(self.shape.blocks(sm_count))
            * self.shape.block_iteration_bytes()
            * u64::from(self.iterations)
    }

    /// Bytes of global memory each buffer (source, destination) of the launch spans; 0 for
    /// shared memory.
    pub fn buffer_bytes(&self, sm_count: u32) -> u64 {
        match (self.shape.op, self.layout) {
            (BandwidthOp::SharedRead, _) => 0,
            (_, RegionLayout::PerBlock) => {
                u64::from(self.shape.blocks(sm_count)) * self.region_bytes
            }
            (_, RegionLayout::GridStride) => self.region_bytes,
        }
    }

    /// Distinct bytes the launch touches in each buffer (for per-block regions: in all
    /// of them together): what must fit a cache for the data to stay in it.
    pub fn footprint_bytes(&self, sm_count: u32) -> u64 {
        let walked = self.chunk_bytes() * u64::from(self.iterations);
        let blocks = u64::from(self.shape.blocks(sm_count));
        match self.layout {
            RegionLayout::PerBlock => blocks * walked.min(self.region_bytes),
            RegionLayout::GridStride => (blocks * walked).min(self.region_bytes),
        }
    }

    /// Bytes one block's threads access in one iteration, per buffer.
    fn chunk_bytes(&self) -> u64 {
        u64::from(self.shape.threads)
            * u64::from(self.shape.vector_bytes)
            * u64::from(self.shape.unroll)
    }

    /// The kernel's addressing arguments: `(block_stride, block_phase, step, mask)` (see
    /// `pchase_kernels::bandwidth`).
    pub fn addressing(&self, sm_count: u32) -> (u64, u32, u32, u32) {
        let chunk = self.chunk_bytes();
        let mask = (self.region_bytes - 1) as u32;
        let (stride, phase, step) = match self.layout {
            RegionLayout::PerBlock => (self.region_bytes, 0, chunk),
            RegionLayout::GridStride => (0, chunk, chunk * u64::from(self.shape.blocks(sm_count))),
        };
        let stride = match self.shape.op {
            BandwidthOp::SharedRead => 0,
            _ => stride,
        };
        // Both fit: check_bandwidth bounds the step by 2^32 and the phase is below it.
        (stride, phase as u32, step as u32, mask)
    }
}

/// What a [`BandwidthRequest`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthRun {
    /// Device time of each timed repetition, in order.
    pub elapsed: Vec<Duration>,
    /// Bytes each launch moved.
    pub bytes_per_launch: u64,
    /// Device time of every launch of the request, the warming one included.
    pub gpu_time: Duration,
}

impl BandwidthRun {
    /// The best (shortest) repetition's bandwidth, bytes per second.
    pub fn best_bytes_per_second(&self) -> Option<f64> {
        let fastest = self.elapsed.iter().min()?.as_secs_f64();
        (fastest > 0.0).then(|| self.bytes_per_launch as f64 / fastest)
    }

    /// The median repetition's bandwidth, bytes per second.
    pub fn median_bytes_per_second(&self) -> Option<f64> {
        let mut sorted = self.elapsed.clone();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2)?.as_secs_f64();
        (median > 0.0).then(|| self.bytes_per_launch as f64 / median)
    }
}

/// Checks what every backend requires of a [`BandwidthRequest`] on `device`: a kernel of the
/// shape, a grid the device can launch, a power-of-two region of 4 KiB to 2 GiB, buffers that fit device memory (shared memory: a block), and
/// 32-bit positions.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_bandwidth(request: &BandwidthRequest, device: &DeviceInfo) -> Result<(), RunnerError> {
    let bad = |why: String| Err(RunnerError::InvalidRequest(why));
    let shape = &request.shape;
    shape.kernel()?;
    if !(1..=MAX_BLOCKS_PER_SM).contains(&shape.blocks_per_sm) {
        return bad(format!(
            "{} blocks per SM: 1 to {MAX_BLOCKS_PER_SM}",
            shape.blocks_per_sm
        ));
    }
    let warp = device.warp_size.max(1);
    if shape.threads == 0
        || shape.threads % warp != 0
        || shape.threads > device.max_threads_per_block
    {
        return bad(format!(
            "{} threads per block: a multiple of {warp} up to {}",
            shape.threads, device.max_threads_per_block
        ));
    }
    let region = request.region_bytes;
    if !region.is_power_of_two() || !(4096..=1 << 31).contains(&region) {
        return bad(format!(
            "a region of {region} B: a power of two from 4 KiB to 2 GiB"
        ));
    }
    // A block's iteration may span more than its region: positions wrap, and threads
    // then read the same bytes (the L1 read does, with small regions and large blocks).
    let chunk = request.chunk_bytes();
    if chunk * u64::from(shape.blocks(device.sm_count)) > u64::from(u32::MAX) {
        return bad("one iteration of the grid spans more than 4 GiB".into());
    }
    if request.iterations == 0 || !(1..=MAX_REPETITIONS).contains(&request.repetitions) {
        return bad(format!(
            "{} iterations and {} repetitions: at least one iteration, 1 to {MAX_REPETITIONS} repetitions",
            request.iterations, request.repetitions
        ));
    }
    match (shape.op, request.layout) {
        (BandwidthOp::SharedRead, RegionLayout::GridStride) => {
            return bad("shared memory is read per block, not in a grid stride".into());
        }
        (BandwidthOp::SharedRead, RegionLayout::PerBlock) => {
            if region > device.shared_per_block_optin_bytes {
                return bad(format!(
                    "{region} B of shared memory per block; a block may have {} B",
                    device.shared_per_block_optin_bytes
                ));
            }
        }
        _ => {
            let buffers = match shape.op {
                BandwidthOp::Copy => 2,
                _ => 1,
            };
            let needed = buffers * request.buffer_bytes(device.sm_count);
            if needed > device.total_memory_bytes / 2 {
                return bad(format!(
                    "{needed} B of buffers: more than half the device's {} B",
                    device.total_memory_bytes
                ));
            }
        }
    }
    Ok(())
}
