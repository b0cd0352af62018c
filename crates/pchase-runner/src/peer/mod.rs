//! The interconnect of a node: whether one GPU can read another's memory, and the
//! latency and bandwidth of doing so.
//!
//! A [`PeerBackend`] holds several GPUs of one node, by position (0 … n−1 in the order
//! they were given; the caller maps positions to CUDA device indices). It answers four
//! requests: may GPU `from` access GPU `to`'s memory ([`PeerBackend::access`]); a
//! pointer chase that `from` runs over a chain in `to`'s memory
//! ([`PeerBackend::peer_chase`]: the fine-grained kernel of the single-GPU benchmarks, its
//! chain on the other GPU); copy-engine copies between GPUs, several at once
//! ([`PeerBackend::peer_copies`]; one of them is the peer copy from `to` into `from`,
//! [`PeerBackend::peer_copy`]); and a streaming kernel of the device-memory bandwidth
//! benchmark run by `from` over `to`'s memory ([`PeerBackend::peer_bandwidth`]).
//! [`measure_link`] turns them into a [`topology::fleet::PeerLink`]: the latencies, the
//! peer copy, and the rates tuned to the link's peak (the copy engines pulling, pushing and
//! both at once, each over the number of streams that moved it fastest; the SMs reading and
//! writing, each with the launch shape that was fastest), each beside the peak where the
//! NVLink count and generation are known ([`set_link_peak`]). [`measure_all_pairs`] copies
//! between every ordered pair at once. The CUDA backend's node is `crate::cuda::CudaNode`;
//! the simulated one is [`SimNode`].
//!
//! ```
//! use pchase_runner::{peer, sim::SimProfile};
//! let mut node = peer::SimNode::new(vec![SimProfile::bundled("h100")?, SimProfile::bundled("h100")?])?;
//! let link = peer::measure_link(&mut node, 0, 1, &peer::PeerOptions::default());
//! assert!(link.peer_access);
//! let warm = link.latency_warm.as_ref().unwrap().mean.get();
//! let cold = link.latency_cold.as_ref().unwrap().mean.get();
//! assert!(cold > warm, "a cold line comes from the other GPU's memory");
//! assert!(link.copy_gib_per_s.unwrap() > 100.0);
//! // 18 NVLink 4 links: 450 GB/s per direction; no rate above it.
//! assert_eq!(link.peak_gb_per_s, Some(450.0));
//! let push = link.copy_push.as_ref().unwrap();
//! assert!(push.fraction_of_peak.unwrap() <= 1.0);
//! assert!(link.copy_both.as_ref().unwrap().sum_gb_per_s > push.gb_per_s);
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

mod all_pairs;
mod link_model;
mod rates;
mod requests;
mod sharing;
mod sim;

use std::time::Duration;

use topology::{fleet::PeerLink, Latency, LatencySummary};

use crate::{
    bandwidth::{BandwidthRequest, BandwidthRun},
    chain::ChainSpec,
    device::{ComputeCapability, DeviceInfo},
    error::RunnerError,
};

pub use all_pairs::measure_all_pairs;
pub use link_model::SimLink;
pub use requests::{
    check_peer_bandwidth, NvlinkGeneration, PeerCopiesRequest, PeerTransfer, MAX_COPIES_PER_TIMING,
    MAX_PEER_COPY_BYTES, MAX_PEER_REPEATS,
};
pub use sim::SimNode;

/// What the driver says about GPU `from` reading GPU `to`'s memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerAccess {
    /// `cuDeviceCanAccessPeer`.
    pub can_access: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`, where reported.
    pub performance_rank: Option<i32>,
    /// Active NVLink links between the two, where the backend knows (the simulator; the
    /// CLI asks NVML for real GPUs).
    pub nvlink_links: Option<u32>,
}

/// A pointer chase that one GPU runs over a chain in another's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerChaseRequest {
    /// The chain, built in the owner's memory (node `k` holds the index of node `k+1`).
    pub chain: ChainSpec,
    /// Untimed loads first.
    pub warmup_steps: u32,
    /// Timed loads.
    pub steps: u32,
    /// Flush the owner's L2 before the chase (so that every first touch goes to memory).
    pub flush_owner_l2: bool,
}

/// A peer copy, timed per repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCopyRequest {
    /// Bytes per copy.
    pub bytes: u64,
    /// Timed copies (one untimed copy goes first).
    pub repeats: u32,
}

/// Several GPUs of one node, by position.
pub trait PeerBackend {
    /// How many GPUs.
    fn gpus(&self) -> u32;

    /// What the driver says about GPU `position`.
    fn info(&self, position: u32) -> Result<&DeviceInfo, RunnerError>;

    /// Whether `from` may read `to`'s memory.
    fn access(&mut self, from: u32, to: u32) -> Result<PeerAccess, RunnerError>;

    /// The latency of each timed load (cycles of `from`'s SM clock, clock overhead
    /// included) of a chase `from` runs over a chain in `to`'s memory; the backend checks
    /// that the chase followed the chain. Peer access is enabled first.
    fn peer_chase(
        &mut self,
        from: u32,
        to: u32,
        request: &PeerChaseRequest,
    ) -> Result<Vec<u32>, RunnerError>;

    /// The time of each timed copy of `request.bytes` from `to`'s memory into `from`'s, by
    /// `from`'s copy engine: one transfer of [`PeerBackend::peer_copies`].
    fn peer_copy(
        &mut self,
        from: u32,
        to: u32,
        request: &PeerCopyRequest,
    ) -> Result<Vec<Duration>, RunnerError> {
        let copies = PeerCopiesRequest {
            transfers: vec![PeerTransfer::pull(from, to)],
            bytes: request.bytes,
            copies_per_timing: 1,
            repeats: request.repeats,
        };
        self.peer_copies(&copies)?
            .into_iter()
            .next()
            .ok_or_else(|| RunnerError::WrongResult("a peer copy timed nothing".into()))
    }

    /// Copy-engine copies at once ([`PeerCopiesRequest`]): per transfer, in the request's
    /// order, the time of each timed group of copies. Peer access is enabled first, from
    /// each engine to the other end of its transfer.
    fn peer_copies(
        &mut self,
        request: &PeerCopiesRequest,
    ) -> Result<Vec<Vec<Duration>>, RunnerError>;

    /// A streaming bandwidth kernel that `from` runs over `to`'s memory: a read or a write
    /// of `pchase_kernels::bandwidth` in a grid stride ([`check_peer_bandwidth`]) over
    /// `request.region_bytes` of `to`'s memory, one untimed launch, then the timed ones
    /// back to back. Peer access is enabled first.
    fn peer_bandwidth(
        &mut self,
        from: u32,
        to: u32,
        request: &BandwidthRequest,
    ) -> Result<BandwidthRun, RunnerError>;

    /// `from`'s measured SM clock (MHz) and the overhead of its clock reads (cycles), as
    /// the single-GPU session measures them; a backend may measure it once per reader for
    /// all of its links.
    fn clock(&mut self, position: u32) -> Result<(f64, u32), RunnerError>;
}

/// How the links are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerOptions {
    /// Timed loads of each chase.
    pub steps: u32,
    /// The warm chain: this many bytes, one node per 128-byte line, read once before the
    /// timed loads (so whichever cache keeps peer lines answers).
    pub warm_chain_bytes: u64,
    /// The cold chain's stride: one node per this many bytes; its nodes are touched once
    /// each after the owner's L2 is flushed.
    pub cold_stride_bytes: u32,
    /// Bytes per peer copy.
    pub copy_bytes: u64,
    /// Timed copies.
    pub copy_repeats: u32,
    /// Measure the rates tuned to the link's peak (copy engines pulling, pushing, both;
    /// SMs reading, writing); without, a link is what schema 1.2 knew.
    pub rates: bool,
    /// Bytes of each transfer's copies of the tuned copy-engine rates and the all-pairs
    /// copy (a transfer split over streams: this much over all of them).
    pub tuned_copy_bytes: u64,
    /// Copies back to back between two events.
    pub tuned_copies_per_timing: u32,
    /// Timed groups of copies.
    pub tuned_repeats: u32,
    /// Bytes of the other GPU's memory that the SMs' launches walk.
    pub sm_region_bytes: u64,
    /// The most launch shapes the SMs' search tries, per direction.
    pub sm_search_budget: usize,
}

impl Default for PeerOptions {
    /// 256 MiB for the peer copy (as before); 64 MiB for the tuned rates, which NVLink 4
    /// moves in some 150 µs: two copies per timing, three timings after an untimed one.
    fn default() -> Self {
        PeerOptions {
            steps: 512,
            warm_chain_bytes: 256 << 10,
            cold_stride_bytes: 4096,
            copy_bytes: 256 << 20,
            copy_repeats: 5,
            rates: true,
            tuned_copy_bytes: 64 << 20,
            tuned_copies_per_timing: 2,
            tuned_repeats: 3,
            sm_region_bytes: 64 << 20,
            sm_search_budget: 8,
        }
    }
}

/// Sets `link`'s NVLink generation (from the reader's architecture, `reader`) and its peak
/// per direction (NVLink links × the generation's rate per link and direction) and every
/// fraction of the peak; the peak is unknown where the link count is, where the GPUs talk
/// over PCIe (0 links), or where the architecture has no NVLink this crate knows.
///
/// ```
/// use pchase_runner::{peer::set_link_peak, ComputeCapability};
/// let mut link = topology::fleet::PeerLink::new(0, 1);
/// link.nvlink_links = Some(18);
/// set_link_peak(&mut link, ComputeCapability { major: 9, minor: 0 });
/// assert_eq!((link.nvlink_generation, link.peak_gb_per_s), (Some(4), Some(450.0)));
/// link.nvlink_links = Some(0);
/// set_link_peak(&mut link, ComputeCapability { major: 9, minor: 0 });
/// assert_eq!(link.peak_gb_per_s, None);
/// ```
pub fn set_link_peak(link: &mut PeerLink, reader: ComputeCapability) {
    let generation = NvlinkGeneration::of(reader);
    let links = link.nvlink_links.filter(|&n| n > 0);
    link.nvlink_generation = links.and(generation.map(|g| g.generation));
    link.set_peak(generation.zip(links).and_then(|(g, n)| g.peak_gb_per_s(n)));
}

/// The latencies of a chase with the clock overhead taken off, as a [`Latency`].
fn latency(samples: &[u32], overhead: u32) -> Option<Latency> {
    let cycles: Vec<f64> = samples
        .iter()
        .map(|&s| f64::from(s.saturating_sub(overhead)))
        .collect();
    LatencySummary::from_samples(&cycles).map(Latency::measured)
}

/// Measures what `from` sees of `to`: access, a warm and a cold chase, a peer copy, the
/// rates tuned to the link's peak where `options.rates` (`rates::measure`), and the peak
/// where the backend knows the NVLink count ([`set_link_peak`]; the CLI asks NVML and sets
/// it again). Never fails as a whole: what cannot be measured is a note on the link (a node's other links
/// and its GPUs' results matter more than one link).
pub fn measure_link(
    node: &mut dyn PeerBackend,
    from: u32,
    to: u32,
    options: &PeerOptions,
) -> PeerLink {
    let mut link = PeerLink::new(from, to);
    let started = std::time::Instant::now();
    let mut phases: Vec<(&str, f64)> = Vec::new();
    let mark = |name: &'static str, phases: &mut Vec<(&str, f64)>| {
        phases.push((name, started.elapsed().as_secs_f64() * 1e3));
    };
    match node.access(from, to) {
        Ok(access) => {
            link.peer_access = access.can_access;
            link.performance_rank = access.performance_rank;
            link.nvlink_links = access.nvlink_links;
        }
        Err(e) => {
            link.notes.push(format!("peer access not known: {e}"));
            return link;
        }
    }
    if !link.peer_access {
        link.notes
            .push("the driver denies peer access: nothing measured".into());
        return link;
    }
    mark("access", &mut phases);
    let overhead = match node.clock(from) {
        Ok((mhz, overhead)) => {
            link.sm_clock_mhz = Some(mhz);
            overhead
        }
        Err(e) => {
            link.notes.push(format!("the reader's clock: {e}"));
            0
        }
    };
    let chases = [
        (
            "warm",
            ChainSpec::new(options.warm_chain_bytes, 128),
            false,
            true,
        ),
        (
            "cold",
            ChainSpec::new(
                u64::from(options.cold_stride_bytes) * (u64::from(options.steps) + 1),
                options.cold_stride_bytes,
            ),
            true,
            false,
        ),
    ];
    mark("clock", &mut phases);
    for (name, chain, flush, warm_up) in chases {
        let result = chain.and_then(|chain| {
            let request = PeerChaseRequest {
                chain,
                warmup_steps: if warm_up {
                    u32::try_from(chain.nodes()).unwrap_or(u32::MAX)
                } else {
                    0
                },
                steps: options.steps,
                flush_owner_l2: flush,
            };
            node.peer_chase(from, to, &request)
        });
        match result.map(|samples| latency(&samples, overhead)) {
            Ok(Some(l)) if name == "warm" => link.latency_warm = Some(l),
            Ok(Some(l)) => link.latency_cold = Some(l),
            Ok(None) => link.notes.push(format!("{name} chase: no samples")),
            Err(e) => link.notes.push(format!("{name} chase failed: {e}")),
        }
        mark(name, &mut phases);
    }
    let copy = PeerCopyRequest {
        bytes: options.copy_bytes,
        repeats: options.copy_repeats.max(1),
    };
    match node.peer_copy(from, to, &copy) {
        Ok(times) => {
            let seconds: Vec<f64> = times.iter().map(Duration::as_secs_f64).collect();
            match topology::fleet::median(&seconds) {
                Some(s) if s > 0.0 => {
                    link.copy_gib_per_s = Some(copy.bytes as f64 / s / f64::from(1u32 << 30));
                    link.copy_bytes = Some(copy.bytes);
                }
                _ => link.notes.push("peer copy: no valid timing".into()),
            }
        }
        Err(e) => link.notes.push(format!("peer copy failed: {e}")),
    }
    mark("copy", &mut phases);
    if options.rates {
        rates::measure(node, from, to, options, &mut link, &mut |name| {
            mark(name, &mut phases);
        });
    }
    if let Ok(reader) = node.info(from) {
        set_link_peak(&mut link, reader.compute_capability);
    }
    log::debug!(
        "link {from} → {to}: {}",
        phases
            .iter()
            .map(|(name, ms)| format!("{name} done at {ms:.1} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    link
}
