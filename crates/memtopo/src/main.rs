//! `memtopo`: measures the memory topology of an NVIDIA GPU (or a simulated one) and
//! prints it as a table; `-o` writes JSON, TOML, Markdown, SVG or MT4G JSON.
//!
//! Exit codes (also in `docs/cli.md`):
//! 0 success; 1 a benchmark failed (the rest is still written); 2 bad command line;
//! 3 no CUDA driver or no GPU; 4 bad device index; 5 bad simulation profile;
//! 6 an output file could not be written; 7 a kernel failed to load or run;
//! 8 the GPU is busy (other processes, another memtopo, or an exclusive GPU held by
//! another process); 9 measured, but disturbed while measuring (values marked).

mod conditions;
mod guard;
mod lock;
#[cfg(feature = "cuda")]
mod nvml;
mod output;
mod raw;
mod run;

use std::{path::PathBuf, process::ExitCode};

use clap::Parser;

/// Discover the memory topology of an NVIDIA GPU by pointer-chase micro-benchmarks.
#[derive(Debug, Parser)]
#[command(name = "memtopo", version, about, long_about = None)]
pub struct Cli {
    /// CUDA device index.
    #[arg(long, short = 'd', default_value_t = 0)]
    pub device: u32,
    /// Measure only these elements (comma-separated): l1, texture, readonly,
    /// constant-l1, constant-l15, shared, l2, memory.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run on a simulated GPU: a profile file (TOML) or a bundled name
    /// (kepler, maxwell, volta, h100, h200).
    #[arg(long, value_name = "PROFILE")]
    pub simulate: Option<String>,
    /// Write the topology to FILE; the format follows the extension: .json, .toml,
    /// .md, .svg, .html (a self-contained report with the raw curves), or .mt4g.json (the
    /// JSON layout of MT4G v1.x).
    #[arg(long, short = 'o', value_name = "FILE")]
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
    /// Only errors; no table, no progress bars.
    #[arg(short, long)]
    pub quiet: bool,
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level))
        .format_timestamp(None)
        .init();
    match run::run(&cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("memtopo: error: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
