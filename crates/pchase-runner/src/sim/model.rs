//! The machine model: the simulated allocator's addresses, the SM caches, chain cursors,
//! and one launch's lockstep loads (the L2 is `l2.rs`).

use super::*;

/// Where the simulated allocator puts global arrays; each chase chain gets its own 2 MiB-aligned
/// range, as separate device allocations would.
pub(super) const GLOBAL_BASE: u64 = 1 << 40;
pub(super) const ALLOCATION_ALIGN: u64 = 2 << 20;
/// The two-phase launch puts every block's copy of a chain on its own 128 KiB boundary inside
/// one buffer (chain A's copies, then chain B's), as the CUDA backend lays them out.
pub(super) const TWO_PHASE_BLOCK_ALIGN: u64 = 128 << 10;
/// Where the constant bank lives (a separate range, so it never aliases global data).
pub(super) const CONSTANT_BASE: u64 = 1 << 32;
/// Constant-path chains of several blocks (and the two chains of a two-phase probe) are
/// packed into the bank, each starting on a 128-byte boundary, as the CUDA backend packs them.
pub(super) const CONSTANT_ALIGN: u64 = 128;
/// Host-side cost of one kernel launch, added to the modelled device time.
pub(super) const LAUNCH_OVERHEAD: Duration = Duration::from_micros(4);
/// Relative standard deviation of the simulated SM clock measurement.
pub(super) const CLOCK_MEASUREMENT_STDEV: f64 = 5e-4;

/// The SM-private caches of one SM: every copy of every profile cache, indexed
/// `[profile cache][copy]`.
#[derive(Debug, Clone)]
pub(super) struct SmCaches {
    pub(super) caches: Vec<Vec<Cache>>,
}

/// One SM cache a load looks up: the profile cache, the copy the loading thread uses, and
/// the latency of a hit there (path extra included).
#[derive(Debug, Clone, Copy)]
pub(super) struct Level {
    pub(super) cache: usize,
    pub(super) copy: usize,
    pub(super) latency: u32,
}

/// How the loads of one thread through one path are served.
#[derive(Debug, Clone)]
pub(super) struct Route {
    /// The SM caches on the path, nearest first, in the thread's copies.
    pub(super) levels: Vec<Level>,
    /// The path's extra latency, added to an L2 hit (the SM levels include it already).
    pub(super) extra: u32,
    /// Latency of a load that misses everything (path extra included).
    pub(super) memory_latency: u32,
    /// Whether the path's addresses pass the TLBs (global memory; not the shared path or
    /// the constant bank).
    pub(super) translated: bool,
    /// `Some(latency)` for the shared path, which never touches a cache.
    pub(super) shared_latency: Option<u32>,
}

/// A position on one block's copy of a chain. The chain is not materialised: the value a
/// load returns is what the array would hold there.
#[derive(Debug, Clone)]
pub(super) struct ChainCursor {
    pub(super) base: u64,
    pub(super) index: u64,
    pub(super) stride_elements: u64,
    pub(super) span_elements: u64,
    /// A walk's grouped visiting order ([`crate::walk::grouped_node`]); `None` for address
    /// order.
    pub(super) grouped: Option<GroupedOrder>,
    /// A list chase's order: the element of each node, in chase order, and the position;
    /// `None` for address order.
    pub(super) listed: Option<(std::sync::Arc<[u64]>, usize)>,
}

/// The grouped order of a walk: `nodes` nodes in groups of `group`, at `position`.
#[derive(Debug, Clone, Copy)]
pub(super) struct GroupedOrder {
    pub(super) nodes: u64,
    pub(super) group: u64,
    pub(super) position: u64,
}

impl ChainCursor {
    /// A cursor at index 0 of `chain`, whose element 0 sits at byte address `base`.
    pub(super) fn new(base: u64, chain: &ChainSpec) -> ChainCursor {
        ChainCursor {
            base,
            index: 0,
            stride_elements: u64::from(chain.stride / 4),
            span_elements: chain.bytes / 4,
            grouped: None,
            listed: None,
        }
    }

    /// A cursor at the first of `elements` (chase order), element 0 at byte `base`.
    pub(super) fn listed(base: u64, elements: std::sync::Arc<[u64]>) -> ChainCursor {
        ChainCursor {
            base,
            index: elements.first().copied().unwrap_or(0),
            stride_elements: 1,
            span_elements: elements.iter().copied().max().unwrap_or(0) + 1,
            grouped: None,
            listed: Some((elements, 0)),
        }
    }

    /// Byte address of the element the next load reads.
    #[inline]
    pub(super) fn address(&self) -> u64 {
        self.base + 4 * self.index
    }

    /// Follows the pointer: the loaded value (the next node's index) becomes the index.
    #[inline]
    pub(super) fn advance(&mut self) {
        if let Some((elements, position)) = &mut self.listed {
            *position = (*position + 1) % elements.len().max(1);
            self.index = elements[*position];
            return;
        }
        if let Some(order) = &mut self.grouped {
            order.position = (order.position + 1) % order.nodes.max(1);
            let node = crate::walk::grouped_node(order.position, order.nodes, order.group);
            self.index = node * self.stride_elements;
            return;
        }
        let next = self.index + self.stride_elements;
        self.index = if next >= self.span_elements { 0 } else { next };
    }

    /// The current index; below 2^32 because a [`ChainSpec`] has at most 2^32 elements.
    pub(super) fn index_u32(&self) -> u32 {
        u32::try_from(self.index).unwrap_or(u32::MAX)
    }
}

/// One block's placement and what it reports.
#[derive(Debug)]
pub(super) struct BlockState {
    pub(super) sm: usize,
    pub(super) near_partition: usize,
    /// Cycles of all the block's loads (for the modelled device time).
    pub(super) cycles: u64,
    /// Cycles of the timed loads only.
    pub(super) timed_cycles: u64,
    pub(super) samples: BlockSamples,
}

/// Whether (and how) the loads of a phase are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timing {
    /// Warm-up loads: no clock reads, no noise.
    Untimed,
    /// Every load timed and recorded with its index.
    Fine,
    /// Loads timed as one total.
    Coarse,
}

/// What the loads of a launch work with, borrowed from the [`SimBackend`].
pub(super) struct Launch<'a> {
    pub(super) sms: &'a mut [Option<SmCaches>],
    pub(super) l2: &'a mut L2,
    pub(super) tlbs: Option<&'a mut Tlbs>,
    pub(super) rng: &'a mut Xoshiro256PlusPlus,
    pub(super) jitter: Option<&'a Normal<f64>>,
    pub(super) noise: NoiseSpec,
    pub(super) overhead: u32,
}

impl Launch<'_> {
    /// A chase: `steps[0]` untimed loads in every block, then `steps[1]` timed ones.
    pub(super) fn warm_then_time(
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
    pub(super) fn run_phase(
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
                        let (data, sm_hit) = serve_level(
                            sm_caches,
                            self.l2,
                            self.rng,
                            route,
                            block.near_partition,
                            cursor.address(),
                        );
                        // A load that hits an SM cache is translated only where the
                        // profile says those caches are physically tagged.
                        let translation = match self.tlbs.as_deref_mut() {
                            Some(tlbs)
                                if route.translated && (!sm_hit || tlbs.sm_hits_translated()) =>
                            {
                                tlbs.translate(block.sm, cursor.address(), self.rng)
                            }
                            _ => 0,
                        };
                        translation + data
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
/// the level that served it and whether that was one of the SM's caches.
#[inline]
pub(super) fn serve_level(
    sm_caches: &mut SmCaches,
    l2: &mut L2,
    rng: &mut Xoshiro256PlusPlus,
    route: &Route,
    near_partition: usize,
    addr: u64,
) -> (u32, bool) {
    for level in &route.levels {
        if sm_caches.caches[level.cache][level.copy].access(addr, rng) {
            return (level.latency, true);
        }
    }
    let latency = match l2.access(near_partition, addr, rng) {
        Some(latency) => latency + route.extra,
        None => route.memory_latency + l2.far_miss_extra(near_partition, addr),
    };
    (latency, false)
}

/// Cursors at index 0 of every chain, laid out as the kernels see them: one after the
/// other, each on its own allocation (global paths) or 128-byte line (constant bank).
pub(super) fn chain_cursors(path: LoadPath, chains: &[ChainSpec]) -> Vec<ChainCursor> {
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
pub(super) fn check_chain(chain: &ChainSpec) -> Result<(), RunnerError> {
    ChainSpec::new(chain.bytes, chain.stride).map(|_| ())
}

/// Bytes one block's copy of a phase's chain occupies in the two-phase layout.
pub(super) fn two_phase_block_stride(phase: &Phase) -> u64 {
    match phase.path {
        LoadPath::Constant => phase.chain.bytes.next_multiple_of(CONSTANT_ALIGN),
        _ => phase.chain.bytes.next_multiple_of(TWO_PHASE_BLOCK_ALIGN),
    }
}
