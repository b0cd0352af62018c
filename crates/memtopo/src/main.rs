//! `memtopo`: measures the memory topology of an NVIDIA GPU (or a simulated one) and
//! prints it as a table; `-o` writes JSON, TOML, Markdown, SVG, HTML or MT4G JSON.
//! Subcommands render, convert, diff, merge and validate saved results without a GPU.
//!
//! The command line is parsed once, here: `cli` holds clap's types and lowers them to the
//! run plan (`plan`) or a subcommand's request; `run` (one GPU) and `node` (several)
//! measure by the plan, `guard` keeps the GPU to this run, `output` and `progress` write.
//! The exit codes are `error::Exit`'s (also in `docs/cli.md` and `memtopo man`).

mod cli;
mod cmd;
mod conditions;
mod error;
mod guard;
mod handover;
mod lock;
mod node;
#[cfg(feature = "cuda")]
mod nvlink;
#[cfg(feature = "cuda")]
mod nvml;
mod output;
mod plan;
mod progress;
mod raw;
mod run;
mod settle;
mod simulate;
#[cfg(feature = "cuda")]
mod startup;
#[cfg(feature = "cuda")]
mod visible;

use std::process::ExitCode;

use clap::Parser as _;

use crate::{
    cli::{Cli, Command, MeasureArgs},
    error::{CliError, Exit},
    plan::Target,
    progress::{Level, ProgressMode, Reporter},
};

/// The error's line, with a hint where one helps.
fn message(error: &CliError) -> String {
    match error {
        CliError::Runner(pchase_runner::RunnerError::BadDeviceIndex { .. }) => {
            format!("{error} (devices are numbered 0 to N-1; `nvidia-smi -L` lists them)")
        }
        _ => error.to_string(),
    }
}

/// Measures as `args` ask: one GPU, or a node.
fn measure(args: &MeasureArgs, reporter: &mut Reporter) -> Result<Exit, CliError> {
    let plan = args.plan()?;
    match &plan.target {
        Target::Gpu(job) => run::measure_gpu(&plan.settings, job, reporter).map(|(code, _)| code),
        Target::Node(node) => node::run(&plan.settings, node, reporter),
    }
}

/// A command line clap refused (or `--help`, `--version`): as clap prints it, or under
/// `--progress json` as a `message` event and the final `summary`, so that a program
/// reading the events sees this error as it sees every other.
fn refused(error: clap::Error) -> ExitCode {
    if !error.use_stderr() || !cli::asks_for_json_progress(std::env::args_os()) {
        error.exit()
    }
    progress::init(true);
    let text = error.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    progress::say(Level::Error, line);
    let code = u8::try_from(error.exit_code()).unwrap_or(Exit::Usage.code());
    Reporter::new(ProgressMode::Json, false).summary(code, Some(line));
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return refused(error),
    };
    let measuring = match &cli.command {
        None => Some(&cli.measure),
        Some(Command::Measure(args)) => Some(args),
        Some(_) => None,
    };
    #[cfg(feature = "cuda")]
    if let Some(index) = measuring.and_then(MeasureArgs::single_real_gpu) {
        // Before any thread starts and before the driver does: it changes the environment.
        visible::narrow(index);
    }
    let mode = measuring.map_or(ProgressMode::Auto, MeasureArgs::progress_mode);
    progress::init(mode == ProgressMode::Json);
    progress::init_logger(measuring.map_or("warn", MeasureArgs::log_level));
    let mut reporter = None;
    let result = match &cli.command {
        Some(Command::Render(args)) => args.request().and_then(|r| cmd::render::render(&r)),
        Some(Command::Convert(args)) => args.request().and_then(|r| cmd::render::render(&r)),
        Some(Command::Diff(args)) => cmd::diff::diff(&args.request()),
        Some(Command::Merge(args)) => args.request().and_then(|r| cmd::merge::merge(&r)),
        Some(Command::Validate(args)) => cmd::validate::validate(&args.files),
        Some(Command::Export(args)) => cmd::export::export(&args.request()),
        Some(Command::Completions { shell }) => cli::docs::completions(*shell),
        Some(Command::Man) => cli::docs::man(),
        Some(Command::Measure(args)) => {
            measure(args, reporter.insert(Reporter::new(mode, args.quiet)))
        }
        None => measure(
            &cli.measure,
            reporter.insert(Reporter::new(mode, cli.measure.quiet)),
        ),
    };
    let (code, error) = match result {
        Ok(code) => (code, None),
        Err(error) => {
            let text = message(&error);
            progress::say(Level::Error, &text);
            (error.exit(), Some(text))
        }
    };
    if let Some(reporter) = &reporter {
        reporter.summary(code.code(), error.as_deref());
    }
    ExitCode::from(code.code())
}
