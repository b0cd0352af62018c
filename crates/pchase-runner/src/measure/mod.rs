//! The benchmarks of the thesis' chapter 4, generic over [`Backend`]: whether L1 caches
//! global loads; size, fetch granularity and latency of the L1 data, texture, read-only
//! and constant caches; shared-memory latency; L2 and device-memory latency.
//!
//! A failing benchmark does not lose the others: each element's result is either a
//! measurement or the reason it is missing.

pub mod analysis;
pub mod carveout;
pub mod hierarchy;
pub mod l2;
pub mod levels;
pub mod probe;
pub mod report;
pub mod search;
pub mod sentinel;
pub mod stats;

use std::{
    collections::BTreeSet,
    fmt,
    str::FromStr,
    time::{Duration, Instant},
};

use crate::{
    backend::{Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath},
    error::RunnerError,
};
use probe::{SizeProbe, CONSTANT_BANK_BYTES};
pub use search::{RawCurve, SearchRange, SizeFinding};
pub use topology::LatencySummary;

/// A memory element the benchmarks measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    /// The L1 data cache (`ld.global.ca`).
    L1,
    /// The texture cache (`tex.1d`).
    Texture,
    /// The read-only data cache (`ld.global.nc`).
    ReadOnly,
    /// The constant L1 cache.
    ConstantL1,
    /// The constant L1.5 cache.
    ConstantL15,
    /// Shared memory.
    Shared,
    /// The L2 cache (latency here; partitions in a later benchmark).
    L2,
    /// Device memory.
    DeviceMemory,
}

impl Element {
    /// Every element, in the order the benchmarks run.
    pub const ALL: [Element; 8] = [
        Element::L1,
        Element::Texture,
        Element::ReadOnly,
        Element::ConstantL1,
        Element::ConstantL15,
        Element::Shared,
        Element::L2,
        Element::DeviceMemory,
    ];

    /// The name used on the command line (`--only l1,texture`).
    pub fn name(self) -> &'static str {
        match self {
            Element::L1 => "l1",
            Element::Texture => "texture",
            Element::ReadOnly => "readonly",
            Element::ConstantL1 => "constant-l1",
            Element::ConstantL15 => "constant-l15",
            Element::Shared => "shared",
            Element::L2 => "l2",
            Element::DeviceMemory => "memory",
        }
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Element {
    type Err = RunnerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Element::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                RunnerError::InvalidRequest(format!(
                    "unknown element `{s}`; expected one of {}",
                    Element::ALL.map(Element::name).join(", ")
                ))
            })
    }
}

/// Options of a measurement session.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureOptions {
    /// Which elements to measure.
    pub only: BTreeSet<Element>,
    /// Timed loads of the fine-grained latency and line benchmarks (each costs 8 bytes
    /// of shared memory).
    pub samples: u32,
    /// SMs each size of a size search runs on at once (its samples).
    pub replicas: u32,
    /// Timed whole passes over each chain in a size search.
    pub timed_passes: u32,
    /// Significance level of the change-point test.
    pub alpha: f64,
    /// Stride of the size searches, bytes (one node per sector).
    pub search_stride: u32,
    /// Measure the L1 at the driver's default and at every shared-memory configuration
    /// the architecture offers.
    pub carveout_table: bool,
    /// Read the sentinels ([`sentinel`]) before the first benchmark and after every one;
    /// a benchmark after which they moved is run again once, and what stays disturbed is
    /// listed in [`Measurements::disturbed`].
    pub watch: bool,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            only: Element::ALL.into_iter().collect(),
            // 6 KiB of timings: with the 1 KiB the driver reserves per block this fits
            // the smallest non-zero carveout step, leaving the L1 its largest size.
            samples: 768,
            replicas: 8,
            timed_passes: 2,
            alpha: 0.01,
            search_stride: 32,
            carveout_table: true,
            watch: false,
        }
    }
}

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
    /// Cycles the timing itself adds to each fine-grained sample.
    pub clock_overhead: Option<u32>,
    /// Whether L1 caches global loads (`.ca` clearly faster than `.cg`).
    pub l1_caches_global_loads: Option<bool>,
    /// Median `.ca` and `.cg` latencies behind that decision.
    pub ca_cg_medians: Option<(f64, f64)>,
    /// Per-element results.
    pub elements: Vec<(Element, ElementResult)>,
    /// Raw curves of the size sweeps.
    pub curves: Vec<RawCurve>,
    /// Pairs of SM caches tested for sharing one physical cache, with the outcome.
    pub sharing: Vec<(Element, Element, hierarchy::EvictionTest)>,
    /// Copies per SM of each SM cache (`None`: more than the warps tested).
    pub copies: Vec<(Element, Option<u32>)>,
    /// The L2's partitions and latencies.
    pub l2: Option<l2::L2Findings>,
    /// Timings per benchmark.
    pub timings: Vec<Timing>,
    /// Benchmarks the sentinels found disturbed ([`MeasureOptions::watch`]).
    pub disturbed: Vec<Disturbance>,
}

/// A benchmark after which the sentinels had moved from their first reading.
#[derive(Debug, Clone, PartialEq)]
pub struct Disturbance {
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
        if let Some(l1) = self.element(Element::L1) {
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

    /// The result of `element`, if it was measured.
    pub fn element(&self, element: Element) -> Option<&ElementResult> {
        self.elements
            .iter()
            .find(|(e, _)| *e == element)
            .map(|(_, r)| r)
    }

    fn element_mut(&mut self, element: Element) -> &mut ElementResult {
        if let Some(i) = self.elements.iter().position(|(e, _)| *e == element) {
            &mut self.elements[i].1
        } else {
            self.elements.push((element, ElementResult::default()));
            &mut self.elements.last_mut().expect("just pushed").1
        }
    }
}

/// Warps tried when counting a cache's copies per SM (thread 0 against warps 1..8).
pub const COPY_WARPS: u32 = 8;

/// A callback told the name of each benchmark as it starts.
type Progress<'b> = Box<dyn FnMut(&str) + 'b>;

/// Runs the benchmarks on one backend.
pub struct Session<'b, B: Backend> {
    backend: &'b mut B,
    options: MeasureOptions,
    results: Measurements,
    progress: Option<Progress<'b>>,
    /// The sentinels' first reading, when watching.
    baseline: Option<sentinel::Reading>,
}

impl<B: Backend> fmt::Debug for Session<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("device", &self.backend.device().name)
            .field("options", &self.options)
            .field("results", &self.results)
            .finish_non_exhaustive()
    }
}

/// Which path and range each searched element uses.
fn size_plan(element: Element, l1_const: Option<u64>) -> Option<(LoadPath, SearchRange)> {
    match element {
        Element::L1 => Some((
            LoadPath::GlobalCa,
            SearchRange {
                start: 256,
                max: 2 * 1024 * 1024,
            },
        )),
        Element::Texture => Some((
            LoadPath::Texture,
            SearchRange {
                start: 256,
                max: 2 * 1024 * 1024,
            },
        )),
        Element::ReadOnly => Some((
            LoadPath::GlobalNc,
            SearchRange {
                start: 256,
                max: 2 * 1024 * 1024,
            },
        )),
        Element::ConstantL1 => Some((
            LoadPath::Constant,
            SearchRange {
                start: 256,
                max: 32 * 1024,
            },
        )),
        Element::ConstantL15 => {
            // Start where a cyclic chase misses the constant L1 on every load (twice
            // its size), so the baseline is L1.5 hits.
            let l1 = l1_const?;
            Some((
                LoadPath::Constant,
                SearchRange {
                    start: (2 * l1).next_power_of_two(),
                    max: CONSTANT_BANK_BYTES,
                },
            ))
        }
        Element::Shared | Element::L2 | Element::DeviceMemory => None,
    }
}

impl<'b, B: Backend> Session<'b, B> {
    /// A session over `backend`.
    pub fn new(backend: &'b mut B, options: MeasureOptions) -> Self {
        Session {
            backend,
            options,
            results: Measurements::default(),
            progress: None,
            baseline: None,
        }
    }

    /// Calls `progress` with the name of each benchmark as it starts.
    pub fn with_progress(mut self, progress: impl FnMut(&str) + 'b) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// Records that a benchmark of `element` failed, and why.
    fn fail(&mut self, element: Element, reason: String) {
        log::info!("{element}: {reason}");
        self.results.element_mut(element).failures.push(reason);
    }

    fn start(&mut self, what: &str) {
        log::info!("benchmark: {what}");
        if let Some(p) = self.progress.as_mut() {
            p(what);
        }
    }

    /// What the sentinels show now against their first reading (taken now if there is
    /// none yet).
    fn sentinels_moved(&mut self) -> Vec<String> {
        let now = sentinel::read_quick(self.backend);
        match &self.baseline {
            Some(base) => sentinel::compare(base, &now),
            None => {
                self.baseline = Some(now);
                Vec::new()
            }
        }
    }

    /// Runs `f` as the benchmark `name`, recording its time. When watching, the sentinels
    /// are read after it; if they moved, `f` runs once more (its first result dropped) and
    /// the benchmark is listed in [`Measurements::disturbed`].
    fn timed<T>(
        &mut self,
        name: &str,
        mut f: impl FnMut(&mut Self, &mut Duration) -> Result<T, RunnerError>,
    ) -> Result<T, RunnerError> {
        if self.options.watch && self.baseline.is_none() {
            self.baseline = Some(sentinel::read(self.backend));
        }
        self.start(name);
        let wall = Instant::now();
        let mut gpu = Duration::ZERO;
        analysis::take_analysis_time();
        let curves = self.results.curves.len();
        let mut result = f(self, &mut gpu);
        if self.options.watch {
            let findings = self.sentinels_moved();
            if !findings.is_empty() {
                log::warn!(
                    "{name}: disturbed ({}); running it again",
                    findings.join("; ")
                );
                self.results.curves.truncate(curves);
                result = f(self, &mut gpu);
                let again = self.sentinels_moved();
                let cleared = again.is_empty();
                self.results.disturbed.push(Disturbance {
                    benchmark: name.to_string(),
                    findings: if cleared { findings } else { again },
                    cleared_by_repeat: cleared,
                });
            }
        }
        self.results.timings.push(Timing {
            benchmark: name.to_string(),
            wall: wall.elapsed(),
            gpu,
            analysis: analysis::take_analysis_time(),
        });
        result
    }

    /// Runs every selected benchmark and returns what was measured.
    ///
    /// # Errors
    /// Only for failures that make every benchmark meaningless (the clock calibration);
    /// a failing benchmark is recorded in its element's `failures`.
    pub fn run(mut self) -> Result<Measurements, RunnerError> {
        let overhead = self.timed("clock calibration", |s, _| {
            let overhead = s.backend.clock_overhead(256)?;
            let mhz = s.backend.measure_sm_clock_mhz()?;
            Ok((overhead, mhz))
        })?;
        self.results.clock_overhead = Some(overhead.0);
        self.results.sm_clock_mhz = Some(overhead.1);

        let only = self.options.only.clone();
        if only.contains(&Element::L1) {
            match self.timed("global-load caching", |s, gpu| s.global_caching(gpu)) {
                Ok((caches, ca, cg)) => {
                    self.results.l1_caches_global_loads = Some(caches);
                    self.results.ca_cg_medians = Some((ca, cg));
                }
                Err(e) => self
                    .results
                    .element_mut(Element::L1)
                    .failures
                    .push(format!("global-load caching: {e}")),
            }
        }
        for element in Element::ALL.into_iter().filter(|e| only.contains(e)) {
            self.measure_element(element);
        }
        self.measure_relations();
        Ok(self.results)
    }

    /// The exact size of an SM cache, where one was measured.
    fn exact_size(&self, element: Element) -> Option<u64> {
        match self.results.element(element)?.sizes.first()?.finding {
            SizeFinding::Exact { bytes, .. } => Some(bytes),
            SizeFinding::AtLeast { .. } => None,
        }
    }

    /// Sharing between every pair of measured SM caches, and the copies per SM of each.
    fn measure_relations(&mut self) {
        // Each cache with its measured size and fetch unit (the probes' node spacing).
        let caches: Vec<(Element, LoadPath, u64, u32)> = [
            (Element::L1, LoadPath::GlobalCa),
            (Element::Texture, LoadPath::Texture),
            (Element::ReadOnly, LoadPath::GlobalNc),
            (Element::ConstantL1, LoadPath::Constant),
        ]
        .into_iter()
        .filter_map(|(e, p)| {
            let unit = self
                .results
                .element(e)
                .and_then(|r| r.line.as_ref())
                .and_then(|l| u32::try_from(l.bytes).ok())
                .unwrap_or(32);
            self.exact_size(e).map(|bytes| (e, p, bytes, unit))
        })
        .collect();
        for (i, &(a, path_a, size_a, unit_a)) in caches.iter().enumerate() {
            for &(b, path_b, size_b, unit_b) in &caches[i + 1..] {
                let name = format!("sharing {a}/{b}");
                match self.timed(&name, |s, gpu| {
                    hierarchy::evicts(
                        s.backend,
                        (path_a, hierarchy::chain(size_a * 3 / 4, unit_a)?),
                        (path_b, hierarchy::chain(size_b * 3 / 4, unit_b)?, 0),
                        gpu,
                    )
                }) {
                    Ok(test) => self.results.sharing.push((a, b, test)),
                    Err(e) => self.fail(a, format!("{name}: {e}")),
                }
            }
        }
        for &(element, path, size, unit) in &caches {
            let name = format!("{element} copies per SM");
            match self.timed(&name, |s, gpu| {
                hierarchy::copies_per_sm(s.backend, path, size, unit, COPY_WARPS, gpu)
            }) {
                Ok(copies) => self.results.copies.push((element, copies)),
                Err(e) => self.fail(element, format!("{name}: {e}")),
            }
        }
    }

    fn measure_element(&mut self, element: Element) {
        // An L1 that does not cache global loads (Maxwell) is an answer, not a failure: the
        // report says so in a note.
        if element == Element::L1 && self.results.l1_caches_global_loads == Some(false) {
            return;
        }
        let constant_l1 = self
            .results
            .element(Element::ConstantL1)
            .and_then(|r| r.sizes.first())
            .and_then(|s| match s.finding {
                SizeFinding::Exact { bytes, .. } => Some(bytes),
                SizeFinding::AtLeast { .. } => None,
            });
        match size_plan(element, constant_l1) {
            Some((path, range)) => self.measure_cache(element, path, range),
            None if element == Element::ConstantL15 => self.fail(
                element,
                "needs the constant L1 size, which was not measured".into(),
            ),
            None => self.measure_latency_only(element),
        }
    }

    fn measure_cache(&mut self, element: Element, path: LoadPath, range: SearchRange) {
        if range.start >= range.max {
            self.fail(
                element,
                format!(
                "no room to search: the search would start at {} B, the path holds at most {} B",
                range.start, range.max
            ),
            );
            return;
        }
        if element != Element::L1 {
            // Without a cache on the path (or, for the constant L1.5, beyond the constant
            // L1), a size search would find the L2 instead.
            let (bytes, stride) = if element == Element::ConstantL15 {
                (range.start, self.constant_l1_line())
            } else {
                (256, 32)
            };
            match self.timed(&format!("{element} cached"), |s, gpu| {
                s.path_is_cached(path, bytes, stride, gpu)
            }) {
                Ok(true) => {}
                Ok(false) => {
                    self.fail(
                        element,
                        format!(
                        "no SM cache serves {path} loads of {bytes} B: they take as long as L2 hits"
                    ),
                    );
                    return;
                }
                Err(e) => {
                    self.fail(element, format!("{element} cached: {e}"));
                    return;
                }
            }
        }
        // Every SM cache is measured where the L1 has the most room: the smallest
        // shared-memory configuration a kernel can get, forced by its shared bytes; the L1
        // also at the driver's default for a kernel without shared memory and at every
        // further configuration (the carveout table, `carveout::settings`).
        let settings = if matches!(element, Element::ConstantL1 | Element::ConstantL15) {
            // The constant caches are not in the L1/shared store: no configuration to force.
            carveout::settings_without_shared()
        } else {
            carveout::settings(
                self.backend.device(),
                element == Element::L1 && self.options.carveout_table,
            )
        };
        for setting in settings {
            let (carveout, reserve) = (setting.carveout, setting.dynamic_shared_bytes);
            let probe = SizeProbe {
                path,
                stride: self.options.search_stride,
                carveout,
                warmup_passes: 1,
                timed_passes: self.options.timed_passes,
                replicas: self.options.replicas,
                reserve_shared_bytes: reserve,
            };
            let label = match (setting.role, setting.config_bytes) {
                (carveout::Role::DriverDefault, _) => "driver default".to_string(),
                (_, Some(config)) => format!("{} KiB shared config", config / 1024),
                (_, None) => "no shared memory".to_string(),
            };
            let name = format!("{element} size ({label})");
            let alpha = self.options.alpha;
            match self.timed(&name, |s, gpu| {
                search::find_size(s.backend, &probe, range, alpha, gpu)
            }) {
                Ok((finding, mut curve)) => {
                    curve.name = format!("{element}-size-{label}");
                    self.results.curves.push(curve);
                    self.results
                        .element_mut(element)
                        .sizes
                        .push(SizeAtCarveout {
                            carveout,
                            reserved_shared_bytes: reserve,
                            config_bytes: setting.config_bytes,
                            role: setting.role,
                            finding,
                        });
                }
                Err(e) => self.fail(element, format!("{name}: {e}")),
            }
        }
        let size = self.results.element(element).and_then(|r| {
            r.sizes.first().map(|s| match s.finding {
                SizeFinding::Exact { bytes, .. } | SizeFinding::AtLeast { bytes, .. } => bytes,
            })
        });
        let exact = self.results.element(element).is_some_and(|r| {
            r.sizes
                .first()
                .is_some_and(|s| matches!(s.finding, SizeFinding::Exact { .. }))
        });
        let Some(size) = size else { return };
        if exact {
            let name = format!("{element} line");
            match self.timed(&name, |s, gpu| s.line_size(path, size, gpu)) {
                Ok(line) => self.results.element_mut(element).line = Some(line),
                Err(e) => self.fail(element, format!("{name}: {e}")),
            }
            let granularity = self
                .results
                .element(element)
                .and_then(|r| r.line.as_ref())
                .map(|l| l.bytes);
            if let Some(granularity) = granularity {
                let name = format!("{element} allocation line");
                match self.timed(&name, |s, gpu| {
                    hierarchy::allocation_line(s.backend, path, size, granularity, gpu)
                }) {
                    Ok(line) => self.results.element_mut(element).line_bytes = Some(line),
                    Err(e) => self.fail(element, format!("{name}: {e}")),
                }
            }
        }
        let name = format!("{element} latency");
        // The constant L1.5 is timed over at least twice the constant L1 with one node per
        // constant-L1 line, so that a cyclic chase misses the L1 on every load (a 32-byte
        // stride would let each 64-byte line serve two nodes; a wider one would leave
        // the L1 room for all of them).
        let (bytes, stride) = match element {
            Element::ConstantL15 => {
                let l1 =
                    self.results
                        .element(Element::ConstantL1)
                        .and_then(|r| r.sizes.first())
                        .map_or(2048, |s| match s.finding {
                            SizeFinding::Exact { bytes, .. }
                            | SizeFinding::AtLeast { bytes, .. } => bytes,
                        });
                let line = self.constant_l1_line();
                let bytes = (size / 2).max(2 * l1).min(CONSTANT_BANK_BYTES);
                (bytes / u64::from(line) * u64::from(line), line)
            }
            // A quarter of the size, at most 4 KiB: the fine-grained kernel's timing
            // buffer takes shared memory, which shrinks a unified L1 below the size the
            // (buffer-less) search measured.
            _ => ((size / 4).clamp(256, 4096) / 32 * 32, 32),
        };
        match self.timed(&name, |s, gpu| s.hit_latency(path, bytes, stride, gpu)) {
            Ok(latency) => self.results.element_mut(element).latency = Some(latency),
            Err(e) => self.fail(element, format!("{name}: {e}")),
        }
    }

    fn measure_latency_only(&mut self, element: Element) {
        let name = format!("{element} latency");
        let result = match element {
            Element::Shared => self.timed(&name, |s, gpu| s.shared_latency(gpu)),
            // The element's latency is the near partition's; the partitions, their
            // latencies and capacities go to `Measurements::l2`.
            Element::L2 => self.timed(&name, |s, gpu| {
                let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
                let found = l2::measure_l2(s.backend, overhead, s.options.samples, gpu)?;
                let near = found.near;
                s.results.curves.push(found.curve.clone());
                s.results.l2 = Some(found);
                Ok(near)
            }),
            Element::DeviceMemory => match self.timed(&name, |s, gpu| s.memory_latency(gpu)) {
                Ok((latency, found)) => {
                    self.results.element_mut(element).latency_levels = found;
                    Ok(latency)
                }
                Err(e) => Err(e),
            },
            _ => return,
        };
        match result {
            Ok(latency) => self.results.element_mut(element).latency = Some(latency),
            Err(e) => self.fail(element, format!("{name}: {e}")),
        }
    }

    /// Fine-grained samples of one chain, warmed up by one pass.
    fn fine_samples(
        &mut self,
        path: LoadPath,
        chain: ChainSpec,
        steps: u32,
        carveout: Carveout,
        gpu: &mut Duration,
    ) -> Result<Vec<u32>, RunnerError> {
        let warmup = u32::try_from(chain.nodes()).unwrap_or(u32::MAX);
        self.fine_samples_with(path, chain, steps, carveout, warmup, false, gpu)
    }

    /// Fine-grained samples of one chain with an explicit warm-up and L2 flush.
    #[allow(clippy::too_many_arguments)]
    fn fine_samples_with(
        &mut self,
        path: LoadPath,
        chain: ChainSpec,
        steps: u32,
        carveout: Carveout,
        warmup_steps: u32,
        flush_l2: bool,
        gpu: &mut Duration,
    ) -> Result<Vec<u32>, RunnerError> {
        let request = ChaseRequest {
            path,
            mode: ChaseMode::Fine,
            chains: vec![chain],
            warmup_steps,
            steps,
            carveout,
            flush_l2,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        let run = self.backend.chase(&request)?;
        *gpu += run.gpu_time;
        run.blocks
            .into_iter()
            .next()
            .map(|b| b.latencies)
            .ok_or_else(|| RunnerError::WrongResult("a chase returned no block".into()))
    }

    fn hit_latency(
        &mut self,
        path: LoadPath,
        bytes: u64,
        stride: u32,
        gpu: &mut Duration,
    ) -> Result<LatencySummary, RunnerError> {
        let chain = ChainSpec::new(bytes, stride)?;
        let samples =
            self.fine_samples(path, chain, self.options.samples, Carveout::Percent(0), gpu)?;
        self.latency_summary(&samples)
    }

    /// The latency distribution of fine-grained samples, the clock overhead subtracted.
    fn latency_summary(&self, samples: &[u32]) -> Result<LatencySummary, RunnerError> {
        let overhead = f64::from(self.results.clock_overhead.unwrap_or(0));
        let cycles: Vec<f64> = samples
            .iter()
            .map(|&v| (f64::from(v) - overhead).max(0.0))
            .collect();
        LatencySummary::from_samples(&cycles)
            .ok_or_else(|| RunnerError::WrongResult("no latency samples".into()))
    }

    /// Shared-memory latency over a 1 KiB chain, with as many samples as the block's
    /// shared memory holds next to it.
    fn shared_latency(&mut self, gpu: &mut Duration) -> Result<LatencySummary, RunnerError> {
        let chain = ChainSpec::new(1024, 32)?;
        let room = self
            .backend
            .device()
            .shared_per_block_optin_bytes
            .saturating_sub(chain.bytes)
            / 8;
        let steps = self
            .options
            .samples
            .min(u32::try_from(room).unwrap_or(u32::MAX));
        if steps < 32 {
            return Err(RunnerError::InvalidRequest(format!(
                "a block's shared memory holds only {room} timing samples next to the chain"
            )));
        }
        let samples =
            self.fine_samples(LoadPath::Shared, chain, steps, Carveout::Percent(0), gpu)?;
        self.latency_summary(&samples)
    }

    /// Device-memory latency: a chain evicted from the L2, timed without a warm-up.
    ///
    /// Nodes are 2 KiB apart, so each load touches a new line of a new DRAM burst; the
    /// timed loads span `samples × 2 KiB` (1.5 MiB by default), inside one 2 MiB page of
    /// the driver's large-page allocations, so after the first load every translation
    /// hits the TLB and the latency is that of the memory, not of a page walk.
    fn memory_latency(
        &mut self,
        gpu: &mut Duration,
    ) -> Result<(LatencySummary, Vec<levels::Mode>), RunnerError> {
        let stride = 2048u32;
        let chain = ChainSpec::new(
            u64::from(self.options.samples + 1) * u64::from(stride),
            stride,
        )?;
        let samples = self.fine_samples_with(
            LoadPath::GlobalCg,
            chain,
            self.options.samples,
            Carveout::Percent(0),
            0,
            true,
            gpu,
        )?;
        // Lines homed in another L2 partition reach memory through it and come back
        // slower (on Hopper by the far-hit penalty): the samples are a mixture, and the
        // latency is its fastest level, the others reported beside it.
        let overhead = f64::from(self.results.clock_overhead.unwrap_or(0));
        let cycles: Vec<f64> = samples
            .iter()
            .map(|&v| (f64::from(v) - overhead).max(0.0))
            .collect();
        let found: Vec<levels::Mode> = analysis::analysing(|| levels::modes(&cycles, 0.05))
            .into_iter()
            .filter(|m| !m.tail)
            .collect();
        if found.len() < 2 {
            return Ok((self.latency_summary(&samples)?, Vec::new()));
        }
        let fastest: Vec<f64> = cycles
            .iter()
            .copied()
            .filter(|&v| v < found[0].upper)
            .collect();
        let summary = LatencySummary::from_samples(&fastest)
            .ok_or_else(|| RunnerError::WrongResult("no memory samples".into()))?;
        Ok((summary, found))
    }

    /// The constant L1's measured fetch granularity (64 B, its size on every NVIDIA GPU
    /// the thesis measured, until it is known).
    fn constant_l1_line(&self) -> u32 {
        self.results
            .element(Element::ConstantL1)
            .and_then(|r| r.line.as_ref())
            .and_then(|l| u32::try_from(l.bytes).ok())
            .unwrap_or(64)
    }

    /// Whether loads through `path` are clearly faster than L2 hits (`.cg`) on a small
    /// array: the same decision as the global-caching test, for any path.
    fn path_is_cached(
        &mut self,
        path: LoadPath,
        bytes: u64,
        stride: u32,
        gpu: &mut Duration,
    ) -> Result<bool, RunnerError> {
        let chain = ChainSpec::new(bytes, stride)?;
        let quantile = |mut v: Vec<u32>, q: f64| {
            v.sort_unstable();
            f64::from(v[((v.len() - 1) as f64 * q) as usize])
        };
        let path_median = quantile(
            self.fine_samples(path, chain, 256, Carveout::Percent(0), gpu)?,
            0.5,
        );
        // The fastest L2 hits: with near and far L2 partitions, loads that miss every SM
        // cache take the near latency or more, so they are never clearly below this.
        // 256 lines of 64 KiB: both partitions are among them whatever the address hash,
        // and no L2 is that small.
        let l2_chain = ChainSpec::new(64 * 1024, 256)?;
        let l2_fast = quantile(
            self.fine_samples(LoadPath::GlobalCg, l2_chain, 512, Carveout::Percent(0), gpu)?,
            0.05,
        );
        Ok(l2_fast - path_median > (0.05 * l2_fast).max(4.0))
    }

    fn global_caching(&mut self, gpu: &mut Duration) -> Result<(bool, f64, f64), RunnerError> {
        let chain = ChainSpec::new(2048, 32)?;
        let median = |mut v: Vec<u32>| {
            v.sort_unstable();
            f64::from(v[v.len() / 2])
        };
        let ca =
            median(self.fine_samples(LoadPath::GlobalCa, chain, 256, Carveout::Percent(0), gpu)?);
        let cg =
            median(self.fine_samples(LoadPath::GlobalCg, chain, 256, Carveout::Percent(0), gpu)?);
        // Without global caching in L1, `.ca` and `.cg` both go to the L2 and their
        // medians agree to within jitter; any L1 in the `.ca` path makes it clearly
        // faster (several times, on every NVIDIA GPU the thesis measured).
        Ok((cg - ca > (0.05 * cg).max(4.0), ca, cg))
    }

    /// The spacing of misses in a 4-byte-stride chase over twice the cache.
    fn line_size(
        &mut self,
        path: LoadPath,
        cache_bytes: u64,
        gpu: &mut Duration,
    ) -> Result<LineFinding, RunnerError> {
        let mut bytes = (2 * cache_bytes).div_ceil(4) * 4;
        if path == LoadPath::Constant {
            bytes = bytes.min(CONSTANT_BANK_BYTES);
        }
        let chain = ChainSpec::new(bytes, 4)?;
        let steps = self.options.samples.max(512);
        let samples = self.fine_samples(path, chain, steps, Carveout::Percent(0), gpu)?;
        line_from_misses(&samples)
    }
}

/// The most common distance, in bytes, between slow loads of a 4-byte-stride chase.
pub fn line_from_misses(samples: &[u32]) -> Result<LineFinding, RunnerError> {
    let mut sorted: Vec<f64> = samples.iter().map(|&v| f64::from(v)).collect();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return Err(RunnerError::WrongResult(
            "no samples for the line size".into(),
        ));
    }
    let p50 = stats::quantile(&sorted, 0.5);
    // A miss to the next level costs at least half again a hit on every GPU; counting
    // every such load (next-level hits and deeper misses alike) makes the spacing that of
    // this cache's fetches, not of a deeper level's lines.
    let threshold = 1.5 * p50 + 4.0;
    let p99 = stats::quantile(&sorted, 0.99);
    if p99 <= threshold {
        return Err(RunnerError::WrongResult(format!(
            "no misses visible (median {p50} cycles, p99 {p99} cycles)"
        )));
    }
    line_from_misses_above(samples, threshold)
}

/// The most common distance, in bytes, between loads of a 4-byte-stride chase slower than
/// `threshold` cycles.
pub fn line_from_misses_above(samples: &[u32], threshold: f64) -> Result<LineFinding, RunnerError> {
    let misses: Vec<usize> = samples
        .iter()
        .enumerate()
        .filter(|(_, &v)| f64::from(v) > threshold)
        .map(|(i, _)| i)
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for pair in misses.windows(2) {
        *counts.entry(pair[1] - pair[0]).or_insert(0usize) += 1;
    }
    let total: usize = counts.values().sum();
    let (&spacing, &count) = counts
        .iter()
        .max_by_key(|(spacing, count)| (**count, std::cmp::Reverse(**spacing)))
        .ok_or_else(|| RunnerError::WrongResult("fewer than two misses".into()))?;
    Ok(LineFinding {
        bytes: 4 * spacing as u64,
        agreement: count as f64 / total as f64,
        misses: misses.len(),
    })
}

/// A short label for a carveout.
pub fn carveout_label(carveout: Carveout) -> String {
    match carveout {
        Carveout::DriverDefault => "driver default".to_string(),
        Carveout::Percent(0) => "max L1".to_string(),
        Carveout::Percent(p) => format!("{p}% shared"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_from_regular_misses() {
        // A miss every 8 loads of 4 bytes: 32-byte sectors.
        let samples: Vec<u32> = (0..512)
            .map(|i| if i % 8 == 0 { 300 } else { 35 })
            .collect();
        let line = line_from_misses(&samples).unwrap();
        assert_eq!(line.bytes, 32);
        assert_eq!(line.agreement, 1.0);
        assert_eq!(line.misses, 64);
    }

    #[test]
    fn no_misses_is_an_error() {
        let samples = vec![35u32; 512];
        assert!(line_from_misses(&samples).is_err());
    }

    #[test]
    fn element_names_round_trip() {
        for e in Element::ALL {
            assert_eq!(e.name().parse::<Element>().unwrap(), e);
        }
        assert!("l3".parse::<Element>().is_err());
    }
}
