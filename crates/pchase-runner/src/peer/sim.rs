//! A simulated node: several simulated GPUs and a model of the link between them.
//!
//! The link is a model, not a measurement: a load of another GPU's memory costs what it
//! costs on that GPU (its L2 near latency for a warm line, its memory latency for a cold
//! one, converted to the reader's clock) plus the link's extra latency; a peer copy moves
//! bytes at the link's bandwidth after a fixed setup time. GPUs of one model are joined by
//! NVLink ([`SimLink::nvlink`]), GPUs of different models by PCIe ([`SimLink::pcie`]); a
//! test may give any link, or deny peer access.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

use super::{PeerAccess, PeerBackend, PeerChaseRequest, PeerCopyRequest};
use crate::{
    backend::Backend,
    device::DeviceInfo,
    error::RunnerError,
    sim::{LinkSpec, SimBackend, SimProfile},
};

/// The modelled link between two simulated GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimLink {
    /// Whether the driver would allow peer access.
    pub access: bool,
    /// Active NVLink links (0: PCIe).
    pub nvlink_links: u32,
    /// What a load across the link adds, ns.
    pub extra_latency_ns: f64,
    /// Copy bandwidth, GiB/s.
    pub bandwidth_gib_per_s: f64,
}

impl SimLink {
    /// An NVLink-like link: 18 links, +600 ns a load, 360 GiB/s a direction (the order of
    /// an H100 SXM's NVLink 4; a model, not a measurement).
    pub fn nvlink() -> SimLink {
        SimLink {
            access: true,
            nvlink_links: 18,
            extra_latency_ns: 600.0,
            bandwidth_gib_per_s: 360.0,
        }
    }

    /// A PCIe-like link: +1500 ns a load, 24 GiB/s (PCIe 5.0 ×16 order).
    pub fn pcie() -> SimLink {
        SimLink {
            access: true,
            nvlink_links: 0,
            extra_latency_ns: 1500.0,
            bandwidth_gib_per_s: 24.0,
        }
    }
}

/// Several simulated GPUs of one node.
#[derive(Debug)]
pub struct SimNode {
    gpus: Vec<SimBackend>,
    /// Per ordered pair `(from, to)`, a link other than the default.
    links: Vec<((u32, u32), SimLink)>,
    rng: Xoshiro256PlusPlus,
}

impl SimNode {
    /// A node of `profiles` (position `i` is profile `i`).
    ///
    /// # Errors
    /// An invalid profile.
    pub fn new(profiles: Vec<SimProfile>) -> Result<SimNode, RunnerError> {
        let seed = profiles
            .iter()
            .fold(0x5eed, |s, p| s ^ p.seed.rotate_left(7));
        let gpus = profiles
            .into_iter()
            .map(SimBackend::new)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SimNode {
            gpus,
            links: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }

    /// Sets the link from `from` to `to` (one direction).
    pub fn set_link(&mut self, from: u32, to: u32, link: SimLink) {
        self.links.retain(|(pair, _)| *pair != (from, to));
        self.links.push(((from, to), link));
    }

    /// The link from `from` to `to`: the one set, else NVLink between GPUs of one model
    /// and PCIe between different models.
    pub fn link(&self, from: u32, to: u32) -> Result<SimLink, RunnerError> {
        let (a, b) = (self.gpu(from)?, self.gpu(to)?);
        if from == to {
            return Err(RunnerError::InvalidRequest(format!(
                "a peer link joins two GPUs; {from} → {to} is one"
            )));
        }
        if let Some((_, link)) = self.links.iter().find(|(pair, _)| *pair == (from, to)) {
            return Ok(*link);
        }
        if a.device().name != b.device().name {
            return Ok(SimLink::pcie());
        }
        // The reader's links into the fabric are what NVML counts for it; a copy moves at
        // the share of links the less connected of the two has up.
        let up = |g: &SimBackend| g.profile().links.map_or(LinkSpec::NVLINKS, |l| l.nvlink);
        let mut link = SimLink::nvlink();
        link.nvlink_links = up(a);
        link.bandwidth_gib_per_s *= f64::from(up(a).min(up(b))) / f64::from(LinkSpec::NVLINKS);
        if link.nvlink_links == 0 {
            link = SimLink::pcie();
        }
        Ok(link)
    }

    fn gpu(&self, position: u32) -> Result<&SimBackend, RunnerError> {
        self.gpus
            .get(position as usize)
            .ok_or(RunnerError::BadDeviceIndex {
                index: position,
                count: self.gpus.len() as u32,
            })
    }

    /// The simulated GPU at `position`.
    pub fn backend_mut(&mut self, position: u32) -> Result<&mut SimBackend, RunnerError> {
        let count = self.gpus.len() as u32;
        self.gpus
            .get_mut(position as usize)
            .ok_or(RunnerError::BadDeviceIndex {
                index: position,
                count,
            })
    }

    fn open(&self, from: u32, to: u32) -> Result<SimLink, RunnerError> {
        let link = self.link(from, to)?;
        if !link.access {
            return Err(RunnerError::InvalidRequest(format!(
                "GPU {from} cannot access GPU {to}'s memory (peer access denied)"
            )));
        }
        Ok(link)
    }
}

impl PeerBackend for SimNode {
    fn gpus(&self) -> u32 {
        self.gpus.len() as u32
    }

    fn info(&self, position: u32) -> Result<&DeviceInfo, RunnerError> {
        Ok(self.gpu(position)?.device())
    }

    fn access(&mut self, from: u32, to: u32) -> Result<PeerAccess, RunnerError> {
        let link = self.link(from, to)?;
        Ok(PeerAccess {
            can_access: link.access,
            performance_rank: Some(if link.nvlink_links > 0 { 0 } else { 1 }),
            nvlink_links: Some(link.nvlink_links),
        })
    }

    fn peer_chase(
        &mut self,
        from: u32,
        to: u32,
        request: &PeerChaseRequest,
    ) -> Result<Vec<u32>, RunnerError> {
        let link = self.open(from, to)?;
        if request.steps == 0 {
            return Err(RunnerError::InvalidRequest(
                "a chase needs at least one timed step".into(),
            ));
        }
        let (reader, owner) = (self.gpu(from)?.profile(), self.gpu(to)?.profile());
        let reader_mhz = reader.clock.sm_mhz;
        let in_reader_cycles =
            |owner_cycles: u32| f64::from(owner_cycles) * reader_mhz / owner.clock.sm_mhz;
        let nodes = request.chain.nodes();
        let link_cycles = link.extra_latency_ns * reader_mhz / 1e3;
        let warm = in_reader_cycles(owner.l2.near_latency) + link_cycles;
        let cold = in_reader_cycles(owner.memory.latency) + link_cycles;
        // A line is warm once the chase has been there, and stays warm while the chain fits
        // the owner's L2 (after a flush everything starts cold).
        let fits = request.chain.bytes <= owner.l2.size_bytes;
        let jitter = Normal::new(0.0, reader.noise.jitter_stdev_cycles.max(0.0)).ok();
        let overhead = f64::from(reader.clock.overhead_cycles);
        let mut seen = request
            .warmup_steps
            .min(u32::try_from(nodes).unwrap_or(u32::MAX)) as u64;
        let mut out = Vec::with_capacity(request.steps as usize);
        for k in 0..u64::from(request.steps) {
            let node = (u64::from(request.warmup_steps) + k) % nodes;
            let hit = fits && node < seen;
            seen = seen.max(node + 1);
            let base = if hit { warm } else { cold };
            let noise = jitter.map_or(0.0, |n| n.sample(&mut self.rng));
            out.push((base + overhead + noise).round().max(1.0) as u32);
        }
        Ok(out)
    }

    fn peer_copy(
        &mut self,
        from: u32,
        to: u32,
        request: &PeerCopyRequest,
    ) -> Result<Vec<Duration>, RunnerError> {
        let link = self.open(from, to)?;
        if request.bytes == 0 {
            return Err(RunnerError::InvalidRequest("a copy of 0 bytes".into()));
        }
        let seconds = request.bytes as f64 / (link.bandwidth_gib_per_s * f64::from(1u32 << 30));
        let jitter = Normal::<f64>::new(1.0, 0.005).expect("a valid normal distribution");
        Ok((0..request.repeats)
            .map(|_| {
                let factor = jitter.sample(&mut self.rng).clamp(0.95, 1.05);
                Duration::from_secs_f64(8e-6 + seconds * factor)
            })
            .collect())
    }

    fn clock(&mut self, position: u32) -> Result<(f64, u32), RunnerError> {
        let gpu = self.backend_mut(position)?;
        Ok((gpu.measure_sm_clock_mhz()?, gpu.clock_overhead(256)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::{measure_link, PeerOptions};

    fn node(names: &[&str]) -> SimNode {
        SimNode::new(
            names
                .iter()
                .map(|n| SimProfile::bundled(n).unwrap())
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn latencies_follow_the_owner_and_the_link() {
        let mut n = node(&["h100", "h200"]);
        let owner = n.gpu(1).unwrap().profile().clone();
        let reader = n.gpu(0).unwrap().profile().clone();
        let link = measure_link(&mut n, 0, 1, &PeerOptions::default());
        assert_eq!(link.nvlink_links, Some(0), "different models: PCIe");
        let expected_cold = f64::from(owner.memory.latency) * reader.clock.sm_mhz
            / owner.clock.sm_mhz
            + 1500.0 * reader.clock.sm_mhz / 1e3;
        let cold = link.latency_cold.unwrap().mean.get();
        assert!(
            (cold - expected_cold).abs() < 0.02 * expected_cold,
            "{cold} vs {expected_cold}"
        );
        let gib = link.copy_gib_per_s.unwrap();
        assert!((gib - 24.0).abs() < 1.0, "{gib}");
    }

    #[test]
    fn denied_access_measures_nothing_and_says_so() {
        let mut n = node(&["h100", "h100"]);
        n.set_link(
            0,
            1,
            SimLink {
                access: false,
                ..SimLink::nvlink()
            },
        );
        let link = measure_link(&mut n, 0, 1, &PeerOptions::default());
        assert!(!link.peer_access);
        assert!(link.latency_warm.is_none() && link.copy_gib_per_s.is_none());
        assert!(link.notes[0].contains("denies"), "{:?}", link.notes);
        // The other direction keeps its default link.
        assert!(measure_link(&mut n, 1, 0, &PeerOptions::default()).peer_access);
        assert!(matches!(
            n.access(0, 5),
            Err(RunnerError::BadDeviceIndex { index: 5, count: 2 })
        ));
    }
}
