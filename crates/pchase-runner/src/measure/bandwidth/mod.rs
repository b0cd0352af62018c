//! Bandwidth of every level, tuned: for each level a search over launch shapes
//! ([`tuner`]) with short launches, then the best shape timed again with long ones.
//!
//! Each level has a plan ([`LevelPlan`]): the operations (instruction variants) that reach
//! it, how the buffer is walked and how large it is, and the seed of the search. The data
//! decides the level, as on the hardware: the L1 read re-reads an 8 KiB region per block
//! (resident in the L1), the L2 reads walk a buffer a fraction of the L2 with `.cg` loads
//! (which the L1 does not keep), device memory a buffer eight times the L2.
//!
//! ```
//! use pchase_runner::measure::bandwidth::{BandwidthLevel, LevelPlan};
//! use pchase_runner::sim::SimProfile;
//! let h100 = SimProfile::bundled("h100")?;
//! let plan = LevelPlan::new(BandwidthLevel::MemoryRead, &h100.device, 1755.0, None, None)?;
//! assert_eq!(plan.region_bytes, 512 << 20); // 8 × 50 MiB, to the next power of two
//! assert!(plan.space.shapes().len() > 100);
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

pub mod tuner;

use std::time::Duration;

use topology::ElementKind;

use super::Session;
pub use crate::bandwidth::BandwidthLevel;
use crate::{
    bandwidth::{
        BandwidthOp, BandwidthRequest, BandwidthShape, ReadVariant, RegionLayout, MAX_BLOCKS_PER_SM,
    },
    device::DeviceInfo,
    error::RunnerError,
};
pub use tuner::{coordinate_search, Search, SearchSpace};

/// Device time each launch of the search aims at (the L2's and device memory's:
/// [`STREAM_TUNING_LAUNCH`]).
pub const TUNING_LAUNCH: Duration = Duration::from_micros(100);
/// Device time each launch of the L2's and device memory's search aims at. On the H100,
/// 100 µs launches ranked the L2's shapes differently from 1 ms ones (7.5–9.0 against
/// 8.0–10.3 TB/s). A device-memory launch covers its buffer at least once (some 180 µs
/// on the H100, 120 µs on the H200), and at that length its start and end cost 4–5 %
/// and weigh on deeper unrolls more: 16 B × 8 ranked below 16 B × 4 in one H200 run of
/// three, though 0.7 % faster in long launches. With launches back to back
/// over two buffers, six runs each on an H100 and an H200 read 0.1–0.3 points higher with
/// these than with 100 µs launches and two finalists, for some 50 ms of GPU time a run.
pub const STREAM_TUNING_LAUNCH: Duration = Duration::from_micros(400);
/// How many of the search's best shapes of the L2 and device memory are timed again with
/// long launches, and one more where the search could not tell it from its best (within
/// [`tuner::MIN_GAIN`]); the one with the best median is the result. Short launches rank
/// their shapes by their start and end as well (`STREAM_TUNING_LAUNCH`). In an H200 run
/// with three finalists at every level, the third was within 0.5 % of the best at the L2
/// write (whose best four shapes were within 0.1 % in short launches and 1.7 % apart in
/// long ones, 4,768 against 4,688 GB/s) and the memory write (where it was chosen), and
/// 1.3–14 % behind at the other four levels, where the first two held the result.
pub const FINALISTS: usize = 2;
/// The same for the L1 and shared memory, whose best shapes all reach the SMs' peak: on an
/// H200 the search's best two read 31,660 and 31,621 GB/s (L1) and 32,145 and 32,140 GB/s
/// (shared) in short launches and 32,692 and 32,695, 33,145 and 33,190 GB/s in long ones,
/// the same to 0.15 %, so the second finalist only chose between equals.
pub const PER_BLOCK_FINALISTS: usize = 1;
/// Device time each launch of the final measurement aims at.
pub const FINAL_LAUNCH: Duration = Duration::from_millis(1);
/// Timed repetitions of each shape the search tries (device memory's:
/// [`MEMORY_TUNING_REPETITIONS`]).
pub const TUNING_REPETITIONS: u32 = 3;
/// Timed repetitions of each shape device memory's searches try. Each request warms up
/// first and each launch streams its whole buffer at least once, and on an H200 one shape's
/// long launches differed by 0.1 % (read), 0.4 % (copy) and 0.6 % (write) from best to
/// median, about the 0.5 % a move must gain: the best of two ranks the shapes as the best
/// of three did, and the finalists are timed again.
pub const MEMORY_TUNING_REPETITIONS: u32 = 2;
/// Timed repetitions of the best shapes. Their best and their median are the result; the
/// launches of one shape differ by 0.02 % (L1) to 1 % (the L2 read) on an H200, except
/// the near-partition read's (13 % between modes: its tolerance is 35 %).
pub const FINAL_REPETITIONS: u32 = 3;
/// The most shapes one level's search evaluates.
pub const SEARCH_BUDGET: usize = 32;
/// The L1 read's largest region per block (the hand-written kernels reached the L1's peak
/// with 8, 16 and 32 KiB alike on the H100).
pub const L1_REGION: u64 = 8 << 10;
/// The L1 read's smallest region per block.
pub const L1_MIN_REGION: u64 = 4 << 10;
/// The shared-memory read's region per block.
pub const SHARED_REGION: u64 = 16 << 10;
/// The peak of the L1 and shared memory from Volta on, bytes per clock per SM.
pub const SM_PEAK_BYTES_PER_CLOCK: f64 = 128.0;

/// How one level is measured on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelPlan {
    /// The level.
    pub level: BandwidthLevel,
    /// The shapes the search may try.
    pub space: SearchSpace,
    /// Where the search starts.
    pub seed: BandwidthShape,
    /// How the buffer is walked.
    pub layout: RegionLayout,
    /// Bytes of each region.
    pub region_bytes: u64,
    /// The rate (bytes per second) launches are sized by: the level's peak where one is
    /// known, an upper estimate otherwise.
    pub sizing_rate: f64,
}

/// The instruction variants the search may try for `level` (on any device), in the order
/// the search tries them; the first is the seed's.
pub fn level_ops(level: BandwidthLevel) -> Vec<BandwidthOp> {
    use BandwidthOp::{Copy, Read, SharedRead, Write};
    match level {
        BandwidthLevel::L1 => vec![Read(ReadVariant::Ca), Read(ReadVariant::Nc)],
        BandwidthLevel::Shared => vec![SharedRead],
        BandwidthLevel::L2Near | BandwidthLevel::L2 => vec![Read(ReadVariant::Cg)],
        BandwidthLevel::L2Write | BandwidthLevel::MemoryWrite => vec![Write],
        BandwidthLevel::MemoryRead => vec![
            Read(ReadVariant::Cg),
            Read(ReadVariant::Cs),
            Read(ReadVariant::Nc),
            Read(ReadVariant::Ca),
        ],
        BandwidthLevel::MemoryCopy => vec![Copy],
    }
}

/// The power of two at or below `bytes` (at least 4 KiB).
fn pow2_floor(bytes: u64) -> u64 {
    if bytes < 4096 {
        4096
    } else {
        1 << (63 - bytes.leading_zeros())
    }
}

/// The device's memory bandwidth as the API states it: memory clock × bus width × 2 (double
/// data rate), bytes per second.
pub fn api_memory_peak(device: &DeviceInfo) -> Option<f64> {
    let clock = f64::from(device.memory_clock_khz?) * 1e3;
    let bus_bytes = f64::from(device.memory_bus_width_bits?) / 8.0;
    (clock > 0.0 && bus_bytes > 0.0).then_some(2.0 * clock * bus_bytes)
}

impl LevelPlan {
    /// The plan of `level` on `device`, whose SM clock is `sm_mhz`; `l2_partitions` sizes the
    /// near-partition read (two where unknown). `sm_cache_bytes` is the
    /// smallest SM cache of the global reads (L1 data, read-only) where the session measured
    /// it; the L1 read sizes its regions and blocks by it (an eighth of it per block, from 4 to
    /// 8 KiB, and the blocks of one SM within half of it). Without it the L1 is taken to be
    /// 128 KiB from Volta on and 12 KiB before.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] where the device cannot hold the level's buffers.
    pub fn new(
        level: BandwidthLevel,
        device: &DeviceInfo,
        sm_mhz: f64,
        sm_cache_bytes: Option<u64>,
        l2_partitions: Option<u32>,
    ) -> Result<Self, RunnerError> {
        let sms = f64::from(device.sm_count);
        let hz = sm_mhz * 1e6;
        let sm_peak = SM_PEAK_BYTES_PER_CLOCK * sms * hz;
        let memory = api_memory_peak(device).unwrap_or(1e12);
        // Eight L2s: every pass evicts the last; at least 256 MiB, a power of two, and at
        // most an eighth of the device's memory (a copy holds two buffers).
        let memory_region = (8 * device.l2_bytes)
            .max(256 << 20)
            .next_power_of_two()
            .min(pow2_floor(device.total_memory_bytes / 8))
            .min(1 << 31);
        // The near partition's share of the L2: from the partition map where the L2
        // benchmark ran, else two partitions (Hopper's).
        let partitions_hint = u64::from(l2_partitions.unwrap_or(2).max(1));
        let l1 = sm_cache_bytes.unwrap_or(if device.compute_capability.major >= 7 {
            128 << 10
        } else {
            12 << 10
        });
        let l1_region = pow2_floor(l1 / 8).clamp(L1_MIN_REGION, L1_REGION);
        let l1_blocks: Vec<u32> = [1, 2, 4, 8]
            .into_iter()
            .filter(|&b| b == 1 || u64::from(b) * l1_region <= l1 / 2)
            .collect();
        let (layout, region, rate, blocks): (_, u64, f64, Vec<u32>) = match level {
            BandwidthLevel::L1 => (RegionLayout::PerBlock, l1_region, sm_peak, l1_blocks),
            BandwidthLevel::Shared => (
                RegionLayout::PerBlock,
                SHARED_REGION,
                sm_peak,
                vec![1, 2, 4, 8],
            ),
            BandwidthLevel::L2Near => (
                RegionLayout::GridStride,
                pow2_floor(device.l2_bytes / partitions_hint / 2),
                sm_peak / 2.0,
                vec![1, 2, 4, 8, 16],
            ),
            BandwidthLevel::L2 => (
                RegionLayout::GridStride,
                pow2_floor(device.l2_bytes / 4 * 3),
                sm_peak / 2.0,
                vec![1, 2, 4, 8, 16],
            ),
            BandwidthLevel::L2Write => (
                RegionLayout::GridStride,
                pow2_floor(device.l2_bytes / 4 * 3),
                sm_peak / 2.0,
                vec![1, 2, 4, 8, 16],
            ),
            BandwidthLevel::MemoryRead => (
                RegionLayout::GridStride,
                memory_region,
                memory,
                vec![1, 2, 4, 8, 16],
            ),
            BandwidthLevel::MemoryWrite => (
                RegionLayout::GridStride,
                memory_region,
                memory,
                vec![1, 2, 4, 8, 16],
            ),
            BandwidthLevel::MemoryCopy => (
                RegionLayout::GridStride,
                memory_region / 2,
                memory,
                vec![1, 2, 4, 8, 16],
            ),
        };
        let ops = level_ops(level);
        if matches!(layout, RegionLayout::GridStride) && 2 * region > device.total_memory_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "{level}: a {region} B buffer does not fit the device's memory"
            )));
        }
        let max_threads_per_sm = device
            .max_threads_per_sm
            .unwrap_or(device.max_threads_per_block);
        let threads: Vec<u32> = [128, 256, 512, 1024]
            .into_iter()
            .filter(|&t| t <= device.max_threads_per_block && t % device.warp_size.max(1) == 0)
            .collect();
        let space = SearchSpace {
            ops: ops.clone(),
            vectors: vec![4, 8, 16],
            unrolls: vec![1, 2, 4, 8],
            threads: threads.clone(),
            blocks_per_sm: blocks
                .into_iter()
                .filter(|&b| b <= MAX_BLOCKS_PER_SM)
                .collect(),
            max_threads_per_sm,
        };
        // Seeds from the hand-written kernels' best shapes on the H100:
        // 16-byte accesses, unroll 4, two blocks of half the SM's threads.
        let seed_threads = threads
            .iter()
            .copied()
            .filter(|&t| 2 * t <= max_threads_per_sm)
            .max()
            .or_else(|| threads.first().copied())
            .ok_or_else(|| {
                RunnerError::InvalidRequest("no block size the search could try".into())
            })?;
        let two_blocks = 2 * seed_threads <= max_threads_per_sm && space.blocks_per_sm.contains(&2);
        let seed = BandwidthShape {
            op: ops[0],
            vector_bytes: 16,
            unroll: 4,
            blocks_per_sm: if two_blocks { 2 } else { 1 },
            threads: seed_threads,
        };
        Ok(LevelPlan {
            level,
            space,
            seed,
            layout,
            region_bytes: region,
            sizing_rate: rate,
        })
    }

    /// The request that times `shape` for about `duration` per launch, `repetitions` times,
    /// after an untimed launch where `warm_up`. Grid-stride launches cover their whole region
    /// at least once.
    pub fn request(
        &self,
        shape: BandwidthShape,
        sm_count: u32,
        duration: Duration,
        repetitions: u32,
        warm_up: bool,
    ) -> BandwidthRequest {
        let per_iteration =
            (u64::from(shape.blocks(sm_count)) * shape.block_iteration_bytes()).max(1);
        let wanted = (self.sizing_rate * duration.as_secs_f64()) as u64;
        let mut iterations = wanted.div_ceil(per_iteration);
        if matches!(self.layout, RegionLayout::GridStride) {
            let step = u64::from(shape.blocks(sm_count))
                * u64::from(shape.threads)
                * u64::from(shape.vector_bytes)
                * u64::from(shape.unroll);
            iterations = iterations.max(self.region_bytes.div_ceil(step.max(1)));
        }
        BandwidthRequest {
            shape,
            layout: self.layout,
            region_bytes: self.region_bytes,
            iterations: u32::try_from(iterations.max(1)).unwrap_or(u32::MAX),
            repetitions,
            warm_up,
        }
    }
}

/// What one level's measurement found.
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthFinding {
    /// The level.
    pub level: BandwidthLevel,
    /// The best shape the search found.
    pub shape: BandwidthShape,
    /// Its best repetition in the final measurement, bytes per second.
    pub best_bytes_per_second: f64,
    /// Its median repetition in the final measurement, bytes per second.
    pub median_bytes_per_second: f64,
    /// Timed repetitions of the final measurement.
    pub repetitions: u32,
    /// Bytes the data spans (per buffer).
    pub working_set_bytes: u64,
    /// Shapes the search evaluated.
    pub shapes_tried: usize,
    /// The SM clock the per-SM figures use, MHz: for the L1 and shared memory read right
    /// after the final launches, otherwise the calibration's.
    pub sm_clock_mhz: f64,
    /// The SM count the per-SM figures use.
    pub sm_count: u32,
    /// The theoretical peak, where one exists: bytes per second, how it is computed, and
    /// bytes per clock per SM where it is stated so.
    pub peak: Option<(f64, &'static str, Option<f64>)>,
    /// The SM cache size the plan was sized by, where the session had measured it.
    pub sm_cache_bytes: Option<u64>,
    /// The L2 partition count the plan sized the near-partition buffer by (the partition
    /// map's, where the L2 benchmark ran).
    pub l2_partitions: Option<u32>,
}

impl BandwidthFinding {
    /// Bytes per clock per SM of the best repetition.
    pub fn bytes_per_clock_per_sm(&self) -> f64 {
        self.best_bytes_per_second / (self.sm_clock_mhz * 1e6 * f64::from(self.sm_count.max(1)))
    }
}

/// The theoretical peak of `level` on `device` at `sm_mhz`, where one exists.
pub fn peak(
    level: BandwidthLevel,
    device: &DeviceInfo,
    sm_mhz: f64,
) -> Option<(f64, &'static str, Option<f64>)> {
    let volta = device.compute_capability.major >= 7;
    match level {
        BandwidthLevel::L1 | BandwidthLevel::Shared if volta => Some((
            SM_PEAK_BYTES_PER_CLOCK * f64::from(device.sm_count) * sm_mhz * 1e6,
            "128 B per clock per SM (Volta and later) × SMs × the measured SM clock",
            Some(SM_PEAK_BYTES_PER_CLOCK),
        )),
        BandwidthLevel::MemoryRead | BandwidthLevel::MemoryWrite | BandwidthLevel::MemoryCopy => {
            api_memory_peak(device)
                .map(|p| (p, "memory clock × bus width × 2, from the driver API", None))
        }
        _ => None,
    }
}

/// Measures `level`: the search with short launches, then the best shape with long ones.
///
/// # Errors
/// The backend's error where the search's seed or the final measurement fails.
pub(crate) fn measure(
    s: &mut Session<'_>,
    level: BandwidthLevel,
    gpu: &mut Duration,
) -> Result<BandwidthFinding, RunnerError> {
    let device = s.backend.device().clone();
    let sm_mhz = s
        .results
        .sm_clock_mhz
        .or_else(|| device.sm_clock_khz.map(|k| f64::from(k) / 1e3))
        .ok_or_else(|| RunnerError::InvalidRequest("no SM clock to size launches by".into()))?;
    // The smallest measured SM cache of the global reads sizes the L1 read.
    let sm_cache_bytes = [ElementKind::L1Data, ElementKind::ReadOnly]
        .into_iter()
        .filter_map(|e| s.exact_size(e))
        .min();
    let l2_partitions = s
        .results
        .l2
        .as_ref()
        .and_then(|l2| l2.map.as_ref().ok())
        .map(|map| map.count);
    let mut plan = LevelPlan::new(level, &device, sm_mhz, sm_cache_bytes, l2_partitions)?;
    let sms = device.sm_count;
    let stream = matches!(level.element(), ElementKind::L2 | ElementKind::DeviceMemory);
    let tuning = if stream {
        STREAM_TUNING_LAUNCH
    } else {
        TUNING_LAUNCH
    };
    let space = plan.space.clone();
    // Reads of data a cache keeps (the L1, shared memory, the L2) find it there, and the
    // clocks up, after the level's first request: only that one runs an untimed launch.
    // Writes and device memory keep it before every request: a write launch after an idle
    // gap finds the L2 clean of the dirty lines the one before left (no launch then pays
    // for them), and device memory's buffers alternate from one launch to the next.
    let cached = level.reads_cached_data();
    let repetitions = if level.element() == ElementKind::DeviceMemory {
        MEMORY_TUNING_REPETITIONS
    } else {
        TUNING_REPETITIONS
    };
    let mut sized = false;
    let search = coordinate_search(&space, plan.seed, SEARCH_BUDGET, |shape| {
        let request = plan.request(*shape, sms, tuning, repetitions, !(cached && sized));
        let run = s.backend.bandwidth(&request)?;
        *gpu += run.gpu_time;
        let best = run
            .best_bytes_per_second()
            .ok_or_else(|| RunnerError::WrongResult(format!("{level}: {shape} was not timed")))?;
        log::info!(
            "bandwidth {level}: {shape}: {:.1} GB/s (best of {repetitions})",
            best / 1e9
        );
        // Launches are sized by the estimate until the seed is measured, then by it.
        if !sized {
            plan.sizing_rate = best;
            sized = true;
        }
        Ok(best)
    })?;
    // The best few shapes again, with long launches: short ones rank close shapes by noise
    // and by their start and end, which weigh more in them.
    let mut finalists: Vec<(BandwidthShape, f64)> = search
        .evaluated
        .iter()
        .filter_map(|(shape, value)| value.map(|v| (*shape, v)))
        .collect();
    finalists.sort_by(|a, b| b.1.total_cmp(&a.1));
    let tied = |k: usize| {
        finalists
            .get(k)
            .zip(finalists.first())
            .is_some_and(|((_, v), (_, best))| v * (1.0 + tuner::MIN_GAIN) >= *best)
    };
    finalists.truncate(if stream {
        FINALISTS + usize::from(tied(FINALISTS))
    } else {
        PER_BLOCK_FINALISTS
    });
    let mut chosen: Option<(BandwidthShape, BandwidthRequest, f64, f64)> = None;
    for (shape, _) in finalists {
        let request = plan.request(shape, sms, FINAL_LAUNCH, FINAL_REPETITIONS, !cached);
        let run = s.backend.bandwidth(&request)?;
        *gpu += run.gpu_time;
        let (best, median) = run
            .best_bytes_per_second()
            .zip(run.median_bytes_per_second())
            .ok_or_else(|| {
                RunnerError::WrongResult(format!("{level}: the final launches were not timed"))
            })?;
        log::info!(
            "bandwidth {level}: {shape}: {:.1} GB/s, median {:.1} (long launches)",
            best / 1e9,
            median / 1e9
        );
        if chosen.as_ref().is_none_or(|c| median > c.3) {
            chosen = Some((shape, request, best, median));
        }
    }
    let (shape, request, best, median) = chosen
        .ok_or_else(|| RunnerError::WrongResult(format!("{level}: the search timed no shape")))?;
    // Bytes per clock per SM need the clock the SMs ran at: read it right after the long
    // launches, while the clocks are still where that load put them (the calibration's
    // clock is from an idle GPU's spin).
    let sm_mhz = if level.per_sm() {
        match s.backend.quick_sm_clock_mhz() {
            Ok(mhz) => mhz,
            Err(e) => {
                log::warn!("bandwidth {level}: SM clock after the launches not read ({e}); using the calibration's");
                sm_mhz
            }
        }
    } else {
        sm_mhz
    };
    log::info!(
        "bandwidth {level}: {:.1} GB/s (median {:.1}) with {shape} after {} shapes",
        best / 1e9,
        median / 1e9,
        search.evaluated.len()
    );
    Ok(BandwidthFinding {
        level,
        shape,
        best_bytes_per_second: best,
        median_bytes_per_second: median,
        repetitions: FINAL_REPETITIONS,
        working_set_bytes: request.footprint_bytes(sms),
        shapes_tried: search.evaluated.len(),
        sm_clock_mhz: sm_mhz,
        sm_count: sms,
        peak: peak(level, &device, sm_mhz),
        sm_cache_bytes,
        l2_partitions,
    })
}
