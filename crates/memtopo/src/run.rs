//! One run of memtopo: pick the backend, measure, print and write the results.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    time::Instant,
};

use pchase_runner::{
    measure::{report, MeasureOptions, Measurements, Session},
    sim::SimBackend,
    Backend, RunnerError,
};
use thiserror::Error;
use topology::{RunRecord, Topology};

use crate::{
    cli::{self, MeasureArgs},
    conditions, guard,
    output::{self, Format, Refusal, Stdout},
    progress::{self, Level, Reporter},
    raw,
};

/// Why a run stopped, each with its exit code.
#[derive(Debug, Error)]
pub enum CliError {
    /// The command line asks for something impossible.
    #[error("{0}")]
    Usage(String),
    /// Anything the runner reports.
    #[error("{0}")]
    Runner(#[from] RunnerError),
    /// Another process uses the GPU, or another memtopo holds its lock.
    #[error("the GPU is busy: {0}")]
    Busy(String),
    /// An output could not be written.
    #[error("cannot write {path}: {reason}")]
    Output {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A saved result cannot be read: missing, not JSON or TOML, against the schema, or
    /// beyond the physical bounds.
    #[error("cannot read {path}: {reason}")]
    Input {
        /// The file (`-`: standard input).
        path: String,
        /// Why (the field's path where one is at fault).
        reason: String,
    },
}

impl CliError {
    /// The documented exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Runner(RunnerError::NoDriver(_) | RunnerError::NoDevice) => 3,
            CliError::Runner(RunnerError::BadDeviceIndex { .. }) => 4,
            CliError::Runner(RunnerError::DeviceBusy(_)) | CliError::Busy(_) => 8,
            CliError::Runner(RunnerError::Profile(_)) => 5,
            CliError::Output { .. } => 6,
            CliError::Runner(_) => 7,
            CliError::Input { .. } => 11,
        }
    }
}

fn options(cli: &MeasureArgs) -> Result<MeasureOptions, CliError> {
    let mut options = MeasureOptions {
        only: cli::only_benchmarks(&cli.only, cli.deep)?,
        ..MeasureOptions::default()
    };
    if !(64..=8192).contains(&cli.samples) {
        return Err(CliError::Usage(format!(
            "--samples {} is outside 64..=8192",
            cli.samples
        )));
    }
    options.samples = cli.samples;
    Ok(options)
}

/// Runs the session on `backend`, telling `progress` each benchmark.
pub(crate) fn measure<B: Backend>(
    backend: &mut B,
    options: MeasureOptions,
    progress: &mut Reporter,
) -> Result<Measurements, CliError> {
    progress.begin(backend.device(), &options);
    let result = Session::new(backend, options)
        .with_progress(|what| progress.benchmark(what))
        .run();
    progress.end();
    Ok(result?)
}

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

/// Checks every output before any GPU work: formats, directories, permissions.
fn preflight(cli: &MeasureArgs) -> Result<Vec<(PathBuf, Format)>, CliError> {
    let refused = |refusal: Refusal| match refusal {
        Refusal::UnknownFormat(message) => CliError::Usage(message),
        Refusal::Unwritable { path, reason } => CliError::Output { path, reason },
    };
    if cli.output.iter().filter(|p| is_stdout(p)).count() > 1 {
        return Err(CliError::Usage(
            "`-o -` (JSON on standard output) may be given once".into(),
        ));
    }
    let outputs = cli
        .output
        .iter()
        .filter(|path| !is_stdout(path))
        .map(|path| Ok((path.clone(), output::check_output(path).map_err(refused)?)))
        .collect::<Result<Vec<_>, CliError>>()?;
    if let Some(dir) = &cli.keep_raw {
        output::check_raw_dir(dir).map_err(refused)?;
    }
    Ok(outputs)
}

/// `-o -`: the JSON document goes to standard output (and the table to standard error).
fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Writes every file; a failure is reported and the others are still written. Returns
/// how many failed.
fn write_files(
    cli: &MeasureArgs,
    outputs: &[(PathBuf, Format)],
    topo: &Topology,
    measured: &Measurements,
) -> usize {
    let mut failed = 0;
    let mut report = |path: &Path, reason: String| {
        progress::say(
            Level::Error,
            format!("cannot write {}: {reason}", path.display()),
        );
        failed += 1;
    };
    let raw_data = outputs
        .iter()
        .any(|(_, format)| *format == Format::Html)
        .then(|| raw::report_data(&measured.curves, measured.l2.as_ref()));
    for (path, format) in outputs {
        match output::text(topo, *format, raw_data.as_ref())
            .and_then(|text| output::write_file(path, text.as_bytes()).map_err(|e| e.to_string()))
        {
            Ok(()) => log::info!("wrote {}", path.display()),
            Err(reason) => report(path, reason),
        }
    }
    if let Some(dir) = &cli.keep_raw {
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

/// Measures as `cli` asks; returns the exit code. Several GPUs (`--device all`, a list,
/// or a simulated node) are [`crate::node::run`]'s.
pub fn run(cli: &MeasureArgs, progress: &mut Reporter) -> Result<u8, CliError> {
    // A bad MEMTOPO_JIT is a usage error, before anything is measured (docs/cli.md).
    #[cfg(feature = "cuda")]
    pchase_runner::cuda::CodePreference::from_env().map_err(|e| match e {
        RunnerError::InvalidRequest(message) => CliError::Usage(message),
        other => CliError::Runner(other),
    })?;
    if crate::node::is_node_run(cli) {
        return crate::node::run(cli, progress);
    }
    measure_gpu(cli, progress).map(|(code, _)| code)
}

/// Measures the one GPU `cli` names; returns the exit code and the result.
pub fn measure_gpu(cli: &MeasureArgs, progress: &mut Reporter) -> Result<(u8, Topology), CliError> {
    let options = options(cli)?;
    if !(cli.wait.is_finite() && cli.wait >= 0.0) {
        return Err(CliError::Usage(format!(
            "--wait {} is not a number of seconds",
            cli.wait
        )));
    }
    let outputs = preflight(cli)?;
    let mut record = conditions::base_record();
    let started = Instant::now();
    let (info, measured) = match &cli.simulate {
        Some(spec) => simulated(cli, spec, options, &mut record, progress)?,
        None => real_gpu(cli, options, &mut record, progress)?,
    };
    let total = started.elapsed();
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
    if cli.quiet {
        // No table: what it would show as failed or doubtful goes to stderr.
        quiet_findings(&topo);
    } else {
        for disturbance in disturbances {
            log::error!("disturbed while measuring: {disturbance}");
        }
    }
    // Files first: a closed terminal or pipe must not lose them.
    let mut failed_outputs = write_files(cli, &outputs, &topo, &measured);
    let mut stdout = Stdout::default();
    let json_to_stdout = cli.output.iter().any(|p| is_stdout(p));
    // With `-o -` standard output carries the JSON alone; the table and timings go to
    // standard error (not with `--progress json`: there every line is an event).
    let mut human = |text: &str| {
        if !json_to_stdout {
            stdout.print(text);
        } else if !progress::json_mode() {
            eprint!("{text}");
        }
    };
    if !cli.quiet {
        human(&topology::render::table(&topo));
    }
    if cli.timings {
        human(&timings_text(&measured, total));
    }
    if json_to_stdout {
        match output::text(&topo, Format::Json, None) {
            Ok(text) => stdout.print(&text),
            Err(reason) => {
                progress::say(
                    Level::Error,
                    format!("cannot write the JSON to standard output: {reason}"),
                );
                failed_outputs += 1;
            }
        }
    }
    if let Some(e) = stdout.error() {
        progress::say(
            Level::Error,
            format!("cannot write the table to standard output: {e}"),
        );
        failed_outputs += 1;
    }
    progress.failed = measured
        .elements
        .iter()
        .flat_map(|(element, r)| r.failures.iter().map(move |f| format!("{element}: {f}")))
        .collect();
    let failed = !progress.failed.is_empty();
    let unexplained = measured.self_check();
    if cli.strict {
        for finding in &unexplained {
            progress::say(Level::SelfCheck, finding);
        }
    }
    let code = if failed_outputs > 0 {
        6
    } else if disturbed {
        9
    } else if cli.strict && !unexplained.is_empty() {
        10
    } else if failed {
        1
    } else {
        0
    };
    Ok((code, topo))
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

/// The simulated GPU: the profile's UUID (if any) is locked, its co-tenant checked as a
/// real GPU's processes are.
fn simulated(
    cli: &MeasureArgs,
    spec: &str,
    options: MeasureOptions,
    record: &mut RunRecord,
    progress: &mut Reporter,
) -> Result<(pchase_runner::DeviceInfo, Measurements), CliError> {
    let specs = crate::node::simulated_specs(spec);
    let index = cli.device.single().unwrap_or(0);
    let spec = specs
        .get(index as usize)
        .ok_or(RunnerError::BadDeviceIndex {
            index,
            count: specs.len() as u32,
        })?;
    let profile = crate::node::load_profile(spec)?;
    record.simulated_profile = Some(guard::profile_label(spec, &profile.name));
    record.gpu_uuid = profile.uuid.clone();
    let mut backend = SimBackend::new(profile)?;
    let _lock = guard::lock_gpu(cli, record.gpu_uuid.clone().as_deref(), record)?;
    let before = guard::check_busy(cli, Some(&mut guard::SimState(&backend)), record)?;
    let info = backend.device().clone();
    let measured = guard::watched(&mut backend, options, progress, record)?;
    log::info!("the simulated GPU ran {} launches", backend.launches());
    guard::after(
        Some(&mut guard::SimState(&backend)),
        before.as_ref(),
        record,
    );
    Ok((info, measured))
}

#[cfg(feature = "cuda")]
fn real_gpu(
    cli: &MeasureArgs,
    options: MeasureOptions,
    record: &mut RunRecord,
    progress: &mut Reporter,
) -> Result<(pchase_runner::DeviceInfo, Measurements), CliError> {
    let ordinal = cli.device.single().ok_or_else(|| {
        CliError::Usage("one GPU at a time here: several are measured by node::run".into())
    })?;
    let started = Instant::now();
    let phase = |name: &str| {
        log::debug!(
            "host phase: {name} done at {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    };
    let identity = pchase_runner::cuda::identify(ordinal)?;
    phase("driver and device identity");
    record.gpu_uuid = identity.uuid.clone();
    record.pci_bus_id = identity.pci_bus_id.clone();
    record.cuda_driver_version = identity.cuda_driver_version;
    let key = identity.uuid.as_deref().or(identity.pci_bus_id.as_deref());
    let _lock = guard::lock_gpu(cli, key, record)?;
    let mut nvml = match crate::nvml::Nvml::open(
        identity.uuid.as_deref(),
        identity.pci_bus_id.as_deref(),
    ) {
        Ok(nvml) => Some(nvml),
        Err(reason) => {
            log::warn!(
                "NVML unavailable ({reason}): other processes on the GPU and its clocks are not checked"
            );
            record.state_unavailable = Some(format!("NVML unavailable: {reason}"));
            None
        }
    };
    phase("lock and NVML");
    let before = guard::check_busy(cli, source(&mut nvml), record)?;
    phase("busy check");
    let mut backend = pchase_runner::cuda::CudaBackend::new(ordinal)?;
    phase("context and modules");
    let info = backend.device().clone();
    let measured = guard::watched(&mut backend, options, progress, record)?;
    phase("benchmarks and confirmations");
    backend.free_memory();
    phase("device memory freed");
    drop(backend);
    phase("context released");
    guard::after(source(&mut nvml), before.as_ref(), record);
    phase("state after");
    Ok((info, measured))
}

/// NVML as a state source, if it loaded.
#[cfg(feature = "cuda")]
fn source(nvml: &mut Option<crate::nvml::Nvml>) -> Option<&mut dyn conditions::StateSource> {
    nvml.as_mut().map(|n| n as &mut dyn conditions::StateSource)
}

#[cfg(not(feature = "cuda"))]
fn real_gpu(
    _cli: &MeasureArgs,
    _options: MeasureOptions,
    _record: &mut RunRecord,
    _progress: &mut Reporter,
) -> Result<(pchase_runner::DeviceInfo, Measurements), CliError> {
    Err(CliError::Runner(RunnerError::NoDriver(
        "memtopo was built without the `cuda` feature; use --simulate".into(),
    )))
}
