//! One run of memtopo: pick the backend, measure, print and write the results.

use std::{collections::BTreeSet, path::Path, process::ExitCode, time::Instant};

use indicatif::{ProgressBar, ProgressStyle};
use pchase_runner::{
    measure::{report, Element, MeasureOptions, Measurements, Session},
    sim::{SimBackend, SimProfile},
    Backend, RunnerError,
};
use thiserror::Error;
use topology::Topology;

use crate::{raw, Cli};

/// Why a run stopped, each with its exit code.
#[derive(Debug, Error)]
pub enum CliError {
    /// The command line asks for something impossible.
    #[error("{0}")]
    Usage(String),
    /// Anything the runner reports.
    #[error("{0}")]
    Runner(#[from] RunnerError),
    /// An output could not be written.
    #[error("cannot write {path}: {reason}")]
    Output {
        /// The file.
        path: String,
        /// Why.
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
            CliError::Runner(RunnerError::Profile(_)) => 5,
            CliError::Output { .. } => 6,
            CliError::Runner(_) => 7,
        }
    }
}

fn options(cli: &Cli) -> Result<MeasureOptions, CliError> {
    let mut options = MeasureOptions::default();
    if !cli.only.is_empty() {
        options.only = cli
            .only
            .iter()
            .map(|s| s.trim().parse::<Element>())
            .collect::<Result<BTreeSet<_>, _>>()
            .map_err(|e| CliError::Usage(e.to_string()))?;
    }
    if !(64..=8192).contains(&cli.samples) {
        return Err(CliError::Usage(format!(
            "--samples {} is outside 64..=8192",
            cli.samples
        )));
    }
    options.samples = cli.samples;
    Ok(options)
}

fn load_profile(spec: &str) -> Result<SimProfile, CliError> {
    let path = Path::new(spec);
    let profile = if path.exists() {
        SimProfile::load(path)?
    } else {
        SimProfile::bundled(spec)?
    };
    Ok(profile)
}

/// Runs the session on `backend` with a progress bar.
fn measure<B: Backend>(
    backend: &mut B,
    options: MeasureOptions,
    quiet: bool,
) -> Result<Measurements, CliError> {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
            .expect("static template")
            .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    let progress_bar = bar.clone();
    let result = Session::new(backend, options)
        .with_progress(move |what| progress_bar.set_message(what.to_string()))
        .run();
    bar.finish_and_clear();
    Ok(result?)
}

fn write_output(topo: &Topology, path: &Path) -> Result<(), CliError> {
    let name = path.to_string_lossy().to_string();
    let fail = |reason: String| CliError::Output {
        path: name.clone(),
        reason,
    };
    let text = if name.ends_with(".mt4g.json") {
        topology::mt4g::export_string(topo)
    } else {
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => topo.to_json_string().map_err(|e| fail(e.to_string()))?,
            Some("toml") => topo.to_toml_string().map_err(|e| fail(e.to_string()))?,
            Some("md") => topology::render::markdown(topo),
            Some("svg") => topology::render::svg(topo),
            _ => {
                return Err(CliError::Usage(format!(
                    "{name}: unknown output format; use .json, .toml, .md, .svg or .mt4g.json"
                )))
            }
        }
    };
    std::fs::write(path, text).map_err(|e| fail(e.to_string()))
}

fn print_timings(measured: &Measurements, total: std::time::Duration) {
    println!();
    println!(
        "{:<36} {:>10} {:>10} {:>12}",
        "benchmark", "wall ms", "GPU ms", "analysis ms"
    );
    for t in &measured.timings {
        println!(
            "{:<36} {:>10.1} {:>10.1} {:>12.2}",
            t.benchmark,
            t.wall.as_secs_f64() * 1e3,
            t.gpu.as_secs_f64() * 1e3,
            t.analysis.as_secs_f64() * 1e3
        );
    }
    let gpu: std::time::Duration = measured.timings.iter().map(|t| t.gpu).sum();
    let analysis: std::time::Duration = measured.timings.iter().map(|t| t.analysis).sum();
    println!(
        "{:<36} {:>10.1} {:>10.1} {:>12.2}",
        "total (including context creation)",
        total.as_secs_f64() * 1e3,
        gpu.as_secs_f64() * 1e3,
        analysis.as_secs_f64() * 1e3
    );
    println!(
        "change-point analysis: {:.2} % of the wall time",
        100.0 * analysis.as_secs_f64() / total.as_secs_f64().max(f64::MIN_POSITIVE)
    );
}

/// Runs memtopo as `cli` asks.
pub fn run(cli: &Cli) -> Result<ExitCode, CliError> {
    let options = options(cli)?;
    for path in &cli.output {
        // Refuse unknown formats before spending minutes measuring.
        let name = path.to_string_lossy();
        let known = name.ends_with(".mt4g.json")
            || matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "toml" | "md" | "svg")
            );
        if !known {
            return Err(CliError::Usage(format!(
                "{name}: unknown output format; use .json, .toml, .md, .svg or .mt4g.json"
            )));
        }
    }
    let started = Instant::now();
    let (info, measured) = match &cli.simulate {
        Some(spec) => {
            let mut backend = SimBackend::new(load_profile(spec)?)?;
            let info = backend.device().clone();
            (info, measure(&mut backend, options, cli.quiet)?)
        }
        None => real_gpu(cli, options)?,
    };
    let total = started.elapsed();
    let topo = report::to_topology(&info, &measured, env!("CARGO_PKG_VERSION"));
    if !cli.quiet {
        print!("{}", topology::render::table(&topo));
    }
    if cli.timings {
        print_timings(&measured, total);
    }
    for path in &cli.output {
        write_output(&topo, path)?;
        log::info!("wrote {}", path.display());
    }
    if let Some(dir) = &cli.keep_raw {
        raw::write_curves(dir, &measured.curves).map_err(|e| CliError::Output {
            path: dir.display().to_string(),
            reason: e,
        })?;
        let output = |e: String| CliError::Output {
            path: dir.display().to_string(),
            reason: e,
        };
        if let Some(Ok(line)) = measured.l2.as_ref().map(|l2| &l2.line) {
            raw::write_l2_line(dir, line).map_err(output)?;
        }
        if let Some(l2) = measured.l2.as_ref() {
            raw::write_l2_samples(dir, l2).map_err(output)?;
        }
    }
    let failed = measured
        .elements
        .iter()
        .any(|(_, r)| !r.failures.is_empty());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(feature = "cuda")]
fn real_gpu(
    cli: &Cli,
    options: MeasureOptions,
) -> Result<(pchase_runner::DeviceInfo, Measurements), CliError> {
    let mut backend = pchase_runner::cuda::CudaBackend::new(cli.device)?;
    let info = backend.device().clone();
    Ok((info, measure(&mut backend, options, cli.quiet)?))
}

#[cfg(not(feature = "cuda"))]
fn real_gpu(
    _cli: &Cli,
    _options: MeasureOptions,
) -> Result<(pchase_runner::DeviceInfo, Measurements), CliError> {
    Err(CliError::Runner(RunnerError::NoDriver(
        "memtopo was built without the `cuda` feature; use --simulate".into(),
    )))
}
