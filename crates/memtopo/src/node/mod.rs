//! Several GPUs of one node: `memtopo --device all` (or a list, or a simulated node).
//!
//! Each GPU is measured as a single run would measure it ([`crate::run::measure`]: its own
//! lock, busy check, sentinels and files), on a thread of its own ([`gpus`]): all at once
//! by default, one after another with `--sequential`. Measured at once, GPUs could disturb
//! each other through what they share (the host's CPU, the PCIe root, the board's power);
//! on the nodes measured so far they did not (docs/fleet.md, "Concurrent, and why"). A GPU
//! that fails is recorded with its exit code and error, and the others are measured. After
//! the GPUs, the links between the measured ones (peer access, a chase into the other's
//! memory, a peer copy; [`peers`]), with every GPU quiet, on the contexts and under the
//! locks the GPUs' runs handed over ([`crate::handover`]), then the node summary: a
//! [`topology::fleet::Fleet`] of one node, written by `--summary` and printed as a table.

mod gpus;
mod peers;
mod select;

use topology::fleet::{Fleet, FleetKind, GpuEntry, Node, SpreadOptions};

use crate::{
    error::{CliError, Exit},
    handover::Handover,
    output::{self, Stdout},
    plan::{
        Devices, NodeFile, NodeOutputs, NodePlan, OutputFile, Settings, SummaryFile, SummaryFormat,
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
    /// The PCI bus id (the links' NVLink count reads it).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
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

/// Measures the GPUs `plan` names (all at once, or one after another), then their links;
/// writes the summary. The exit code: 0 when every GPU's run gave 0; when a GPU could not
/// be measured while others were, 12; when none was measured, the first GPU's code; else the
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
    // Every GPU identified first (without a context): each GPU's run record names the
    // GPUs measured with it, and two GPUs of one UUID would write one file.
    let identified: Vec<gpus::Identified> = indices
        .iter()
        .map(|&index| {
            let identified = match specs {
                Some(specs) => simulated_gpu(&specs[index as usize], &node, index),
                None => identify(index).map(|(uuid, pci)| (uuid, None, pci)),
            };
            identified
                .map(|(uuid, spec, pci_bus_id)| Measured {
                    index,
                    uuid,
                    spec,
                    pci_bus_id,
                })
                .map_err(|e| (index, e))
        })
        .collect();
    refuse_shared_uuids(&identified)?;
    let concurrent = plan.concurrent && identified.iter().filter(|g| g.is_ok()).count() >= 2;
    let mut gpus: Vec<GpuEntry> = Vec::new();
    let mut failures = Vec::new();
    let mut measured = Vec::new();
    let mut failed_benchmarks = Vec::new();
    let mut codes = Vec::new();
    let mut reporters = Vec::new();
    // The links need two GPUs measured; their runs hand locks and contexts over to them.
    let handover = (plan.peers && identified.iter().filter(|g| g.is_ok()).count() >= 2)
        .then(Handover::default);
    let shared = gpus::Shared {
        settings,
        plan,
        files: &files,
        node: &node,
        handover: handover.as_ref(),
    };
    gpus::measure(&shared, identified, concurrent, progress, |finished| {
        match finished.outcome {
            gpus::Outcome::Measured { gpu, run, file } => {
                let code = run.print(&mut Stdout::default());
                let mut entry =
                    GpuEntry::from_topology(&run.topo, Some(gpu.uuid.clone()), Some(node.clone()));
                entry.device_index = Some(gpu.index);
                entry.exit_code = Some(code.code());
                entry.file = file;
                gpus.push(entry);
                codes.push(code);
                let index = gpu.index;
                failed_benchmarks.extend(
                    finished
                        .reporter
                        .failed
                        .iter()
                        .map(|f| format!("GPU {index}: {f}")),
                );
                measured.push(gpu);
            }
            gpus::Outcome::Failed(mut failure, code) => {
                failure.node = Some(node.clone());
                failures.push(failure);
                codes.push(code);
            }
        }
        reporters.push(finished.reporter);
    });
    for reporter in &reporters {
        progress.absorb(reporter);
    }
    progress.failed = failed_benchmarks;
    let mut entry = Node {
        name: node.clone(),
        host: crate::conditions::base_record().host.filter(|h| *h != node),
        devices_requested: Some(plan.devices.selection().to_string()),
        device_count: Some(count),
        schedule: Some(
            if concurrent {
                "concurrent"
            } else {
                "sequential"
            }
            .into(),
        ),
        links: Vec::new(),
        notes: Vec::new(),
    };
    // After every GPU's thread has ended: what their runs handed over.
    let kept = handover.map(|h| h.take()).unwrap_or_default();
    if plan.peers && measured.len() >= 2 {
        // The GPUs are quiet; the links hold every measured GPU's lock.
        peers::measure(&settings.guard, &measured, kept, &mut entry);
    } else {
        // No links: the locks and contexts go now.
        drop(kept);
        if !plan.peers {
            entry.notes.push("links not measured (--no-peers)".into());
        } else if indices.len() >= 2 {
            entry
                .notes
                .push("links not measured: fewer than two GPUs were measured".into());
        }
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

/// Refuses a node whose GPUs share a UUID (a simulated node whose profiles name one
/// twice): their files and locks would be the same.
fn refuse_shared_uuids(gpus: &[gpus::Identified]) -> Result<(), CliError> {
    let known: Vec<&Measured> = gpus.iter().filter_map(|g| g.as_ref().ok()).collect();
    for (i, a) in known.iter().enumerate() {
        if let Some(b) = known[i + 1..].iter().find(|b| b.uuid == a.uuid) {
            return Err(CliError::Usage(format!(
                "GPUs {} and {} have the same UUID {}: their results would overwrite each \
                 other; give each its own (`uuid=` in a simulated GPU's profile)",
                a.index, b.index, a.uuid
            )));
        }
    }
    Ok(())
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
