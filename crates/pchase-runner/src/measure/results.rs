//! What a session measured: per-element results, relations, the L2, timings and
//! disturbances.

use std::{collections::BTreeMap, time::Duration};

use topology::ElementKind;

use super::{carveout, hierarchy, l2, levels, LatencySummary, RawCurve, SizeFinding};
use crate::backend::{Carveout, LoadPath};

/// A measured size with the carveout it was measured under.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeAtCarveout {
    /// The carveout requested.
    pub carveout: Carveout,
    /// Dynamic shared memory reserved per block, which the driver had to configure.
    pub reserved_shared_bytes: u32,
    /// The shared-memory configuration (bytes per SM) the reservation forced, where it
    /// forced one ([`carveout::settings`]).
    pub config_bytes: Option<u64>,
    /// Why this size was measured: the largest L1, the driver's default, or one more row
    /// of the table.
    pub role: carveout::Role,
    /// What the search found.
    pub finding: SizeFinding,
}

/// The fetch granularity seen as the spacing of misses in a 4-byte-stride chase.
#[derive(Debug, Clone, PartialEq)]
pub struct LineFinding {
    /// Bytes between consecutive misses (the most common spacing).
    pub bytes: u64,
    /// Share of spacings equal to `bytes`.
    pub agreement: f64,
    /// Misses observed.
    pub misses: usize,
}

/// Everything measured for one element.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ElementResult {
    /// The load path of its size search, where it had one.
    pub path: Option<LoadPath>,
    /// Sizes (several for the L1: one per carveout).
    pub sizes: Vec<SizeAtCarveout>,
    /// Fetch granularity.
    pub line: Option<LineFinding>,
    /// Allocation line (the bytes one tag covers), from the eviction probe.
    pub line_bytes: Option<LineFinding>,
    /// Hit latency in cycles, with the clock overhead subtracted: the fastest level where
    /// the samples show several ([`ElementResult::latency_levels`]).
    pub latency: Option<LatencySummary>,
    /// The levels of the latency samples where there are several (device memory reached
    /// through the near and the far L2 partition), fastest first; empty for one level.
    pub latency_levels: Vec<levels::Mode>,
    /// Benchmarks of this element that failed, with the reason.
    pub failures: Vec<String>,
}

impl ElementResult {
    /// `(configuration, L1 bytes)` of every size measured exactly under a forced
    /// shared-memory configuration: the carveout table's rows the step check compares.
    pub fn config_rows(&self) -> Vec<(u64, u64)> {
        self.sizes
            .iter()
            .filter_map(|s| match (s.config_bytes, &s.finding) {
                (Some(config), SizeFinding::Exact { bytes, .. }) => Some((config, *bytes)),
                _ => None,
            })
            .collect()
    }
}

/// Wall and GPU time of one benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// What ran.
    pub benchmark: String,
    /// Host wall time.
    pub wall: Duration,
    /// Summed device time of its launches.
    pub gpu: Duration,
    /// Host time of its change-point analysis (cpd calls: geometric mapping, change points,
    /// KS tests, PELT), timed around each call.
    pub analysis: Duration,
}

/// The outcome of a session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Measurements {
    /// Measured SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// The SMs the one-block fine-grained chases ran on (`%smid`): the latencies of the
    /// shared caches depend on where an SM sits in its GPC.
    pub chase_sms: std::collections::BTreeSet<u32>,
    /// Cycles the timing itself adds to each fine-grained sample.
    pub clock_overhead: Option<u32>,
    /// Whether L1 caches global loads (`.ca` clearly faster than `.cg`).
    pub l1_caches_global_loads: Option<bool>,
    /// Median `.ca` and `.cg` latencies behind that decision.
    pub ca_cg_medians: Option<(f64, f64)>,
    /// Per-element results.
    pub elements: Vec<(ElementKind, ElementResult)>,
    /// Raw curves of the size sweeps.
    pub curves: Vec<RawCurve>,
    /// Pairs of SM caches tested for sharing one physical cache, with the outcome.
    pub sharing: Vec<(ElementKind, ElementKind, hierarchy::EvictionTest)>,
    /// Copies per SM of each SM cache (`None`: more than the warps tested).
    pub copies: Vec<(ElementKind, Option<u32>)>,
    /// The L2's partitions and latencies.
    pub l2: Option<l2::L2Findings>,
    /// The L2's ways from minimal eviction sets (`l2-ways`, `--deep`), or why they were not
    /// measured.
    pub l2_ways: Option<Result<topology::L2Ways, String>>,
    /// The translation levels seen on each load path searched, per allocation of the
    /// walked memory (`tlb`, `--deep`).
    pub tlb: Vec<super::tlb::TlbSearch>,
    /// Memory-level parallelism (`mlp`, `--deep`): per level (the L2 or device memory) and
    /// scope (one SM, the GPU).
    pub mlp: Vec<(ElementKind, super::mlp::MlpFinding)>,
    /// The instruction caches (`icache`, `--deep`).
    pub icache: Option<super::icache::IcacheFinding>,
    /// Why the instruction caches were not measured (not applicable, or a failure).
    pub icache_failure: Option<String>,
    /// Sets, ways, mapping and replacement of the SM caches (`sets`, `--deep`).
    pub sets: Vec<super::sets::CacheSets>,
    /// Thread-block clusters: DSMEM, the GPC map, or why they are not applicable.
    pub clusters: super::cluster::ClusterFindings,
    /// Copies from global to shared memory: latency and bandwidth per path and size, or
    /// why a path is not applicable (benchmark `async-copy`, `--deep`).
    pub copies_to_shared: super::copy::CopyFindings,
    /// Timings per benchmark.
    pub timings: Vec<Timing>,
    /// Benchmarks the sentinels found disturbed
    /// ([`MeasureOptions::watch`](super::MeasureOptions::watch)).
    pub disturbed: Vec<Disturbance>,
    /// The bandwidth of each level measured.
    pub bandwidth: Vec<super::bandwidth::BandwidthFinding>,
    /// Levels whose bandwidth could not be measured, with the reason.
    pub bandwidth_failures: Vec<(super::bandwidth::BandwidthLevel, String)>,
    /// What each benchmark that reports a [`topology::Section`] found, by the benchmark's
    /// name, or why it found nothing.
    pub sections: BTreeMap<&'static str, Result<topology::Section, String>>,
}

/// A benchmark after which the sentinels had moved from their first reading.
#[derive(Debug, Clone, PartialEq)]
pub struct Disturbance {
    /// The element of the benchmark it happened in, where it measures one.
    pub element: Option<ElementKind>,
    /// The benchmark, as progress names it.
    pub benchmark: String,
    /// What the sentinels showed (after the repeat, if that was disturbed too).
    pub findings: Vec<String>,
    /// Whether the repeat was clean: then its result is the one kept.
    pub cleared_by_repeat: bool,
}

impl Measurements {
    /// What the tool's self-check found that no reported level or configuration explains:
    /// L2 curve features the levels do not explain, and carveout rows whose L1 did not
    /// shrink by the configurations' step. Empty when every feature is explained.
    pub fn self_check(&self) -> Vec<String> {
        let mut found: Vec<String> = self
            .l2
            .iter()
            .flat_map(|l2| &l2.unexplained)
            .map(|u| format!("L2: {}", u.reason))
            .collect();
        if let Some(l1) = self.element(ElementKind::L1Data) {
            found.extend(
                carveout::step_checks(&l1.config_rows())
                    .iter()
                    .filter(|c| !c.agrees)
                    .map(|c| {
                        format!(
                        "L1: from the {} to the {} KiB configuration the L1 shrank by {:.2} KiB",
                        c.from_config / 1024,
                        c.to_config / 1024,
                        c.l1_shrank as f64 / 1024.0
                    )
                    }),
            );
        }
        found
    }

    /// The section benchmark `name` reported, if it found one.
    pub fn section(&self, name: &str) -> Option<&topology::Section> {
        self.sections
            .get(name)
            .and_then(|found| found.as_ref().ok())
    }

    /// The result of `element`, if it was measured.
    pub fn element(&self, element: ElementKind) -> Option<&ElementResult> {
        self.elements
            .iter()
            .find(|(e, _)| *e == element)
            .map(|(_, r)| r)
    }

    pub(crate) fn element_mut(&mut self, element: ElementKind) -> &mut ElementResult {
        if let Some(i) = self.elements.iter().position(|(e, _)| *e == element) {
            &mut self.elements[i].1
        } else {
            self.elements.push((element, ElementResult::default()));
            &mut self.elements.last_mut().expect("just pushed").1
        }
    }
}
