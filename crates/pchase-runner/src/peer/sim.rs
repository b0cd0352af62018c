//! A simulated node: several simulated GPUs and a model of the link between them.
//!
//! The link is a model, not a measurement: a load of another GPU's memory costs what it
//! costs on that GPU (its L2 near latency for a warm line, its memory latency for a cold
//! one, converted to the reader's clock) plus the link's extra latency. Bytes move at a
//! share of the link's peak per direction: a copy engine's copy at
//! [`SimLink::copy_pull`] or [`SimLink::copy_push`] of it on one stream, a little more
//! split over streams, less while the pair's other direction is busy
//! ([`SimLink::both_ways`]), each copy after a fixed setup time; copies at once share each
//! GPU's ports (its links' capacity sending and receiving) fairly (`sharing`); the SMs
//! read and write at [`SimLink::sm_read`] and [`SimLink::sm_write`] of the peak with enough
//! bytes in flight (a loaded round trip's worth of the link's rate), less with narrower
//! accesses, after a fixed launch cost. GPUs of one model are joined by NVLink
//! ([`SimLink::nvlink`]: the links the profile's `[links]` has up, NVLink 4's 25 GB/s each
//! per direction), GPUs of different models by PCIe ([`SimLink::pcie`]); a test may give any
//! link, or deny peer access.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

use super::link_model::{SimLink, COPY_SETUP, LAUNCH_COST, LOADED_ROUND_TRIP_S, PORT_CEILING};
use super::sharing::{fair_shares, Flow};
use super::{
    check_peer_bandwidth, NvlinkGeneration, PeerAccess, PeerBackend, PeerChaseRequest,
    PeerCopiesRequest,
};
use crate::{
    backend::Backend,
    bandwidth::{check_bandwidth, BandwidthOp, BandwidthRequest, BandwidthRun},
    device::DeviceInfo,
    error::RunnerError,
    sim::{LinkSpec, SimBackend, SimProfile},
};

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
        // The reader's links into the fabric are what NVML counts for it; bytes move at the
        // share of links the less connected of the two has up.
        let up = |g: &SimBackend| g.profile().links.map_or(LinkSpec::NVLINKS, |l| l.nvlink);
        let mut link = SimLink::nvlink();
        link.nvlink_links = up(a);
        link.peak_gb_per_s = f64::from(up(a).min(up(b))) * per_link(a);
        if link.nvlink_links == 0 || up(b) == 0 {
            link = SimLink::pcie();
        }
        Ok(link)
    }

    /// The capacity of `position`'s ports of the kind of `link` (its NVLinks, or its PCIe
    /// link), sending or receiving, GB/s.
    fn port_gb_per_s(&self, position: u32, link: &SimLink) -> Result<f64, RunnerError> {
        let gpu = self.gpu(position)?;
        let links = gpu.profile().links.map_or(LinkSpec::NVLINKS, |l| l.nvlink);
        Ok(PORT_CEILING
            * if link.nvlink_links > 0 {
                f64::from(links) * per_link(gpu)
            } else {
                link.peak_gb_per_s
            })
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

/// A simulated GPU's rate per NVLink and direction: its architecture's, else NVLink 4's.
fn per_link(gpu: &SimBackend) -> f64 {
    NvlinkGeneration::of(gpu.device().compute_capability).map_or(25.0, |g| g.gb_per_s_per_link)
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

    fn peer_copies(
        &mut self,
        request: &PeerCopiesRequest,
    ) -> Result<Vec<Vec<Duration>>, RunnerError> {
        request.check(self.gpus())?;
        // Ports: per GPU and kind of link, its sending and its receiving side.
        let mut ports: Vec<((u32, bool, bool), f64)> = Vec::new();
        let mut port =
            |key: (u32, bool, bool), capacity: f64| match ports.iter().position(|(k, _)| *k == key)
            {
                Some(at) => at,
                None => {
                    ports.push((key, capacity));
                    ports.len() - 1
                }
            };
        let mut flows = Vec::new();
        for t in &request.transfers {
            let link = self.open(t.engine, t.peer())?;
            let streams = request
                .transfers
                .iter()
                .filter(|u| (u.src, u.dst, u.engine) == (t.src, t.dst, t.engine))
                .count();
            let reverse = request
                .transfers
                .iter()
                .any(|u| (u.src, u.dst) == (t.dst, t.src));
            let alone = link.copy_rate(t.engine == t.dst, streams) / streams as f64;
            let nvlink = link.nvlink_links > 0;
            let passes = vec![
                port((t.src, nvlink, true), self.port_gb_per_s(t.src, &link)?),
                port((t.dst, nvlink, false), self.port_gb_per_s(t.dst, &link)?),
            ];
            flows.push(Flow {
                demand: alone * if reverse { link.both_ways } else { 1.0 },
                ports: passes,
            });
        }
        let capacity: Vec<f64> = ports.iter().map(|(_, c)| *c).collect();
        let rates = fair_shares(&flows, &capacity);
        let jitter = Normal::<f64>::new(1.0, 0.005).expect("a valid normal distribution");
        let copies = f64::from(request.copies_per_timing);
        Ok(rates
            .iter()
            .map(|&gb_per_s| {
                (0..request.repeats)
                    .map(|_| {
                        let factor = jitter.sample(&mut self.rng).clamp(0.95, 1.05);
                        let moving = request.bytes as f64 / (gb_per_s * 1e9) * factor;
                        Duration::from_secs_f64(copies * (COPY_SETUP.as_secs_f64() + moving))
                    })
                    .collect()
            })
            .collect())
    }

    fn peer_bandwidth(
        &mut self,
        from: u32,
        to: u32,
        request: &BandwidthRequest,
    ) -> Result<BandwidthRun, RunnerError> {
        check_peer_bandwidth(request)?;
        let link = self.open(from, to)?;
        let device = self.gpu(from)?.device().clone();
        check_bandwidth(request, &device)?;
        device.check_kernel(request.kernel()?)?;
        let shape = request.shape;
        let share = match shape.op {
            BandwidthOp::Write => link.sm_write,
            _ => link.sm_read,
        };
        // Bytes in flight per SM against a loaded round trip's worth of its share.
        let in_flight = f64::from(shape.blocks_per_sm)
            * f64::from(shape.threads)
            * f64::from(shape.vector_bytes)
            * f64::from(shape.unroll);
        let needed =
            link.peak_gb_per_s * 1e9 * LOADED_ROUND_TRIP_S / f64::from(device.sm_count.max(1));
        let width = match shape.vector_bytes {
            16 => 1.0,
            8 => 0.97,
            _ => 0.9,
        };
        let gb_per_s = link.peak_gb_per_s * share * width * (in_flight / needed).min(1.0);
        let bytes = request.bytes_per_launch(device.sm_count);
        let jitter = Normal::<f64>::new(1.0, 0.003).expect("a valid normal distribution");
        let launch = |rng: &mut Xoshiro256PlusPlus| {
            let factor = jitter.sample(rng).clamp(0.97, 1.03);
            LAUNCH_COST + Duration::from_secs_f64(bytes as f64 / (gb_per_s * 1e9) * factor)
        };
        let untimed = launch(&mut self.rng);
        let elapsed: Vec<Duration> = (0..request.repetitions)
            .map(|_| launch(&mut self.rng))
            .collect();
        Ok(BandwidthRun {
            gpu_time: untimed + elapsed.iter().sum::<Duration>(),
            elapsed,
            bytes_per_launch: bytes,
        })
    }

    fn clock(&mut self, position: u32) -> Result<(f64, u32), RunnerError> {
        let gpu = self.backend_mut(position)?;
        Ok((gpu.measure_sm_clock_mhz()?, gpu.clock_overhead(256)?))
    }
}

#[cfg(test)]
mod tests {
    use super::super::link_model::GIB;
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

    /// Every rate of a link, GB/s, with its name.
    fn rates(link: &topology::fleet::PeerLink) -> Vec<(&'static str, f64)> {
        let mut out = link.rates();
        if let Some(both) = &link.copy_both {
            out.push(("both: pull", both.pull.gb_per_s));
            out.push(("both: push", both.push.gb_per_s));
        }
        out
    }

    #[test]
    fn nvlink_rates_stay_below_the_peak_and_both_ways_beat_one() {
        let mut n = node(&["h100", "h100"]);
        let link = measure_link(&mut n, 0, 1, &PeerOptions::default());
        assert!(link.notes.is_empty(), "{:?}", link.notes);
        assert_eq!(
            (link.nvlink_generation, link.peak_gb_per_s),
            (Some(4), Some(450.0))
        );
        let peak = 450.0;
        for (name, rate) in rates(&link) {
            let directions = if name == "copy_both" { 2.0 } else { 1.0 };
            assert!(
                rate > 0.0 && rate <= 1.05 * peak * directions,
                "{name}: {rate}"
            );
        }
        let fractions = [
            link.copy_fraction_of_peak,
            link.copy_pull.as_ref().and_then(|r| r.fraction_of_peak),
            link.copy_push.as_ref().and_then(|r| r.fraction_of_peak),
            link.copy_both.as_ref().and_then(|b| b.sum_fraction_of_peak),
            link.sm_read.as_ref().and_then(|r| r.fraction_of_peak),
            link.sm_write.as_ref().and_then(|r| r.fraction_of_peak),
        ];
        for f in fractions {
            let f = f.expect("every rate has its share of the peak");
            assert!(f > 0.5 && f <= 1.05, "{f}");
        }
        let both = link.copy_both.as_ref().unwrap();
        let push = link.copy_push.as_ref().unwrap();
        let pull = link.copy_pull.as_ref().unwrap();
        // Both ways at once move more than either way alone, and each way less than alone.
        assert!(
            both.sum_gb_per_s > push.gb_per_s.max(pull.gb_per_s),
            "{both:?}"
        );
        assert!(both.pull.gb_per_s < pull.gb_per_s && both.push.gb_per_s < push.gb_per_s);
        // The tuned pull's 64 MiB copies, split, pay their setup more often than the one
        // copy of 256 MiB, and win it back by the split.
        let copy = link.copy_gb_per_s().unwrap();
        assert!(pull.gb_per_s >= 0.97 * copy, "{pull:?} against {copy}");
        // The SMs' search stayed in its budget and its method names the shape.
        let read = link.sm_read.as_ref().unwrap();
        let method = read.method.as_deref().unwrap();
        assert!(
            method.contains("block(s)/SM") && method.contains("shape(s)"),
            "{method}"
        );
        assert!(
            link.violations("l").is_empty(),
            "{:?}",
            link.violations("l")
        );
    }

    #[test]
    fn a_peer_with_links_down_shows_below_the_readers_peak() {
        let mut profiles = vec![SimProfile::bundled("h100").unwrap(); 2];
        if let Some(links) = profiles[1].links.as_mut() {
            links.nvlink = 12;
        }
        let mut n = SimNode::new(profiles).unwrap();
        let healthy = measure_link(&mut node(&["h100", "h100"]), 0, 1, &PeerOptions::default());
        let slow = measure_link(&mut n, 0, 1, &PeerOptions::default());
        // The reader counts its own 18 links; the copies move at the peer's 12.
        assert_eq!(slow.peak_gb_per_s, Some(450.0));
        for ((name, ok), (_, low)) in rates(&healthy).into_iter().zip(rates(&slow)) {
            assert!(low < 0.75 * ok, "{name}: {low} against {ok}");
        }
    }

    #[test]
    fn pcie_links_are_measured_without_a_peak() {
        let mut n = node(&["h100", "h200"]);
        let link = measure_link(&mut n, 0, 1, &PeerOptions::default());
        assert_eq!(link.nvlink_links, Some(0));
        assert_eq!((link.peak_gb_per_s, link.nvlink_generation), (None, None));
        assert!(link.copy_push.as_ref().unwrap().fraction_of_peak.is_none());
        for (name, rate) in rates(&link) {
            let directions = if name == "copy_both" { 2.0 } else { 1.0 };
            assert!(rate > 0.0 && rate <= 31.5 * directions, "{name}: {rate}");
        }
        // Without the tuned rates, a link is what schema 1.2 knew.
        let options = PeerOptions {
            rates: false,
            ..PeerOptions::default()
        };
        let plain = measure_link(&mut n, 0, 1, &options);
        assert!(plain.copy_gib_per_s.is_some() && plain.copy_push.is_none());
    }

    #[test]
    fn all_pairs_at_once_share_each_gpus_links() {
        let options = PeerOptions::default();
        let mut four = node(&["h100"; 4]);
        let alone = measure_link(&mut four, 0, 1, &options);
        let mut links = Vec::new();
        for (a, b) in [
            (0, 1),
            (1, 0),
            (0, 2),
            (2, 0),
            (0, 3),
            (3, 0),
            (1, 2),
            (2, 1),
        ] {
            links.push(measure_link(&mut four, a, b, &options));
        }
        links.extend(
            [(1, 3), (3, 1), (2, 3), (3, 2)].map(|(a, b)| measure_link(&mut four, a, b, &options)),
        );
        let mut all = crate::peer::measure_all_pairs(&mut four, &[0, 1, 2, 3], &options).unwrap();
        all.set_peaks(&links);
        assert_eq!(all.pairs.len(), 12);
        assert!(all.violations("all", &links).is_empty());
        for pair in &all.pairs {
            // No pair above its link's peak, and sharing: each below its link alone.
            let f = pair.fraction_of_peak.unwrap();
            assert!(f <= 1.0, "{pair:?}");
            assert!(pair.gb_per_s < 0.5 * alone.copy_pull.as_ref().unwrap().gb_per_s);
        }
        // What each GPU receives at once stays within its own links' peak.
        for gpu in 0..4 {
            let into: f64 = all
                .pairs
                .iter()
                .filter(|p| p.from == gpu)
                .map(|p| p.gb_per_s)
                .sum();
            assert!(into <= 450.0, "GPU {gpu} receives {into}");
            assert!(into > 0.8 * 450.0, "GPU {gpu} receives only {into}");
        }
        // Two GPUs: both directions at once, each below the pull alone, more together.
        let mut two = node(&["h100", "h100"]);
        let pair = crate::peer::measure_all_pairs(&mut two, &[0, 1], &options).unwrap();
        let pull = alone.copy_gib_per_s.unwrap() * GIB / 1e9;
        assert_eq!(pair.pairs.len(), 2);
        assert!(pair.pairs.iter().all(|p| p.gb_per_s < pull), "{pair:?}");
        assert!(pair.total_gb_per_s > pull, "{pair:?}");
    }

    #[test]
    fn all_pairs_leave_out_denied_pairs_and_say_so() {
        let mut n = node(&["h100", "h100"]);
        n.set_link(
            0,
            1,
            SimLink {
                access: false,
                ..SimLink::nvlink()
            },
        );
        let all = crate::peer::measure_all_pairs(&mut n, &[4, 7], &PeerOptions::default()).unwrap();
        assert_eq!(all.pairs.len(), 1);
        assert_eq!(
            (all.pairs[0].from, all.pairs[0].to),
            (7, 4),
            "by device index"
        );
        assert!(
            all.notes[0].starts_with("4 → 7 left out"),
            "{:?}",
            all.notes
        );
        assert!(all.notes[0].contains("denies"), "{:?}", all.notes);
        n.set_link(
            1,
            0,
            SimLink {
                access: false,
                ..SimLink::nvlink()
            },
        );
        assert!(matches!(
            crate::peer::measure_all_pairs(&mut n, &[4, 7], &PeerOptions::default()),
            Err(RunnerError::InvalidRequest(_))
        ));
    }
}
