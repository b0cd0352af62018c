//! TLB walks over (nearly) all of device memory: the requests a backend that can
//! run them answers, and the two ways the walked memory is allocated.
//!
//! A walk is one fine-grained chase of `nodes` nodes `step_bytes` apart through the
//! line-indexed kernel (`pchase_kernels::catalogue::chase_lines`): its indices count
//! 128-byte lines, so a chain may span up to 512 GiB, where the ordinary chase's 32-bit
//! element indices stop at 16 GiB. Every walk runs in one *region* that the backend
//! allocates once per search ([`WalkBackend::walk_region`]), so all walks of a search see
//! the same mapping:
//!
//! - [`WalkAllocation::Plain`]: one `cuMemAlloc`; the driver chooses the page size.
//! - [`WalkAllocation::Chunked`]: the virtual memory management API: a reserved address
//!   range whose places of the allocation granularity (2 MiB on current GPUs) are mapped
//!   one by one, in a shuffled order of a pool of physical chunks (about 4 GiB, mapped over
//!   and over where the range is larger), so that no two neighbouring places are
//!   physically neighbours; the GPU's MMU cannot map such a range with pages larger than
//!   one chunk. Two nodes of a walk never share a physical line
//!   ([`CHUNKED_POOL_CHUNKS`] says why).
//! - [`WalkAllocation::Aliased`]: more virtual addresses than the GPU has memory (up to
//!   [`ALIASED_BYTES`]): a reserved range whose places of [`ALIASED_CHUNK_BYTES`] hold a
//!   small pool of physical chunks over and over (place `j` holds chunk `j mod pool`), so
//!   walks can span hundreds of GiB. The pool is a power of two of chunks, so two nodes of
//!   a walk ([`crate::measure::tlb::step_bytes`], an odd number of lines apart) share a
//!   physical line only after 2^25 nodes or more.
//!
//! A backend offers walks through [`Backend::walks`](crate::Backend::walks); `None` makes
//! the TLB benchmark fail with a reason.
//!
//! ```
//! use pchase_runner::walk::{WalkAllocation, WalkRequest};
//! use pchase_runner::LoadPath;
//! let request = WalkRequest { path: LoadPath::GlobalCg, nodes: 3, step_bytes: 4 << 20, group: 1, warmup_steps: 3, steps: 8 };
//! assert_eq!(request.span_bytes(), 12 << 20);
//! assert_eq!(request.line_after(4), (4 << 20) / 128);
//! assert!(request.check(16 << 20).is_ok());
//! assert!(request.check(8 << 20).is_err());
//! // Six nodes in groups of two: positions 0..6 visit nodes 0, 2, 4, 1, 3, 5.
//! let grouped = WalkRequest { nodes: 6, group: 2, ..request };
//! let lines: Vec<u64> = (0..6).map(|p| grouped.line_after(p) / grouped.stride_lines()).collect();
//! assert_eq!(lines, [0, 2, 4, 1, 3, 5]);
//! assert!(WalkRequest { nodes: 5, ..grouped }.check(64 << 20).is_err());
//! assert_eq!(WalkAllocation::Chunked.name(), "chunked");
//! ```

use std::time::Duration;

use pchase_kernels::{catalogue, Kernel, LoadPath};

use crate::error::RunnerError;
pub use crate::error::VmmError;

/// Bytes one index of a walk counts (a 128-byte line).
pub const LINE_BYTES: u64 = catalogue::LINE_UNIT_BYTES;

/// The virtual addresses of an aliased region at most: 496 GiB, below the 512 GiB that the
/// line-indexed chase's 32-bit indices reach (`scripts/gpu/tlb_alias.cu`, with 64-bit
/// indices, walked 992 GiB of 64 MiB mappings on an H100; 1 TiB of 2 MiB ones was refused
/// access beyond 1008 GiB).
pub const ALIASED_BYTES: u64 = 496 << 30;

/// One place of an aliased region (a multiple of every GPU's 2 MiB granularity; few
/// mappings: 7936 for 496 GiB).
pub const ALIASED_CHUNK_BYTES: u64 = 64 << 20;

/// The physical chunks behind an aliased region at most (4 GiB of 64 MiB chunks; a power
/// of two).
pub const ALIASED_POOL_CHUNKS: u64 = 64;

/// The pool of an aliased region on a device of `memory` bytes: [`ALIASED_POOL_CHUNKS`],
/// or the largest power of two of chunks within a quarter of the memory (at least one).
///
/// ```
/// use pchase_runner::walk::aliased_pool_chunks;
/// assert_eq!(aliased_pool_chunks(80 << 30), 64);
/// assert_eq!(aliased_pool_chunks(1 << 30), 4); // 256 MiB: four chunks of 64 MiB
/// assert_eq!(aliased_pool_chunks(100 << 20), 1);
/// ```
pub fn aliased_pool_chunks(memory: u64) -> u64 {
    let fits = (memory / 4 / ALIASED_CHUNK_BYTES).clamp(1, ALIASED_POOL_CHUNKS);
    1 << (63 - fits.leading_zeros())
}

/// The physical chunks behind a chunked region at most: 2025 (3⁴ · 5²) chunks of the
/// granularity, about 4 GiB of 2 MiB chunks. Odd, so that the places of any power-of-two
/// stride run through every chunk of the pool before one comes round again (the first
/// 2025 nodes of a walk at a stride of at least one chunk lie in distinct chunks, as in a
/// region of distinct chunks); made of the primes 3 and 5 only, which divide no walk's step
/// in lines ([`crate::measure::tlb::step_bytes`]: odd and divisible by no prime up to 13),
/// so two nodes of one walk share a physical line only 2025 × (chunk / 128 B) nodes apart
/// (33 million for 2 MiB chunks), far beyond the walks' limit.
pub const CHUNKED_POOL_CHUNKS: u64 = 2025;

/// How the memory of a walk is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WalkAllocation {
    /// One `cuMemAlloc` of the region: the driver's choice of page size.
    Plain,
    /// Places of the allocation granularity, each mapped on its own (`cuMemMap`) to a chunk
    /// of a pool in a shuffled order (`cuMemCreate`), in one reserved address range: pages
    /// of at most one chunk.
    Chunked,
    /// A pool of physical chunks mapped over and over into a reserved range larger than
    /// the memory ([`ALIASED_BYTES`]): walks over more virtual addresses than the GPU has.
    Aliased,
}

impl WalkAllocation {
    /// All three, plain first.
    pub const ALL: [WalkAllocation; 3] = [
        WalkAllocation::Plain,
        WalkAllocation::Chunked,
        WalkAllocation::Aliased,
    ];

    /// The name in logs and in the topology (`plain`, `chunked`, `aliased`).
    pub fn name(self) -> &'static str {
        match self {
            WalkAllocation::Plain => "plain",
            WalkAllocation::Chunked => "chunked",
            WalkAllocation::Aliased => "aliased",
        }
    }
}

impl std::fmt::Display for WalkAllocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The region walks run in, as allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkRegion {
    /// How it was allocated.
    pub allocation: WalkAllocation,
    /// Its bytes (at most what was asked; less where memory was short).
    pub bytes: u64,
    /// The chunk of a [`WalkAllocation::Chunked`] region (the driver's minimum allocation
    /// granularity) or of an aliased one's places; `None` for a plain one.
    pub chunk_bytes: Option<u64>,
    /// The physical bytes behind a region of chunks where they are fewer than its bytes
    /// (its pool, mapped over and over); `None` for a plain region and where every place
    /// has a chunk of its own.
    pub backing_bytes: Option<u64>,
}

/// One walk: a fine-grained chase of `nodes` nodes `step_bytes` apart from the region's
/// start, one block, thread 0 chasing. In address order (`group` 1) the chase visits node
/// 0, 1, 2, …; with `group` g it visits one node of each group of g neighbours in turn:
/// position `p` is node `(p % R) × g + p / R`, `R = nodes / g` ([`WalkRequest::node_at`]).
/// The same lines in two orders tell translation (which depends on the order of the
/// address ranges touched) from data effects (which depend on the lines only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkRequest {
    /// `GlobalCa` (the L1 path) or `GlobalCg` (the L2 path).
    pub path: LoadPath,
    /// Nodes of the chain (1 or more; one node loads itself).
    pub nodes: u32,
    /// Bytes between consecutive nodes: a positive multiple of [`LINE_BYTES`].
    pub step_bytes: u64,
    /// Nodes per group of the visiting order: 1 (address order) or a divisor of `nodes`.
    pub group: u32,
    /// Untimed loads before the timed ones.
    pub warmup_steps: u32,
    /// Timed loads (1 or more).
    pub steps: u32,
}

impl WalkRequest {
    /// The catalogue kernel that runs this request.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a path without a line-indexed chase.
    pub fn kernel(&self) -> Result<&'static Kernel, RunnerError> {
        catalogue::chase_lines(self.path).map_err(|e| RunnerError::InvalidRequest(e.to_string()))
    }

    /// Bytes from the first node to the end of the last node's step.
    pub fn span_bytes(&self) -> u64 {
        u64::from(self.nodes).saturating_mul(self.step_bytes)
    }

    /// Lines between consecutive nodes.
    pub fn stride_lines(&self) -> u64 {
        self.step_bytes / LINE_BYTES
    }

    /// The node at position `position` of the visiting order (see [`WalkRequest`]).
    pub fn node_at(&self, position: u64) -> u64 {
        grouped_node(position, u64::from(self.nodes), u64::from(self.group))
    }

    /// The line index a chase from node 0 holds after `loads` loads.
    pub fn line_after(&self, loads: u64) -> u64 {
        self.node_at(loads) * self.stride_lines()
    }

    /// Checks the request against a region of `region_bytes`.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] naming what does not fit.
    pub fn check(&self, region_bytes: u64) -> Result<(), RunnerError> {
        let bad = |m: String| Err(RunnerError::InvalidRequest(m));
        self.kernel()?;
        if self.nodes == 0 || self.steps == 0 {
            return bad(format!(
                "a walk needs a node and a timed step ({} nodes, {} steps)",
                self.nodes, self.steps
            ));
        }
        if self.group == 0 || self.nodes % self.group != 0 {
            return bad(format!(
                "a walk's group of {} does not divide its {} nodes",
                self.group, self.nodes
            ));
        }
        if self.step_bytes == 0 || self.step_bytes % LINE_BYTES != 0 {
            return bad(format!(
                "walk step {} B is not a positive multiple of {LINE_BYTES} B",
                self.step_bytes
            ));
        }
        // Line indices (and their products in the init kernel) are 32-bit.
        if self.span_bytes() / LINE_BYTES > u64::from(u32::MAX) {
            return bad(format!(
                "a walk over {} B spans more than 2^32 lines",
                self.span_bytes()
            ));
        }
        if self.span_bytes() > region_bytes {
            return bad(format!(
                "a walk over {} B does not fit the {region_bytes} B region",
                self.span_bytes()
            ));
        }
        Ok(())
    }
}

/// The node at position `position` (mod `nodes`) of a cycle of `nodes` nodes visited in
/// groups of `group` neighbours: `(p mod R) × group + p / R` with `R = nodes / group`
/// groups, so one node of each group in turn (`group` 1: address order). The CUDA
/// backend's `init_chain_lines` writes the same order; the simulator follows it.
///
/// ```
/// use pchase_runner::walk::grouped_node;
/// let order: Vec<u64> = (0..6).map(|p| grouped_node(p, 6, 3)).collect();
/// assert_eq!(order, [0, 3, 1, 4, 2, 5]);
/// assert_eq!(grouped_node(7, 6, 1), 1);
/// ```
pub fn grouped_node(position: u64, nodes: u64, group: u64) -> u64 {
    let nodes = nodes.max(1);
    let group = group.max(1);
    let groups = (nodes / group).max(1);
    let p = position % nodes;
    (p % groups) * group + p / groups
}

/// What a walk returned.
#[derive(Debug, Clone, PartialEq)]
pub struct WalkRun {
    /// The SM the block ran on.
    pub smid: u32,
    /// Per-load latencies in SM cycles, with the clock overhead.
    pub latencies: Vec<u32>,
    /// Device time of the launches (chain initialisation and chase).
    pub gpu_time: Duration,
}

/// A backend that can run walks ([`Backend::walks`](crate::Backend::walks)).
pub trait WalkBackend {
    /// Allocates the region walks run in from now on, replacing any earlier one: `allocation`
    /// of up to `max_bytes` (a multiple of 1 GiB is a good size); a backend may give less
    /// where memory is short, and says how much.
    ///
    /// # Errors
    /// [`RunnerError::Vmm`] for a chunked region the driver refused, [`RunnerError::Cuda`]
    /// for a plain one, [`RunnerError::InvalidRequest`] for a size below one chunk.
    fn walk_region(
        &mut self,
        allocation: WalkAllocation,
        max_bytes: u64,
    ) -> Result<WalkRegion, RunnerError>;

    /// Runs one walk in the current region.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] without a region or for a request that does not fit
    /// it ([`WalkRequest::check`]); a launch failure; [`RunnerError::WrongResult`] when the
    /// chase did not follow its chain.
    fn walk(&mut self, request: &WalkRequest) -> Result<WalkRun, RunnerError>;

    /// Frees the current region, if any.
    ///
    /// # Errors
    /// [`RunnerError::Vmm`] when tearing a chunked region down failed (the memory may stay
    /// mapped until the context ends).
    fn release_walk_region(&mut self) -> Result<(), RunnerError>;
}
