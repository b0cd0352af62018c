//! `cargo xtask`: the project's automation, in Rust so that a machine with only the Rust
//! toolchain (and Python 3 for the ptxas wheel) can run all of it.
//!
//! ```text
//! cargo xtask test [ARGS]      all tests of the workspace (builds the CUDA stand-in if needed)
//! cargo xtask run [ARGS]       memtopo on GPU 0 (release build), ARGS passed on
//! cargo xtask lint             rustfmt --check, clippy -D warnings, rustdoc -D warnings
//! cargo xtask ptx [--check]    regenerate ptx/ (or check it is up to date)
//! cargo xtask ptxas            assemble every PTX module with ptxas 12.9 for sm_50..sm_90
//! cargo xtask cargo ARGS       any cargo command with the CUDA environment applied
//! cargo xtask ci               everything .ci/run runs
//! ```

mod cuda_stub;
mod ptx;
mod ptxas;

use std::{
    env,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

use cuda_stub::CudaEnv;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// Runs cargo with `args` in the workspace, with the CUDA environment applied.
fn cargo(cuda: Option<&CudaEnv>, args: &[&str], extra: &[String]) -> Result<(), String> {
    cargo_with_env(cuda, args, extra, &[])
}

/// [`cargo`] with extra environment variables for this one call.
fn cargo_with_env(
    cuda: Option<&CudaEnv>,
    args: &[&str],
    extra: &[String],
    vars: &[(&str, &str)],
) -> Result<(), String> {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args).args(extra).current_dir(workspace_root());
    cmd.envs(vars.iter().copied());
    if let Some(cuda) = cuda {
        cuda.apply(&mut cmd);
    }
    let shown = args
        .iter()
        .map(|s| s.to_string())
        .chain(extra.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("xtask: cargo {shown}");
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {shown}` failed ({status})"))
    }
}

fn cuda_env() -> Result<CudaEnv, String> {
    let cuda = CudaEnv::detect(&workspace_root())?;
    eprintln!("xtask: {}", cuda.describe());
    Ok(cuda)
}

fn test(extra: &[String]) -> Result<(), String> {
    let cuda = cuda_env()?;
    cargo(Some(&cuda), &["test", "--workspace", "--locked"], extra)
}

fn lint() -> Result<(), String> {
    cargo(None, &["fmt", "--all", "--check"], &[])?;
    let cuda = cuda_env()?;
    cargo(
        Some(&cuda),
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo_with_env(
        Some(&cuda),
        &["doc", "--workspace", "--no-deps", "--locked"],
        &[],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )
}

/// Builds memtopo (quietly) and runs it with `extra`, returning its exit status, so that
/// "no GPU" is the tool's one line and its exit code, not a wrapper's.
fn run(extra: &[String]) -> Result<ExitCode, String> {
    // `cargo xtask run -- ARGS` and `cargo xtask run ARGS` both work.
    let extra = match extra.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => extra,
    };
    let cuda = CudaEnv::detect(&workspace_root())?;
    let mut build = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build
        .args(["build", "--release", "--locked", "--quiet", "-p", "memtopo"])
        .current_dir(workspace_root());
    cuda.apply(&mut build);
    let status = build
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building memtopo failed ({status})"));
    }
    let binary = cuda_stub::target_dir(&workspace_root()).join("release/memtopo");
    let mut memtopo = Command::new(&binary);
    memtopo.args(extra);
    cuda.apply(&mut memtopo);
    let status = memtopo
        .status()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(1),
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let (command, rest) = match args.split_first() {
        Some((c, rest)) => (c.as_str(), rest),
        None => ("help", &[][..]),
    };
    if command == "run" {
        return run(rest).unwrap_or_else(|message| {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        });
    }
    let result = match command {
        "test" => test(rest),
        "lint" => lint(),
        "ptx" => ptx::run_ptx(rest),
        "ptxas" => ptxas::run_ptxas(rest),
        "cargo" => cuda_env().and_then(|cuda| {
            let (first, more) = rest
                .split_first()
                .ok_or("usage: cargo xtask cargo <cargo arguments>")?;
            cargo(Some(&cuda), &[first.as_str()], more)
        }),
        "ci" => test(&[])
            .and_then(|()| lint())
            .and_then(|()| ptx::run_ptx(&["--check".to_string()]))
            .and_then(|()| ptxas::run_ptxas(&[])),
        "help" | "--help" | "-h" => {
            let usage: Vec<&str> = include_str!("main.rs")
                .lines()
                .skip(4)
                .take(8)
                .map(|l| l.trim_start_matches("//! "))
                .collect();
            println!("{}", usage.join("\n"));
            Ok(())
        }
        other => Err(format!("unknown command `{other}`; try `cargo xtask help`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}
