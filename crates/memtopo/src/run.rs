//! The measurement of one GPU: pick the backend, measure, print and write the results.
//! Several GPUs are `node`'s, which measures each through [`measure_gpu`] too.

use std::{fmt::Write as _, path::Path, time::Instant};

use pchase_runner::{
    measure::{report, MeasureOptions, Measurements},
    sim::SimBackend,
    Backend,
};
use topology::{RunRecord, Topology};

use crate::{
    conditions,
    error::{CliError, Exit},
    guard,
    handover::{self, Slot},
    output::{self, Format, Stdout},
    plan::{Gpu, GpuJob, GuardPolicy, Settings},
    progress::{self, Level, Reporter},
    raw, simulate,
};

fn timings_text(measured: &Measurements, total: std::time::Duration) -> String {
    let mut out = String::from("\n");
    let _ = writeln!(
        out,
        "{:<36} {:>10} {:>10} {:>12}",
        "benchmark", "wall ms", "GPU ms", "analysis ms"
    );
    for t in &measured.timings {
        let _ = writeln!(
            out,
            "{:<36} {:>10.1} {:>10.1} {:>12.2}",
            t.benchmark,
            t.wall.as_secs_f64() * 1e3,
            t.gpu.as_secs_f64() * 1e3,
            t.analysis.as_secs_f64() * 1e3
        );
    }
    let gpu: std::time::Duration = measured.timings.iter().map(|t| t.gpu).sum();
    let analysis: std::time::Duration = measured.timings.iter().map(|t| t.analysis).sum();
    let _ = writeln!(
        out,
        "{:<36} {:>10.1} {:>10.1} {:>12.2}",
        "total (including context creation)",
        total.as_secs_f64() * 1e3,
        gpu.as_secs_f64() * 1e3,
        analysis.as_secs_f64() * 1e3
    );
    let _ = writeln!(
        out,
        "change-point analysis: {:.2} % of the wall time",
        100.0 * analysis.as_secs_f64() / total.as_secs_f64().max(f64::MIN_POSITIVE)
    );
    out
}

/// The device memory and context of a measured GPU, being released on a thread of their
/// own (some 80 ms on an H200) while the result is built and written; dropping it waits
/// for the release, so that the run's total and the process's end include it.
#[derive(Debug, Default)]
struct Release(Option<std::thread::JoinHandle<()>>);

impl Release {
    /// Waits for the release to end.
    fn wait(mut self) {
        self.join();
    }

    fn join(&mut self) {
        if let Some(handle) = self.0.take() {
            if handle.join().is_err() {
                log::warn!("releasing the context ended in a panic");
            }
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        self.join();
    }
}

/// Checks every output before any GPU work: directories, permissions.
fn preflight(job: &GpuJob) -> Result<(), CliError> {
    for file in &job.outputs.files {
        output::check_output(&file.path)?;
    }
    if let Some(dir) = &job.keep_raw {
        output::check_raw_dir(dir)?;
    }
    Ok(())
}

/// Writes every file; a failure is reported and the others are still written. Returns
/// how many failed.
fn write_files(job: &GpuJob, topo: &Topology, measured: &Measurements) -> usize {
    let mut failed = 0;
    let mut report = |path: &Path, reason: String| {
        progress::say(
            Level::Error,
            format!("cannot write {}: {reason}", path.display()),
        );
        failed += 1;
    };
    let raw_data = job
        .outputs
        .files
        .iter()
        .any(|file| file.format == Format::Html)
        .then(|| raw::report_data(&measured.curves, measured.l2.as_ref()));
    for file in &job.outputs.files {
        let path = &file.path;
        match output::text(topo, file.format, raw_data.as_ref())
            .and_then(|text| output::write_file(path, text.as_bytes()).map_err(|e| e.to_string()))
        {
            Ok(()) => log::info!("wrote {}", path.display()),
            Err(reason) => report(path, reason),
        }
    }
    if let Some(dir) = &job.keep_raw {
        if let Err(reason) = raw::write_curves(dir, &measured.curves) {
            report(dir, reason);
        }
        if let Some(Ok(line)) = measured.l2.as_ref().map(|l2| &l2.line) {
            if let Err(reason) = raw::write_l2_line(dir, line) {
                report(dir, reason);
            }
        }
        if let Some(l2) = measured.l2.as_ref() {
            if let Err(reason) = raw::write_l2_samples(dir, l2) {
                report(dir, reason);
            }
        }
    }
    failed
}

/// Measures the GPU of `job` as `settings` say, prints what standard output gets; returns
/// the exit code and the result.
pub fn measure_gpu(
    settings: &Settings,
    job: &GpuJob,
    progress: &mut Reporter,
) -> Result<(Exit, Topology), CliError> {
    let run = measure(settings, job, progress, None)?;
    let code = run.print(&mut Stdout::default());
    Ok((code, run.topo))
}

/// One GPU measured and its files written; what goes to standard output is kept for
/// [`GpuRun::print`], so that a node run prints the tables of GPUs measured at once one
/// after another, in device order.
#[derive(Debug)]
pub struct GpuRun {
    /// The result.
    pub topo: Topology,
    /// The table and the timings (under `-o -`: for standard error).
    human: String,
    /// `-o -`: the JSON document for standard output.
    json: Option<String>,
    /// The files that could not be written.
    failed_outputs: usize,
    /// Disturbed while measuring.
    disturbed: bool,
    /// `--strict` and the self-check found something.
    self_check: bool,
    /// A benchmark failed.
    failed: bool,
}

impl GpuRun {
    /// The run's exit code, standard output aside: 6 when a file could not be written, else
    /// 9 when disturbed, 10 for `--strict`'s findings, 1 when a benchmark failed, else 0.
    pub fn code(&self) -> Exit {
        self.code_with(self.failed_outputs)
    }

    fn code_with(&self, failed_outputs: usize) -> Exit {
        if failed_outputs > 0 {
            Exit::Output
        } else if self.disturbed {
            Exit::Disturbed
        } else if self.self_check {
            Exit::SelfCheck
        } else if self.failed {
            Exit::Findings
        } else {
            Exit::Success
        }
    }

    /// Prints the table (or the JSON of `-o -`) and returns the run's exit code, 6 also
    /// when standard output fails.
    pub fn print(&self, stdout: &mut Stdout) -> Exit {
        let mut failed_outputs = self.failed_outputs;
        match &self.json {
            // With `-o -` standard output carries the JSON alone; the table and timings go
            // to standard error (not with `--progress json`: there every line is an event).
            Some(json) => {
                if !progress::json_mode() {
                    eprint!("{}", self.human);
                }
                stdout.print(json);
            }
            None => progress::outside_bar(|| stdout.print(&self.human)),
        }
        if let Some(e) = stdout.error() {
            progress::say(
                Level::Error,
                format!("cannot write the table to standard output: {e}"),
            );
            failed_outputs += 1;
        }
        self.code_with(failed_outputs)
    }
}

/// Measures the GPU of `job` as `settings` say and writes its files; prints nothing on
/// standard output (that is [`GpuRun::print`]'s). A GPU of a node run whose links are to
/// be measured hands its lock and context over to them through `slot`.
pub fn measure(
    settings: &Settings,
    job: &GpuJob,
    progress: &mut Reporter,
    slot: Option<Slot<'_>>,
) -> Result<GpuRun, CliError> {
    preflight(job)?;
    let mut record = conditions::base_record();
    record.concurrent_with = job.concurrent_with.clone();
    let started = Instant::now();
    let options = settings.options.clone();
    let (info, measured, release) = match &job.gpu {
        Gpu::Simulated(spec) => {
            simulated(&settings.guard, spec, options, &mut record, progress, slot)?
        }
        Gpu::Real(ordinal) => real_gpu(
            &settings.guard,
            *ordinal,
            options,
            &mut record,
            progress,
            slot,
        )?,
    };
    let mut topo = report::to_topology(&info, &measured, env!("CARGO_PKG_VERSION"));
    for reason in &record.busy_reasons {
        topo.warn(
            None,
            format!("measured on a busy GPU (--allow-busy): {reason}"),
        );
    }
    for disturbance in &record.disturbances {
        topo.warn(None, format!("disturbed: {disturbance}"));
    }
    topo.run = Some(record);
    guard::mark_benchmarks(&measured, &mut topo);
    let disturbances = topo.run.as_ref().map_or(&[][..], |r| &r.disturbances[..]);
    let disturbed = !disturbances.is_empty();
    if settings.quiet {
        // No table: what it would show as failed or doubtful goes to stderr.
        quiet_findings(&topo);
    } else {
        for disturbance in disturbances {
            log::error!("disturbed while measuring: {disturbance}");
        }
    }
    // Files first: a closed terminal or pipe must not lose them.
    let mut failed_outputs = write_files(job, &topo, &measured);
    let mut human = String::new();
    if !settings.quiet {
        human.push_str(&topology::render::table(&topo));
    }
    let json = if job.outputs.stdout_json {
        match output::text(&topo, Format::Json, None) {
            Ok(text) => Some(text),
            Err(reason) => {
                progress::say(
                    Level::Error,
                    format!("cannot write the JSON to standard output: {reason}"),
                );
                failed_outputs += 1;
                Some(String::new())
            }
        }
    } else {
        None
    };
    // The result was built and written beside the context's release; the total ends with
    // both.
    release.wait();
    let total = started.elapsed();
    log::debug!(
        "the result written and the GPU released at {:.1} ms",
        total.as_secs_f64() * 1e3
    );
    if settings.timings {
        human.push_str(&timings_text(&measured, total));
    }
    progress.failed = measured
        .elements
        .iter()
        .flat_map(|(element, r)| r.failures.iter().map(move |f| format!("{element}: {f}")))
        .collect();
    let unexplained = measured.self_check();
    if settings.strict {
        for finding in &unexplained {
            progress::say(Level::SelfCheck, finding);
        }
    }
    Ok(GpuRun {
        topo,
        human,
        json,
        failed_outputs,
        disturbed,
        self_check: settings.strict && !unexplained.is_empty(),
        failed: !progress.failed.is_empty(),
    })
}

/// With `-q` (no table): every note that says a value is missing or doubtful, on stderr
/// (a failed benchmark as an error, warnings as warnings: disturbances, a busy GPU, what
/// the self-check found).
fn quiet_findings(topo: &Topology) {
    for note in &topo.notes {
        let about = note
            .element
            .map(|e| format!("{}: ", e.display_name()))
            .unwrap_or_default();
        match note.severity {
            topology::NoteSeverity::NotMeasured => progress::say(
                Level::Error,
                format!("{about}not measured: {}", note.message),
            ),
            topology::NoteSeverity::Warning => {
                progress::say(Level::Warning, format!("{about}{}", note.message))
            }
            topology::NoteSeverity::Info => {}
        }
    }
}

/// `options` with the PCIe link NVML (or the simulated GPU's profile) reported before the
/// run, for the host-link benchmark's peak.
fn with_pcie(
    mut options: MeasureOptions,
    before: Option<&conditions::Observation>,
) -> MeasureOptions {
    let state = before.map(|b| &b.state);
    options.pcie = state.and_then(|g| {
        Some(pchase_runner::host::PcieLink {
            generation: g.pcie_generation?,
            width: g.pcie_width?,
            max_generation: g.pcie_max_generation.or(g.pcie_generation)?,
            max_width: g.pcie_max_width.or(g.pcie_width)?,
        })
    });
    options
}

/// The simulated GPU of profile `spec`: its UUID (if the profile names one) is locked,
/// its co-tenant checked as a real GPU's processes are; the lock is handed over to the
/// node's links through `slot` (a simulated GPU has no context to hand over).
fn simulated(
    policy: &GuardPolicy,
    spec: &str,
    options: MeasureOptions,
    record: &mut RunRecord,
    progress: &mut Reporter,
    slot: Option<Slot<'_>>,
) -> Result<(pchase_runner::DeviceInfo, Measurements, Release), CliError> {
    let profile = simulate::load_profile(spec)?;
    record.simulated_profile = Some(simulate::profile_label(spec, &profile.name));
    record.gpu_uuid = profile.uuid.clone();
    let mut backend = SimBackend::new(profile)?;
    let lock = guard::lock_gpu(policy, record.gpu_uuid.clone().as_deref(), record, || {
        handover::before_waiting(slot)
    })?;
    let before = guard::check_busy(policy, Some(&mut guard::SimState(&backend)), record)?;
    let options = with_pcie(options, before.as_ref());
    let info = backend.device().clone();
    let measured = guard::watched(&mut backend, options, progress, record)?;
    log::info!("the simulated GPU ran {} launches", backend.launches());
    guard::after(
        Some(&mut guard::SimState(&backend)),
        before.as_ref(),
        record,
    );
    if let Some(slot) = slot {
        slot.keep(lock, None);
    }
    Ok((info, measured, Release::default()))
}

/// A real GPU; its lock and context are handed over to the node's links through `slot`
/// (the context waited for and floating: current on no thread). Otherwise its device
/// memory and context are released on a thread of their own, which the returned
/// [`Release`] waits for.
#[cfg(feature = "cuda")]
fn real_gpu(
    policy: &GuardPolicy,
    ordinal: u32,
    options: MeasureOptions,
    record: &mut RunRecord,
    progress: &mut Reporter,
    slot: Option<Slot<'_>>,
) -> Result<(pchase_runner::DeviceInfo, Measurements, Release), CliError> {
    let started = Instant::now();
    let phase = |name: &str| {
        log::debug!(
            "host phase: {name} done at {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    };
    crate::visible::log_decision();
    let cuda_ordinal = crate::visible::cuda_ordinal(ordinal);
    let crate::startup::Opened {
        mut backend,
        lock,
        mut nvml,
        before,
    } = crate::startup::open(policy, ordinal, cuda_ordinal, record, slot, started)?;
    let options = with_pcie(options, before.as_ref());
    let mut info = backend.device().clone();
    // The index the user gave, whatever CUDA numbered the GPU in this process.
    info.ordinal = ordinal;
    let measured = guard::watched(&mut backend, options, progress, record)?;
    phase("benchmarks and confirmations");
    let mut release = Release::default();
    // Kept for the node's links, the context is still open when the state after the run
    // is read.
    let context = match slot.filter(|s| s.handover.is_open()) {
        Some(_) => {
            backend.free_memory();
            phase("device memory freed");
            match backend.into_floating() {
                Ok(floating) => {
                    phase("context kept for the links");
                    Some(floating)
                }
                Err(e) => {
                    log::warn!("the context is not kept for the links: {e}");
                    phase("context released");
                    None
                }
            }
        }
        // Released beside the state after the run and the writing of the result: the
        // backend's buffers, then its context, on a thread of their own.
        None => {
            match backend.into_floating() {
                Ok(floating) => {
                    release = Release(Some(std::thread::spawn(move || {
                        let begun = Instant::now();
                        drop(floating);
                        log::debug!(
                            "released the device memory and the context in {:.1} ms, beside writing the result",
                            begun.elapsed().as_secs_f64() * 1e3
                        );
                    })));
                }
                Err(e) => log::warn!("the context was released with an error: {e}"),
            }
            phase("release started");
            None
        }
    };
    guard::after(source(&mut nvml), before.as_ref(), record);
    phase("state after");
    if let Some(slot) = slot {
        slot.keep(lock, context);
    }
    Ok((info, measured, release))
}

/// NVML as a state source, if it loaded.
#[cfg(feature = "cuda")]
fn source(nvml: &mut Option<crate::nvml::Nvml>) -> Option<&mut dyn conditions::StateSource> {
    nvml.as_mut().map(|n| n as &mut dyn conditions::StateSource)
}

#[cfg(not(feature = "cuda"))]
fn real_gpu(
    _policy: &GuardPolicy,
    _ordinal: u32,
    _options: MeasureOptions,
    _record: &mut RunRecord,
    _progress: &mut Reporter,
    _slot: Option<Slot<'_>>,
) -> Result<(pchase_runner::DeviceInfo, Measurements, Release), CliError> {
    Err(CliError::Runner(pchase_runner::RunnerError::NoDriver(
        "memtopo was built without the `cuda` feature; use --simulate".into(),
    )))
}
