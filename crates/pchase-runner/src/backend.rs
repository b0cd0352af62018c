//! The [`Backend`] trait: what a GPU, real or simulated, must be able to run.
//!
//! Everything above this trait — the size search, the orchestration of benchmarks, the
//! analysis and the building of a topology — is generic over it, so that it is tested in CI
//! against [`crate::sim::SimBackend`] whose truth is known.

use std::time::Duration;

pub use pchase_kernels::LoadPath;

use crate::{device::DeviceInfo, error::RunnerError};

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

/// One pointer-chase array: a cyclic chain of `bytes / stride` nodes, `stride` bytes apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChainSpec {
    /// Bytes spanned by the chain. A multiple of `stride`.
    pub bytes: u64,
    /// Distance between consecutive nodes in bytes; a multiple of 4.
    pub stride: u32,
}

impl ChainSpec {
    /// A chain over `bytes` with nodes `stride` bytes apart.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] when the stride is not a positive multiple of 4,
    /// the size is not a positive multiple of the stride, or the chain has more than
    /// `u32::MAX` elements (indices are 32-bit).
    pub fn new(bytes: u64, stride: u32) -> Result<ChainSpec, RunnerError> {
        if stride == 0 || stride % 4 != 0 {
            return Err(RunnerError::InvalidRequest(format!(
                "stride {stride} B is not a positive multiple of 4 B"
            )));
        }
        if bytes == 0 || bytes % u64::from(stride) != 0 {
            return Err(RunnerError::InvalidRequest(format!(
                "array of {bytes} B is not a positive multiple of the {stride} B stride"
            )));
        }
        if bytes / 4 > u64::from(u32::MAX) {
            return Err(RunnerError::InvalidRequest(format!(
                "array of {bytes} B has more than 2^32 elements"
            )));
        }
        Ok(ChainSpec { bytes, stride })
    }

    /// Number of nodes (loads per pass over the chain).
    pub fn nodes(&self) -> u64 {
        self.bytes / u64::from(self.stride)
    }

    /// Number of 4-byte elements the chain spans.
    pub fn elements(&self) -> u64 {
        self.bytes / 4
    }
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
}

/// Coarse `.cg` chases pinned to chosen SMs, all starting together: the L2 pair test.
///
/// The hardware places the blocks of an ordinary launch on SMs afresh at every launch, so
/// a test that must run the same SMs at several array sizes pins them instead: slot `s`
/// runs on SM `sms[s]` and chases `chains[s]`; the slots wait for each other (a bounded
/// time) before their warm-up, so their passes overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedRequest {
    /// The SM (`%smid`) of each slot; distinct, below the device's SM count.
    pub sms: Vec<u32>,
    /// One chain per slot; all with one stride.
    pub chains: Vec<ChainSpec>,
    /// Untimed loads of every slot before its timed pass.
    pub warmup_steps: u32,
    /// Timed loads of every slot.
    pub steps: u32,
}

/// What one slot of a [`PinnedRequest`] reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedSlot {
    /// The SM the slot ran on (the requested one).
    pub sm: u32,
    /// Total cycles of the timed pass, with one clock-read overhead.
    pub total_cycles: u64,
    /// The index the chase ended on (checked against the chain by the backend).
    pub final_index: u32,
    /// Whether every slot had started before this one began its warm-up.
    pub together: bool,
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
        self.slots.iter().all(|s| s.is_some_and(|s| s.together))
    }
}

/// Checks what every backend requires of a [`PinnedRequest`]: one chain per SM, at least
/// one slot and one timed step, distinct SMs below `sm_count`, one stride.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_pinned(request: &PinnedRequest, sm_count: u32) -> Result<(), RunnerError> {
    let bad = |why: String| Err(RunnerError::InvalidRequest(why));
    if request.sms.is_empty() || request.sms.len() != request.chains.len() {
        return bad(format!(
            "a pinned chase needs one chain per SM and at least one SM: {} SMs, {} chains",
            request.sms.len(),
            request.chains.len()
        ));
    }
    if request.steps == 0 {
        return bad("a pinned chase needs at least one timed step".into());
    }
    for (k, &sm) in request.sms.iter().enumerate() {
        if sm >= sm_count {
            return bad(format!("SM {sm} does not exist: the device has {sm_count}"));
        }
        if request.sms[..k].contains(&sm) {
            return bad(format!("SM {sm} is asked for twice"));
        }
    }
    if request
        .chains
        .windows(2)
        .any(|pair| pair[0].stride != pair[1].stride)
    {
        return bad("all chains of one launch must share one stride".into());
    }
    Ok(())
}

/// Checks what every backend requires of a [`ChaseRequest`]'s `written_bytes`: a multiple
/// of 4, at most the stride, with `flush_l2`, on a global path (the others copy the chain
/// elsewhere before the chase).
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_written(request: &ChaseRequest) -> Result<(), RunnerError> {
    let written = request.written_bytes;
    if written == 0 {
        return Ok(());
    }
    let stride = request.chains.iter().map(|c| c.stride).min().unwrap_or(0);
    let why = if written % 4 != 0 || written > stride {
        format!("{written} written bytes per node: a multiple of 4 up to the {stride} B stride")
    } else if !request.flush_l2 {
        "written bytes per node need flush_l2 (they are written after the flush)".into()
    } else if !matches!(
        request.path,
        LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc
    ) {
        format!(
            "written bytes per node need a global path, not {}",
            request.path
        )
    } else {
        return Ok(());
    };
    Err(RunnerError::InvalidRequest(why))
}

/// Checks what every backend requires of a [`TwoPhaseRequest`]: at least one block and one
/// timed step, enough threads for both phases and no more than a block may have, and paths
/// that have a two-phase kernel (the SM caches' paths).
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_two_phase(
    request: &TwoPhaseRequest,
    max_threads_per_block: u32,
) -> Result<(), RunnerError> {
    let bad = |why: String| Err(RunnerError::InvalidRequest(why));
    if request.blocks == 0 || request.timed_steps == 0 {
        return bad("a two-phase probe needs at least one block and one timed step".into());
    }
    let needed = request.fill.thread.max(request.evict.thread) + 1;
    if request.threads < needed || request.threads > max_threads_per_block {
        return bad(format!(
            "{} threads per block: the phases need at least {needed}, a block may have {max_threads_per_block}",
            request.threads
        ));
    }
    for phase in [request.fill, request.evict] {
        if !matches!(
            phase.path,
            LoadPath::GlobalCa
                | LoadPath::GlobalCg
                | LoadPath::GlobalNc
                | LoadPath::Texture
                | LoadPath::Constant
        ) {
            return bad(format!(
                "the two-phase probe is for caches of global data; {} is not one of their paths",
                phase.path
            ));
        }
    }
    Ok(())
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

    /// Runs coarse `.cg` chases pinned to chosen SMs (the L2 pair test).
    ///
    /// # Errors
    /// A [`RunnerError`] when the request does not fit the device or the launch fails; a
    /// launch that did not reach every SM is not an error (see [`PinnedRun::complete`]).
    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError>;

    /// The SM clock while the GPU is busy, in MHz, measured against a wall clock.
    ///
    /// # Errors
    /// A [`RunnerError`] when the launch fails.
    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError>;
}
