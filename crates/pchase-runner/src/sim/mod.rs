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

mod bandwidth;
pub(crate) mod cache;
mod cluster;
mod copy;
mod host;
mod icache;
mod l2;
mod mlp;
mod model;
mod probe;
mod profile;
mod requests;
mod tenant;
mod tlb;
mod walk;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

pub use bandwidth::{BandwidthSpec, LevelThroughput};
pub use icache::{IcacheLevelSpec, IcacheSpec};
pub use mlp::MlpSpec;
pub use profile::{
    deal_sms, Associativity, CacheSpec, ClockSpec, ClusterSpec, CopyPathSpec, CopySpec,
    HostLinkSpec, L2Interleave, L2SetIndex, L2Spec, LinkSpec, MemorySpec, NoiseSpec, Replacement,
    SetIndex, SharedMemorySpec, SimProfile, UnifiedStore, CONSTANT_BANK_BYTES, SIM_MEMORY_BUDGET,
};
pub use tenant::{CoTenant, SimObservation};
pub use tlb::{TlbLevelSpec, TlbSpec};

use crate::backend::{
    check_partition_map, check_pinned, check_two_phase, check_written, Backend, BlockSamples,
    Carveout, ChainSpec, ChaseMode, ChaseRequest, ChaseRun, LoadPath, PartitionMapRequest,
    PartitionMapRun, Phase, PinnedRequest, PinnedRun, PinnedSlot, SmLineLatencies, TwoPhaseRequest,
};
use crate::device::DeviceInfo;
use crate::error::RunnerError;
use cache::{Cache, Geometry};
use l2::*;
use model::*;
use tlb::Tlbs;

/// A simulated GPU configured by a [`SimProfile`].
#[derive(Debug, Clone)]
pub struct SimBackend {
    profile: SimProfile,
    rng: Xoshiro256PlusPlus,
    jitter: Option<Normal<f64>>,
    sms: Vec<Option<SmCaches>>,
    l2: L2,
    tlbs: Option<Tlbs>,
    /// The walk region (`crate::walk`) and the TLBs its walks are translated by.
    walk_region: Option<(crate::walk::WalkRegion, Option<Tlbs>)>,
    last_shared_bytes: Option<u64>,
    /// Launches so far (kernels and clock measurements), for the co-tenant's arrival.
    launches: u64,
    /// Whether the L2 was rebuilt for the co-tenant.
    tenant_in_l2: bool,
    /// Entry names of the catalogue kernels the requests so far would launch.
    kernels_used: BTreeSet<&'static str>,
    /// The random numbers of each probe's noise, by entry name, and the probe running: a
    /// probe draws from its own stream, so that adding one changes no other benchmark's
    /// simulated values.
    probe_noise: (
        BTreeMap<&'static str, Xoshiro256PlusPlus>,
        Option<&'static str>,
    ),
}

impl SimBackend {
    /// Entry names of the catalogue kernels the requests so far would have launched on a
    /// GPU (the chases, probes, sweeps and maps; not the clock calibration's).
    pub fn kernels_used(&self) -> &BTreeSet<&'static str> {
        &self.kernels_used
    }

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
        let l2 = L2::new(&profile.l2);
        let sm_count = profile.device.sm_count as usize;
        Ok(SimBackend {
            rng: Xoshiro256PlusPlus::seed_from_u64(profile.seed),
            jitter,
            sms: vec![None; sm_count],
            l2,
            tlbs: profile
                .tlb
                .as_ref()
                .map(|spec| Tlbs::new(spec, sm_count, spec.page_bytes)),
            walk_region: None,
            last_shared_bytes: None,
            launches: 0,
            tenant_in_l2: false,
            kernels_used: BTreeSet::new(),
            probe_noise: (BTreeMap::new(), None),
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
                .indexed(c.set_index)
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
            translated: !matches!(path, LoadPath::Shared | LoadPath::Constant),
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
        if let Some(tlbs) = &mut self.tlbs {
            tlbs.reset();
        }
        blocks
    }

    /// The loads' view of the backend for one launch.
    fn launch(&mut self) -> Launch<'_> {
        Launch {
            sms: &mut self.sms,
            l2: &mut self.l2,
            tlbs: self.tlbs.as_mut(),
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

    /// The run of a fine-grained launch: each block's samples with the index its cursor
    /// ended on, and the launch's modelled time.
    fn fine_run(&self, blocks: Vec<BlockState>, cursors: &[ChainCursor]) -> ChaseRun {
        let gpu_time = self.gpu_time(&blocks);
        let blocks = blocks
            .into_iter()
            .zip(cursors)
            .map(|(mut block, cursor)| {
                block.samples.final_index = cursor.index_u32();
                block.samples
            })
            .collect();
        ChaseRun { blocks, gpu_time }
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
