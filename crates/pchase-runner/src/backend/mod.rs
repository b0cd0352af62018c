//! The [`Backend`] trait: what a GPU, real or simulated, must be able to run.
//!
//! Everything above this trait — the size search, the orchestration of benchmarks, the
//! analysis and the building of a topology — is generic over it, so that it is tested in CI
//! against [`crate::sim::SimBackend`] whose truth is known.

use std::time::Duration;

pub use pchase_kernels::LoadPath;

pub use crate::chain::ChainSpec;

mod checks;
mod probe;
pub use checks::{
    check_list_chase, check_partition_map, check_pinned, check_two_phase, check_written,
};
pub use probe::{ProbeArg, ProbeLaunch, ProbeModel, ProbeRun, SimulatedGpu, SimulatedProbe};

use pchase_kernels::{catalogue, Granularity, Kernel};

use crate::{
    bandwidth::{BandwidthRequest, BandwidthRun},
    device::DeviceInfo,
    error::RunnerError,
};

/// Whether a chase records every load's latency or only the total of the timed pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChaseMode {
    /// Every load's latency and loaded index (the thesis' fine-grained p-chase).
    Fine,
    /// Only the total cycles of the timed pass (a plain dependent chain).
    Coarse,
}

/// The share of the unified L1/shared-memory store given to shared memory.
///
/// The L1 size depends on it, so every request states one and every result records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Carveout {
    /// Leave the driver's default (the driver then chooses per launch).
    #[default]
    DriverDefault,
    /// Prefer this percentage (0–100) of the unified store as shared memory
    /// (`CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`).
    Percent(u8),
}

/// A pointer-chase launch: one chain per block, one thread working per block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaseRequest {
    /// Which load instruction the chase uses.
    pub path: LoadPath,
    /// Fine-grained (per-load) or coarse (total) timing.
    pub mode: ChaseMode,
    /// One chain per block; the blocks run concurrently, ideally one per SM.
    pub chains: Vec<ChainSpec>,
    /// Untimed loads before the timed pass (fills the cache under test).
    pub warmup_steps: u32,
    /// Timed loads.
    pub steps: u32,
    /// The shared-memory carveout to set for the launch.
    pub carveout: Carveout,
    /// Evict the chains from the L2 before the chase (by writing a buffer twice the L2's
    /// size), so that loads without a warm-up go to device memory.
    pub flush_l2: bool,
    /// Dynamic shared memory to reserve per block beyond what the kernel uses: the driver
    /// must then configure at least this much shared memory, which takes it from a unified
    /// L1. Measuring the L1 at several reservations gives its size per carveout.
    pub reserve_shared_bytes: u32,
    /// With `flush_l2`: after the flush, write the first `written_bytes` of every node
    /// again (the next index, then zeros), so that the L2 holds those bytes of each node and
    /// nothing else of the chains; 0 writes nothing. A load then hits the L2 only where the
    /// write covered the whole sector it needs: the L2 sector probe. A multiple of 4, at
    /// most the stride.
    pub written_bytes: u32,
}

impl ChaseRequest {
    /// The catalogue kernel that runs this request (both backends ask here).
    pub fn kernel(&self) -> &'static Kernel {
        let granularity = match self.mode {
            ChaseMode::Fine => Granularity::Fine,
            ChaseMode::Coarse => Granularity::Coarse,
        };
        catalogue::chase(self.path, granularity)
    }

    /// A fine-grained request over one chain, warming up with one full pass.
    pub fn fine(path: LoadPath, chain: ChainSpec, steps: u32) -> ChaseRequest {
        ChaseRequest {
            path,
            mode: ChaseMode::Fine,
            chains: vec![chain],
            warmup_steps: u32::try_from(chain.nodes()).unwrap_or(u32::MAX),
            steps,
            carveout: Carveout::DriverDefault,
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        }
    }
}

/// What one block of a chase reported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockSamples {
    /// The SM the block ran on (`%smid`).
    pub smid: u32,
    /// Per-load latencies in SM cycles (fine mode only; empty in coarse mode).
    pub latencies: Vec<u32>,
    /// The index each timed load returned (fine mode only).
    pub indices: Vec<u32>,
    /// The index the chase ended on; checks the chain was followed.
    pub final_index: u32,
    /// Total cycles of the timed pass (coarse mode only).
    pub total_cycles: Option<u64>,
}

/// The result of a [`ChaseRequest`], one entry per chain, in request order.
#[derive(Debug, Clone, PartialEq)]
pub struct ChaseRun {
    /// Per-block samples.
    pub blocks: Vec<BlockSamples>,
    /// Device time of the launch(es) that produced them, as the backend measured it.
    pub gpu_time: Duration,
}

/// One phase of a [`TwoPhaseRequest`]: a thread of the block chasing a chain through a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// The load path.
    pub path: LoadPath,
    /// The chain (one per block, like [`ChaseRequest::chains`], here the same for all).
    pub chain: ChainSpec,
    /// The thread of the block that runs this phase (`threadIdx.x`).
    pub thread: u32,
    /// Untimed loads of the phase.
    pub steps: u32,
}

/// The sharing and caches-per-SM probe of the thesis (4.5, 4.6): in every block, the thread
/// of `fill` warms chain A, then (after a barrier) the thread of `evict` warms chain B, then
/// (after a barrier) the thread of `fill` chases chain A again and times `timed_steps` loads,
/// fine-grained. If A's re-timed loads miss, B evicted A: the two paths (or the two threads'
/// cache copies) use one physical cache.
///
/// The two chains live in separate memory (on the constant path: separate ranges of the
/// constant bank); each block works on its own copy, one block per SM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwoPhaseRequest {
    /// Warms chain A (and is re-timed).
    pub fill: Phase,
    /// Warms chain B in between.
    pub evict: Phase,
    /// Timed loads of the final pass over chain A.
    pub timed_steps: u32,
    /// Blocks to run (one per SM); each is a replica.
    pub blocks: u32,
    /// Threads per block (must exceed both phases' thread indices).
    pub threads: u32,
    /// The shared-memory carveout of the launch.
    pub carveout: Carveout,
    /// Evict both chains from the L2 before the launch (as [`ChaseRequest::flush_l2`]), so
    /// that the phases, not the chains' initialisation, decide what the L2 holds and in
    /// which order the lines were used.
    pub flush_l2: bool,
    /// Every thread of the block loads chain A's nodes, then chain B's, in address order,
    /// instead of one thread chasing each (`two_phase_block_global_cg`): A's first nodes are
    /// still its oldest lines, and the passes take a fraction of a chase's time (the L2's
    /// line probe). Both paths `GlobalCg`, one block, each phase one whole pass
    /// (`steps` = the chain's nodes); the phases' `thread`s are not used.
    pub block_fill: bool,
}

impl TwoPhaseRequest {
    /// The catalogue kernel that runs this request (both backends ask here).
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] when the catalogue has no kernel for the pair.
    pub fn kernel(&self) -> Result<&'static Kernel, RunnerError> {
        if self.block_fill {
            return Ok(catalogue::two_phase_block());
        }
        catalogue::two_phase(self.fill.path, self.evict.path).map_err(|e| {
            RunnerError::InvalidRequest(format!("no two-phase kernel for this pair: {e}"))
        })
    }
}

/// A fine-grained chase by thread 0 of one block over an explicit cyclic list of lines of
/// one buffer (the sets search's reduction to one set): load `k` reads the first
/// word of line `lines[(warmup_steps + k) mod n]`, `line_bytes` from the buffer's start
/// times its number. The buffer is the backend's chain buffer (the same virtual addresses
/// run after run); every line lies at its own offset whichever lines are listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListChaseRequest {
    /// The load path: `GlobalCa`, `GlobalCg` or `GlobalNc`.
    pub path: LoadPath,
    /// Bytes per line (a multiple of 4).
    pub line_bytes: u32,
    /// The lines in chase order, distinct, at least two.
    pub lines: Vec<u64>,
    /// Untimed loads first.
    pub warmup_steps: u32,
    /// Timed loads, each recorded.
    pub steps: u32,
    /// The shared-memory carveout of the launch.
    pub carveout: Carveout,
}

impl ListChaseRequest {
    /// The line timed load `k` reads.
    pub fn line_of_load(&self, k: u64) -> u64 {
        let n = self.lines.len().max(1) as u64;
        self.lines[((u64::from(self.warmup_steps) + k) % n) as usize]
    }
}

/// Coarse `.cg` chases pinned to chosen SMs, all starting together, each chased by one or
/// more warps at once: the L2 size sweep and its per-load samples.
///
/// The hardware places the blocks of an ordinary launch on SMs afresh at every launch, so
/// a test that must run the same SMs at several array sizes pins them instead: slot `s`
/// runs on SM `sms[s]` and chases `chains[s]`; the slots wait for each other (a bounded
/// time) before their warm-up, so their passes overlap.
///
/// With `warps` > 1, the first thread of each of the slot's warps chases the slot's chain
/// from its own starting node: warp `w` starts at node `w × ⌊nodes / warps⌋` and follows
/// the chain from there. Each line is then still loaded once per `nodes` loads of the
/// slot, so what the caches hold is what one chase would leave, but `warps` loads are in
/// flight at once: a sweep over arrays larger than the L2 takes a fraction of the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedRequest {
    /// The SM (`%smid`) of each slot; distinct, below the device's SM count.
    pub sms: Vec<u32>,
    /// One chain per slot; all with one stride.
    pub chains: Vec<ChainSpec>,
    /// Untimed loads of every warp of every slot before the timed pass.
    pub warmup_steps: u32,
    /// Timed loads of every warp of every slot.
    pub steps: u32,
    /// Warps chasing each slot's chain at once: 1 to 32.
    pub warps: u32,
    /// After the timed pass of every warp, the first thread of warp 0 times this many
    /// further loads of its chase one by one ([`PinnedSlot::samples`]) while the other warps
    /// go on chasing untimed as many loads (so that a sampled load meets what a timed one
    /// met); 0 for none. At most [`PINNED_MAX_SAMPLES`].
    pub sample_steps: u32,
    /// Independent chases per warp, all by its first thread, one load of each per step
    /// (memory-level parallelism past 32 chains per SM): 1, 2, 4 or 8; above 1 without
    /// samples. Chase `c = warp × chains_per_warp + k` starts at
    /// [`PinnedRequest::start_node`]`(chain, c)`.
    pub chains_per_warp: u32,
}

/// The most per-load samples a [`PinnedRequest`] may ask for (they are kept in shared
/// memory during the chase: 8 bytes each).
pub const PINNED_MAX_SAMPLES: u32 = 8192;

impl PinnedRequest {
    /// One warp per slot, no samples: the plain pinned chase.
    pub fn single(sms: Vec<u32>, chains: Vec<ChainSpec>, warmup_steps: u32, steps: u32) -> Self {
        PinnedRequest {
            sms,
            chains,
            warmup_steps,
            steps,
            warps: 1,
            sample_steps: 0,
            chains_per_warp: 1,
        }
    }

    /// The node chase `chase` (warp `chase / chains_per_warp`, its chase
    /// `chase % chains_per_warp`) starts at; with one chase per warp, the warp's number.
    pub fn start_node(&self, chain: &ChainSpec, chase: u32) -> u64 {
        u64::from(chase) * (chain.nodes() / self.chases_per_slot().max(1))
    }

    /// Chases per slot: warps × chases per warp.
    pub fn chases_per_slot(&self) -> u64 {
        u64::from(self.warps.max(1)) * u64::from(self.chains_per_warp.max(1))
    }

    /// The catalogue kernel that runs the request.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a number of chases per warp without a kernel.
    pub fn kernel(&self) -> Result<&'static Kernel, RunnerError> {
        catalogue::chase_pinned_global_cg_chains(self.chains_per_warp).ok_or_else(|| {
            RunnerError::InvalidRequest(format!(
                "{} chases per warp: 1, 2, 4 or 8",
                self.chains_per_warp
            ))
        })
    }
}

/// What one slot of a [`PinnedRequest`] reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedSlot {
    /// The SM the slot ran on (the requested one).
    pub sm: u32,
    /// Cycles of the timed passes summed over the slot's warps, each with one clock-read
    /// overhead.
    pub total_cycles: u64,
    /// The index warp 0's chase ended on, after its timed pass and its samples (checked
    /// against the chain by the backend).
    pub final_index: u32,
    /// Whether every slot had started before this one began its warm-up.
    pub together: bool,
    /// The latency of each sampled load of warp 0, raw cycles (with the clock overhead), in
    /// the order they were loaded; empty without `sample_steps`.
    pub samples: Vec<u32>,
}

impl PinnedSlot {
    /// Mean cycles per timed step of the slot's warps (with the clock overhead spread over
    /// each warp's pass); a step is one load of each of a warp's chases, so with one chase
    /// per warp it is the mean latency of a load.
    pub fn cycles_per_load(&self, request: &PinnedRequest) -> f64 {
        let loads = u64::from(request.steps) * u64::from(request.warps.max(1));
        self.total_cycles as f64 / loads.max(1) as f64
    }
}

/// The result of a [`PinnedRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct PinnedRun {
    /// Per slot, in request order: `None` where no block of the launch reached the SM.
    pub slots: Vec<Option<PinnedSlot>>,
    /// Device time of the launch.
    pub gpu_time: Duration,
}

impl PinnedRun {
    /// Every slot's SM was reached and all started together: the launch measured what
    /// was asked.
    pub fn complete(&self) -> bool {
        self.slots
            .iter()
            .all(|s| s.as_ref().is_some_and(|s| s.together))
    }
}

/// Which L2 partition serves which SM, and where each line lives, seen from every SM: the
/// partition map.
///
/// Every SM gets an array of `lines_per_sm` nodes, one per `line_bytes` (one node per L2
/// line), chained in address order. In one launch, with one block on every SM, the
/// reference SM first loads every array twice (so every line is in the L2, in its home
/// partition and wherever the reference SM's loads leave copies); then the SMs take turns,
/// in SM order, each chasing its own array twice and timing every load. An SM that shares
/// the reference's partition finds every line near; an SM of another partition finds the
/// lines homed in partitions other than its own at the far latency on its first pass, and,
/// where a partition keeps copies of far lines, near on its second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionMapRequest {
    /// The SM that loads every array first.
    pub reference_sm: u32,
    /// Nodes of each SM's array.
    pub lines_per_sm: u32,
    /// Bytes between consecutive nodes (the L2 line); a multiple of 4.
    pub line_bytes: u32,
}

/// What one SM of a [`PartitionMapRequest`] saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmLineLatencies {
    /// The latency of each line's first load by this SM, raw cycles (with the clock
    /// overhead), indexed by the line's position in the SM's array.
    pub cold: Vec<u32>,
    /// The latency of each line's second load (the pass right after the first), likewise.
    pub warm: Vec<u32>,
}

/// The result of a [`PartitionMapRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionMapRun {
    /// Per SM (`%smid` 0 … SM count − 1): `None` where no block of the launch reached the
    /// SM, or it gave up waiting for the others.
    pub sms: Vec<Option<SmLineLatencies>>,
    /// The device address of SM 0's array; line `i` of SM `s`'s array is at
    /// `base_address + s * array_stride + i * line_bytes` (the map's address analysis reads
    /// each line's home from it).
    pub base_address: u64,
    /// Bytes from one SM's array to the next.
    pub array_stride: u64,
    /// Device time of the launch.
    pub gpu_time: Duration,
}

/// A GPU that can run pointer chases: the CUDA one or the simulated one.
pub trait Backend {
    /// Facts about the device read from its API (or the simulation profile).
    fn device(&self) -> &DeviceInfo;

    /// Runs a pointer chase.
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails.
    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError>;

    /// Cycles spent by the measurement itself: two clock reads around no load, with the
    /// same dependent shared-memory store (median of `samples` readings).
    ///
    /// # Errors
    /// A [`RunnerError`] when the launch fails.
    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError>;

    /// Runs the two-phase probe; returns one [`BlockSamples`] per block with the re-timed
    /// loads of chain A (latencies and indices) and the block's SM.
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails.
    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError>;

    /// Runs a fine-grained chase over an explicit list of lines ([`ListChaseRequest`]); one
    /// block, whose samples hold every timed load's latency.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a bad list, or from a backend that has no such
    /// chase (the default); a launch failure.
    fn list_chase(&mut self, request: &ListChaseRequest) -> Result<ChaseRun, RunnerError> {
        check_list_chase(request)?;
        Err(RunnerError::InvalidRequest(
            "this backend cannot chase an explicit list of lines".into(),
        ))
    }

    /// Runs coarse `.cg` chases pinned to chosen SMs, one or more warps per SM (the L2
    /// size sweep), with optional per-load samples.
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails; a
    /// launch that did not reach every SM is not an error (see [`PinnedRun::complete`]).
    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError>;

    /// Runs the L2 partition map ([`PartitionMapRequest`]).
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails;
    /// [`RunnerError::Unsupported`] where the device cannot run it (the kernel needs
    /// compute capability 7.0 for `nanosleep`). An SM the launch did not reach is not an
    /// error: its entry is `None`.
    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError>;

    /// Runs a bandwidth kernel: one untimed launch, then `repetitions` timed ones
    /// ([`BandwidthRequest`], `crate::bandwidth`).
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails.
    fn bandwidth(&mut self, request: &BandwidthRequest) -> Result<BandwidthRun, RunnerError>;

    /// The SM clock while the GPU is busy, in MHz, measured against a wall clock.
    ///
    /// # Errors
    /// A [`RunnerError`] when the launch fails.
    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError>;

    /// The SM clock over a short window, for the sentinels read between benchmarks: less
    /// precise than [`Backend::measure_sm_clock_mhz`] (a third of a millisecond against
    /// `%globaltimer`'s microsecond: 0.3 %), far cheaper. The default measures the long way.
    ///
    /// # Errors
    /// A [`RunnerError`] when the launch fails.
    fn quick_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        self.measure_sm_clock_mhz()
    }

    /// The SM clock of a GPU whose clock a warm-up has already brought up (the sentinels'
    /// first reading), for the clock calibration: over a window between the quick one and
    /// [`Backend::measure_sm_clock_mhz`]'s, whose length serves as a warm-up of its own. The
    /// default measures the long way.
    ///
    /// # Errors
    /// A [`RunnerError`] when the launch fails.
    fn warm_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        self.measure_sm_clock_mhz()
    }

    /// Runs the instruction-fetch kernel: one warp on one SM, `request.run_segments()`
    /// segments of straight-line multiply-adds per iteration. The
    /// default is [`RunnerError::Unsupported`], for backends without it.
    ///
    /// # Errors
    /// A [`RunnerError`] when the request is invalid, the device cannot run it or the
    /// launch fails.
    fn instruction_fetch(
        &mut self,
        request: &crate::icache::InstructionFetchRequest,
    ) -> Result<crate::icache::InstructionFetchRun, RunnerError> {
        request.check()?;
        Err(RunnerError::Unsupported {
            kernel: pchase_kernels::icache::kernel().entry(),
            needed: "a backend that runs it".into(),
            found: "none".into(),
        })
    }

    /// The thread-block-cluster requests, where the device has clusters (compute capability
    /// 9.0 and newer); `None` makes the cluster benchmarks "not applicable".
    fn clusters(&mut self) -> Option<&mut dyn crate::cluster::ClusterBackend> {
        None
    }

    /// Runs a copy from global to shared memory ([`crate::copy::CopyRequest`]). The
    /// benchmark asks only for paths the device's compute capability has; the default
    /// answers [`RunnerError::Unsupported`] (a backend without copies).
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails.
    fn copy(
        &mut self,
        request: &crate::copy::CopyRequest,
    ) -> Result<crate::copy::CopyRun, RunnerError> {
        Err(RunnerError::Unsupported {
            kernel: request.kernel().entry(),
            needed: request.path.min_capability().to_string(),
            found: self.device().compute_capability.to_string(),
        })
    }

    /// The TLB walks over (nearly) all of device memory, plain or in separately mapped
    /// chunks ([`crate::walk`]); `None` where the backend has none.
    fn walks(&mut self) -> Option<&mut dyn crate::walk::WalkBackend> {
        None
    }

    /// The link to the host ([`crate::host`]): copies and a chase over it; `None` where the
    /// backend has none.
    fn host(&mut self) -> Option<&mut dyn crate::host::HostBackend> {
        None
    }

    /// Runs a probe ([`ProbeLaunch`]): the CUDA backend launches its kernel, the simulated
    /// GPU runs `model` instead. The default, for a backend that has neither, is
    /// [`RunnerError::Unsupported`].
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a launch that does not match the catalogue;
    /// [`RunnerError::Unsupported`] where the device cannot run the kernel; a launch
    /// failure.
    fn probe(
        &mut self,
        launch: &ProbeLaunch,
        model: &dyn ProbeModel,
    ) -> Result<ProbeRun, RunnerError> {
        let _ = model;
        launch.check()?;
        Err(RunnerError::Unsupported {
            kernel: launch.kernel.entry(),
            needed: "a backend that runs probes".into(),
            found: "none".into(),
        })
    }
}
