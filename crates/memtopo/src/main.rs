//! `memtopo`: measures the memory topology of an NVIDIA GPU (or a simulated one) and
//! prints it as a table; `-o` writes JSON, TOML, Markdown, SVG or MT4G JSON. Subcommands
//! render, convert, diff and validate saved results without a GPU.
//!
//! Exit codes (also in `docs/cli.md`):
//! 0 success; 1 a benchmark failed (the rest is still written), or `diff` found
//! differences; 2 bad command line; 3 no CUDA driver or no GPU; 4 bad device index;
//! 5 bad simulation profile; 6 an output file could not be written; 7 a kernel failed to
//! load or run; 8 the GPU is busy (other processes, another memtopo, or an exclusive GPU
//! held by another process); 9 measured, but disturbed while measuring (values marked);
//! 10 `--strict` self-check findings; 11 a saved result cannot be read or is invalid;
//! 12 several GPUs: some were measured, others not (the node summary says which and why).

mod cli;
mod cmd;
mod conditions;
mod guard;
mod lock;
mod node;
#[cfg(feature = "cuda")]
mod nvlink;
#[cfg(feature = "cuda")]
mod nvml;
mod output;
mod progress;
mod raw;
mod run;

use std::process::ExitCode;

use clap::Parser;

use crate::{
    cli::{Cli, Command},
    progress::{Level, ProgressMode, Reporter},
    run::CliError,
};

/// The logging level of `-q` and `-v`s.
fn log_level(quiet: bool, verbose: u8) -> &'static str {
    match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    }
}

/// The error's line, with a hint where one helps.
fn message(error: &CliError) -> String {
    match error.exit_code() {
        4 => format!("{error} (devices are numbered 0 to N-1; `nvidia-smi -L` lists them)"),
        _ => error.to_string(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let measure = match &cli.command {
        None => Some(&cli.measure),
        Some(Command::Measure(args)) => Some(args),
        Some(_) => None,
    };
    progress::init(measure.is_some_and(|m| m.progress == ProgressMode::Json));
    progress::init_logger(measure.map_or("warn", |m| log_level(m.quiet, m.verbose)));
    let mut reporter = None;
    let mut measure_with = |args| {
        let reporter = reporter.insert(Reporter::new(
            measure.map_or(ProgressMode::Auto, |m| m.progress),
            measure.is_some_and(|m| m.quiet),
        ));
        run::run(args, reporter)
    };
    let result = match &cli.command {
        Some(Command::Render(args)) => cmd::render::render(args),
        Some(Command::Convert(args)) => cmd::render::convert(args),
        Some(Command::Diff(args)) => cmd::diff::diff(args),
        Some(Command::Merge(args)) => cmd::merge::merge(args),
        Some(Command::Validate(args)) => cmd::validate::validate(args),
        Some(Command::Export(args)) => cmd::export::export(args),
        Some(Command::Completions { shell }) => cmd::docs::completions(*shell),
        Some(Command::Man) => cmd::docs::man(),
        Some(Command::Measure(args)) => measure_with(args),
        None => measure_with(&cli.measure),
    };
    let (code, error) = match result {
        Ok(code) => (code, None),
        Err(error) => {
            let text = message(&error);
            progress::say(Level::Error, &text);
            (error.exit_code(), Some(text))
        }
    };
    if let Some(reporter) = &reporter {
        reporter.summary(code, error.as_deref());
    }
    ExitCode::from(code)
}
