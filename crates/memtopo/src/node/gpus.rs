//! The GPUs of a node run, each measured on a thread of its own: all at once (the default),
//! or one after another (`--sequential`, or a node of one).
//!
//! Each thread measures its GPU exactly as a single run does ([`crate::run::measure`]):
//! its own lock, its own NVML session and busy check, its own CUDA backend (a context of
//! its own, current on that thread only) or simulator, its own sentinels, and it writes its
//! own files as soon as its GPU is done. Where the links are measured next, the thread
//! then hands its lock and its context (current on no thread any more) over to them
//! ([`crate::handover`]). What the threads share is thread-safe: the driver
//! library, loaded once (`cuda-shim`), and NVML, initialised once for the process
//! (`crate::nvml::load`; NVML is thread-safe); the lock files are one per UUID.
//! What a thread prints goes through [`crate::progress`], which names its GPU. Standard
//! output is the caller's: each GPU's table is handed back in device order, as soon as that
//! GPU and every one before it are done, so that the tables follow one another whole.
//!
//! A GPU whose thread stops on an error is a failure of that GPU alone; one whose thread
//! panics (a bug in memtopo) too, with exit code 7, so that the others' results stand.

use std::thread::{self, Scope, ScopedJoinHandle};

use topology::fleet::GpuFailure;

use super::{select, Measured, NodeFiles};
use crate::{
    error::{CliError, Exit},
    handover::{Handover, Slot},
    plan::{self, Gpu, GpuJob, GpuOutputs, NodePlan, OutputFile, Settings, SummaryFile},
    progress::{self, Level, Reporter},
    run::{self, GpuRun},
};

/// What the threads of a node run share.
pub(super) struct Shared<'a> {
    /// How each GPU is measured.
    pub settings: &'a Settings,
    /// The node run.
    pub plan: &'a NodePlan,
    /// The node's files.
    pub files: &'a NodeFiles,
    /// The node's name.
    pub node: &'a str,
    /// Where the GPUs hand their locks and contexts over to the links, if measured.
    pub handover: Option<&'a Handover>,
}

/// A GPU of the node: identified (its UUID known), or not, with why.
pub(super) type Identified = Result<Measured, (u32, CliError)>;

/// What became of one GPU.
pub(super) enum Outcome {
    /// Measured, its files written; its table not yet printed.
    Measured {
        /// The GPU.
        gpu: Measured,
        /// Its result and what standard output gets.
        run: Box<GpuRun>,
        /// Its JSON file as the node summary names it.
        file: Option<String>,
    },
    /// Not measured: the summary's entry and the exit code.
    Failed(GpuFailure, Exit),
}

/// One GPU done.
pub(super) struct Finished {
    /// What became of it.
    pub outcome: Outcome,
    /// Its progress (benchmarks run, benchmarks failed).
    pub reporter: Reporter,
}

/// Measures `gpus`, all at once where `concurrent` (each GPU's run record names the others),
/// else one after another; hands each GPU to `done` in the order of `gpus`, as soon as it
/// and every one before it are done (one after another: before the next one starts).
pub(super) fn measure(
    shared: &Shared<'_>,
    gpus: Vec<Identified>,
    concurrent: bool,
    progress: &Reporter,
    mut done: impl FnMut(Finished),
) {
    let uuids: Vec<String> = gpus
        .iter()
        .filter_map(|g| g.as_ref().ok().map(|g| g.uuid.clone()))
        .collect();
    let indices: Vec<u32> = gpus
        .iter()
        .map(|g| match g {
            Ok(gpu) => gpu.index,
            Err((index, _)) => *index,
        })
        .collect();
    let bar = concurrent.then(|| progress.node_bar(&indices)).flatten();
    thread::scope(|scope| {
        let mut running = Vec::new();
        for (slot, gpu) in gpus.into_iter().enumerate() {
            let reporter = progress.for_gpu(bar.as_ref(), slot);
            let others = match &gpu {
                Ok(gpu) if concurrent => {
                    uuids.iter().filter(|u| **u != gpu.uuid).cloned().collect()
                }
                _ => Vec::new(),
            };
            let started = start(scope, shared, gpu, others, reporter);
            if concurrent {
                running.push(started);
            } else {
                done(started.finish());
            }
        }
        for started in running {
            done(started.finish());
        }
    });
    if let Some(bar) = bar {
        bar.finish();
    }
}

/// A GPU being measured on its thread, or done already.
enum Started<'scope> {
    Thread(u32, String, ScopedJoinHandle<'scope, Finished>),
    Done(Box<Finished>),
}

impl Started<'_> {
    /// Waits for the GPU.
    fn finish(self) -> Finished {
        match self {
            Started::Done(finished) => *finished,
            Started::Thread(index, uuid, handle) => handle.join().unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                failed_here(
                    index,
                    Some(uuid),
                    &CliError::Internal(format!(
                        "memtopo stopped on an internal error ({what}); please report it"
                    )),
                )
            }),
        }
    }
}

/// A GPU that failed before or outside its thread: said and recorded on this thread, in
/// the GPU's name.
fn failed_here(index: u32, uuid: Option<String>, error: &CliError) -> Finished {
    progress::set_device(Some(index));
    let failure = fail(index, uuid, error);
    progress::set_device(None);
    Finished {
        outcome: Outcome::Failed(failure, error.exit()),
        reporter: Reporter::new(progress::ProgressMode::None, true),
    }
}

/// Starts measuring `gpu` on a thread of its own; a GPU that was not identified, or whose
/// thread cannot be started, is done at once (failed).
fn start<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    shared: &'scope Shared<'env>,
    gpu: Identified,
    concurrent_with: Vec<String>,
    reporter: Reporter,
) -> Started<'scope> {
    let gpu = match gpu {
        Ok(gpu) => gpu,
        Err((index, error)) => {
            progress::set_device(Some(index));
            if progress::json_mode() {
                progress::event(
                    "device_started",
                    serde_json::json!({"device": index, "node": shared.node, "uuid": null}),
                );
            }
            let failure = fail(index, None, &error);
            device_finished(index, error.exit());
            progress::set_device(None);
            return Started::Done(Box::new(Finished {
                outcome: Outcome::Failed(failure, error.exit()),
                reporter,
            }));
        }
    };
    let (index, uuid) = (gpu.index, gpu.uuid.clone());
    match thread::Builder::new()
        .name(format!("GPU {index}"))
        .spawn_scoped(scope, move || {
            measure_one(shared, gpu, concurrent_with, reporter)
        }) {
        Ok(handle) => Started::Thread(index, uuid, handle),
        Err(e) => Started::Done(Box::new(failed_here(
            index,
            Some(uuid),
            &CliError::Internal(format!("cannot start a thread to measure it: {e}")),
        ))),
    }
}

/// Measures one GPU on this thread, which is its own: the thread's messages and events
/// name it.
fn measure_one(
    shared: &Shared<'_>,
    gpu: Measured,
    concurrent_with: Vec<String>,
    mut reporter: Reporter,
) -> Finished {
    let index = gpu.index;
    progress::set_device(Some(index));
    if progress::json_mode() {
        progress::event(
            "device_started",
            serde_json::json!({"device": index, "node": shared.node, "uuid": gpu.uuid}),
        );
    }
    let job = gpu_job(shared, &gpu, concurrent_with);
    let slot = shared.handover.map(|handover| Slot { handover, index });
    let outcome = match run::measure(shared.settings, &job, &mut reporter, slot) {
        Ok(run) => Outcome::Measured {
            file: file_for_summary(&job.outputs.files, &shared.files.summaries),
            gpu,
            run: Box::new(run),
        },
        Err(e) => Outcome::Failed(fail(index, Some(gpu.uuid), &e), e.exit()),
    };
    device_finished(
        index,
        match &outcome {
            Outcome::Measured { run, .. } => run.code(),
            Outcome::Failed(_, code) => *code,
        },
    );
    progress::set_device(None);
    Finished { outcome, reporter }
}

/// The `device_finished` event of GPU `index`.
fn device_finished(index: u32, code: Exit) {
    if progress::json_mode() {
        progress::event(
            "device_finished",
            serde_json::json!({"device": index, "exit_code": code.code()}),
        );
    }
}

/// One GPU's measurement: its device (or simulated profile with its UUID), its files, and
/// the GPUs measured at the same time.
fn gpu_job(shared: &Shared<'_>, gpu: &Measured, concurrent_with: Vec<String>) -> GpuJob {
    let (plan, node) = (shared.plan, shared.node);
    GpuJob {
        gpu: match &gpu.spec {
            Some(spec) => Gpu::Simulated(spec.clone()),
            None => Gpu::Real(gpu.index),
        },
        outputs: GpuOutputs {
            files: shared
                .files
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
        concurrent_with,
    }
}

/// The GPU's JSON file as the summary names it: relative to the summary's folder where
/// it lies below it.
fn file_for_summary(outputs: &[OutputFile], summaries: &[SummaryFile]) -> Option<String> {
    let json = outputs
        .iter()
        .find(|f| f.format == crate::output::Format::Json)
        .map(|f| &f.path)?;
    let base = summaries.first().and_then(|s| s.path.parent());
    let shown = base
        .and_then(|b| json.strip_prefix(b).ok())
        .unwrap_or(json.as_path());
    Some(shown.display().to_string())
}

/// Says that GPU `index` was not measured and why (on stderr, naming it), and returns its
/// entry in the summary's failures (the node's name is the caller's to fill in).
pub(super) fn fail(index: u32, uuid: Option<String>, error: &CliError) -> GpuFailure {
    let who = match &uuid {
        Some(uuid) => format!("GPU {index} ({uuid})"),
        None => format!("GPU {index}"),
    };
    progress::say_named(Level::Error, format!("{who}: not measured: {error}"));
    GpuFailure {
        node: None,
        device_index: Some(index),
        uuid,
        exit_code: error.exit().code(),
        error: error.to_string(),
    }
}
