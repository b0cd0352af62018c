//! The session: runs the registered benchmarks a selection plans, one after another, with
//! timings, progress and (when watching) the sentinels between them.

use std::{
    fmt,
    time::{Duration, Instant},
};

use topology::ElementKind;

use super::{
    analysis,
    bench::{self, Benchmark},
    sentinel, Disturbance, ElementResult, MeasureOptions, Measurements, SizeFinding, Timing,
};
use crate::{backend::Backend, error::RunnerError};

/// Where a session is: told to the progress callback as each step starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step<'a> {
    /// The registered benchmark running (`"calibration"` for the clock calibration).
    pub benchmark: &'a str,
    /// Its place in the plan, from 1 (0 for the calibration).
    pub index: usize,
    /// Benchmarks in the plan.
    pub count: usize,
    /// The step, as timings name it, e.g. `l1 size (8 KiB shared config)`.
    pub name: &'a str,
}

/// A callback told each step as it starts.
type Progress<'b> = Box<dyn FnMut(&Step<'_>) + 'b>;

/// Runs the benchmarks on one backend.
pub struct Session<'b> {
    pub(crate) backend: &'b mut dyn Backend,
    pub(crate) options: MeasureOptions,
    pub(crate) results: Measurements,
    progress: Option<Progress<'b>>,
    /// The sentinels' first reading, when watching.
    baseline: Option<sentinel::Reading>,
    /// The benchmark running: its name, element, place in the plan and the plan's length.
    current: (&'static str, Option<ElementKind>, usize, usize),
}

impl fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("device", &self.backend.device().name)
            .field("options", &self.options)
            .field("results", &self.results)
            .finish_non_exhaustive()
    }
}

impl<'b> Session<'b> {
    /// A session over `backend`.
    pub fn new<B: Backend + 'b>(backend: &'b mut B, options: MeasureOptions) -> Self {
        Session {
            backend,
            options,
            results: Measurements::default(),
            progress: None,
            baseline: None,
            current: ("calibration", None, 0, 0),
        }
    }

    /// Takes `baseline` as the sentinels' first reading, which the caller has just read
    /// with [`sentinel::read`] on this backend; without it a watching session reads its
    /// own before its first step. A caller that compares the sentinels before and after
    /// the whole session thus reads them once at the start, not twice back to back (a
    /// reading with its warm-up is some 20 ms of GPU time on a Hopper GPU).
    pub fn with_baseline(mut self, baseline: sentinel::Reading) -> Self {
        self.baseline = Some(baseline);
        self
    }

    /// Calls `progress` with the name of each step as it starts.
    pub fn with_progress(self, mut progress: impl FnMut(&str) + 'b) -> Self {
        self.with_steps(move |step| progress(step.name))
    }

    /// Calls `progress` with each step as it starts: the benchmark, its place in the plan
    /// and the step's name.
    pub fn with_steps(mut self, progress: impl FnMut(&Step<'_>) + 'b) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// The registered benchmarks this session's options select, in the order they run.
    pub fn plan(&self) -> Vec<&'static dyn Benchmark> {
        bench::plan(&self.options.only)
    }

    /// The options.
    pub fn options(&self) -> &MeasureOptions {
        &self.options
    }

    /// What was measured so far.
    pub fn results(&self) -> &Measurements {
        &self.results
    }

    /// Records that a benchmark of `element` failed, and why.
    pub(crate) fn fail(&mut self, element: ElementKind, reason: String) {
        log::info!("{element}: {reason}");
        self.results.element_mut(element).failures.push(reason);
    }

    /// The result of `element`, created empty if absent.
    pub(crate) fn element_mut(&mut self, element: ElementKind) -> &mut ElementResult {
        self.results.element_mut(element)
    }

    fn start(&mut self, what: &str) {
        log::info!("benchmark: {what}");
        let (benchmark, _, index, count) = self.current;
        if let Some(p) = self.progress.as_mut() {
            p(&Step {
                benchmark,
                index,
                count,
                name: what,
            });
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

    /// Runs `f` as the step `name`, recording its time. When watching, the sentinels
    /// are read after it; if they moved, `f` runs once more (its first result dropped) and
    /// the step is listed in [`Measurements::disturbed`].
    pub(crate) fn timed<T>(
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
                    element: self.current.1,
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

    /// Runs every planned benchmark and returns what was measured.
    ///
    /// # Errors
    /// Only for failures that make every benchmark meaningless (the clock calibration);
    /// a failing benchmark is recorded in its element's `failures`.
    pub fn run(mut self) -> Result<Measurements, RunnerError> {
        let plan = self.plan();
        let overhead = self.timed("clock calibration", |s, _| {
            let overhead = s.backend.clock_overhead(256)?;
            // Watching, the sentinels' first reading (its warm-up and readings until two
            // agree) came first, and the clock is up.
            let mhz = if s.options.watch {
                s.backend.warm_sm_clock_mhz()?
            } else {
                s.backend.measure_sm_clock_mhz()?
            };
            Ok((overhead, mhz))
        })?;
        self.results.clock_overhead = Some(overhead.0);
        self.results.sm_clock_mhz = Some(overhead.1);
        for (i, benchmark) in plan.iter().enumerate() {
            let info = benchmark.info();
            self.current = (info.name, info.element, i + 1, plan.len());
            benchmark.run(&mut self);
        }
        Ok(self.results)
    }

    /// The exact size of an SM cache, where one was measured.
    pub(crate) fn exact_size(&self, element: ElementKind) -> Option<u64> {
        match self.results.element(element)?.sizes.first()?.finding {
            SizeFinding::Exact { bytes, .. } => Some(bytes),
            SizeFinding::AtLeast { .. } => None,
        }
    }
}
