//! `cargo xtask ptxas`: assembles every committed PTX module with `ptxas` 12.9 for each
//! architecture memtopo ships cubins for (`pchase_kernels::cubin::ARCHITECTURES`), and prints
//! each module/architecture result with the register, shared and constant memory usage
//! `ptxas -v` reports. `cargo xtask cubin` (which writes and checks the committed cubins)
//! assembles through the same functions.
//!
//! `ptxas` comes from the PyPI wheel `nvidia-cuda-nvcc-cu12` (pinned), installed with pip into
//! a cache directory so no CUDA toolkit is needed. Nothing is skipped: a failed install or a
//! failed assembly is an error.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use pchase_kernels::{catalogue, cubin::ARCHITECTURES, ComputeCapability};

/// The pinned wheel; its `ptxas` is release 12.9 (PTX ISA up to 8.8, sm_50 to sm_121).
const WHEEL: &str = "nvidia-cuda-nvcc-cu12";
const WHEEL_VERSION: &str = "12.9.86";
/// `ptxas --version` must report this release.
pub const PTXAS_RELEASE: &str = "release 12.9, V12.9.86";
/// Environment variable that overrides the cache directory.
const CACHE_ENV: &str = "MEMTOPO_PTXAS_CACHE";
/// The options every assembly uses besides `-arch` and the files: warnings are errors (a
/// warning in a timed loop is a bug), and `-v` prints the resource usage (it does not change
/// the cubin).
pub const OPTIONS: [&str; 2] = ["-v", "--warning-as-error"];

/// Entry point of `cargo xtask ptxas`.
pub fn run_ptxas(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!(
            "usage: cargo xtask ptxas (env {CACHE_ENV} sets the cache); got {args:?}"
        ));
    }
    let root = crate::ptx::workspace_root();
    let cache = cache_dir(&root);
    let ptxas = ensure_ptxas(&cache)?;
    println!("ptxas: {} ({PTXAS_RELEASE})", ptxas.display());

    let out_dir = cache.join("cubin");
    fs::create_dir_all(&out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let mut failures = Vec::new();
    let mut assembled = 0;
    for module in catalogue::modules() {
        let source = root.join("ptx").join(module.file_name());
        if !source.is_file() {
            failures.push(format!(
                "{} is missing (run `cargo xtask ptx`)",
                source.display()
            ));
            continue;
        }
        for arch in ARCHITECTURES.iter().filter(|arch| module.supports(**arch)) {
            let sm = arch.sm_name();
            let cubin = out_dir.join(format!("{}.{sm}.cubin", module.name()));
            let assembly = assemble(&ptxas, *arch, &source, &cubin)?;
            if assembly.ok {
                assembled += 1;
                println!("ok     {:<8} {sm}", module.name());
                for line in resource_lines(&assembly.log) {
                    println!("         {line}");
                }
            } else {
                println!("FAILED {:<8} {sm}", module.name());
                for line in assembly.log.lines() {
                    println!("         {line}");
                }
                failures.push(format!("{} for {sm}", module.name()));
            }
        }
    }
    if failures.is_empty() {
        println!("ptxas: {assembled} module/architecture pairs assembled");
        Ok(())
    } else {
        Err(format!("ptxas failed: {}", failures.join(", ")))
    }
}

/// What one run of `ptxas` gave.
#[derive(Debug)]
pub struct Assembly {
    /// Whether ptxas succeeded (and wrote the output).
    pub ok: bool,
    /// Its standard error and output.
    pub log: String,
}

/// Assembles `source` for `arch` into `output` with [`OPTIONS`]; an error only when ptxas
/// cannot be run at all.
pub fn assemble(
    ptxas: &Path,
    arch: ComputeCapability,
    source: &Path,
    output: &Path,
) -> Result<Assembly, String> {
    let result = Command::new(ptxas)
        .arg(format!("-arch={}", arch.sm_name()))
        .args(OPTIONS)
        .arg("-o")
        .arg(output)
        .arg(source)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    Ok(Assembly {
        ok: result.status.success(),
        log: String::from_utf8_lossy(&result.stderr).into_owned()
            + &String::from_utf8_lossy(&result.stdout),
    })
}

/// The cache directory: `MEMTOPO_PTXAS_CACHE`, else `<workspace>/.ptxas-cache`.
pub fn cache_dir(root: &Path) -> PathBuf {
    std::env::var_os(CACHE_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".ptxas-cache"))
}

/// The resource lines of a `ptxas -v` log: module-wide memory, then one line per kernel with
/// registers, barriers, constant banks, stack and spills ("kernel: usage; stack").
fn resource_lines(log: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    let mut frame = String::new();
    for line in log.lines() {
        let text = line.trim_start_matches("ptxas info    :").trim();
        if let Some(rest) = text.strip_prefix("Compiling entry function '") {
            current = rest.split('\'').next().unwrap_or_default().to_owned();
            frame.clear();
        } else if text.contains("bytes stack frame") {
            frame = text.to_owned();
        } else if text.starts_with("Used ") {
            lines.push(format!("{current:<24} {text}; {frame}"));
        } else if text.contains("bytes gmem") {
            lines.push(format!("{:<24} {text}", "(module)"));
        }
    }
    lines
}

/// The `ptxas` binary from the pinned wheel, installing the wheel into `cache` first when the
/// cache does not hold it yet.
pub fn ensure_ptxas(cache: &Path) -> Result<PathBuf, String> {
    let install_dir = cache.join(format!("{WHEEL}-{WHEEL_VERSION}"));
    if !install_dir.is_dir() {
        install_wheel(cache, &install_dir)?;
    }
    let ptxas = find_file(&install_dir, "ptxas").ok_or_else(|| {
        format!(
            "no `ptxas` inside {} (delete the directory to reinstall the wheel)",
            install_dir.display()
        )
    })?;
    make_executable(&ptxas)?;
    let version = Command::new(&ptxas)
        .arg("--version")
        .output()
        .map_err(|e| format!("running {} --version: {e}", ptxas.display()))?;
    let text = String::from_utf8_lossy(&version.stdout);
    if !version.status.success() || !text.contains(PTXAS_RELEASE) {
        return Err(format!(
            "{} --version did not report {PTXAS_RELEASE}:\n{text}",
            ptxas.display()
        ));
    }
    Ok(ptxas)
}

fn install_wheel(cache: &Path, install_dir: &Path) -> Result<(), String> {
    // pip writes into a staging directory that is renamed only after a complete install, so an
    // interrupted install is never mistaken for a usable cache.
    let staging = cache.join(format!("{WHEEL}-{WHEEL_VERSION}.partial"));
    if staging.exists() {
        fs::remove_dir_all(&staging).map_err(|e| format!("removing {}: {e}", staging.display()))?;
    }
    fs::create_dir_all(cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    println!(
        "ptxas: installing {WHEEL}=={WHEEL_VERSION} into {}",
        install_dir.display()
    );
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
        ])
        .arg(&staging)
        .arg(format!("{WHEEL}=={WHEEL_VERSION}"))
        .status()
        .map_err(|e| {
            format!("cannot run `python3 -m pip` to install {WHEEL}=={WHEEL_VERSION}: {e}")
        })?;
    if !status.success() {
        return Err(format!(
            "`python3 -m pip install --target {} --no-deps {WHEEL}=={WHEEL_VERSION}` failed ({status}); \
             ptxas validation cannot run without it",
            staging.display()
        ));
    }
    fs::rename(&staging, install_dir).map_err(|e| {
        format!(
            "renaming {} to {}: {e}",
            staging.display(),
            install_dir.display()
        )
    })
}

fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in &entries {
        if path.is_file() && path.file_name().is_some_and(|n| n == name) {
            return Some(path.clone());
        }
    }
    entries
        .iter()
        .filter(|p| p.is_dir())
        .find_map(|sub| find_file(sub, name))
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut permissions = metadata.permissions();
    if permissions.mode() & 0o111 == 0 {
        permissions.set_mode(permissions.mode() | 0o755);
        fs::set_permissions(path, permissions)
            .map_err(|e| format!("chmod {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_lines_pair_usage_with_entries() {
        let log = "ptxas info    : 0 bytes gmem, 65536 bytes cmem[3]\n\
                   ptxas info    : Compiling entry function 'chase_fine_shared' for 'sm_90'\n\
                   ptxas info    : Function properties for chase_fine_shared\n\
                   \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
                   ptxas info    : Used 18 registers, 400 bytes cmem[0]\n";
        assert_eq!(
            resource_lines(log),
            [
                "(module)                 0 bytes gmem, 65536 bytes cmem[3]",
                "chase_fine_shared        Used 18 registers, 400 bytes cmem[0]; \
                 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
            ]
        );
    }
}
