//! The simulated GPU: [`SimBackend`] runs the same [`ChaseRequest`]s as the CUDA backend
//! against a cache model described by a [`SimProfile`], so the whole measurement pipeline
//! is tested against a known truth.
//!
//! The model, per launch:
//! - every block runs on SM `block % sm_count`, following its own chain at its own
//!   addresses, exactly as the kernels of `pchase-kernels` do (node `k` at element
//!   `k × stride` holds `((k + 1) % nodes) × stride`); the blocks advance in lockstep, one
//!   load each in turn;
//! - a chase is one thread per block (thread 0); the two-phase probe
//!   ([`Backend::two_phase`]) runs a fill thread, an evict thread and the fill thread again,
//!   one phase after the other, as its kernel does between its barriers;
//! - all caches start empty; the SM-private caches a path goes through are looked up
//!   nearest first, then the L2 (the SM's near partition or the line's far home
//!   partition), then device memory; every level passed on the way is filled; a miss of a
//!   line homed in a far partition costs the far partition's extra latency on top of
//!   device memory's, as the request and the data cross to it and back;
//! - a pinned chase ([`Backend::pinned_chase`]) runs one chase per warp of each slot, all
//!   in lockstep, then samples warp 0's loads one by one while the other warps go on; the partition map
//!   ([`Backend::partition_map`]) lets the reference SM load every SM's array, then every
//!   SM reads its own array twice, one SM after the other; SM `s` of `n` uses partition
//!   `s × partitions / n` as its near one;
//! - a cache with `copies_per_sm = c` serves thread `t` through copy `(t / warp_size) % c`
//!   ([`CacheSpec::copy_for_thread`]): a warp always uses one copy, and a thread never sees
//!   another copy's contents;
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
mod tenant;

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

pub use profile::{
    Associativity, CacheSpec, ClockSpec, L2Spec, MemorySpec, NoiseSpec, Replacement,
    SharedMemorySpec, SimProfile, UnifiedStore, CONSTANT_BANK_BYTES, SIM_MEMORY_BUDGET,
};
pub use tenant::{CoTenant, SimObservation};

use crate::backend::{
    check_partition_map, check_pinned, check_two_phase, check_written, Backend, BlockSamples,
    Carveout, ChainSpec, ChaseMode, ChaseRequest, ChaseRun, LoadPath, PartitionMapRequest,
    PartitionMapRun, Phase, PinnedRequest, PinnedRun, PinnedSlot, SmLineLatencies, TwoPhaseRequest,
};
use crate::device::DeviceInfo;
use crate::error::RunnerError;
use cache::{Cache, Geometry};

/// Where the simulated allocator puts global arrays; each chase chain gets its own 2 MiB-aligned
/// range, as separate device allocations would.
const GLOBAL_BASE: u64 = 1 << 40;
const ALLOCATION_ALIGN: u64 = 2 << 20;
/// The two-phase launch puts every block's copy of a chain on its own 128 KiB boundary inside
/// one buffer (chain A's copies, then chain B's), as the CUDA backend lays them out.
const TWO_PHASE_BLOCK_ALIGN: u64 = 128 << 10;
/// Where the constant bank lives (a separate range, so it never aliases global data).
const CONSTANT_BASE: u64 = 1 << 32;
/// Constant-path chains of several blocks (and the two chains of a two-phase probe) are
/// packed into the bank, each starting on a 128-byte boundary, as the CUDA backend packs them.
const CONSTANT_ALIGN: u64 = 128;
/// Host-side cost of one kernel launch, added to the modelled device time.
const LAUNCH_OVERHEAD: Duration = Duration::from_micros(4);
/// Relative standard deviation of the simulated SM clock measurement.
const CLOCK_MEASUREMENT_STDEV: f64 = 5e-4;

/// The SM-private caches of one SM: every copy of every profile cache, indexed
/// `[profile cache][copy]`.
#[derive(Debug, Clone)]
struct SmCaches {
    caches: Vec<Vec<Cache>>,
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

    /// Extra cycles of a load that misses the L2 when the line's home partition is not the
    /// SM's near one: the request crosses to the far partition and the data comes back the
    /// same way, as for a far hit.
    #[inline]
    fn far_miss_extra(&self, near: usize, addr: u64) -> u32 {
        let count = self.partitions.len();
        if count == 1 || home_partition(addr >> self.line_shift, count) == near {
            0
        } else {
            self.far_latency.saturating_sub(self.near_latency)
        }
    }

    /// A store of `bytes` bytes from `addr` reaches the line's home partition.
    fn write(&mut self, addr: u64, bytes: u64, rng: &mut Xoshiro256PlusPlus) {
        let count = self.partitions.len();
        let home = home_partition(addr >> self.line_shift, count);
        self.partitions[home].write(addr, bytes, rng);
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

/// One SM cache a load looks up: the profile cache, the copy the loading thread uses, and
/// the latency of a hit there (path extra included).
#[derive(Debug, Clone, Copy)]
struct Level {
    cache: usize,
    copy: usize,
    latency: u32,
}

/// How the loads of one thread through one path are served.
#[derive(Debug, Clone)]
struct Route {
    /// The SM caches on the path, nearest first, in the thread's copies.
    levels: Vec<Level>,
    /// The path's extra latency, added to an L2 hit (the SM levels include it already).
    extra: u32,
    /// Latency of a load that misses everything (path extra included).
    memory_latency: u32,
    /// `Some(latency)` for the shared path, which never touches a cache.
    shared_latency: Option<u32>,
}

/// A position on one block's copy of a chain. The chain is not materialised: the value a
/// load returns is what the array would hold there.
#[derive(Debug, Clone, Copy)]
struct ChainCursor {
    base: u64,
    index: u64,
    stride_elements: u64,
    span_elements: u64,
}

impl ChainCursor {
    /// A cursor at index 0 of `chain`, whose element 0 sits at byte address `base`.
    fn new(base: u64, chain: &ChainSpec) -> ChainCursor {
        ChainCursor {
            base,
            index: 0,
            stride_elements: u64::from(chain.stride / 4),
            span_elements: chain.bytes / 4,
        }
    }

    /// Byte address of the element the next load reads.
    #[inline]
    fn address(&self) -> u64 {
        self.base + 4 * self.index
    }

    /// Follows the pointer: the loaded value (the next node's index) becomes the index.
    #[inline]
    fn advance(&mut self) {
        let next = self.index + self.stride_elements;
        self.index = if next >= self.span_elements { 0 } else { next };
    }

    /// The current index; below 2^32 because a [`ChainSpec`] has at most 2^32 elements.
    fn index_u32(&self) -> u32 {
        u32::try_from(self.index).unwrap_or(u32::MAX)
    }
}

/// One block's placement and what it reports.
#[derive(Debug)]
struct BlockState {
    sm: usize,
    near_partition: usize,
    /// Cycles of all the block's loads (for the modelled device time).
    cycles: u64,
    /// Cycles of the timed loads only.
    timed_cycles: u64,
    samples: BlockSamples,
}

/// Whether (and how) the loads of a phase are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timing {
    /// Warm-up loads: no clock reads, no noise.
    Untimed,
    /// Every load timed and recorded with its index.
    Fine,
    /// Loads timed as one total.
    Coarse,
}

/// What the loads of a launch work with, borrowed from the [`SimBackend`].
struct Launch<'a> {
    sms: &'a mut [Option<SmCaches>],
    l2: &'a mut L2,
    rng: &'a mut Xoshiro256PlusPlus,
    jitter: Option<&'a Normal<f64>>,
    noise: NoiseSpec,
    overhead: u32,
}

impl Launch<'_> {
    /// A chase: `steps[0]` untimed loads in every block, then `steps[1]` timed ones.
    fn warm_then_time(
        &mut self,
        blocks: &mut [BlockState],
        cursors: &mut [ChainCursor],
        route: &Route,
        steps: [u32; 2],
        timing: Timing,
    ) -> Result<(), RunnerError> {
        self.run_phase(blocks, cursors, route, steps[0], Timing::Untimed)?;
        self.run_phase(blocks, cursors, route, steps[1], timing)
    }

    /// Runs `steps` loads in every block, block `i` on `cursors[i]` through `route`; the
    /// blocks advance in lockstep, one load each in turn.
    fn run_phase(
        &mut self,
        blocks: &mut [BlockState],
        cursors: &mut [ChainCursor],
        route: &Route,
        steps: u32,
        timing: Timing,
    ) -> Result<(), RunnerError> {
        if timing == Timing::Fine {
            for block in blocks.iter_mut() {
                block.samples.latencies.reserve_exact(steps as usize);
                block.samples.indices.reserve_exact(steps as usize);
            }
        }
        for _ in 0..steps {
            for (block, cursor) in blocks.iter_mut().zip(cursors.iter_mut()) {
                let latency = match route.shared_latency {
                    Some(latency) => latency,
                    None => {
                        // Every used SM is prepared before a launch's first phase.
                        let Some(sm_caches) = self.sms[block.sm].as_mut() else {
                            return Err(RunnerError::WrongResult(format!(
                                "simulator: SM {} was not prepared",
                                block.sm
                            )));
                        };
                        serve(
                            sm_caches,
                            self.l2,
                            self.rng,
                            route,
                            block.near_partition,
                            cursor.address(),
                        )
                    }
                };
                cursor.advance();
                if timing == Timing::Untimed {
                    block.cycles += u64::from(latency);
                    continue;
                }
                let noisy = (i64::from(latency)
                    + SimBackend::noise(
                        self.rng,
                        self.jitter,
                        self.noise.outlier_probability,
                        self.noise.outlier_extra_cycles,
                    ))
                .max(1) as u64;
                block.cycles += noisy;
                block.timed_cycles += noisy;
                if timing == Timing::Fine {
                    let sample =
                        u32::try_from(noisy + u64::from(self.overhead)).unwrap_or(u32::MAX);
                    block.samples.latencies.push(sample);
                    block.samples.indices.push(cursor.index_u32());
                }
            }
        }
        Ok(())
    }
}

/// Serves one load of byte address `addr` through `route` on one SM; returns the latency of
/// the level that served it.
#[inline]
fn serve(
    sm_caches: &mut SmCaches,
    l2: &mut L2,
    rng: &mut Xoshiro256PlusPlus,
    route: &Route,
    near_partition: usize,
    addr: u64,
) -> u32 {
    for level in &route.levels {
        if sm_caches.caches[level.cache][level.copy].access(addr, rng) {
            return level.latency;
        }
    }
    match l2.access(near_partition, addr, rng) {
        Some(latency) => latency + route.extra,
        None => route.memory_latency + l2.far_miss_extra(near_partition, addr),
    }
}

/// Cursors at index 0 of every chain, laid out as the kernels see them: one after the
/// other, each on its own allocation (global paths) or 128-byte line (constant bank).
fn chain_cursors(path: LoadPath, chains: &[ChainSpec]) -> Vec<ChainCursor> {
    let mut cursors = Vec::with_capacity(chains.len());
    let mut next_base = match path {
        LoadPath::Constant => CONSTANT_BASE,
        _ => GLOBAL_BASE,
    };
    for chain in chains {
        cursors.push(ChainCursor::new(next_base, chain));
        next_base += match path {
            LoadPath::Constant => chain.bytes.next_multiple_of(CONSTANT_ALIGN),
            _ => chain.bytes.next_multiple_of(ALLOCATION_ALIGN),
        };
    }
    cursors
}

/// Checks a chain whose fields were set directly rather than through [`ChainSpec::new`].
fn check_chain(chain: &ChainSpec) -> Result<(), RunnerError> {
    ChainSpec::new(chain.bytes, chain.stride).map(|_| ())
}

/// Bytes one block's copy of a phase's chain occupies in the two-phase layout.
fn two_phase_block_stride(phase: &Phase) -> u64 {
    match phase.path {
        LoadPath::Constant => phase.chain.bytes.next_multiple_of(CONSTANT_ALIGN),
        _ => phase.chain.bytes.next_multiple_of(TWO_PHASE_BLOCK_ALIGN),
    }
}

/// The geometry of one L2 partition of `l2`.
fn l2_partition_geometry(l2: &L2Spec) -> Geometry {
    Geometry::new(
        l2.partition_bytes(),
        l2.line_bytes,
        l2.sector(),
        l2.associativity,
        l2.replacement,
    )
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
    /// Launches so far (kernels and clock measurements), for the co-tenant's arrival.
    launches: u64,
    /// Whether the L2 was rebuilt for the co-tenant.
    tenant_in_l2: bool,
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
        let geometry = l2_partition_geometry(l2spec);
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
            launches: 0,
            tenant_in_l2: false,
            profile,
        })
    }

    /// The co-tenant, if the profile has one and it runs now.
    fn tenant(&self) -> Option<&CoTenant> {
        self.profile
            .co_tenant
            .as_ref()
            .filter(|t| t.active_at(self.launches.saturating_sub(1)))
    }

    /// Counts a launch; when the co-tenant arrives its share of the L2 becomes unusable
    /// and the L2 slower, when it leaves the L2 is whole again (and cold).
    fn count_launch(&mut self) {
        self.launches += 1;
        let tenant = self.tenant().cloned();
        if tenant.is_some() == self.tenant_in_l2 {
            return;
        }
        let l2spec = &self.profile.l2;
        let stolen = tenant.as_ref().map_or(0, |t| t.l2_stolen_bytes);
        let geometry =
            l2_partition_geometry(l2spec).stealing(stolen / u64::from(l2spec.partitions.max(1)));
        self.l2.partitions = (0..l2spec.partitions)
            .map(|_| Cache::new(geometry))
            .collect();
        let inflate = |latency: u32| tenant.as_ref().map_or(latency, |t| t.inflate(latency));
        self.l2.near_latency = inflate(l2spec.near_latency);
        self.l2.far_latency = inflate(l2spec.far());
        self.tenant_in_l2 = tenant.is_some();
    }

    /// Launches so far: every kernel, clock measurement and overhead calibration.
    pub fn launches(&self) -> u64 {
        self.launches
    }

    /// The GPU as NVML would report it now: the SM clock, the utilisation, and the
    /// processes it lists (the co-tenant, while it runs and is visible).
    pub fn observe(&self) -> SimObservation {
        let tenant = self.tenant();
        SimObservation {
            sm_clock_mhz: self.profile.clock.sm_mhz * tenant.map_or(1.0, |t| t.sm_clock_factor),
            utilization_percent: tenant.map_or(0, |t| t.utilization_percent),
            processes: tenant
                .filter(|t| t.visible)
                .map(|t| vec![(t.pid, t.name.clone())])
                .unwrap_or_default(),
        }
    }

    /// The profile this GPU simulates.
    pub fn profile(&self) -> &SimProfile {
        &self.profile
    }

    /// Shared memory per SM (bytes) the last launch (chase or two-phase probe) ran with, i.e.
    /// the carveout the simulated driver chose; `None` before the first launch.
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
    /// every copy of the caches of `sm`.
    fn prepare_sm(&mut self, sm: usize, shared_bytes: u64) {
        let stolen = self.tenant().map_or(0, |t| t.l1_stolen_bytes);
        let wanted: Vec<(Geometry, usize)> = self
            .profile
            .caches
            .iter()
            .map(|c| {
                let geometry = Geometry::new(
                    c.size_at(shared_bytes),
                    c.line_bytes,
                    c.sector(),
                    c.associativity,
                    c.replacement,
                )
                .stealing(stolen);
                (geometry, c.copies_per_sm as usize)
            })
            .collect();
        let slot = &mut self.sms[sm];
        match slot {
            Some(state)
                if state
                    .caches
                    .iter()
                    .map(|copies| (copies[0].geometry(), copies.len()))
                    .eq(wanted.iter().copied()) =>
            {
                state.caches.iter_mut().flatten().for_each(Cache::reset);
            }
            _ => {
                *slot = Some(SmCaches {
                    caches: wanted
                        .into_iter()
                        .map(|(geometry, copies)| {
                            (0..copies).map(|_| Cache::new(geometry)).collect()
                        })
                        .collect(),
                });
            }
        }
    }

    /// How loads of thread `thread` through `path` are served.
    fn route(&self, path: LoadPath, thread: u32) -> Route {
        let extra = self
            .profile
            .path_extra_latency
            .get(&path)
            .copied()
            .unwrap_or(0);
        let warp_size = self.profile.device.warp_size;
        Route {
            levels: self
                .profile
                .caches
                .iter()
                .enumerate()
                .filter(|(_, c)| c.serves(path))
                .map(|(i, c)| Level {
                    cache: i,
                    copy: c.copy_for_thread(thread, warp_size) as usize,
                    latency: c.hit_latency + extra,
                })
                .collect(),
            extra,
            memory_latency: self.tenant().map_or(self.profile.memory.latency, |t| {
                t.inflate(self.profile.memory.latency)
            }) + extra,
            shared_latency: (path == LoadPath::Shared)
                .then_some(self.profile.shared_memory.latency + extra),
        }
    }

    /// Places `count` blocks on SMs (block `b` on SM `b % sm_count`) and empties every cache
    /// the launch can reach: the caches of the SMs it uses, and the L2.
    fn start_launch(&mut self, count: usize, shared_bytes: u64) -> Vec<BlockState> {
        let sm_count = self.sms.len();
        let sms: Vec<usize> = (0..count).map(|b| b % sm_count).collect();
        self.start_launch_on(&sms, shared_bytes)
    }

    /// Places block `b` on SM `sms[b]` (each below the SM count) and empties every cache
    /// the launch can reach: the caches of those SMs, and the L2.
    fn start_launch_on(&mut self, sms: &[usize], shared_bytes: u64) -> Vec<BlockState> {
        self.count_launch();
        self.last_shared_bytes = Some(shared_bytes);
        let sm_count = self.sms.len();
        let partitions = self.l2.partitions.len();
        let blocks: Vec<BlockState> = sms
            .iter()
            .map(|&sm| BlockState {
                sm,
                near_partition: sm * partitions / sm_count,
                cycles: 0,
                timed_cycles: 0,
                samples: BlockSamples {
                    smid: u32::try_from(sm).unwrap_or(u32::MAX),
                    ..BlockSamples::default()
                },
            })
            .collect();
        let mut used: Vec<usize> = sms.to_vec();
        used.sort_unstable();
        used.dedup();
        for sm in used {
            self.prepare_sm(sm, shared_bytes);
        }
        self.l2.reset();
        blocks
    }

    /// The loads' view of the backend for one launch.
    fn launch(&mut self) -> Launch<'_> {
        Launch {
            sms: &mut self.sms,
            l2: &mut self.l2,
            rng: &mut self.rng,
            jitter: self.jitter.as_ref(),
            noise: self.profile.noise,
            overhead: self.profile.clock.overhead_cycles,
        }
    }

    /// The modelled device time of a launch: its overhead plus the slowest block's cycles.
    fn gpu_time(&self, blocks: &[BlockState]) -> Duration {
        let slowest = blocks.iter().map(|b| b.cycles).max().unwrap_or(0);
        LAUNCH_OVERHEAD
            + Duration::from_secs_f64(slowest as f64 / (self.profile.clock.sm_mhz * 1e6))
    }

    fn check_request(&self, request: &ChaseRequest) -> Result<u64, RunnerError> {
        check_written(request)?;
        if request.chains.is_empty() {
            return Err(RunnerError::InvalidRequest(
                "a chase needs at least one chain".into(),
            ));
        }
        for chain in &request.chains {
            check_chain(chain)?;
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
        self.profile.shared_carveout_for(
            request.carveout,
            timing_bytes + chain_copy + u64::from(request.reserve_shared_bytes),
        )
    }

    /// Checks a two-phase probe against the device; returns the shared memory per SM the
    /// launch runs with.
    fn check_two_phase_request(&self, request: &TwoPhaseRequest) -> Result<u64, RunnerError> {
        check_two_phase(request, self.profile.device.max_threads_per_block)?;
        let blocks = u64::from(request.blocks);
        let (mut constant, mut global) = (0u64, 0u64);
        for phase in [&request.fill, &request.evict] {
            check_chain(&phase.chain)?;
            let region = blocks.saturating_mul(two_phase_block_stride(phase));
            match phase.path {
                LoadPath::Constant => constant = constant.saturating_add(region),
                _ => global = global.saturating_add(region),
            }
        }
        if constant > CONSTANT_BANK_BYTES {
            return Err(RunnerError::InvalidRequest(format!(
                "the constant-path chains of {blocks} block(s) need {constant} B, the constant bank holds {CONSTANT_BANK_BYTES} B"
            )));
        }
        if global > self.profile.device.total_memory_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "the chains of {blocks} block(s) need {global} B, the device has {} B",
                self.profile.device.total_memory_bytes
            )));
        }
        // The timed pass stores a latency and an index per load in dynamic shared memory.
        self.profile
            .shared_carveout_for(request.carveout, 8 * u64::from(request.timed_steps))
    }

    /// Cursors at index 0 of every block's copy of the chains of `fill` and `evict`, in the
    /// two-phase layout: in global memory one buffer holds every block's copy of chain A,
    /// then every block's copy of chain B; in the constant bank they are packed the same way.
    fn two_phase_cursors(request: &TwoPhaseRequest) -> (Vec<ChainCursor>, Vec<ChainCursor>) {
        let (mut global_next, mut constant_next) = (GLOBAL_BASE, CONSTANT_BASE);
        let mut region = |phase: &Phase| {
            let stride = two_phase_block_stride(phase);
            let next = match phase.path {
                LoadPath::Constant => &mut constant_next,
                _ => &mut global_next,
            };
            let start = *next;
            *next += stride * u64::from(request.blocks);
            (0..u64::from(request.blocks))
                .map(|b| ChainCursor::new(start + b * stride, &phase.chain))
                .collect::<Vec<_>>()
        };
        let a = region(&request.fill);
        let b = region(&request.evict);
        (a, b)
    }
}

impl Backend for SimBackend {
    fn device(&self) -> &DeviceInfo {
        &self.profile.device
    }

    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        let shared_bytes = self.check_request(request)?;
        let path = request.path;

        let mut cursors = chain_cursors(path, &request.chains);
        let mut blocks = self.start_launch(request.chains.len(), shared_bytes);
        // The launch starts with a cold L2 (a flush); a written chain then has the first
        // `written_bytes` of every node in it.
        if request.written_bytes > 0 {
            for cursor in &cursors {
                let stride = 4 * cursor.stride_elements;
                for node in 0..cursor.span_elements / cursor.stride_elements.max(1) {
                    self.l2.write(
                        cursor.base + node * stride,
                        u64::from(request.written_bytes),
                        &mut self.rng,
                    );
                }
            }
        }
        // A chase is thread 0 of every block: copy 0 of every cache.
        let route = self.route(path, 0);
        if path == LoadPath::Shared {
            // The block copies its chain into shared memory first: one load per element.
            let far = u64::from(self.profile.l2.far());
            for (block, cursor) in blocks.iter_mut().zip(&cursors) {
                block.cycles += cursor.span_elements * far;
            }
        }
        let timing = match request.mode {
            ChaseMode::Fine => Timing::Fine,
            ChaseMode::Coarse => Timing::Coarse,
        };
        self.launch().warm_then_time(
            &mut blocks,
            &mut cursors,
            &route,
            [request.warmup_steps, request.steps],
            timing,
        )?;

        let gpu_time = self.gpu_time(&blocks);
        let overhead = u64::from(self.profile.clock.overhead_cycles);
        let out = blocks
            .into_iter()
            .zip(&cursors)
            .map(|(mut block, cursor)| {
                block.samples.final_index = cursor.index_u32();
                if timing == Timing::Coarse {
                    // The timed pass of the coarse kernel is bracketed by one pair of clock
                    // reads: its total is the sum of its loads plus that one overhead.
                    block.samples.total_cycles = Some(block.timed_cycles + overhead);
                }
                block.samples
            })
            .collect();
        Ok(ChaseRun {
            blocks: out,
            gpu_time,
        })
    }

    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError> {
        let shared_bytes = self.check_two_phase_request(request)?;
        let (mut chain_a, mut chain_b) = Self::two_phase_cursors(request);
        let mut blocks = self.start_launch(request.blocks as usize, shared_bytes);
        // Each phase's thread reaches the caches through its own warp's copies.
        let fill = self.route(request.fill.path, request.fill.thread);
        let evict = self.route(request.evict.path, request.evict.thread);
        let mut launch = self.launch();
        // The kernel's barriers separate the phases: every block finishes one before any
        // starts the next.
        launch.run_phase(
            &mut blocks,
            &mut chain_a,
            &fill,
            request.fill.steps,
            Timing::Untimed,
        )?;
        launch.run_phase(
            &mut blocks,
            &mut chain_b,
            &evict,
            request.evict.steps,
            Timing::Untimed,
        )?;
        launch.run_phase(
            &mut blocks,
            &mut chain_a,
            &fill,
            request.timed_steps,
            Timing::Fine,
        )?;
        let gpu_time = self.gpu_time(&blocks);
        let out = blocks
            .into_iter()
            .zip(&chain_a)
            .map(|(mut block, cursor)| {
                block.samples.final_index = cursor.index_u32();
                block.samples
            })
            .collect();
        Ok(ChaseRun {
            blocks: out,
            gpu_time,
        })
    }

    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError> {
        check_pinned(request, self.profile.device.sm_count)?;
        for chain in &request.chains {
            check_chain(chain)?;
        }
        let shared_bytes = self.profile.shared_carveout_for(Carveout::Percent(0), 0)?;
        let slots = request.sms.len();
        let warps = request.warps.max(1) as usize;
        // One state per warp of every slot, warp-major: the first `slots` are the warps 0.
        let bases = chain_cursors(LoadPath::GlobalCg, &request.chains);
        let mut cursors = Vec::with_capacity(slots * warps);
        let mut sms = Vec::with_capacity(slots * warps);
        for warp in 0..warps {
            for ((base, chain), &sm) in bases.iter().zip(&request.chains).zip(&request.sms) {
                let mut cursor = *base;
                cursor.index = request.start_node(chain, warp as u32) * cursor.stride_elements;
                cursors.push(cursor);
                sms.push(sm as usize);
            }
        }
        // Every slot is reached and starts with the others: the simulated SMs are all free.
        let mut blocks = self.start_launch_on(&sms, shared_bytes);
        let route = self.route(LoadPath::GlobalCg, 0);
        // The kernel's barriers: every warp warms up, then every warp runs its timed pass,
        // then the first thread of warp 0 samples loads one by one.
        self.launch().warm_then_time(
            &mut blocks,
            &mut cursors,
            &route,
            [request.warmup_steps, request.steps],
            Timing::Coarse,
        )?;
        // The samples are not part of the timed passes.
        let timed: Vec<u64> = blocks.iter().map(|b| b.timed_cycles).collect();
        // Warp 0 samples while the other warps go on chasing, one load each in turn.
        let (first, rest) = blocks.split_at_mut(slots);
        let (first_cursors, rest_cursors) = cursors.split_at_mut(slots);
        let mut launch = self.launch();
        for _ in 0..request.sample_steps {
            launch.run_phase(first, first_cursors, &route, 1, Timing::Fine)?;
            launch.run_phase(rest, rest_cursors, &route, 1, Timing::Untimed)?;
        }
        let gpu_time = self.gpu_time(&blocks);
        let overhead = u64::from(self.profile.clock.overhead_cycles);
        let mut out: Vec<Option<PinnedSlot>> = (0..slots)
            .map(|i| {
                Some(PinnedSlot {
                    sm: blocks[i].samples.smid,
                    total_cycles: 0,
                    final_index: cursors[i].index_u32(),
                    together: true,
                    samples: std::mem::take(&mut blocks[i].samples.latencies),
                })
            })
            .collect();
        for (i, cycles) in timed.iter().enumerate() {
            if let Some(slot) = out[i % slots].as_mut() {
                // Each warp's timed pass is bracketed by its own pair of clock reads.
                slot.total_cycles += cycles + overhead;
            }
        }
        Ok(PinnedRun {
            slots: out,
            gpu_time,
        })
    }

    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        let sm_count = self.profile.device.sm_count;
        check_partition_map(request, sm_count)?;
        let shared_bytes = self.profile.shared_carveout_for(Carveout::Percent(0), 0)?;
        let lines = request.lines_per_sm;
        let chain = ChainSpec::new(
            u64::from(lines) * u64::from(request.line_bytes),
            request.line_bytes,
        )?;
        // One buffer: SM `s`'s array is the `s`-th run of `lines` lines.
        let cursors: Vec<ChainCursor> = (0..u64::from(sm_count))
            .map(|s| ChainCursor::new(GLOBAL_BASE + s * chain.bytes, &chain))
            .collect();
        let sms: Vec<usize> = (0..sm_count as usize).collect();
        let mut blocks = self.start_launch_on(&sms, shared_bytes);
        let route = self.route(LoadPath::GlobalCg, 0);
        let reference = request.reference_sm as usize;
        let mut launch = self.launch();
        // The reference loads every array once, then the SMs take turns: each reads its own
        // array twice, every load timed.
        for cursor in &cursors {
            let mut warming = *cursor;
            launch.run_phase(
                std::slice::from_mut(&mut blocks[reference]),
                std::slice::from_mut(&mut warming),
                &route,
                lines,
                Timing::Untimed,
            )?;
        }
        let mut seen = Vec::with_capacity(sms.len());
        for sm in 0..sms.len() {
            let mut cursor = cursors[sm];
            let block = &mut blocks[sm];
            let before = block.samples.latencies.len();
            launch.run_phase(
                std::slice::from_mut(block),
                std::slice::from_mut(&mut cursor),
                &route,
                2 * lines,
                Timing::Fine,
            )?;
            let mut cold = block.samples.latencies.split_off(before);
            let warm = cold.split_off(lines as usize);
            seen.push(Some(SmLineLatencies { cold, warm }));
        }
        // The SMs take turns: the launch lasts as long as all their loads together.
        let cycles: u64 = blocks.iter().map(|b| b.cycles).sum();
        let gpu_time = LAUNCH_OVERHEAD
            + Duration::from_secs_f64(cycles as f64 / (self.profile.clock.sm_mhz * 1e6));
        Ok(PartitionMapRun {
            sms: seen,
            gpu_time,
        })
    }

    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        if samples == 0 {
            return Err(RunnerError::InvalidRequest(
                "clock overhead needs at least one sample".into(),
            ));
        }
        self.count_launch();
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
        self.count_launch();
        let mhz = self.observe().sm_clock_mhz;
        let normal = Normal::new(mhz, mhz * CLOCK_MEASUREMENT_STDEV)
            .map_err(|e| RunnerError::Profile(format!("clock.sm_mhz: {e}")))?;
        Ok(normal.sample(&mut self.rng))
    }
}
