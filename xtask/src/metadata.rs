//! `cargo metadata`, read for the workspace: the CUDA generators find their dependencies'
//! sources with it, the no-cycles rule the workspace's targets.

use std::{
    env,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// `cargo metadata` of `workspace`, parsed; with `deps`, every package of the dependency
/// graph, without, the workspace members only (`--no-deps`, faster).
///
/// # Errors
/// cargo cannot be run or fails, or prints something that is not JSON.
pub fn read(workspace: &Path, deps: bool) -> Result<serde_json::Value, String> {
    let mut args = vec!["metadata", "--format-version", "1", "--locked"];
    if !deps {
        args.push("--no-deps");
    }
    let out = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(&args)
        .current_dir(workspace)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err("cargo metadata failed".into());
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed invalid JSON: {e}"))
}

/// The source directory of `package`, a package of the dependency graph.
///
/// # Errors
/// As [`read`], or a package that is not in the graph.
pub fn package_dir(workspace: &Path, package: &str) -> Result<PathBuf, String> {
    let meta = read(workspace, true)?;
    let manifest = meta["packages"]
        .as_array()
        .and_then(|pkgs| pkgs.iter().find(|p| p["name"] == package))
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or_else(|| format!("{package} is not in the dependency graph"))?;
    Path::new(manifest)
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{package}'s manifest has no parent directory"))
}
