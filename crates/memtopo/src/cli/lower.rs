//! From parsed arguments to what the commands run: the measurement's [`MeasurePlan`] and
//! the subcommands' requests. Every check a value needs beyond its type happens here, once,
//! with a usage error that says what to give instead; nothing below sees a clap type.

use std::{path::Path, time::Duration};

use pchase_runner::measure::{bench::REGISTRY, MeasureOptions, Selection};
use topology::{diff::DiffOptions, fleet::SpreadOptions};

use super::{
    ConvertArgs, DiffArgs, ExportArgs, ExportTarget, MeasureArgs, MergeArgs, RenderArgs,
    ToleranceArgs,
};
use crate::{
    cmd::{diff, export, merge, render},
    error::CliError,
    output::{self, Format},
    plan::{
        self, Devices, Gpu, GpuJob, GpuOutputs, GuardPolicy, MeasurePlan, NodeFile, NodeOutputs,
        NodePlan, OutputFile, Settings, SummaryFile, SummaryFormat, Target,
    },
    progress::ProgressMode,
    simulate,
};

/// The samples a fine-grained benchmark may take.
const SAMPLES: std::ops::RangeInclusive<u32> = 64..=8192;

impl MeasureArgs {
    /// How progress is shown (known before the plan, so that its errors are shown so).
    pub fn progress_mode(&self) -> ProgressMode {
        self.progress
    }

    /// The logging level of `-q` and `-v`s.
    pub fn log_level(&self) -> &'static str {
        match (self.quiet, self.verbose) {
            (true, _) => "error",
            (false, 0) => "warn",
            (false, 1) => "info",
            (false, 2) => "debug",
            (false, _) => "trace",
        }
    }

    /// The index of the one real GPU this command line measures, if it measures one (not
    /// a node, not a simulated GPU, not a command line the plan refuses).
    #[cfg(feature = "cuda")]
    pub fn single_real_gpu(&self) -> Option<u32> {
        match self.plan().ok()?.target {
            Target::Gpu(job) => match job.gpu {
                Gpu::Real(index) => Some(index),
                Gpu::Simulated(_) => None,
            },
            Target::Node(_) => None,
        }
    }

    /// The run plan, every value checked.
    pub fn plan(&self) -> Result<MeasurePlan, CliError> {
        // A bad MEMTOPO_JIT is a usage error, before anything is measured (docs/cli.md).
        #[cfg(feature = "cuda")]
        pchase_runner::cuda::CodePreference::from_env().map_err(|e| match e {
            pchase_runner::RunnerError::InvalidRequest(message) => CliError::Usage(message),
            other => CliError::Runner(other),
        })?;
        let options = MeasureOptions {
            only: only_benchmarks(&self.only, self.deep)?,
            samples: self.samples,
            ..MeasureOptions::default()
        };
        if !SAMPLES.contains(&self.samples) {
            return Err(CliError::Usage(format!(
                "--samples {} is outside {}..={}",
                self.samples,
                SAMPLES.start(),
                SAMPLES.end()
            )));
        }
        let wait = Duration::try_from_secs_f64(self.wait).map_err(|_| {
            CliError::Usage(format!("--wait {} is not a number of seconds", self.wait))
        })?;
        if let Some(dir) = self
            .output
            .iter()
            .find(|p| p.is_dir() && !plan::is_folder(p))
        {
            return Err(CliError::Usage(format!(
                "-o {0}: {0} is a folder; add a slash (-o {0}/) for one result per GPU in it, \
                 or name a file with an extension",
                dir.display()
            )));
        }
        let selection = self.device.clone();
        let node = selection.single().is_none()
            || !self.summary.is_empty()
            || self
                .output
                .iter()
                .any(|p| plan::is_per_gpu(p) || plan::is_folder(p));
        let specs = self.simulate.as_deref().map(simulate::simulated_specs);
        let target = match (node, selection.single()) {
            (false, Some(index)) => Target::Gpu(GpuJob {
                gpu: match specs {
                    None => Gpu::Real(index),
                    Some(specs) => Gpu::Simulated(specs.get(index as usize).cloned().ok_or(
                        CliError::NoSimulatedDevice {
                            index,
                            count: specs.len() as u32,
                        },
                    )?),
                },
                outputs: self.gpu_outputs()?,
                keep_raw: self.keep_raw.clone(),
                concurrent_with: Vec::new(),
            }),
            _ => Target::Node(NodePlan {
                outputs: self.node_outputs()?,
                devices: match specs {
                    Some(specs) => Devices::Simulated { specs, selection },
                    None => Devices::Real(selection),
                },
                keep_raw: self.keep_raw.clone(),
                peers: !self.no_peers,
                concurrent: !self.sequential,
            }),
        };
        Ok(MeasurePlan {
            settings: Settings {
                options,
                guard: GuardPolicy {
                    allow_busy: self.allow_busy,
                    wait,
                },
                quiet: self.quiet,
                timings: self.timings,
                strict: self.strict,
            },
            target,
        })
    }

    /// One GPU's files: each with a format, `-o -` at most once.
    fn gpu_outputs(&self) -> Result<GpuOutputs, CliError> {
        let dashes = self.output.iter().filter(|p| render::is_dash(p)).count();
        if dashes > 1 {
            return Err(CliError::Usage(
                "`-o -` (JSON on standard output) may be given once".into(),
            ));
        }
        let files = self
            .output
            .iter()
            .filter(|p| !render::is_dash(p))
            .map(|path| output_file(path))
            .collect::<Result<_, _>>()?;
        Ok(GpuOutputs {
            files,
            stdout_json: dashes > 0,
        })
    }

    /// A node's files: every `-o` a folder or a per-GPU template, every summary a format.
    fn node_outputs(&self) -> Result<NodeOutputs, CliError> {
        let mut files = Vec::new();
        for path in &self.output {
            if render::is_dash(path) {
                return Err(CliError::Usage(
                    "`-o -` writes one document; with several GPUs use -o DIR/ or a path \
                     with {uuid} (docs/fleet.md)"
                        .into(),
                ));
            }
            files.push(if plan::is_folder(path) {
                NodeFile::Folder(path.clone())
            } else if plan::is_per_gpu(path) {
                NodeFile::Template(output_file(path)?)
            } else {
                return Err(CliError::Usage(format!(
                    "-o {}: with several GPUs every output needs {{uuid}} or {{index}} in its \
                     name (one file per GPU), or is a folder (-o DIR/)",
                    path.display()
                )));
            });
        }
        let summaries = self
            .summary
            .iter()
            .map(|path| {
                let format = SummaryFormat::of(path).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--summary {}: use .json, .md or .html",
                        path.display()
                    ))
                })?;
                Ok(SummaryFile {
                    path: path.clone(),
                    format,
                })
            })
            .collect::<Result<_, CliError>>()?;
        Ok(NodeOutputs { files, summaries })
    }
}

/// An `-o` file with the format its extension names.
fn output_file(path: &Path) -> Result<OutputFile, CliError> {
    let format = Format::of(path).ok_or_else(|| CliError::Usage(output::unknown_format(path)))?;
    Ok(OutputFile {
        path: path.to_owned(),
        format,
    })
}

/// The benchmarks `--only` names (every registered one of the default run when it is
/// empty), with the deep ones where `deep` (`--deep`); the plan adds what they need
/// (`constant-l15` brings `constant-l1`). The one place that reads `--only` and `--deep`.
pub fn only_benchmarks(only: &[String], deep: bool) -> Result<Selection, CliError> {
    if only.is_empty() {
        return Ok(if deep {
            Selection::Deep
        } else {
            Selection::All
        });
    }
    let mut names: Vec<&str> = only.iter().map(String::as_str).collect();
    if deep {
        names.extend(
            REGISTRY
                .iter()
                .filter(|b| b.info().deep)
                .map(|b| b.info().name),
        );
    }
    let selection = Selection::named(&names).map_err(|e| CliError::Usage(e.to_string()))?;
    for (added, by) in selection.added() {
        log::info!("--only {by} needs {added}: measuring {added} too");
    }
    Ok(selection)
}

impl ToleranceArgs {
    /// The library's options.
    pub fn options(&self) -> DiffOptions {
        DiffOptions {
            sigmas: self.sigmas,
            relative_tolerance: self.latency_tolerance,
            size_tolerance: self.size_tolerance,
            count_tolerance: self.count_tolerance,
        }
    }
}

impl RenderArgs {
    /// What `render` writes where: `-o -` once at most, `--format` only for standard
    /// output, every file a format.
    pub fn request(&self) -> Result<render::Request, CliError> {
        if self.output.iter().filter(|p| render::is_dash(p)).count() > 1 {
            return Err(CliError::Usage(
                "`-o -` (standard output) may be given once".into(),
            ));
        }
        let targets = if self.output.is_empty() {
            vec![render::Target::Stdout(self.format.unwrap_or(Format::Table))]
        } else {
            if self.format.is_some() && !self.output.iter().any(|p| render::is_dash(p)) {
                return Err(CliError::Usage(
                    "--format names the format of standard output: add `-o -`, or name the \
                     format of a file by its extension"
                        .into(),
                ));
            }
            self.output
                .iter()
                .map(|path| {
                    Ok(if render::is_dash(path) {
                        render::Target::Stdout(self.format.unwrap_or(Format::Json))
                    } else {
                        let file = output_file(path)?;
                        render::Target::File(file.path, file.format)
                    })
                })
                .collect::<Result<Vec<_>, CliError>>()?
        };
        Ok(render::Request {
            input: self.input.clone(),
            targets,
            raw: self.raw.clone(),
        })
    }
}

impl ConvertArgs {
    /// `convert IN OUT` as `render IN -o OUT`, `--format` over the extension.
    pub fn request(&self) -> Result<render::Request, CliError> {
        let target = if render::is_dash(&self.output) {
            render::Target::Stdout(self.format.unwrap_or(Format::Json))
        } else {
            let format = self
                .format
                .or_else(|| Format::of(&self.output))
                .ok_or_else(|| CliError::Usage(output::unknown_format(&self.output)))?;
            render::Target::File(self.output.clone(), format)
        };
        Ok(render::Request {
            input: self.input.clone(),
            targets: vec![target],
            raw: None,
        })
    }
}

impl ExportArgs {
    /// What `export` writes where (`-o -` is standard output).
    pub fn request(&self) -> export::Request {
        export::Request {
            target: match self.target {
                ExportTarget::Gpgpusim => export::Target::Gpgpusim,
            },
            input: self.input.clone(),
            output: self.output.clone().filter(|p| !render::is_dash(p)),
            base: self.base.clone(),
        }
    }
}

impl DiffArgs {
    /// The comparison `diff` makes.
    pub fn request(&self) -> diff::Request {
        diff::Request {
            before: self.before.clone(),
            after: self.after.clone(),
            options: self.tolerances.options(),
            ignore_notes: self.ignore_notes,
        }
    }
}

impl MergeArgs {
    /// The inputs, the report's targets and the tolerances of `merge`.
    pub fn request(&self) -> Result<merge::Request, CliError> {
        let outputs = self
            .output
            .iter()
            .map(|path| {
                if render::is_dash(path) {
                    return Ok(merge::Report::Stdout);
                }
                let format = SummaryFormat::of(path).ok_or_else(|| {
                    CliError::Usage(format!(
                        "-o {}: use .json, .md or .html (or - for JSON on standard output)",
                        path.display()
                    ))
                })?;
                Ok(merge::Report::File(path.clone(), format))
            })
            .collect::<Result<_, CliError>>()?;
        Ok(merge::Request {
            inputs: self.inputs.clone(),
            outputs,
            options: SpreadOptions::from_diff(self.tolerances.options(), self.mad),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    /// The plan of `memtopo ARGS`.
    fn plan(args: &[&str]) -> Result<MeasurePlan, CliError> {
        let cli = Cli::try_parse_from(std::iter::once("memtopo").chain(args.iter().copied()))
            .expect("parses");
        assert!(cli.command.is_none());
        cli.measure.plan()
    }

    #[test]
    fn only_adds_dependencies_and_refuses_unknown_benchmarks() {
        let selection = only_benchmarks(&["constant-l15".into()], false).unwrap();
        assert_eq!(selection.added(), [("constant-l1", "constant-l15")]);
        assert!(matches!(
            only_benchmarks(&["l3".into()], false),
            Err(CliError::Usage(_))
        ));
        assert_eq!(only_benchmarks(&[], false).unwrap(), Selection::All);
        assert_eq!(only_benchmarks(&[], true).unwrap(), Selection::Deep);
        assert_eq!(
            only_benchmarks(&["l1".into()], true).unwrap(),
            Selection::named(&[
                "l1",
                "tlb",
                "mlp",
                "async-copy",
                "icache",
                "sets",
                "l2-address",
                "l2-ways",
                "gpc-contention"
            ])
            .unwrap()
        );
    }

    #[test]
    fn a_plain_run_is_one_gpu_with_typed_outputs() {
        let plan = plan(&[
            "--simulate",
            "2xh100",
            "-d",
            "1",
            "-o",
            "a.json",
            "-o",
            "-",
            "-o",
            "b.md",
        ])
        .unwrap();
        let Target::Gpu(job) = &plan.target else {
            panic!("{:?}", plan.target)
        };
        assert_eq!(job.gpu, Gpu::Simulated("h100".into()));
        assert!(job.outputs.stdout_json);
        let formats: Vec<Format> = job.outputs.files.iter().map(|f| f.format).collect();
        assert_eq!(formats, [Format::Json, Format::Markdown]);
        assert_eq!(plan.settings.guard.wait, Duration::from_secs(10));
        assert!(matches!(
            super::MeasureArgs::plan(
                &Cli::try_parse_from(["memtopo", "--simulate", "h100", "-d", "3"])
                    .unwrap()
                    .measure
            ),
            Err(CliError::NoSimulatedDevice { index: 3, count: 1 })
        ));
    }

    #[test]
    fn a_node_run_needs_per_gpu_names() {
        let node = plan(&["-d", "all", "-o", "r/{uuid}.svg", "--summary", "s.html"]).unwrap();
        let Target::Node(node) = &node.target else {
            panic!("{:?}", node.target)
        };
        assert_eq!(node.devices, Devices::Real(plan::DeviceSelection::All));
        assert!(matches!(&node.outputs.files[0], NodeFile::Template(f) if f.format == Format::Svg));
        assert_eq!(node.outputs.summaries[0].format, SummaryFormat::Html);
        for bad in [
            &["-d", "0,1", "-o", "one.json"][..],
            &["-d", "all", "-o", "-"],
            &["-d", "all", "--summary", "s.svg"],
            &["-o", "{index}.xlsx"],
        ] {
            assert!(matches!(plan(bad), Err(CliError::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn values_beyond_their_type_are_usage_errors() {
        for bad in [
            &["--samples", "10"][..],
            &["--wait=-1"],
            &["--wait", "1e300"],
            &["--wait", "NaN"],
            &["-o", "x.xlsx"],
            &["-o", "-", "-o", "-"],
        ] {
            assert!(matches!(plan(bad), Err(CliError::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn subcommands_lower_to_their_requests() {
        let cli =
            Cli::try_parse_from(["memtopo", "render", "r.json", "-o", "-", "-f", "md"]).unwrap();
        let Some(Command::Render(args)) = cli.command else {
            panic!()
        };
        assert_eq!(
            args.request().unwrap().targets,
            [render::Target::Stdout(Format::Markdown)]
        );
        let cli = Cli::try_parse_from(["memtopo", "merge", "a", "-o", "x.txt"]).unwrap();
        let Some(Command::Merge(args)) = cli.command else {
            panic!()
        };
        assert!(matches!(args.request(), Err(CliError::Usage(_))));
    }
}
