//! Several GPUs of one node: `memtopo --device all` (or a list, or a simulated node).
//!
//! Each GPU is measured as a single run would measure it ([`crate::run::measure_gpu`]:
//! its own lock, busy check, sentinels and files), one after another: two GPUs measured
//! at once may disturb each other (shared PCIe root, host memory, CPU for the
//! change-point analysis, the power budget of the board), and how much is not measured,
//! so there is no concurrent mode (docs/fleet.md). A GPU that
//! fails is recorded with its exit code and error and the next one is measured. After
//! the GPUs, the links between the measured ones (peer access, a chase into the other's
//! memory, a peer copy; [`peers`]), then the node summary: a [`topology::fleet::Fleet`]
//! of one node, written by `--summary` and printed as a table.

mod peers;
mod select;

use topology::fleet::{Fleet, FleetKind, GpuEntry, GpuFailure, Node, SpreadOptions};

use crate::{
    error::{CliError, Exit},
    output::{self, Stdout},
    plan::{
        self, Devices, Gpu, GpuJob, GpuOutputs, NodeFile, NodeOutputs, NodePlan, OutputFile,
        Settings, SummaryFile, SummaryFormat,
    },
    progress::{self, Level, Reporter},
    simulate::{load_profile, simulated_uuid},
};

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

/// The node's files with `{node}` expanded, checked before anything is measured.
struct NodeFiles {
    /// Per-GPU templates (`{uuid}`, `{index}` still in them).
    per_gpu: Vec<OutputFile>,
    /// Summary files.
    summaries: Vec<SummaryFile>,
}

impl NodeFiles {
    fn new(outputs: &NodeOutputs, node: &str) -> Result<NodeFiles, CliError> {
        let mut per_gpu = Vec::new();
        let mut summaries: Vec<SummaryFile> = outputs
            .summaries
            .iter()
            .map(|s| SummaryFile {
                path: select::expand(&s.path, "", 0, node),
                format: s.format,
            })
            .collect();
        for file in &outputs.files {
            match file {
                NodeFile::Folder(dir) => {
                    // `{node}` is known now (a folder per node of a shared directory).
                    let dir = select::expand_node(dir, node);
                    std::fs::create_dir_all(&dir).map_err(|e| CliError::Output {
                        path: dir.display().to_string(),
                        reason: e.to_string(),
                    })?;
                    per_gpu.push(OutputFile {
                        path: dir.join("{uuid}.json"),
                        format: output::Format::Json,
                    });
                    if outputs.summaries.is_empty() {
                        summaries.push(SummaryFile {
                            path: dir.join(format!("node-{node}.json")),
                            format: SummaryFormat::Json,
                        });
                    }
                }
                NodeFile::Template(template) => per_gpu.push(OutputFile {
                    path: select::expand_node(&template.path, node),
                    format: template.format,
                }),
            }
        }
        for file in &per_gpu {
            let probe = select::expand(&file.path, "GPU-preflight", 0, node);
            if let Some(dir) = probe.parent().filter(|d| !d.as_os_str().is_empty()) {
                // `{node}` in a folder name: the folder is this node's to make.
                let _ = std::fs::create_dir_all(dir);
            }
            output::check_output(&probe)?;
        }
        for summary in &summaries {
            // The summary is written after every GPU: make sure it can be, first.
            output::check_output(&summary.path)?;
        }
        Ok(NodeFiles { per_gpu, summaries })
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

/// One GPU's measurement: its device (or simulated profile with its UUID) and its files.
fn gpu_job(plan: &NodePlan, files: &NodeFiles, gpu: &Measured, node: &str) -> GpuJob {
    GpuJob {
        gpu: match &gpu.spec {
            Some(spec) => Gpu::Simulated(spec.clone()),
            None => Gpu::Real(gpu.index),
        },
        outputs: GpuOutputs {
            files: files
                .per_gpu
                .iter()
                .map(|f| OutputFile {
                    path: select::expand(&f.path, &gpu.uuid, gpu.index, node),
                    format: f.format,
                })
                .collect(),
            stdout_json: false,
        },
        keep_raw: plan.keep_raw.as_ref().map(|dir| {
            if plan::is_per_gpu(dir) {
                select::expand(dir, &gpu.uuid, gpu.index, node)
            } else {
                dir.join(&gpu.uuid)
            }
        }),
    }
}

/// The GPU's JSON file as the summary names it: relative to the summary's folder where
/// it lies below it.
fn file_for_summary(outputs: &[OutputFile], summaries: &[SummaryFile]) -> Option<String> {
    let json = outputs
        .iter()
        .find(|f| f.format == output::Format::Json)
        .map(|f| &f.path)?;
    let base = summaries.first().and_then(|s| s.path.parent());
    let shown = base
        .and_then(|b| json.strip_prefix(b).ok())
        .unwrap_or(json.as_path());
    Some(shown.display().to_string())
}

/// Measures the GPUs `plan` names, one after another, then their links; writes the
/// summary. The exit code: 0 when every GPU's run gave 0; when a GPU could not be
/// measured while others were, 12; when none was measured, the first GPU's code; else the
/// first of 6, 9, 10, 1 among the GPUs' codes (as a single run orders them), and 1 when a
/// GPU is flagged degraded against its peers. A summary that cannot be written is 6.
pub fn run(
    settings: &Settings,
    plan: &NodePlan,
    progress: &mut Reporter,
) -> Result<Exit, CliError> {
    let node = select::node_name();
    let specs = match &plan.devices {
        Devices::Simulated { specs, .. } => Some(specs),
        Devices::Real(_) => None,
    };
    let count = match specs {
        Some(specs) => specs.len() as u32,
        None => device_count()?,
    };
    let indices = plan.devices.resolve(count)?;
    // A bad profile is the command line's fault, not one GPU's: refused before measuring.
    for spec in specs.into_iter().flatten() {
        load_profile(spec)?;
    }
    let files = NodeFiles::new(&plan.outputs, &node)?;
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
        let identified = match specs {
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
        let job = gpu_job(plan, &files, &gpu, &node);
        progress.failed.clear();
        match crate::run::measure_gpu(settings, &job, progress) {
            Ok((code, topo)) => {
                let mut entry =
                    GpuEntry::from_topology(&topo, Some(gpu.uuid.clone()), Some(node.clone()));
                entry.device_index = Some(index);
                entry.exit_code = Some(code.code());
                entry.file = file_for_summary(&job.outputs.files, &files.summaries);
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
                serde_json::json!({"device": index, "exit_code": codes.last().map(|c: &Exit| c.code())}),
            );
        }
    }
    progress.failed = failed_benchmarks;
    let mut entry = Node {
        name: node.clone(),
        host: crate::conditions::base_record().host.filter(|h| *h != node),
        devices_requested: Some(plan.devices.selection().to_string()),
        device_count: Some(count),
        schedule: Some("sequential".into()),
        links: Vec::new(),
        notes: Vec::new(),
    };
    if !plan.peers {
        entry.notes.push("links not measured (--no-peers)".into());
    } else if measured.len() >= 2 {
        peers::measure(&settings.guard, &measured, &mut entry);
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
    let written = write_summaries(&summary, &files.summaries);
    if !settings.quiet {
        let mut stdout = Stdout::default();
        stdout.print(&format!("\n{}", topology::fleet::table(&summary)));
    }
    for flag in summary.degraded() {
        progress::say(
            Level::Warning,
            format!("{}: degraded: {}: {}", flag.label(), flag.path, flag.reason),
        );
    }
    let degraded = summary.degraded().next().is_some();
    let none_measured = summary.gpus.is_empty();
    Ok(if !written {
        Exit::Output
    } else if !summary.failures.is_empty() && !none_measured {
        Exit::SomeGpus
    } else if none_measured {
        codes.first().copied().unwrap_or(Exit::NoGpu)
    } else {
        [
            Exit::Output,
            Exit::Disturbed,
            Exit::SelfCheck,
            Exit::Findings,
        ]
        .into_iter()
        .find(|c| codes.contains(c))
        .unwrap_or(if degraded {
            Exit::Findings
        } else {
            Exit::Success
        })
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
    codes: &mut Vec<Exit>,
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
    codes.push(error.exit());
    failures.push(GpuFailure {
        node: Some(node.to_owned()),
        device_index: Some(index),
        uuid,
        exit_code: error.exit().code(),
        error: error.to_string(),
    });
}

/// Writes the summary in each format; false when one failed (each failure reported).
fn write_summaries(summary: &Fleet, files: &[SummaryFile]) -> bool {
    let mut ok = true;
    for file in files {
        let path = &file.path;
        let text = match file.format {
            SummaryFormat::Markdown => Ok(topology::fleet::markdown(summary)),
            SummaryFormat::Html => Ok(topology::fleet::html(summary)),
            SummaryFormat::Json => summary.to_json_string().map_err(|e| e.to_string()),
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
