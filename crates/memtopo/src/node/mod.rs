//! Several GPUs of one node: `memtopo --device all` (or a list, or a simulated node).
//!
//! Each GPU is measured as a single run would measure it ([`crate::run::measure_gpu`]:
//! its own lock, busy check, sentinels and files), one after another: whether two GPUs
//! measured at once disturb each other (shared PCIe root, host memory, CPU for the
//! change-point analysis, the power budget of the board) has not been shown on a
//! multi-GPU machine yet, so there is no concurrent mode (docs/fleet.md). A GPU that
//! fails is recorded with its exit code and error and the next one is measured. After
//! the GPUs, the links between the measured ones (peer access, a chase into the other's
//! memory, a peer copy; [`peers`]), then the node summary: a [`topology::fleet::Fleet`]
//! of one node, written by `--summary` and printed as a table.

mod peers;
mod select;

use std::path::{Path, PathBuf};

use topology::fleet::{Fleet, FleetKind, GpuEntry, GpuFailure, Node, SpreadOptions};

pub use select::{load_profile, parse_devices, simulated_specs, simulated_uuid, DeviceSelection};

use crate::{
    cli::MeasureArgs,
    output::{self, Stdout},
    progress::{self, Level, Reporter},
    run::CliError,
};

/// Whether `cli` is a node run: several GPUs (a list or `all`), or one GPU whose files are
/// named per GPU (`{uuid}`, `{index}`, `-o DIR/`) or with a node summary (`--summary`).
/// `--device N` with plain file names is the single run it always was.
pub fn is_node_run(cli: &MeasureArgs) -> bool {
    cli.device.single().is_none()
        || !cli.summary.is_empty()
        || cli
            .output
            .iter()
            .any(|p| select::is_per_gpu(p) || select::per_gpu_in(p).is_some())
}

/// One GPU that was measured: what the links and the summary need.
#[derive(Debug, Clone)]
pub(crate) struct Measured {
    /// The CUDA device index (the position in the simulated node).
    pub index: u32,
    /// Its UUID (or the name it was locked and filed under).
    pub uuid: String,
    /// The simulated GPU's profile spec (with its `uuid=`).
    pub spec: Option<String>,
    /// The PCI bus id.
    pub pci_bus_id: Option<String>,
}

/// The summary formats `--summary` may name.
fn summary_format(path: &Path) -> Option<&'static str> {
    let name = path.to_string_lossy().to_ascii_lowercase();
    ["json", "md", "html"]
        .into_iter()
        .find(|ext| name.ends_with(&format!(".{ext}")))
}

/// Where each GPU's files and the summary go, checked before anything is measured.
struct Plan {
    /// Per-GPU output templates.
    per_gpu: Vec<PathBuf>,
    /// Summary files (`{node}` expanded).
    summaries: Vec<PathBuf>,
}

impl Plan {
    fn new(cli: &MeasureArgs, node: &str) -> Result<Plan, CliError> {
        let mut per_gpu = Vec::new();
        let mut summaries: Vec<PathBuf> = cli
            .summary
            .iter()
            .map(|p| select::expand(p, "", 0, node))
            .collect();
        for path in &cli.output {
            // `{node}` is known now (a folder per node of a shared directory).
            let path = &select::expand_node(path, node);
            if path.as_os_str() == "-" {
                return Err(CliError::Usage(
                    "`-o -` writes one document; with several GPUs use -o DIR/ or a path \
                     with {uuid} (docs/fleet.md)"
                        .into(),
                ));
            }
            if let Some(template) = select::per_gpu_in(path) {
                std::fs::create_dir_all(path).map_err(|e| CliError::Output {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                per_gpu.push(template);
                if cli.summary.is_empty() {
                    summaries.push(path.join(format!("node-{node}.json")));
                }
            } else if select::is_per_gpu(path) {
                per_gpu.push(path.clone());
            } else {
                return Err(CliError::Usage(format!(
                    "-o {}: with several GPUs every output needs {{uuid}} or {{index}} in its \
                     name (one file per GPU), or is a folder (-o DIR/)",
                    path.display()
                )));
            }
        }
        for path in &per_gpu {
            let probe = select::expand(path, "GPU-preflight", 0, node);
            if let Some(dir) = probe.parent().filter(|d| !d.as_os_str().is_empty()) {
                // `{node}` in a folder name: the folder is this node's to make.
                let _ = std::fs::create_dir_all(dir);
            }
            output::check_output(&probe).map_err(refusal)?;
        }
        for path in &summaries {
            if summary_format(path).is_none() {
                return Err(CliError::Usage(format!(
                    "--summary {}: use .json, .md or .html",
                    path.display()
                )));
            }
            // The summary is written after every GPU: make sure it can be, first.
            output::check_output(path).map_err(refusal)?;
        }
        Ok(Plan { per_gpu, summaries })
    }
}

fn refusal(refusal: output::Refusal) -> CliError {
    match refusal {
        output::Refusal::UnknownFormat(message) => CliError::Usage(message),
        output::Refusal::Unwritable { path, reason } => CliError::Output { path, reason },
    }
}

/// The CUDA devices of this node.
#[cfg(feature = "cuda")]
fn device_count() -> Result<u32, CliError> {
    Ok(pchase_runner::cuda::CudaBackend::device_count()?)
}

#[cfg(not(feature = "cuda"))]
fn device_count() -> Result<u32, CliError> {
    Err(CliError::Runner(pchase_runner::RunnerError::NoDriver(
        "memtopo was built without the `cuda` feature; use --simulate".into(),
    )))
}

/// The UUID and bus id of a real GPU, without a context.
#[cfg(feature = "cuda")]
fn identify(index: u32) -> Result<(String, Option<String>), CliError> {
    let identity = pchase_runner::cuda::identify(index)?;
    let uuid = identity
        .uuid
        .clone()
        .or_else(|| identity.pci_bus_id.clone())
        .unwrap_or_else(|| format!("device-{index}"));
    Ok((uuid, identity.pci_bus_id))
}

#[cfg(not(feature = "cuda"))]
fn identify(_index: u32) -> Result<(String, Option<String>), CliError> {
    Err(CliError::Runner(pchase_runner::RunnerError::NoDriver(
        "memtopo was built without the `cuda` feature; use --simulate".into(),
    )))
}

/// The arguments of one GPU's run: its device (or simulated profile with its UUID) and
/// its files.
fn gpu_args(cli: &MeasureArgs, plan: &Plan, gpu: &Measured, node: &str) -> MeasureArgs {
    let mut args = cli.clone();
    args.device = DeviceSelection::One(if gpu.spec.is_some() { 0 } else { gpu.index });
    args.simulate = gpu.spec.clone();
    args.output = plan
        .per_gpu
        .iter()
        .map(|p| select::expand(p, &gpu.uuid, gpu.index, node))
        .collect();
    args.keep_raw = cli.keep_raw.as_ref().map(|dir| {
        if select::is_per_gpu(dir) {
            select::expand(dir, &gpu.uuid, gpu.index, node)
        } else {
            dir.join(&gpu.uuid)
        }
    });
    args.summary = Vec::new();
    args
}

/// The GPU's JSON file as the summary names it: relative to the summary's folder where
/// it lies below it.
fn file_for_summary(outputs: &[PathBuf], summaries: &[PathBuf]) -> Option<String> {
    let json = outputs.iter().find(|p| {
        p.to_string_lossy().ends_with(".json") && !p.to_string_lossy().ends_with(".mt4g.json")
    })?;
    let base = summaries.first().and_then(|s| s.parent());
    let shown = base
        .and_then(|b| json.strip_prefix(b).ok())
        .unwrap_or(json.as_path());
    Some(shown.display().to_string())
}

/// Measures the GPUs `cli` names, one after another, then their links; writes the
/// summary. The exit code: 0 when every GPU's run gave 0; when a GPU could not be
/// measured while others were, 12; when none was measured, the first GPU's code; else the
/// first of 6, 9, 10, 1 among the GPUs' codes (as a single run orders them). A summary
/// that cannot be written is 6.
pub fn run(cli: &MeasureArgs, progress: &mut Reporter) -> Result<u8, CliError> {
    let node = select::node_name();
    let specs = cli.simulate.as_deref().map(simulated_specs);
    let count = match &specs {
        Some(specs) => specs.len() as u32,
        None => device_count()?,
    };
    let indices = cli.device.resolve(count)?;
    // A bad profile is the command line's fault, not one GPU's: refused before measuring.
    for spec in specs.iter().flatten() {
        load_profile(spec)?;
    }
    let plan = Plan::new(cli, &node)?;
    let mut gpus: Vec<GpuEntry> = Vec::new();
    let mut failures = Vec::new();
    let mut measured = Vec::new();
    let mut failed_benchmarks = Vec::new();
    let mut codes = Vec::new();
    for &index in &indices {
        if progress::json_mode() {
            progress::event(
                "device_started",
                serde_json::json!({"device": index, "node": node}),
            );
        }
        let identified = match &specs {
            Some(specs) => simulated_gpu(&specs[index as usize], &node, index),
            None => identify(index).map(|(uuid, pci)| (uuid, None, pci)),
        };
        let gpu = match identified {
            Ok((uuid, spec, pci_bus_id)) => Measured {
                index,
                uuid,
                spec,
                pci_bus_id,
            },
            Err(e) => {
                fail(&mut failures, &mut codes, &node, index, None, &e);
                continue;
            }
        };
        let args = gpu_args(cli, &plan, &gpu, &node);
        progress.failed.clear();
        match crate::run::measure_gpu(&args, progress) {
            Ok((code, topo)) => {
                let mut entry =
                    GpuEntry::from_topology(&topo, Some(gpu.uuid.clone()), Some(node.clone()));
                entry.device_index = Some(index);
                entry.exit_code = Some(code);
                entry.file = file_for_summary(&args.output, &plan.summaries);
                gpus.push(entry);
                codes.push(code);
                failed_benchmarks
                    .extend(progress.failed.iter().map(|f| format!("GPU {index}: {f}")));
                measured.push(gpu);
            }
            Err(e) => fail(&mut failures, &mut codes, &node, index, Some(gpu.uuid), &e),
        }
        if progress::json_mode() {
            progress::event(
                "device_finished",
                serde_json::json!({"device": index, "exit_code": codes.last()}),
            );
        }
    }
    progress.failed = failed_benchmarks;
    let mut entry = Node {
        name: node.clone(),
        host: crate::conditions::base_record().host.filter(|h| *h != node),
        devices_requested: Some(cli.device.to_string()),
        device_count: Some(count),
        schedule: Some("sequential".into()),
        links: Vec::new(),
        notes: Vec::new(),
    };
    if cli.no_peers {
        entry.notes.push("links not measured (--no-peers)".into());
    } else if measured.len() >= 2 {
        peers::measure(cli, &measured, &mut entry);
    } else if indices.len() >= 2 {
        entry
            .notes
            .push("links not measured: fewer than two GPUs were measured".into());
    }
    let mut summary = Fleet::build(
        FleetKind::Node,
        gpus,
        failures,
        vec![entry],
        SpreadOptions::default(),
    );
    summary.created_utc = crate::conditions::base_record().date_utc;
    summary.tool_version = Some(env!("CARGO_PKG_VERSION").into());
    let written = write_summaries(&summary, &plan.summaries);
    if !cli.quiet {
        let mut stdout = Stdout::default();
        stdout.print(&format!("\n{}", topology::fleet::table(&summary)));
    }
    let none_measured = summary.gpus.is_empty();
    Ok(if !written {
        6
    } else if !summary.failures.is_empty() && !none_measured {
        12
    } else if none_measured {
        codes.first().copied().unwrap_or(3)
    } else {
        [6, 9, 10, 1]
            .into_iter()
            .find(|c| codes.contains(c))
            .unwrap_or(0)
    })
}

/// A simulated GPU's UUID (the profile's own, else one made from the node and index) and
/// the spec that carries it.
fn simulated_gpu(
    spec: &str,
    node: &str,
    index: u32,
) -> Result<(String, Option<String>, Option<String>), CliError> {
    let profile = load_profile(spec)?;
    Ok(match profile.uuid {
        Some(uuid) => (uuid, Some(spec.to_owned()), None),
        None => {
            let uuid = simulated_uuid(node, index, spec);
            let tagged = format!("{spec}:uuid={uuid}");
            (uuid, Some(tagged), None)
        }
    })
}

/// Records a GPU that was not measured.
fn fail(
    failures: &mut Vec<GpuFailure>,
    codes: &mut Vec<u8>,
    node: &str,
    index: u32,
    uuid: Option<String>,
    error: &CliError,
) {
    let who = match &uuid {
        Some(uuid) => format!("GPU {index} ({uuid})"),
        None => format!("GPU {index}"),
    };
    progress::say(Level::Error, format!("{who}: not measured: {error}"));
    codes.push(error.exit_code());
    failures.push(GpuFailure {
        node: Some(node.to_owned()),
        device_index: Some(index),
        uuid,
        exit_code: error.exit_code(),
        error: error.to_string(),
    });
}

/// Writes the summary in each format; false when one failed (each failure reported).
fn write_summaries(summary: &Fleet, paths: &[PathBuf]) -> bool {
    let mut ok = true;
    for path in paths {
        let text = match summary_format(path) {
            Some("md") => Ok(topology::fleet::markdown(summary)),
            Some("html") => Ok(topology::fleet::html(summary)),
            _ => summary.to_json_string().map_err(|e| e.to_string()),
        };
        let written =
            text.and_then(|t| output::write_file(path, t.as_bytes()).map_err(|e| e.to_string()));
        if let Err(reason) = written {
            progress::say(
                Level::Error,
                format!("cannot write {}: {reason}", path.display()),
            );
            ok = false;
        } else {
            log::info!("wrote {}", path.display());
        }
    }
    ok
}
