//! The simulator's throughput model: how fast a bandwidth kernel of a given
//! launch shape runs on the simulated GPU, so that the tuner has a real optimum to find.
//!
//! Per launch the model
//! - picks the level that serves the data from the request's footprint, as the hardware
//!   would: shared memory for shared reads; for global reads through `ca`/`nc`, the SM cache
//!   of that path where one SM's share fits it; the L2 near partition where the data fits
//!   half of one partition, the whole L2 where it fits three quarters of it; device memory
//!   otherwise; writes go to the L2 where their data fits three quarters of it, else to
//!   device memory; copies always to device memory;
//! - counts the blocks resident per SM (threads per SM, and for shared reads shared memory
//!   per SM), and the waves a grid of more blocks needs;
//! - bounds the throughput per SM by Little's law (bytes in flight, resident blocks ×
//!   threads × vector × unroll, over the level's latency under load) and by instruction
//!   issue (four warp instructions per clock, each access costing its address arithmetic and
//!   the words it consumes), and the level by its peak times the instruction variant's
//!   factor;
//! - times a repetition as bytes over that throughput, plus the launch overhead, stretched
//!   by a little noise.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::*;
use crate::bandwidth::{
    check_bandwidth, BandwidthLevel, BandwidthOp, BandwidthRequest, BandwidthRun, ReadVariant,
    RegionLayout,
};

/// One level's throughput: its peak, the latency its bytes stay in flight under load, and
/// what each instruction variant reaches of the peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelThroughput {
    /// Peak: bytes per clock per SM for the L1 and shared memory, GB/s (10⁹ bytes per
    /// second) for the L2 and device memory.
    pub peak: f64,
    /// Cycles an access keeps its bytes in flight when the level is busy.
    pub latency_cycles: f64,
    /// Share of the peak each variant reaches (`ca`, `nc`, `cg`, `cs`, `st`, `copy`,
    /// `shared`); an unlisted variant reaches all of it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variants: BTreeMap<String, f64>,
}

impl LevelThroughput {
    fn factor(&self, variant: &str) -> f64 {
        self.variants.get(variant).copied().unwrap_or(1.0)
    }

    fn validate(&self, at: &str) -> Result<(), RunnerError> {
        let err = |m: String| Err(RunnerError::Profile(format!("bandwidth.{at}: {m}")));
        if !(self.peak.is_finite() && self.peak > 0.0) {
            return err(format!("peak {} is not a positive number", self.peak));
        }
        if !(self.latency_cycles.is_finite() && self.latency_cycles > 0.0) {
            return err(format!(
                "latency_cycles {} is not a positive number",
                self.latency_cycles
            ));
        }
        for (name, factor) in &self.variants {
            if !["ca", "nc", "cg", "cs", "st", "copy", "shared"].contains(&name.as_str()) {
                return err(format!("variants: unknown variant `{name}`"));
            }
            if !(factor.is_finite() && *factor > 0.0 && *factor <= 1.0) {
                return err(format!("variants.{name}: {factor} is not in (0, 1]"));
            }
        }
        Ok(())
    }
}

/// The throughput of every level a bandwidth benchmark measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthSpec {
    /// Where the numbers come from.
    #[serde(default)]
    pub source: String,
    /// The SM cache of global reads (bytes per clock per SM).
    pub l1: LevelThroughput,
    /// Shared memory (bytes per clock per SM).
    pub shared: LevelThroughput,
    /// Reads of data the near L2 partition holds (GB/s).
    pub l2_near: LevelThroughput,
    /// Reads of data spread over the whole L2 (GB/s).
    pub l2: LevelThroughput,
    /// Writes of data spread over the whole L2 (GB/s); absent in profiles older than it,
    /// which then write at the whole L2's read throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_write: Option<LevelThroughput>,
    /// Device-memory reads (GB/s).
    pub memory_read: LevelThroughput,
    /// Device-memory writes (GB/s).
    pub memory_write: LevelThroughput,
    /// Device-memory copies, bytes read plus bytes written (GB/s).
    pub memory_copy: LevelThroughput,
    /// Relative standard deviation of a repetition's time (each repetition is slowed by
    /// the absolute value of a normal draw).
    #[serde(default)]
    pub noise: f64,
}

impl BandwidthSpec {
    /// Checks every level; the message names the first bad field.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] naming the field.
    pub fn validate(&self) -> Result<(), RunnerError> {
        for (name, level) in [
            ("l1", &self.l1),
            ("shared", &self.shared),
            ("l2_near", &self.l2_near),
            ("l2", &self.l2),
            ("memory_read", &self.memory_read),
            ("memory_write", &self.memory_write),
            ("memory_copy", &self.memory_copy),
        ] {
            level.validate(name)?;
        }
        if let Some(l2_write) = &self.l2_write {
            l2_write.validate("l2_write")?;
        }
        if !(self.noise.is_finite() && (0.0..0.5).contains(&self.noise)) {
            return Err(RunnerError::Profile(format!(
                "bandwidth.noise: {} is not in [0, 0.5)",
                self.noise
            )));
        }
        Ok(())
    }

    /// The spec of `level`.
    pub fn level(&self, level: BandwidthLevel) -> &LevelThroughput {
        match level {
            BandwidthLevel::L1 => &self.l1,
            BandwidthLevel::Shared => &self.shared,
            BandwidthLevel::L2Near => &self.l2_near,
            BandwidthLevel::L2 => &self.l2,
            BandwidthLevel::L2Write => self.l2_write.as_ref().unwrap_or(&self.l2),
            BandwidthLevel::MemoryRead => &self.memory_read,
            BandwidthLevel::MemoryWrite => &self.memory_write,
            BandwidthLevel::MemoryCopy => &self.memory_copy,
        }
    }
}

/// A plausible throughput model for a random profile: peaks and latencies drawn in the
/// ranges of the bundled GPUs, every variant at its full peak.
pub(super) fn random_spec(rng: &mut Xoshiro256PlusPlus) -> BandwidthSpec {
    let mut level = |peak: std::ops::RangeInclusive<u32>,
                     latency: std::ops::RangeInclusive<u32>| {
        LevelThroughput {
            peak: f64::from(rng.random_range(peak)),
            latency_cycles: f64::from(rng.random_range(latency)),
            variants: BTreeMap::new(),
        }
    };
    BandwidthSpec {
        source: "random profile".into(),
        l1: level(32..=128, 100..=300),
        shared: level(32..=128, 60..=200),
        l2_near: level(200..=8000, 300..=1000),
        l2: level(200..=8000, 300..=1000),
        l2_write: Some(level(200..=8000, 300..=1000)),
        memory_read: level(50..=4000, 400..=900),
        memory_write: level(50..=4000, 300..=900),
        memory_copy: level(50..=4000, 400..=900),
        noise: 0.005,
    }
}

/// The variant name of an operation in [`LevelThroughput::variants`].
fn variant_name(op: BandwidthOp) -> &'static str {
    match op {
        BandwidthOp::Read(v) => v.name(),
        BandwidthOp::Write => "st",
        BandwidthOp::Copy => "copy",
        BandwidthOp::SharedRead => "shared",
    }
}

impl SimProfile {
    /// The level that serves `request`'s data (see the module documentation).
    pub fn throughput_level(&self, request: &BandwidthRequest) -> BandwidthLevel {
        let sms = self.device.sm_count.max(1);
        let footprint = request.footprint_bytes(sms);
        let fits_l2 = footprint <= self.l2.size_bytes / 4 * 3;
        let variant = match request.shape.op {
            BandwidthOp::SharedRead => return BandwidthLevel::Shared,
            BandwidthOp::Write if fits_l2 => return BandwidthLevel::L2Write,
            BandwidthOp::Write => return BandwidthLevel::MemoryWrite,
            BandwidthOp::Copy => return BandwidthLevel::MemoryCopy,
            BandwidthOp::Read(v) => v,
        };
        let path = match variant {
            ReadVariant::Ca => Some(LoadPath::GlobalCa),
            ReadVariant::Nc => Some(LoadPath::GlobalNc),
            ReadVariant::Cg | ReadVariant::Cs => None,
        };
        // One SM's share: its resident blocks' regions, or its part of the grid stride.
        let per_sm = match request.layout {
            RegionLayout::PerBlock => {
                footprint / u64::from(request.shape.blocks(sms)).max(1)
                    * u64::from(self.resident_blocks(request).max(1))
            }
            RegionLayout::GridStride => footprint / u64::from(sms),
        };
        // Global reads ask for the largest L1 (carveout 0 %), as the CUDA backend does.
        let smallest_shared = self
            .unified_cache()
            .and_then(|c| c.unified.as_ref())
            .and_then(|u| u.shared_carveouts_bytes.first().copied())
            .unwrap_or(self.device.shared_per_sm_bytes);
        let in_sm_cache = path.is_some_and(|p| {
            self.caches_on_path(p)
                .next()
                .is_some_and(|c| per_sm <= c.size_at(smallest_shared))
        });
        let partition = self.l2.size_bytes / u64::from(self.l2.partitions.max(1));
        if in_sm_cache {
            BandwidthLevel::L1
        } else if footprint <= partition / 2 {
            BandwidthLevel::L2Near
        } else if fits_l2 {
            BandwidthLevel::L2
        } else {
            BandwidthLevel::MemoryRead
        }
    }

    /// Blocks of `request` resident on one SM at once: bounded by threads per SM and, for
    /// shared reads, by shared memory per SM.
    pub fn resident_blocks(&self, request: &BandwidthRequest) -> u32 {
        let shape = &request.shape;
        let max_threads = self
            .device
            .max_threads_per_sm
            .unwrap_or(self.device.max_threads_per_block);
        let by_threads = max_threads / shape.threads.max(1);
        let by_shared = match shape.op {
            BandwidthOp::SharedRead => {
                let per_block =
                    request.region_bytes + self.device.reserved_shared_per_block_bytes.unwrap_or(0);
                u32::try_from(self.device.shared_per_sm_bytes / per_block.max(1))
                    .unwrap_or(u32::MAX)
            }
            _ => u32::MAX,
        };
        shape.blocks_per_sm.min(by_threads).min(by_shared)
    }

    /// The modelled throughput of `request` without noise, bytes per second; `None` where
    /// the profile has no bandwidth model or no block of the shape fits an SM.
    pub fn modelled_bytes_per_second(&self, request: &BandwidthRequest) -> Option<f64> {
        let spec = self.bandwidth.as_ref()?;
        let shape = &request.shape;
        let resident = self.resident_blocks(request);
        if resident == 0 {
            return None;
        }
        let level = self.throughput_level(request);
        let throughput = spec.level(level);
        let hz = self.clock.sm_mhz * 1e6;
        let sms = f64::from(self.device.sm_count);
        // A grid of more blocks than fit runs in waves; the last one may be partly empty.
        let waves = shape.blocks_per_sm.div_ceil(resident);
        let occupancy = f64::from(shape.blocks_per_sm) / f64::from(waves * resident);
        let in_flight = f64::from(resident)
            * f64::from(shape.threads)
            * f64::from(shape.vector_bytes)
            * f64::from(shape.unroll);
        let little = in_flight / throughput.latency_cycles;
        // Four warp instructions per clock; an access costs its address (three), itself,
        // and one instruction per 4-byte word it consumes.
        let warp_bytes = f64::from(self.device.warp_size) * f64::from(shape.vector_bytes);
        let issue = 4.0 * warp_bytes / (4.0 + f64::from(shape.vector_bytes / 4));
        let per_sm_clock = little.min(issue) * occupancy;
        let factor = throughput.factor(variant_name(shape.op));
        // A copy moves two bytes for every byte in flight as a load.
        let moved = shape.op.bytes_per_access(1) as f64;
        let rate = match level {
            BandwidthLevel::L1 | BandwidthLevel::Shared => {
                per_sm_clock.min(throughput.peak * factor) * sms * hz
            }
            _ => (per_sm_clock * moved * sms * hz).min(throughput.peak * factor * 1e9),
        };
        Some(rate)
    }
}

impl SimBackend {
    /// Runs a bandwidth request (`Backend::bandwidth`): one untimed launch where the request
    /// asks for it, and the timed repetitions, each the modelled time with noise.
    pub(super) fn run_bandwidth(
        &mut self,
        request: &BandwidthRequest,
    ) -> Result<BandwidthRun, RunnerError> {
        check_bandwidth(request, &self.profile.device)?;
        self.kernels_used.insert(request.kernel()?.entry());
        let noise = self.profile.bandwidth.as_ref().map_or(0.0, |b| b.noise);
        let rate = self
            .profile
            .modelled_bytes_per_second(request)
            .ok_or_else(|| match self.profile.bandwidth {
                None => RunnerError::Profile(format!(
                    "profile `{}` has no [bandwidth] section, so the simulator cannot answer `{}`",
                    self.profile.name,
                    request.kernel().map_or("a bandwidth kernel", |k| k.entry())
                )),
                Some(_) => {
                    RunnerError::InvalidRequest(format!("no block of {} fits an SM", request.shape))
                }
            })?;
        let bytes = request.bytes_per_launch(self.profile.device.sm_count);
        let ideal = Duration::from_secs_f64(bytes as f64 / rate);
        let spread = Normal::new(0.0, noise.max(f64::MIN_POSITIVE))
            .map_err(|e| RunnerError::Profile(format!("bandwidth.noise: {e}")))?;
        let mut gpu_time = Duration::ZERO;
        let mut elapsed = Vec::with_capacity(request.repetitions as usize);
        let first = u32::from(!request.warm_up);
        for launch in first..=request.repetitions {
            self.count_launch();
            let stretch = 1.0 + spread.sample(&mut self.rng).abs();
            let time = LAUNCH_OVERHEAD + ideal.mul_f64(stretch);
            gpu_time += time;
            if launch > 0 {
                elapsed.push(time);
            }
        }
        Ok(BandwidthRun {
            elapsed,
            bytes_per_launch: bytes,
            gpu_time,
        })
    }
}
