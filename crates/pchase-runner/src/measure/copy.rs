//! What the copy benchmark found, and its plan, which needs no GPU: the sizes
//! from one line to the largest copy a block's shared memory holds, the tiles of the tensor
//! form, and the launch of each latency and bandwidth measurement.
//!
//! Latency: one block, one copy in flight, from a source of at least 1 MiB read once in the
//! warm-up rounds (so every timed copy comes from the L2, and the `.ca` paths cannot keep it
//! in the L1, which is smaller). Bandwidth: every SM full of blocks (as many as shared
//! memory, threads and the limit of [`MAX_BLOCKS_PER_SM`] allow), each with up to eight
//! copies in flight, over a source of half the L2, read once in the warm-up rounds.
//!
//! ```
//! use pchase_runner::measure::copy::{linear_sizes, max_copy_bytes, tiles};
//! // An H100 block may have 227 KiB of shared memory; 128 B of it are the header.
//! let max = max_copy_bytes(232_448);
//! assert_eq!(max, 232_320);
//! let sizes = linear_sizes(max);
//! assert_eq!(sizes.first(), Some(&128));
//! assert_eq!(sizes[sizes.len() - 2..], [131_072, 232_320]);
//! assert_eq!(tiles(max).last(), Some(&(256, 128)));
//! ```

use pchase_kernels::copy::{slot_bytes, CopyPath, COPY_SHARED_HEADER, COPY_SLOT_ALIGN};
use topology::LatencySummary;

use crate::copy::{CopyRequest, CopySource};
use crate::device::DeviceInfo;

/// The smallest copy: one 128-byte line.
pub const MIN_COPY_BYTES: u32 = 128;

/// The source of a latency measurement: at least this many bytes (four L1s of 256 KiB).
pub const LATENCY_SPAN_BYTES: u64 = 1 << 20;

/// Timed rounds of a latency measurement.
pub const LATENCY_ROUNDS: u32 = 64;

/// Bytes every SM copies in a bandwidth measurement's timed rounds (about 0.1 ms at
/// 50 B/cycle and 1.7 GHz).
pub const BANDWIDTH_BYTES_PER_SM: u64 = 8 << 20;

/// Copies in flight per block in a bandwidth measurement: enough for `32 KiB` per block, at
/// most this many.
pub const MAX_DEPTH: u32 = 8;

/// Blocks per SM at most in a bandwidth measurement.
pub const MAX_BLOCKS_PER_SM: u32 = 16;

/// Threads per block of the copies the threads make.
pub const THREAD_COPY_THREADS: u32 = 256;

/// Threads per block of the bulk copies (thread 0 issues).
pub const BULK_THREADS: u32 = 32;

/// Tensor rows are this many 4-byte elements wide (32 KiB).
pub const TENSOR_ROW_ELEMENTS: u32 = 8192;

/// The 2-D tiles measured (width × height of 4-byte elements): squares from 256 B to
/// 64 KiB, then 256 × 128 (128 KiB); each box side is at most 256.
pub const TILES: [(u32, u32); 6] = [(8, 8), (16, 16), (32, 32), (64, 64), (128, 128), (256, 128)];

/// The largest copy a block's shared memory holds besides the header, in whole slots.
pub fn max_copy_bytes(shared_per_block_optin: u64) -> u32 {
    let room = shared_per_block_optin.saturating_sub(u64::from(COPY_SHARED_HEADER));
    let aligned = room / u64::from(COPY_SLOT_ALIGN) * u64::from(COPY_SLOT_ALIGN);
    u32::try_from(aligned).unwrap_or(u32::MAX)
}

/// The linear sizes: one line, doubling, and the largest copy where it is not a power of two.
pub fn linear_sizes(max: u32) -> Vec<u32> {
    let mut sizes = Vec::new();
    let mut bytes = MIN_COPY_BYTES;
    while bytes <= max {
        sizes.push(bytes);
        bytes = match bytes.checked_mul(2) {
            Some(b) => b,
            None => break,
        };
    }
    if max >= MIN_COPY_BYTES && sizes.last() != Some(&max) {
        sizes.push(max);
    }
    sizes
}

/// The tiles of [`TILES`] that fit `max` bytes.
pub fn tiles(max: u32) -> Vec<(u32, u32)> {
    TILES
        .iter()
        .copied()
        .filter(|(w, h)| u64::from(w * h * 4) <= u64::from(max))
        .collect()
}

fn threads(path: CopyPath) -> u32 {
    if path.is_bulk() {
        BULK_THREADS
    } else {
        THREAD_COPY_THREADS
    }
}

/// The source of `regions` regions of `bytes` (a tile's bytes for the tensor form).
fn source(path: CopyPath, bytes: u32, tile: Option<(u32, u32)>, regions: u64) -> CopySource {
    let regions = regions.clamp(1, u64::from(u32::MAX / 2));
    match (path, tile) {
        (CopyPath::BulkTensor2d, Some((box_w, box_h))) => {
            let tiles_per_row = (TENSOR_ROW_ELEMENTS / box_w).max(1);
            let tile_rows = regions.div_ceil(u64::from(tiles_per_row)) as u32;
            CopySource::Tensor2d {
                tiles_per_row,
                tile_rows: tile_rows.max(1),
                box_w,
                box_h,
            }
        }
        _ => {
            let _ = bytes;
            CopySource::Linear {
                regions: regions as u32,
            }
        }
    }
}

/// One copy in flight on one block, over a source of at least [`LATENCY_SPAN_BYTES`]
/// (and four copies) read once in the warm-up rounds.
pub fn latency_request(path: CopyPath, bytes: u32, tile: Option<(u32, u32)>) -> CopyRequest {
    let span = LATENCY_SPAN_BYTES.max(4 * u64::from(bytes));
    let source = source(path, bytes, tile, span.div_ceil(u64::from(bytes)));
    let regions = u32::try_from(source.regions()).unwrap_or(u32::MAX);
    CopyRequest {
        path,
        source,
        bytes,
        depth: 1,
        grid: 1,
        threads: threads(path),
        warmup_rounds: regions,
        rounds: LATENCY_ROUNDS,
    }
}

/// The launch shape of a bandwidth measurement: (blocks per SM, copies per block).
pub fn bandwidth_shape(path: CopyPath, bytes: u32, device: &DeviceInfo) -> (u32, u32) {
    let slot = slot_bytes(bytes);
    let room = device
        .shared_per_block_optin_bytes
        .saturating_sub(u64::from(COPY_SHARED_HEADER));
    let depth = (32_768 / u64::from(bytes.max(1)))
        .clamp(1, u64::from(MAX_DEPTH))
        .min((room / slot).max(1)) as u32;
    let shared = u64::from(COPY_SHARED_HEADER)
        + u64::from(depth) * slot
        + device.reserved_shared_per_block_bytes.unwrap_or(0);
    let by_shared = device.shared_per_sm_bytes / shared.max(1);
    let by_threads = u64::from(device.max_threads_per_sm.unwrap_or(2048) / threads(path));
    let blocks = by_shared
        .min(by_threads)
        .min(u64::from(MAX_BLOCKS_PER_SM))
        .max(1) as u32;
    (blocks, depth)
}

/// Every SM full of blocks with copies in flight, over half the L2 read once in the warm-up
/// rounds (at least one region per copy of a round).
pub fn bandwidth_request(
    path: CopyPath,
    bytes: u32,
    tile: Option<(u32, u32)>,
    device: &DeviceInfo,
) -> CopyRequest {
    let (blocks, depth) = bandwidth_shape(path, bytes, device);
    let grid = blocks * device.sm_count;
    let per_round = u64::from(grid) * u64::from(depth);
    let regions = (device.l2_bytes / 2 / u64::from(bytes)).max(per_round);
    let source = source(path, bytes, tile, regions);
    let rounds = BANDWIDTH_BYTES_PER_SM
        .div_ceil(u64::from(blocks) * u64::from(depth) * u64::from(bytes))
        .clamp(4, 4096) as u32;
    CopyRequest {
        path,
        source,
        bytes,
        depth,
        grid,
        threads: threads(path),
        warmup_rounds: source.regions().div_ceil(per_round).max(1) as u32,
        rounds,
    }
}

/// The 5th percentile of `samples` by nearest rank (as [`LatencySummary`] takes its
/// percentiles); `None` for no samples.
pub fn p5(samples: &[f64]) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    (n > 0).then(|| sorted[((0.05 * n as f64).ceil() as usize).clamp(1, n) - 1])
}

/// One size of one path.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyAtSize {
    /// Bytes of one copy.
    pub bytes: u32,
    /// The tile (width, height in elements) of the tensor form.
    pub tile: Option<(u32, u32)>,
    /// One copy in flight, clock overhead subtracted.
    pub latency: Option<LatencySummary>,
    /// The 5th percentile of the same samples.
    pub latency_p5: Option<f64>,
    /// Bytes per SM cycle with many in flight.
    pub bytes_per_sm_cycle: Option<f64>,
    /// The same over the GPU at the measured SM clock, GB/s.
    pub gigabytes_per_second: Option<f64>,
    /// (blocks per SM, threads per block, copies in flight per block) of the bandwidth.
    pub launch: Option<(u32, u32, u32)>,
}

/// Every size of one path.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyPathFinding {
    /// The path.
    pub path: CopyPath,
    /// Its sizes, ascending.
    pub sizes: Vec<CopyAtSize>,
}

/// Everything the copy benchmark found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CopyFindings {
    /// The paths measured.
    pub paths: Vec<CopyPathFinding>,
    /// The paths the device lacks, with the reason.
    pub not_applicable: Vec<(CopyPath, String)>,
    /// What failed, with the path and size.
    pub failures: Vec<String>,
}

impl CopyFindings {
    /// The finding of `path`, if measured.
    pub fn path(&self, path: CopyPath) -> Option<&CopyPathFinding> {
        self.paths.iter().find(|p| p.path == path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimProfile;

    #[test]
    fn plans_fit_the_device() {
        let device = SimProfile::bundled("h100").unwrap().device;
        let max = max_copy_bytes(device.shared_per_block_optin_bytes);
        for path in CopyPath::ALL {
            let list: Vec<(u32, Option<(u32, u32)>)> = if path == CopyPath::BulkTensor2d {
                tiles(max)
                    .into_iter()
                    .map(|t| (t.0 * t.1 * 4, Some(t)))
                    .collect()
            } else {
                linear_sizes(max).into_iter().map(|b| (b, None)).collect()
            };
            for (bytes, tile) in list {
                for request in [
                    latency_request(path, bytes, tile),
                    bandwidth_request(path, bytes, tile, &device),
                ] {
                    request.check().unwrap();
                    assert!(request.shared_bytes() <= device.shared_per_block_optin_bytes);
                    // The warm-up rounds read every region once.
                    let per_round = u64::from(request.grid) * u64::from(request.depth);
                    assert!(
                        u64::from(request.warmup_rounds) * per_round >= request.source.regions()
                    );
                }
                let latency = latency_request(path, bytes, tile);
                assert!(latency.source.buffer_bytes(bytes) >= LATENCY_SPAN_BYTES);
                let bw = bandwidth_request(path, bytes, tile, &device);
                let (blocks, _) = bandwidth_shape(path, bytes, &device);
                let reserved = device.reserved_shared_per_block_bytes.unwrap_or(0);
                assert!(
                    u64::from(blocks) * (bw.shared_bytes() + reserved)
                        <= device.shared_per_sm_bytes
                );
            }
        }
    }

    #[test]
    fn the_fifth_percentile_is_a_nearest_rank() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(p5(&samples), Some(5.0));
        assert_eq!(p5(&[7.0]), Some(7.0));
        assert_eq!(p5(&[]), None);
        assert_eq!(linear_sizes(100), Vec::<u32>::new());
        assert_eq!(linear_sizes(256), [128, 256]);
    }
}
