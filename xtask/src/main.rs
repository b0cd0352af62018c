//! `cargo xtask`: the project's automation, in Rust so that a machine with only the Rust
//! toolchain (and Python 3 for the ptxas wheel) can run all of it.
//!
//! ```text
//! cargo xtask test [ARGS]      all tests (no driver here: against a scriptable stand-in)
//! cargo xtask run [ARGS]       memtopo on GPU 0 (release build), ARGS passed on
//! cargo xtask lint             words, cycles, rustfmt --check, clippy, rustdoc (-D warnings), file lengths
//! cargo xtask words            no issue or round numbers, no stale markers (src/words.rs)
//! cargo xtask cycles           no import cycles between the modules of a crate (src/cycles/)
//! cargo xtask ptx [--check]    regenerate ptx/ (or check it is up to date)
//! cargo xtask cubin [--check]  assemble every module with ptxas 12.9 into ptx/cubin/ (or check)
//! cargo xtask ptxas            every module's registers and spills per architecture (ptxas -v)
//! cargo xtask shim [--check]   regenerate the CUDA driver entry points of crates/cuda-shim
//! cargo xtask cargo ARGS       any cargo command (kept for old scripts; plain cargo works)
//! cargo xtask sys-sage [--source DIR]  sys-sage loads memtopo's MT4G exports (docs/clients.md)
//! cargo xtask ci               everything .ci/run runs
//! ```

mod cubin;
mod cuda_shim;
mod cuda_stub;
mod cycles;
mod file_length;
mod metadata;
mod ptx;
mod ptxas;
#[cfg(test)]
mod scratch;
mod sys_sage;
#[cfg(test)]
mod walkthrough;
mod words;

use std::{
    env,
    path::{Path, PathBuf},
    process::{Command, ExitCode},
};

/// Cargo's target directory, honouring `CARGO_TARGET_DIR`.
fn target_dir(workspace: &Path) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// Runs cargo with `args` in the workspace.
fn cargo(args: &[&str], extra: &[String]) -> Result<(), String> {
    cargo_with_env(args, extra, &[])
}

/// [`cargo`] with extra environment variables for this one call.
fn cargo_with_env(args: &[&str], extra: &[String], vars: &[(&str, &str)]) -> Result<(), String> {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args).args(extra).current_dir(workspace_root());
    cmd.envs(vars.iter().copied());
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

fn test(extra: &[String]) -> Result<(), String> {
    let stand_in = cuda_stub::StandIn::prepare(&workspace_root())?;
    eprintln!("xtask: {}", stand_in.describe());
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["test", "--workspace", "--locked"])
        .args(extra)
        .current_dir(workspace_root());
    stand_in.apply(&mut cmd);
    eprintln!("xtask: cargo test --workspace --locked {}", extra.join(" "));
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo test --workspace --locked` failed ({status})"
        ))
    }
}

fn lint() -> Result<(), String> {
    words::check(&workspace_root())?;
    cycles::check(&workspace_root())?;
    file_length::check(&workspace_root())?;
    cargo(&["fmt", "--all", "--check"], &[])?;
    cargo(
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
    let mut build = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build
        .args(["build", "--release", "--locked", "--quiet", "-p", "memtopo"])
        .current_dir(workspace_root());
    let status = build
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building memtopo failed ({status})"));
    }
    let binary = target_dir(&workspace_root()).join("release/memtopo");
    let mut memtopo = Command::new(&binary);
    memtopo.args(extra);
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
        "words" => words::check(&workspace_root()),
        "cycles" => cycles::check(&workspace_root()),
        "ptx" => ptx::run_ptx(rest),
        "ptxas" => ptxas::run_ptxas(rest),
        "cubin" => cubin::run_cubin(rest),
        "shim" => cuda_shim::run_shim(&workspace_root(), rest),
        "sys-sage" => sys_sage::run_sys_sage(&workspace_root(), rest),
        "cargo" => rest
            .split_first()
            .ok_or_else(|| "usage: cargo xtask cargo <cargo arguments>".to_string())
            .and_then(|(first, more)| cargo(&[first.as_str()], more)),
        "ci" => test(&[])
            .and_then(|()| lint())
            .and_then(|()| cuda_shim::run_shim(&workspace_root(), &["--check".to_string()]))
            .and_then(|()| ptx::run_ptx(&["--check".to_string()]))
            .and_then(|()| cubin::run_cubin(&["--check".to_string()])),
        "help" | "--help" | "-h" => {
            // The table between the fences of this file's first comment.
            let usage: Vec<&str> = include_str!("main.rs")
                .lines()
                .skip_while(|l| *l != "//! ```text")
                .skip(1)
                .take_while(|l| *l != "//! ```")
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
