//! The run plan: what a measurement does, checked and typed, made once from the command
//! line (`cli`'s lowering) and read by everything below it (`run`, `node`, `guard`).
//! Nothing here knows the command-line parser.

use std::{
    fmt,
    path::{Path, PathBuf},
    time::Duration,
};

use pchase_runner::{measure::MeasureOptions, RunnerError};

use crate::{error::CliError, output::Format};

/// One measurement: of one GPU, or of several GPUs of a node.
#[derive(Debug, Clone)]
pub struct MeasurePlan {
    /// How each GPU is measured and what is shown.
    pub settings: Settings,
    /// What is measured, and where the results go.
    pub target: Target,
}

/// What a measurement measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One GPU, its files named as given.
    Gpu(GpuJob),
    /// Several GPUs, or one with per-GPU file names or a node summary.
    Node(NodePlan),
}

/// The GPUs of a node run and where their results go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Which GPUs.
    pub devices: Devices,
    /// Each GPU's files and the summary.
    pub outputs: NodeOutputs,
    /// `--keep-raw DIR`: a folder per GPU below it, or a template.
    pub keep_raw: Option<PathBuf>,
    /// Measure the links between the GPUs.
    pub peers: bool,
    /// Measure the GPUs all at once, each on a thread of its own (not `--sequential`).
    pub concurrent: bool,
}

/// How each GPU is measured, and what is shown of it.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The benchmarks and their sample counts.
    pub options: MeasureOptions,
    /// The lock and the busy check.
    pub guard: GuardPolicy,
    /// No table; findings on standard error instead.
    pub quiet: bool,
    /// Print the time of each benchmark.
    pub timings: bool,
    /// Self-check findings are an error (exit 10), not warnings.
    pub strict: bool,
}

/// How a busy GPU and another memtopo on it are handled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuardPolicy {
    /// Measure although other work is on the GPU (the result is marked).
    pub allow_busy: bool,
    /// How long to wait for another memtopo's lock on the GPU.
    pub wait: Duration,
}

/// The GPUs a run measures: real ones, or simulated ones from profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// CUDA devices.
    Real(DeviceSelection),
    /// A simulated node: one profile spec per GPU (`h100`, `h100:memory=+25%`, a file).
    Simulated {
        /// The node's GPUs, in device order.
        specs: Vec<String>,
        /// Which of them.
        selection: DeviceSelection,
    },
}

impl Devices {
    /// Which devices `--device` names.
    pub fn selection(&self) -> &DeviceSelection {
        match self {
            Devices::Real(selection) | Devices::Simulated { selection, .. } => selection,
        }
    }

    /// The indices on a node of `count` devices; an index past the last is an error
    /// that speaks of the simulated node where the GPUs are simulated.
    pub fn resolve(&self, count: u32) -> Result<Vec<u32>, CliError> {
        self.selection()
            .resolve(count)
            .map_err(|error| match (self, error) {
                (Devices::Simulated { .. }, RunnerError::BadDeviceIndex { index, count }) => {
                    CliError::NoSimulatedDevice { index, count }
                }
                (_, error) => error.into(),
            })
    }
}

/// One GPU to measure: a CUDA device or a simulated GPU's profile spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gpu {
    /// The CUDA device of this index.
    Real(u32),
    /// The simulated GPU of this profile spec.
    Simulated(String),
}

/// The GPUs `--device` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSelection {
    /// One index (the default, 0).
    One(u32),
    /// Several indices, in the order given, without repeats.
    List(Vec<u32>),
    /// Every device.
    All,
}

impl DeviceSelection {
    /// The single index, for a run of one GPU.
    pub fn single(&self) -> Option<u32> {
        match self {
            DeviceSelection::One(i) => Some(*i),
            _ => None,
        }
    }

    /// The indices on a node of `count` devices; an index past the last is an error.
    pub fn resolve(&self, count: u32) -> Result<Vec<u32>, RunnerError> {
        let list = match self {
            DeviceSelection::One(i) => vec![*i],
            DeviceSelection::List(list) => list.clone(),
            DeviceSelection::All => (0..count).collect(),
        };
        match list.iter().find(|&&i| i >= count) {
            Some(&index) => Err(RunnerError::BadDeviceIndex { index, count }),
            None if list.is_empty() => Err(RunnerError::NoDevice),
            None => Ok(list),
        }
    }
}

impl fmt::Display for DeviceSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelection::One(i) => write!(f, "{i}"),
            DeviceSelection::List(list) => {
                let texts: Vec<String> = list.iter().map(u32::to_string).collect();
                f.write_str(&texts.join(","))
            }
            DeviceSelection::All => f.write_str("all"),
        }
    }
}

/// The files of one GPU's result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuOutputs {
    /// The files, each with the format its extension names.
    pub files: Vec<OutputFile>,
    /// `-o -`: the JSON document on standard output.
    pub stdout_json: bool,
}

/// One output file and its format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile {
    /// The path.
    pub path: PathBuf,
    /// The format its extension names.
    pub format: Format,
}

/// A node's outputs, before the node's and the GPUs' names are known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeOutputs {
    /// Each GPU's files, in the order given.
    pub files: Vec<NodeFile>,
    /// `--summary` files (`{node}` still in them), each with its format.
    pub summaries: Vec<SummaryFile>,
}

/// Where a node's GPUs' files go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeFile {
    /// A template with `{uuid}` or `{index}` (and maybe `{node}`), with its format.
    Template(OutputFile),
    /// A folder (`-o DIR/`): `DIR/{uuid}.json` per GPU and, without `--summary`,
    /// `DIR/node-{node}.json`.
    Folder(PathBuf),
}

/// One GPU's measurement within a plan: the GPU and where its result goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuJob {
    /// The GPU.
    pub gpu: Gpu,
    /// Its files.
    pub outputs: GpuOutputs,
    /// Its raw curves' folder.
    pub keep_raw: Option<PathBuf>,
    /// The other GPUs (UUIDs) measured at the same time, for the run record.
    pub concurrent_with: Vec<String>,
}

/// A node summary's file and format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryFile {
    /// The path.
    pub path: PathBuf,
    /// Its format.
    pub format: SummaryFormat,
}

/// The formats of a node summary or a fleet report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryFormat {
    /// The fleet document.
    Json,
    /// The Markdown report.
    Markdown,
    /// The HTML report.
    Html,
}

impl SummaryFormat {
    /// The format `path` names by its extension.
    pub fn of(path: &Path) -> Option<SummaryFormat> {
        let name = path.to_string_lossy().to_ascii_lowercase();
        [
            (".json", SummaryFormat::Json),
            (".md", SummaryFormat::Markdown),
            (".html", SummaryFormat::Html),
        ]
        .into_iter()
        .find(|(ext, _)| name.ends_with(ext))
        .map(|(_, format)| format)
    }
}

/// Whether `path` names one file per GPU (`{uuid}` or `{index}` in it).
pub fn is_per_gpu(path: &Path) -> bool {
    let text = path.to_string_lossy();
    text.contains("{uuid}") || text.contains("{index}")
}

/// Whether `path` names a folder for a node's files: `-o DIR/`. The slash says so, not
/// the file system: a typo must not turn a result file into a folder of files.
pub fn is_folder(path: &Path) -> bool {
    path.to_string_lossy().ends_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_selections_resolve_against_the_count() {
        assert_eq!(DeviceSelection::All.resolve(3).unwrap(), [0, 1, 2]);
        assert!(matches!(
            DeviceSelection::List(vec![0, 3]).resolve(2),
            Err(RunnerError::BadDeviceIndex { index: 3, count: 2 })
        ));
        assert_eq!(DeviceSelection::List(vec![1, 0]).to_string(), "1,0");
    }

    #[test]
    fn per_gpu_names_and_folders() {
        assert!(is_per_gpu(Path::new("r/{index}.md")));
        assert!(!is_per_gpu(Path::new("r/{node}.md")));
        assert!(is_folder(Path::new("res/")));
        assert_eq!(
            SummaryFormat::of(Path::new("s.HTML")),
            Some(SummaryFormat::Html)
        );
        assert_eq!(SummaryFormat::of(Path::new("s.svg")), None);
    }
}
