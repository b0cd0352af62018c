//! The interconnect of a node: whether one GPU can read another's memory, and the
//! latency and bandwidth of doing so.
//!
//! A [`PeerBackend`] holds several GPUs of one node, by position (0 … n−1 in the order
//! they were given; the caller maps positions to CUDA device indices). It answers three
//! requests: may GPU `from` access GPU `to`'s memory ([`PeerBackend::access`]); a
//! pointer chase that `from` runs over a chain in `to`'s memory
//! ([`PeerBackend::peer_chase`]: the fine-grained kernel of the single-GPU benchmarks, its
//! chain on the other GPU); and a peer copy from `to` into `from`
//! ([`PeerBackend::peer_copy`]). [`measure_link`] turns them into a
//! [`topology::fleet::PeerLink`]. The CUDA backend's node is `crate::cuda::CudaNode`; the
//! simulated one is [`SimNode`].
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
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

mod sim;

use std::time::Duration;

use topology::{fleet::PeerLink, Latency, LatencySummary};

use crate::{chain::ChainSpec, device::DeviceInfo, error::RunnerError};

pub use sim::{SimLink, SimNode};

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

    /// The time of each timed copy of `request.bytes` from `to`'s memory into `from`'s.
    fn peer_copy(
        &mut self,
        from: u32,
        to: u32,
        request: &PeerCopyRequest,
    ) -> Result<Vec<Duration>, RunnerError>;

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
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions {
            steps: 512,
            warm_chain_bytes: 256 << 10,
            cold_stride_bytes: 4096,
            copy_bytes: 256 << 20,
            copy_repeats: 5,
        }
    }
}

/// The latencies of a chase with the clock overhead taken off, as a [`Latency`].
fn latency(samples: &[u32], overhead: u32) -> Option<Latency> {
    let cycles: Vec<f64> = samples
        .iter()
        .map(|&s| f64::from(s.saturating_sub(overhead)))
        .collect();
    LatencySummary::from_samples(&cycles).map(Latency::measured)
}

/// Measures what `from` sees of `to`: access, a warm and a cold chase, a peer copy. Never
/// fails as a whole: what cannot be measured is a note on the link (a node's other links
/// and its GPUs' results matter more than one link).
pub fn measure_link(
    node: &mut dyn PeerBackend,
    from: u32,
    to: u32,
    options: &PeerOptions,
) -> PeerLink {
    let mut link = PeerLink {
        from,
        to,
        from_uuid: None,
        to_uuid: None,
        peer_access: false,
        nvlink_links: None,
        performance_rank: None,
        latency_warm: None,
        latency_cold: None,
        sm_clock_mhz: None,
        copy_gib_per_s: None,
        copy_bytes: None,
        notes: Vec::new(),
    };
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
