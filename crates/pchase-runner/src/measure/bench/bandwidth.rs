//! The bandwidth benchmarks: the L1, shared memory, the L2 (near partition and
//! whole) and device memory (read, write, copy), each tuned over launch shapes
//! (`measure::bandwidth`).

use pchase_kernels::{bandwidth as kernels, Kernel};
use topology::{
    Bandwidth, BandwidthLaunch, BandwidthPeak, Bytes, Conditions, Megahertz, Note, NoteSeverity,
    Provenance, QuantityKind, Topology,
};

use super::{Benchmark, Info};
use crate::{
    bandwidth::BandwidthOp,
    measure::{
        bandwidth::{self as bw, BandwidthFinding, BandwidthLevel, LevelPlan},
        Measurements, Session,
    },
    sim::SimProfile,
};

/// A bandwidth benchmark: the levels it measures, one step each.
pub(crate) struct BandwidthBench {
    info: Info,
    levels: &'static [BandwidthLevel],
}

/// The catalogue kernels of `ops`, at every width and unroll.
fn kernels_of(ops: &[BandwidthOp]) -> Vec<&'static Kernel> {
    kernels::kernels()
        .filter(|k| kernels::shape_of(k).is_some_and(|s| ops.contains(&s.op)))
        .collect()
}

/// The operations the searches of `levels` may use (`bw::level_ops`).
fn ops_of(levels: &[BandwidthLevel]) -> Vec<BandwidthOp> {
    levels.iter().flat_map(|&l| bw::level_ops(l)).collect()
}

/// L1 read bandwidth.
pub(crate) static BANDWIDTH_L1: BandwidthBench = BandwidthBench {
    info: Info {
        name: "bandwidth-l1",
        summary:
            "L1: read bandwidth, bytes per clock per SM and whole GPU, tuned over launch shapes",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || kernels_of(&ops_of(&[BandwidthLevel::L1])),
    },
    levels: &[BandwidthLevel::L1],
};

/// Shared-memory read bandwidth.
pub(crate) static BANDWIDTH_SHARED: BandwidthBench = BandwidthBench {
    info: Info {
        name: "bandwidth-shared",
        summary: "shared memory: read bandwidth, bytes per clock per SM, tuned over launch shapes",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || kernels_of(&ops_of(&[BandwidthLevel::Shared])),
    },
    levels: &[BandwidthLevel::Shared],
};

/// L2 read bandwidth, near partition and whole.
pub(crate) static BANDWIDTH_L2: BandwidthBench = BandwidthBench {
    info: Info {
        name: "bandwidth-l2",
        summary:
            "L2: read bandwidth of data in the near partition and over the whole L2, and write, tuned",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || kernels_of(&ops_of(&[BandwidthLevel::L2, BandwidthLevel::L2Write])),
    },
    levels: &[
        BandwidthLevel::L2Near,
        BandwidthLevel::L2,
        BandwidthLevel::L2Write,
    ],
};

/// Device-memory read, write and copy bandwidth.
pub(crate) static BANDWIDTH_MEMORY: BandwidthBench = BandwidthBench {
    info: Info {
        name: "bandwidth-memory",
        summary: "device memory: read, write and copy bandwidth against the API's peak, tuned",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || {
            kernels_of(&ops_of(&[
                BandwidthLevel::MemoryRead,
                BandwidthLevel::MemoryWrite,
                BandwidthLevel::MemoryCopy,
            ]))
        },
    },
    levels: &[
        BandwidthLevel::MemoryRead,
        BandwidthLevel::MemoryWrite,
        BandwidthLevel::MemoryCopy,
    ],
};

/// The topology's bandwidth of a finding.
fn bandwidth_of(f: &BandwidthFinding) -> Bandwidth {
    let mut b = Bandwidth::from_bytes_per_second(f.best_bytes_per_second, Provenance::Benchmark)
        .with_launch(BandwidthLaunch {
            blocks_per_sm: f.shape.blocks_per_sm,
            threads_per_block: f.shape.threads,
            vector_bytes: f.shape.vector_bytes,
            unroll: f.shape.unroll,
            instruction: f.shape.op.instruction().to_string(),
        })
        .with_conditions(Conditions {
            sm_clock_mhz: Some(Megahertz(f.sm_clock_mhz)),
            remark: Some(format!(
                "best of {} timed launches of the best of {} launch shapes tried",
                f.repetitions, f.shapes_tried
            )),
            ..Conditions::default()
        });
    b.median = Some(
        Bandwidth::from_bytes_per_second(f.median_bytes_per_second, Provenance::Benchmark).value,
    );
    b.repetitions = Some(f.repetitions);
    b.working_set = Some(Bytes(f.working_set_bytes));
    if f.level.per_sm() {
        b.bytes_per_clock_per_sm = Some(f.bytes_per_clock_per_sm());
    }
    if let Some((peak, basis, per_sm)) = f.peak {
        let mut p = BandwidthPeak::from_bytes_per_second(peak, basis);
        p.bytes_per_clock_per_sm = per_sm;
        b = b.with_peak(p);
    }
    b
}

/// Checks one level's finding against the profile's throughput model: the data was served
/// by the level, and the value is the model's best over the plan's whole space (the search
/// visits a few of its shapes).
fn check_level(profile: &SimProfile, f: &BandwidthFinding) -> Result<(), String> {
    let sms = profile.device.sm_count;
    let plan = LevelPlan::new(
        f.level,
        &profile.device,
        f.sm_clock_mhz,
        f.sm_cache_bytes,
        f.l2_partitions,
    )
    .map_err(|e| e.to_string())?;
    let request = plan.request(f.shape, sms, bw::FINAL_LAUNCH, bw::FINAL_REPETITIONS, true);
    let served = profile.throughput_level(&request);
    // With one L2 partition the near partition is the whole L2.
    let single = profile.l2.partitions <= 1
        && matches!(served, BandwidthLevel::L2 | BandwidthLevel::L2Near)
        && matches!(f.level, BandwidthLevel::L2 | BandwidthLevel::L2Near);
    if served != f.level && !single {
        return Err(format!(
            "{}: the best shape ({}) was served by {served:?}",
            f.level, f.shape
        ));
    }
    let optimum = plan
        .space
        .shapes()
        .into_iter()
        .filter_map(|shape| {
            let request = plan.request(shape, sms, bw::FINAL_LAUNCH, bw::FINAL_REPETITIONS, true);
            (profile.throughput_level(&request) == served)
                .then(|| profile.modelled_bytes_per_second(&request))
                .flatten()
        })
        .fold(0.0, f64::max);
    let ratio = f.best_bytes_per_second / optimum;
    if !(0.97..=1.0 + 1e-9).contains(&ratio) {
        return Err(format!(
            "{}: {:.1} GB/s with {}, the model's optimum is {:.1} GB/s ({:.1} %)",
            f.level,
            f.best_bytes_per_second / 1e9,
            f.shape,
            optimum / 1e9,
            100.0 * ratio
        ));
    }
    Ok(())
}

impl Benchmark for BandwidthBench {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        for &level in self.levels {
            let step = format!("{} ({level})", self.info.name);
            match s.timed(&step, |s, gpu| bw::measure(s, level, gpu)) {
                Ok(finding) => {
                    s.results.bandwidth.retain(|f| f.level != level);
                    s.results.bandwidth.push(finding);
                }
                Err(e) => {
                    log::info!("{step}: {e}");
                    s.results
                        .bandwidth_failures
                        .push((level, format!("{step}: {e}")));
                }
            }
        }
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        for &level in self.levels {
            if let Some(f) = measured.bandwidth.iter().find(|f| f.level == level) {
                let slots = topo.element_mut(level.element()).bandwidth_mut();
                let slot = match level {
                    BandwidthLevel::L2Near => &mut slots.read_near_partition,
                    BandwidthLevel::MemoryWrite | BandwidthLevel::L2Write => &mut slots.write,
                    BandwidthLevel::MemoryCopy => &mut slots.copy,
                    _ => &mut slots.read,
                };
                *slot = Some(bandwidth_of(f));
            }
            for (_, reason) in measured
                .bandwidth_failures
                .iter()
                .filter(|(l, _)| *l == level)
            {
                topo.notes.push(Note {
                    severity: NoteSeverity::Warning,
                    element: Some(level.element()),
                    quantity: Some(QuantityKind::Bandwidth),
                    message: format!("{level} bandwidth not measured: {reason}"),
                });
            }
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        for &level in self.levels {
            match m.bandwidth.iter().find(|f| f.level == level) {
                Some(f) => check_level(profile, f)?,
                None => {
                    let why: Vec<&str> = m
                        .bandwidth_failures
                        .iter()
                        .filter(|(l, _)| *l == level)
                        .map(|(_, r)| r.as_str())
                        .collect();
                    return Err(format!("{level} not measured: {why:?}"));
                }
            }
        }
        Ok(())
    }

    fn expected_steps(
        &self,
        _device: &crate::device::DeviceInfo,
        _options: &crate::measure::MeasureOptions,
        _plan: &[&'static dyn Benchmark],
    ) -> u64 {
        self.levels.len() as u64
    }
}
