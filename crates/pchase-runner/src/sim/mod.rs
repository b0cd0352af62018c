//! The simulated GPU: [`SimBackend`] runs the same [`ChaseRequest`]s as the CUDA backend
//! against a cache model described by a [`SimProfile`], so the whole measurement pipeline
//! is tested against a known truth.
//!
//! The model, per launch:
//! - every block is one thread on SM `block % sm_count`, following its own chain at its own
//!   addresses, exactly as the kernels of `pchase-kernels` do (node `k` at element
//!   `k × stride` holds `((k + 1) % nodes) × stride`); the blocks advance in lockstep, one
//!   load each in turn;
//! - all caches start empty; the SM-private caches a path goes through are looked up
//!   nearest first, then the L2 (the SM's near partition or the line's far home
//!   partition), then device memory; every level passed on the way is filled;
//! - a load costs the latency of the level that served it, plus the path's extra latency;
//!   a timed load adds jitter and, rarely, an outlier; a fine-grained sample adds the clock
//!   overhead, as the real kernel's two clock reads do.
//!
//! `docs/simulator.md` describes the model, the replacement policies and the shipped
//! profiles.
//!
//! ```
//! use pchase_runner::sim::{SimBackend, SimProfile};
//! use pchase_runner::{Backend, ChainSpec, ChaseRequest, LoadPath};
//! # fn main() -> Result<(), pchase_runner::RunnerError> {
//! let mut profile = SimProfile::bundled("volta")?;
//! profile.noise = Default::default(); // no jitter: exact latencies
//! let overhead = profile.clock.overhead_cycles;
//! let l1_latency = profile.caches[0].hit_latency;
//! let mut gpu = SimBackend::new(profile)?;
//! // 8 KiB fits the L1: after the warm-up pass every load hits.
//! let run = gpu.chase(&ChaseRequest::fine(LoadPath::GlobalCa, ChainSpec::new(8192, 32)?, 64))?;
//! assert!(run.blocks[0].latencies.iter().all(|&l| l == l1_latency + overhead));
//! # Ok(()) }
//! ```

mod cache;
mod profile;

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

pub use profile::{
    Associativity, CacheSpec, ClockSpec, L2Spec, MemorySpec, NoiseSpec, Replacement,
    SharedMemorySpec, SimProfile, UnifiedStore, CONSTANT_BANK_BYTES,
};

use crate::backend::{Backend, BlockSamples, ChaseMode, ChaseRequest, ChaseRun, LoadPath};
use crate::device::DeviceInfo;
use crate::error::RunnerError;
use cache::{Cache, Geometry};

/// Where the simulated allocator puts global arrays; each chain gets its own 2 MiB-aligned
/// range, as separate device allocations would.
const GLOBAL_BASE: u64 = 1 << 40;
const ALLOCATION_ALIGN: u64 = 2 << 20;
/// Where the constant bank lives (a separate range, so it never aliases global data).
const CONSTANT_BASE: u64 = 1 << 32;
/// Constant-path chains of several blocks are packed into the bank at this alignment.
const CONSTANT_ALIGN: u64 = 256;
/// Host-side cost of one kernel launch, added to the modelled device time.
const LAUNCH_OVERHEAD: Duration = Duration::from_micros(4);
/// Relative standard deviation of the simulated SM clock measurement.
const CLOCK_MEASUREMENT_STDEV: f64 = 5e-4;

/// The SM-private caches of one SM (copy 0 of each profile cache: one thread per block
/// always uses copy 0).
#[derive(Debug, Clone)]
struct SmCaches {
    caches: Vec<Cache>,
}

/// The L2 partitions and how one SM reaches them.
#[derive(Debug, Clone)]
struct L2 {
    partitions: Vec<Cache>,
    line_shift: u32,
    near_latency: u32,
    far_latency: u32,
    near_keeps_far_copies: bool,
}

impl L2 {
    /// Latency of a load of `addr` from an SM whose near partition is `near`, or `None`
    /// when it misses the L2 (device memory serves it). Fills what it passes.
    #[inline]
    fn access(&mut self, near: usize, addr: u64, rng: &mut Xoshiro256PlusPlus) -> Option<u32> {
        let count = self.partitions.len();
        if count == 1 {
            return self.partitions[0]
                .access(addr, rng)
                .then_some(self.near_latency);
        }
        let home = home_partition(addr >> self.line_shift, count);
        if home == near {
            return self.partitions[near]
                .access(addr, rng)
                .then_some(self.near_latency);
        }
        // The copy lookup also fills the copy on a miss, so far data the SM reuses is
        // then served near.
        if self.near_keeps_far_copies && self.partitions[near].access(addr, rng) {
            return Some(self.near_latency);
        }
        self.partitions[home]
            .access(addr, rng)
            .then_some(self.far_latency)
    }

    fn reset(&mut self) {
        self.partitions.iter_mut().for_each(Cache::reset);
    }
}

/// The home partition of an L2 line: a hash of the line number, so that consecutive lines
/// spread over the partitions as the hardware's address hash spreads them.
#[inline]
fn home_partition(line: u64, count: usize) -> usize {
    // The SplitMix64 finaliser: every input bit affects every output bit.
    let mut x = line.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    // `count` is a small partition count; the remainder is below it.
    (x % count as u64) as usize
}

/// One block's chase state.
#[derive(Debug)]
struct BlockState {
    sm: usize,
    near_partition: usize,
    base: u64,
    index: u64,
    stride_elements: u64,
    span_elements: u64,
    /// Cycles of all the block's loads (for the modelled device time).
    cycles: u64,
    /// Cycles of the timed loads only.
    timed_cycles: u64,
    samples: BlockSamples,
}

/// A simulated GPU configured by a [`SimProfile`].
#[derive(Debug, Clone)]
pub struct SimBackend {
    profile: SimProfile,
    rng: Xoshiro256PlusPlus,
    jitter: Option<Normal<f64>>,
    sms: Vec<Option<SmCaches>>,
    l2: L2,
    last_shared_bytes: Option<u64>,
}

impl SimBackend {
    /// A simulated GPU; validates the profile first.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] when the profile is invalid.
    pub fn new(profile: SimProfile) -> Result<SimBackend, RunnerError> {
        profile.validate()?;
        let jitter = if profile.noise.jitter_stdev_cycles > 0.0 {
            Some(
                Normal::new(0.0, profile.noise.jitter_stdev_cycles)
                    .map_err(|e| RunnerError::Profile(format!("noise.jitter_stdev_cycles: {e}")))?,
            )
        } else {
            None
        };
        let l2spec = &profile.l2;
        let geometry = Geometry::new(
            l2spec.partition_bytes(),
            l2spec.line_bytes,
            l2spec.sector(),
            l2spec.associativity,
            l2spec.replacement,
        );
        let l2 = L2 {
            partitions: (0..l2spec.partitions)
                .map(|_| Cache::new(geometry))
                .collect(),
            line_shift: l2spec.line_bytes.trailing_zeros(),
            near_latency: l2spec.near_latency,
            far_latency: l2spec.far(),
            near_keeps_far_copies: l2spec.near_keeps_far_copies,
        };
        let sm_count = profile.device.sm_count as usize;
        Ok(SimBackend {
            rng: Xoshiro256PlusPlus::seed_from_u64(profile.seed),
            jitter,
            sms: vec![None; sm_count],
            l2,
            last_shared_bytes: None,
            profile,
        })
    }

    /// The profile this GPU simulates.
    pub fn profile(&self) -> &SimProfile {
        &self.profile
    }

    /// Shared memory per SM (bytes) the last chase ran with, i.e. the carveout the
    /// simulated driver chose; `None` before the first chase.
    pub fn last_shared_carveout_bytes(&self) -> Option<u64> {
        self.last_shared_bytes
    }

    /// Noise of one timed load: rounded normal jitter plus, rarely, an outlier.
    #[inline]
    fn noise(
        rng: &mut Xoshiro256PlusPlus,
        jitter: Option<&Normal<f64>>,
        outlier_probability: f64,
        outlier_extra: u32,
    ) -> i64 {
        let mut noise = match jitter {
            // Rounded to whole cycles, as a clock counter reads; far inside i64.
            Some(normal) => normal.sample(rng).round() as i64,
            None => 0,
        };
        if outlier_probability > 0.0 && rng.random_bool(outlier_probability) {
            noise += i64::from(outlier_extra);
        }
        noise
    }

    /// Builds (or rebuilds, when the carveout changed a unified cache's size) and empties
    /// the caches of `sm`.
    fn prepare_sm(&mut self, sm: usize, shared_bytes: u64) {
        let wanted: Vec<Geometry> = self
            .profile
            .caches
            .iter()
            .map(|c| {
                Geometry::new(
                    c.size_at(shared_bytes),
                    c.line_bytes,
                    c.sector(),
                    c.associativity,
                    c.replacement,
                )
            })
            .collect();
        let slot = &mut self.sms[sm];
        match slot {
            Some(state)
                if state
                    .caches
                    .iter()
                    .map(Cache::geometry)
                    .eq(wanted.iter().copied()) =>
            {
                state.caches.iter_mut().for_each(Cache::reset);
            }
            _ => {
                *slot = Some(SmCaches {
                    caches: wanted.into_iter().map(Cache::new).collect(),
                });
            }
        }
    }

    /// Serves one load of byte address `addr` through `levels` (profile cache indices with
    /// their latencies) on `sm`; returns the latency of the level that served it.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn serve(
        sm_caches: &mut SmCaches,
        l2: &mut L2,
        rng: &mut Xoshiro256PlusPlus,
        levels: &[(usize, u32)],
        near_partition: usize,
        memory_latency: u32,
        addr: u64,
    ) -> u32 {
        for &(cache, latency) in levels {
            if sm_caches.caches[cache].access(addr, rng) {
                return latency;
            }
        }
        l2.access(near_partition, addr, rng)
            .unwrap_or(memory_latency)
    }

    fn check_request(&self, request: &ChaseRequest) -> Result<u64, RunnerError> {
        if request.chains.is_empty() {
            return Err(RunnerError::InvalidRequest(
                "a chase needs at least one chain".into(),
            ));
        }
        for chain in &request.chains {
            if chain.stride == 0
                || chain.stride % 4 != 0
                || chain.bytes == 0
                || chain.bytes % u64::from(chain.stride) != 0
            {
                return Err(RunnerError::InvalidRequest(format!(
                    "chain of {} B with stride {} B: the size must be a positive multiple of a stride that is a positive multiple of 4",
                    chain.bytes, chain.stride
                )));
            }
        }
        let timing_bytes = match request.mode {
            ChaseMode::Fine => 8 * u64::from(request.steps),
            ChaseMode::Coarse => 0,
        };
        let chain_copy = match request.path {
            LoadPath::Shared => request.chains.iter().map(|c| c.bytes).max().unwrap_or(0),
            _ => 0,
        };
        if request.path == LoadPath::Constant {
            let packed: u64 = request
                .chains
                .iter()
                .map(|c| c.bytes.next_multiple_of(CONSTANT_ALIGN))
                .sum();
            if packed > CONSTANT_BANK_BYTES {
                return Err(RunnerError::InvalidRequest(format!(
                    "constant-path chains need {packed} B, the constant bank holds {CONSTANT_BANK_BYTES} B"
                )));
            }
        }
        self.profile
            .shared_carveout_for(request.carveout, timing_bytes + chain_copy)
    }
}

impl Backend for SimBackend {
    fn device(&self) -> &DeviceInfo {
        &self.profile.device
    }

    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        let shared_bytes = self.check_request(request)?;
        self.last_shared_bytes = Some(shared_bytes);
        let sm_count = self.sms.len();
        let partitions = self.l2.partitions.len();

        // Lay the chains out as the kernels see them, and place the blocks on SMs.
        let mut blocks = Vec::with_capacity(request.chains.len());
        let mut next_base = match request.path {
            LoadPath::Constant => CONSTANT_BASE,
            _ => GLOBAL_BASE,
        };
        for (b, chain) in request.chains.iter().enumerate() {
            let sm = b % sm_count;
            blocks.push(BlockState {
                sm,
                near_partition: sm * partitions / sm_count,
                base: next_base,
                index: 0,
                stride_elements: u64::from(chain.stride / 4),
                span_elements: chain.bytes / 4,
                cycles: 0,
                timed_cycles: 0,
                samples: BlockSamples {
                    smid: u32::try_from(sm).unwrap_or(u32::MAX),
                    ..BlockSamples::default()
                },
            });
            next_base += match request.path {
                LoadPath::Constant => chain.bytes.next_multiple_of(CONSTANT_ALIGN),
                _ => chain.bytes.next_multiple_of(ALLOCATION_ALIGN),
            };
        }
        let mut used: Vec<usize> = blocks.iter().map(|b| b.sm).collect();
        used.sort_unstable();
        used.dedup();
        for &sm in &used {
            self.prepare_sm(sm, shared_bytes);
        }
        self.l2.reset();

        let path = request.path;
        let extra = self
            .profile
            .path_extra_latency
            .get(&path)
            .copied()
            .unwrap_or(0);
        let levels: Vec<(usize, u32)> = self
            .profile
            .caches
            .iter()
            .enumerate()
            .filter(|(_, c)| c.serves(path))
            .map(|(i, c)| (i, c.hit_latency + extra))
            .collect();
        let shared_latency = self.profile.shared_memory.latency + extra;
        let memory_latency = self.profile.memory.latency + extra;
        let overhead = self.profile.clock.overhead_cycles;
        let fine = request.mode == ChaseMode::Fine;
        let outlier_probability = self.profile.noise.outlier_probability;
        let outlier_extra = self.profile.noise.outlier_extra_cycles;
        if fine {
            for block in &mut blocks {
                block
                    .samples
                    .latencies
                    .reserve_exact(request.steps as usize);
                block.samples.indices.reserve_exact(request.steps as usize);
            }
        }
        if path == LoadPath::Shared {
            // The block copies its chain into shared memory first: one load per element.
            for block in &mut blocks {
                block.cycles += block.span_elements * u64::from(self.profile.l2.far());
            }
        }

        let SimBackend {
            rng,
            jitter,
            sms,
            l2,
            ..
        } = self;
        let jitter = jitter.as_ref();
        for (phase_steps, timed) in [(request.warmup_steps, false), (request.steps, true)] {
            for _ in 0..phase_steps {
                for block in blocks.iter_mut() {
                    let addr = block.base + 4 * block.index;
                    let latency = if path == LoadPath::Shared {
                        shared_latency
                    } else {
                        // Every used SM was prepared above.
                        let Some(sm_caches) = sms[block.sm].as_mut() else {
                            return Err(RunnerError::WrongResult(format!(
                                "simulator: SM {} was not prepared",
                                block.sm
                            )));
                        };
                        Self::serve(
                            sm_caches,
                            l2,
                            rng,
                            &levels,
                            block.near_partition,
                            memory_latency,
                            addr,
                        )
                    };
                    // The loaded value: the next node's index.
                    let next = block.index + block.stride_elements;
                    block.index = if next >= block.span_elements { 0 } else { next };
                    if timed {
                        let noisy = (i64::from(latency)
                            + Self::noise(rng, jitter, outlier_probability, outlier_extra))
                        .max(1) as u64;
                        block.cycles += noisy;
                        block.timed_cycles += noisy;
                        if fine {
                            let sample =
                                u32::try_from(noisy + u64::from(overhead)).unwrap_or(u32::MAX);
                            block.samples.latencies.push(sample);
                            block
                                .samples
                                .indices
                                .push(u32::try_from(block.index).unwrap_or(u32::MAX));
                        }
                    } else {
                        block.cycles += u64::from(latency);
                    }
                }
            }
        }

        let mut slowest = 0u64;
        let out: Vec<BlockSamples> = blocks
            .into_iter()
            .map(|mut block| {
                slowest = slowest.max(block.cycles);
                // Indices are below 2^32: ChainSpec limits the elements.
                block.samples.final_index = u32::try_from(block.index).unwrap_or(u32::MAX);
                if !fine {
                    // The timed pass of the coarse kernel is bracketed by one pair of clock
                    // reads: its total is the sum of its loads plus that one overhead.
                    block.samples.total_cycles = Some(block.timed_cycles + u64::from(overhead));
                }
                block.samples
            })
            .collect();
        let gpu_time = LAUNCH_OVERHEAD
            + Duration::from_secs_f64(slowest as f64 / (self.profile.clock.sm_mhz * 1e6));
        Ok(ChaseRun {
            blocks: out,
            gpu_time,
        })
    }

    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        if samples == 0 {
            return Err(RunnerError::InvalidRequest(
                "clock overhead needs at least one sample".into(),
            ));
        }
        let overhead = i64::from(self.profile.clock.overhead_cycles);
        let jitter = self.jitter;
        let noise = self.profile.noise;
        let mut readings: Vec<i64> = (0..samples)
            .map(|_| {
                (overhead
                    + Self::noise(
                        &mut self.rng,
                        jitter.as_ref(),
                        noise.outlier_probability,
                        noise.outlier_extra_cycles,
                    ))
                .max(0)
            })
            .collect();
        let middle = readings.len() / 2;
        let (_, median, _) = readings.select_nth_unstable(middle);
        Ok(u32::try_from(*median).unwrap_or(u32::MAX))
    }

    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        let mhz = self.profile.clock.sm_mhz;
        let normal = Normal::new(mhz, mhz * CLOCK_MEASUREMENT_STDEV)
            .map_err(|e| RunnerError::Profile(format!("clock.sm_mhz: {e}")))?;
        Ok(normal.sample(&mut self.rng))
    }
}
