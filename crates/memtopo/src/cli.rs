//! The command line: clap's types for every subcommand, the parsers of values clap
//! cannot check by type (device indices, percentages), and help texts made from the
//! definitions they describe (the benchmark registry, the output formats, the exit codes).
//! [`lower`] turns the parsed arguments into the run plan and the subcommands' requests;
//! no module below sees a clap type.
//!
//! `memtopo` without a subcommand measures (the flags of [`MeasureArgs`] at the top level,
//! exactly as `memtopo measure`); a subcommand's flags cannot be mixed with them.

pub mod docs;
pub mod lower;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::{error::Exit, output::Format, plan::DeviceSelection, progress::ProgressMode};

/// Discover the memory topology of an NVIDIA GPU by pointer-chase micro-benchmarks.
#[derive(Debug, Parser)]
#[command(
    name = "memtopo",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    after_help = "Without a command memtopo measures (`memtopo measure`); the other commands \
                  work on saved results and need neither a GPU nor the CUDA driver. \
                  Exit codes: `memtopo --help`, `memtopo man`, docs/cli.md.",
    after_long_help = exit_codes_help()
)]
pub struct Cli {
    /// What to do (default: measure).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The flags of `measure`, when no subcommand is given.
    #[command(flatten)]
    pub measure: MeasureArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure the GPU (the default when no subcommand is given).
    Measure(MeasureArgs),
    /// Render a saved result in any format `-o` writes, or as the table.
    Render(RenderArgs),
    /// Convert a saved result from one format to another (`render IN -o OUT`).
    Convert(ConvertArgs),
    /// Compare two saved results: exit 0 when equal within the tolerances, 1 when not.
    Diff(DiffArgs),
    /// Join results and node summaries into one fleet report; flag GPUs outside their
    /// model's spread, degraded or differing (exit 1 when a GPU is flagged degraded or
    /// was not measured).
    Merge(MergeArgs),
    /// Check saved results against the schema and the physical bounds: exit 0 when valid.
    Validate(ValidateArgs),
    /// Write a simulator's configuration from a saved result: `gpgpusim`, the
    /// memory-system options of GPGPU-Sim's gpgpusim.config (docs/clients.md).
    Export(ExportArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) on standard output: `memtopo man | man -l -`.
    Man,
}

/// The flags of a measurement.
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// CUDA device index (0 to N-1 for N devices; `nvidia-smi -L` lists them), a list
    /// (`0,3`) or `all`: several GPUs are measured all at once (`--sequential`: one after
    /// another), each result named by `{uuid}` or `{index}` in the -o path, with a node
    /// summary (docs/fleet.md).
    #[arg(
        long,
        short = 'd',
        default_value = "0",
        value_name = "N|LIST|all",
        value_parser = parse_devices,
        allow_negative_numbers = true
    )]
    pub device: DeviceSelection,
    /// Run only these benchmarks (comma-separated), with the ones they need.
    #[arg(long, value_delimiter = ',', value_name = "BENCHMARK", value_parser = benchmark_names())]
    pub only: Vec<String>,
    // Help: the registry's deep benchmarks (`deep_help`).
    #[arg(long, help = deep_help(false), long_help = deep_help(true))]
    pub deep: bool,
    /// Run on a simulated GPU: a profile file (TOML) or a bundled name
    /// (kepler, maxwell, volta, h100, h200); a simulated node: several, separated by
    /// commas, `NxNAME` for N alike, each maybe perturbed (`3xh100,h100:memory=+25%`).
    #[arg(long, value_name = "PROFILE")]
    pub simulate: Option<String>,
    // Help: the formats an extension names (`output_help`).
    #[arg(long, short = 'o', value_name = "FILE", help = output_help(
        "the topology",
        "JSON on standard output; several GPUs: a folder (DIR/, with its slash) or a name \
         with {uuid} or {index}"
    ))]
    pub output: Vec<PathBuf>,
    /// Print wall and GPU time per benchmark.
    #[arg(long)]
    pub timings: bool,
    /// Write the raw latency curves as CSV and SVG plots into DIR.
    #[arg(long, value_name = "DIR")]
    pub keep_raw: Option<PathBuf>,
    /// Timed loads of the fine-grained benchmarks (latency distributions, fetch granularity).
    #[arg(long, default_value_t = 768)]
    pub samples: u32,
    /// More log output (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// No table and no progress bar; failures, warnings and errors still go to stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// How progress is shown on standard error while measuring.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto, value_name = "MODE")]
    pub progress: ProgressMode,
    /// Measure even when other processes use the GPU; the result is marked as taken on
    /// a busy GPU.
    #[arg(long)]
    pub allow_busy: bool,
    /// Exit 10 when the self-check finds a raw-curve feature no reported level explains
    /// (or a carveout row off its configuration); without it such findings are warnings.
    #[arg(long)]
    pub strict: bool,
    /// Seconds to wait for another memtopo measuring the same GPU to finish.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub wait: f64,
    /// Several GPUs: write the node summary to FILE (.json, .md or .html; repeatable;
    /// `{node}` is replaced by the node's name).
    #[arg(long, value_name = "FILE")]
    pub summary: Vec<PathBuf>,
    /// Several GPUs: do not measure the links between them (peer access, latency and
    /// bandwidth of one GPU reading another's memory).
    #[arg(long)]
    pub no_peers: bool,
    /// Several GPUs: measure them one after another instead of all at once (each on a
    /// thread of its own); the links between them are measured after the GPUs either way.
    #[arg(long)]
    pub sequential: bool,
}

/// `memtopo render`.
#[derive(Debug, Clone, Args)]
pub struct RenderArgs {
    /// The result: a .json or .toml file as written by `-o`, or `-` for standard input.
    pub input: PathBuf,
    // Help: the formats an extension names (`output_help`).
    #[arg(
        long,
        short = 'o',
        value_name = "FILE",
        help = output_help("the result", "standard output in --format (default JSON)")
    )]
    pub output: Vec<PathBuf>,
    /// The format on standard output (without -o: default table; with `-o -`: default json).
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,
    /// A `--keep-raw` folder of the same run: the HTML report draws its curves.
    #[arg(long, value_name = "DIR")]
    pub raw: Option<PathBuf>,
}

/// `memtopo convert`.
#[derive(Debug, Clone, Args)]
pub struct ConvertArgs {
    /// The result: a .json or .toml file as written by `-o` (without an extension: by its
    /// content), or `-` for standard input.
    pub input: PathBuf,
    /// The file to write, its format by its extension; `-`: standard output (--format,
    /// default JSON).
    pub output: PathBuf,
    /// The format, instead of the extension's.
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<Format>,
}

/// `memtopo diff`.
#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    /// The first result (.json or .toml; without an extension, read by its content).
    pub before: PathBuf,
    /// The second result (.json or .toml; without an extension, read by its content).
    pub after: PathBuf,
    /// The tolerances.
    #[command(flatten)]
    pub tolerances: ToleranceArgs,
    /// Do not count notes on one side only as differences (they are still listed).
    #[arg(long)]
    pub ignore_notes: bool,
}

/// The tolerances per kind of quantity, shared by `diff` and `merge`.
#[derive(Debug, Clone, Args)]
pub struct ToleranceArgs {
    /// Latencies: how many combined standard errors the means must be apart.
    #[arg(long, default_value_t = 3.0, value_name = "N", value_parser = parse_non_negative)]
    pub sigmas: f64,
    /// Latencies, clocks and bandwidths: the smallest relative change that counts, in
    /// percent; a quantity that moves more from run to run (its measured tolerance,
    /// `docs/fleet.md`) takes its own.
    #[arg(long, default_value = "2", value_name = "PERCENT", value_parser = parse_percent)]
    pub latency_tolerance: f64,
    /// Sizes: how far each side's interval is widened, in percent.
    #[arg(long, default_value = "2", value_name = "PERCENT", value_parser = parse_percent)]
    pub size_tolerance: f64,
    /// Counts (copies per SM, L2 partitions): the largest difference that is not a change.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub count_tolerance: u32,
}

/// `memtopo merge`.
#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// Results (`-o x.json`), node summaries and fleet reports (.json; results also
    /// .toml; without an extension, read by its content), or folders: every .json file
    /// in them and their subfolders. A file given twice is read once.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Write the report: .json (the fleet document), .md or .html; `-`: JSON on
    /// standard output. Repeatable. Without it the table goes to standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Vec<PathBuf>,
    /// The tolerances below which no GPU is flagged (those of `diff`).
    #[command(flatten)]
    pub tolerances: ToleranceArgs,
    /// How many scaled median absolute deviations from the median a value may lie.
    #[arg(long, default_value_t = 3.5, value_name = "K", value_parser = parse_non_negative)]
    pub mad: f64,
}

/// `memtopo export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// What to write.
    #[arg(value_enum)]
    pub target: ExportTarget,
    /// The result: a .json or .toml file as written by `-o`, or `-` for standard input.
    pub input: PathBuf,
    /// The file to write; `-` or none: standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A configuration to start from (e.g. GPGPU-Sim's tested SM90_H100/gpgpusim.config):
    /// its lines are kept, the options memtopo measures replace its own, and the fields
    /// memtopo does not measure (policies, MSHRs, memory channels) come from it.
    #[arg(long, value_name = "FILE")]
    pub base: Option<PathBuf>,
}

/// What `memtopo export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportTarget {
    /// GPGPU-Sim's gpgpusim.config (also read by Accel-Sim): the memory-system options.
    Gpgpusim,
}

/// `memtopo validate`.
#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// The results (.json or .toml; without an extension, read by its content; `-` for
    /// standard input).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Whether the raw command line asks for `--progress json` (before any `--`), for the
/// errors of a command line clap refuses.
pub fn asks_for_json_progress(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let args = args.split(|a| a == "--").next().unwrap_or_default();
    args.iter().enumerate().any(|(i, arg)| {
        arg == "--progress=json"
            || (arg == "--progress" && args.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// A device index: a number from 0. Anything else (a negative number, a name) gets a
/// message that says what indices are and how to list the devices.
pub fn parse_device(text: &str) -> Result<u32, String> {
    text.trim().parse::<u32>().map_err(|_| {
        format!(
            "`{text}` is not a device index: devices are numbered 0 to N-1 for a machine \
             with N CUDA devices (`nvidia-smi -L` lists them)"
        )
    })
}

/// `--device`: `all`, an index, or indices separated by commas.
pub fn parse_devices(text: &str) -> Result<DeviceSelection, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("all") {
        return Ok(DeviceSelection::All);
    }
    if !text.contains(',') {
        return parse_device(text).map(DeviceSelection::One);
    }
    let mut list = Vec::new();
    for part in text.split(',') {
        if part.trim().is_empty() {
            return Err(format!(
                "`{text}` has an empty entry: give indices separated by commas (`0,3`) or `all`"
            ));
        }
        let index = parse_device(part)?;
        if list.contains(&index) {
            return Err(format!("`{text}` names device {index} twice"));
        }
        list.push(index);
    }
    Ok(DeviceSelection::List(list))
}

/// A percentage (`2`, `0.5`, `2%`) as a fraction (0.02).
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    parse_non_negative(number)
        .map(|p| p / 100.0)
        .map_err(|_| format!("`{text}` is not a percentage (a number from 0, e.g. 2 or 0.5%)"))
}

/// A finite number from 0.
pub fn parse_non_negative(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("`{text}` is not a number from 0")),
    }
}

/// The registered benchmarks, each with its summary, as `--only`'s values.
fn benchmark_names() -> clap::builder::PossibleValuesParser {
    pchase_runner::measure::bench::REGISTRY
        .iter()
        .map(|b| clap::builder::PossibleValue::new(b.info().name).help(b.info().summary))
        .collect::<Vec<_>>()
        .into()
}

/// The `-o` help of a command writing `what`: every format an extension names, from
/// [`Format::ALL`], and what `-` means.
fn output_help(what: &str, dash: &str) -> String {
    let formats: Vec<String> = Format::ALL
        .iter()
        .filter_map(|f| Some(format!("{} ({})", f.extension()?, f.describe())))
        .collect();
    format!(
        "Write {what} to FILE in the format its extension names: {}; `-`: {dash}. Repeatable",
        formats.join(", ")
    )
}

/// The `--deep` help: the registry's deep benchmarks (with their summaries in the long
/// help).
fn deep_help(long: bool) -> String {
    let deep: Vec<_> = pchase_runner::measure::bench::REGISTRY
        .iter()
        .map(|b| b.info())
        .filter(|info| info.deep)
        .collect();
    let names: Vec<&str> = deep.iter().map(|info| info.name).collect();
    let mut text = format!(
        "Also run the deep benchmarks, too costly for the default run ({}); with --only, \
         they join the named ones",
        names.join(", ")
    );
    if long {
        for info in deep {
            let summary = info.summary.trim_end_matches(" (deep)");
            text.push_str(&format!("\n  {}: {summary}", info.name));
        }
    }
    text
}

/// The exit codes, for `--help`.
fn exit_codes_help() -> String {
    let mut text = String::from(
        "Without a command memtopo measures (`memtopo measure`); the other commands work on \
         saved results and need neither a GPU nor the CUDA driver.\n\nExit codes:",
    );
    for exit in Exit::ALL {
        text.push_str(&format!("\n  {:>2}  {}", exit.code(), exit.meaning()));
    }
    text
}

/// Output formats a subcommand can name with `--format`: [`Format::ALL`].
impl ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &Format::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let value = clap::builder::PossibleValue::new(self.name()).help(self.describe());
        Some(match self {
            Format::Markdown => value.alias("markdown"),
            Format::Mt4g => value.alias("mt4g.json"),
            _ => value,
        })
    }
}

/// The modes of `--progress`.
impl ValueEnum for ProgressMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[ProgressMode::Auto, ProgressMode::Json, ProgressMode::None]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            ProgressMode::Auto => PossibleValue::new("auto")
                .help("a bar while standard error is a terminal, else nothing"),
            ProgressMode::Json => PossibleValue::new("json")
                .help("JSON Lines events for programs, every message one of them"),
            ProgressMode::None => PossibleValue::new("none").help("nothing"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_indices_are_numbers_from_zero() {
        assert_eq!(parse_device("3"), Ok(3));
        let err = parse_device("-1").unwrap_err();
        assert!(
            err.contains("0 to N-1") && err.contains("nvidia-smi -L"),
            "{err}"
        );
        assert!(parse_device("gpu0").is_err());
    }

    #[test]
    fn percentages_are_fractions() {
        assert_eq!(parse_percent("2"), Ok(0.02));
        assert_eq!(parse_percent("50%"), Ok(0.5));
        assert!(parse_percent("-1").is_err());
        assert!(parse_percent("NaN").is_err());
    }

    #[test]
    fn json_progress_is_found_in_a_refused_command_line() {
        let asks = |args: &[&str]| asks_for_json_progress(args.iter().map(|a| a.into()));
        assert!(asks(&["memtopo", "--progress", "json", "--bogus"]));
        assert!(asks(&["memtopo", "--bogus", "--progress=json"]));
        assert!(!asks(&["memtopo", "--progress", "none", "json"]));
        assert!(!asks(&["memtopo", "--", "--progress", "json"]));
    }

    #[test]
    fn device_lists_parse() {
        assert_eq!(parse_devices("all"), Ok(DeviceSelection::All));
        assert_eq!(parse_devices("2"), Ok(DeviceSelection::One(2)));
        assert_eq!(parse_devices("0,3"), Ok(DeviceSelection::List(vec![0, 3])));
        assert!(parse_devices("0,0").unwrap_err().contains("twice"));
        assert!(parse_devices("0,").unwrap_err().contains("empty"));
        assert!(parse_devices("0,-1").unwrap_err().contains("0 to N-1"));
    }

    #[test]
    fn help_names_every_format_and_deep_benchmark() {
        let help = output_help("x", "y");
        for format in Format::ALL {
            if let Some(ext) = format.extension() {
                assert!(help.contains(ext), "{ext}: {help}");
            }
        }
        let deep = deep_help(false);
        for name in ["tlb", "mlp", "icache", "sets", "async-copy"] {
            assert!(deep.contains(name), "{name}: {deep}");
        }
    }
}
