//! The CUDA environment for cargo: the real toolkit where one is installed, otherwise a
//! link-time stand-in for `libcuda.so`.
//!
//! cust 0.3.2 links `-lcuda` and its build script (cust_raw through find_cuda_helper)
//! panics when it finds no CUDA installation. On a machine with only the Rust toolchain we
//! therefore build a small shared library, soname `libcuda.so.1`, that exports every `cu*`
//! entry point cust_raw declares; each returns `CUDA_ERROR_NO_DEVICE` (100) unless the
//! environment variable `MEMTOPO_STAND_IN` scripts another answer (see
//! [`stand_in_source`]), so that tests can make any call fail with any code. `CUDA_LIBRARY_PATH` then points at the directory holding its
//! `lib64/`, which is what the build script accepts.
//!
//! The stand-in is put on `LD_LIBRARY_PATH` only when the loader cannot find a real
//! `libcuda.so.1`: on a GPU machine the driver always wins. A binary linked against the
//! stand-in records only the soname, so on a GPU machine it resolves to the real driver.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

/// How cargo commands get to see CUDA.
#[derive(Debug)]
pub enum CudaEnv {
    /// A CUDA toolkit (or a user-provided `CUDA_LIBRARY_PATH`) is there: change nothing.
    Toolkit,
    /// The stand-in was built at `root/lib64`; `on_loader_path` says whether tests must load it.
    StandIn { root: PathBuf, on_loader_path: bool },
}

impl CudaEnv {
    /// Finds a CUDA installation the way find_cuda_helper 0.2 does, or builds the stand-in.
    pub fn detect(workspace: &Path) -> Result<CudaEnv, String> {
        if env::var_os("CUDA_LIBRARY_PATH").is_some() || toolkit_lib_dir().is_some() {
            return Ok(CudaEnv::Toolkit);
        }
        let root = target_dir(workspace).join("cuda-stub");
        build_stand_in(workspace, &root)?;
        Ok(CudaEnv::StandIn {
            root,
            on_loader_path: !real_driver_present(),
        })
    }

    /// Applies the environment to a command about to run cargo or a built binary.
    pub fn apply(&self, cmd: &mut Command) {
        if let CudaEnv::StandIn {
            root,
            on_loader_path,
        } = self
        {
            cmd.env("CUDA_LIBRARY_PATH", root);
            if *on_loader_path {
                let lib = root.join("lib64");
                let mut paths = vec![lib];
                if let Some(old) = env::var_os("LD_LIBRARY_PATH") {
                    paths.extend(env::split_paths(&old));
                }
                cmd.env(
                    "LD_LIBRARY_PATH",
                    env::join_paths(paths).expect("paths without ':'"),
                );
                // Tests that script the stand-in's answers must then find it working.
                cmd.env("MEMTOPO_STAND_IN_LOADED", "1");
            }
        }
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        match self {
            CudaEnv::Toolkit => "CUDA: using the installed toolkit".to_string(),
            CudaEnv::StandIn {
                root,
                on_loader_path: true,
            } => format!(
                "CUDA: no toolkit found; linking and testing against the stand-in libcuda in {}",
                root.join("lib64").display()
            ),
            CudaEnv::StandIn {
                root,
                on_loader_path: false,
            } => format!(
                "CUDA: no toolkit found; linking against the stand-in in {} but running against the real driver",
                root.join("lib64").display()
            ),
        }
    }
}

/// The `lib64` directories find_cuda_helper 0.2 would accept on Linux.
fn toolkit_lib_dir() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("/opt/cuda"), PathBuf::from("/usr/local/cuda")];
    if let Ok(entries) = fs::read_dir("/usr/local") {
        let mut versioned: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cuda-"))
            })
            .collect();
        versioned.sort();
        candidates.extend(versioned);
    }
    candidates.into_iter().find_map(|base| {
        let lib = base.join("lib64");
        if lib.is_dir() {
            return Some(lib);
        }
        let targets = base.join("targets/x86_64-linux");
        targets
            .join("include/cuda.h")
            .is_file()
            .then(|| targets.join("lib"))
    })
}

/// Whether the dynamic loader would find a real NVIDIA driver library.
fn real_driver_present() -> bool {
    if let Ok(out) = Command::new("ldconfig").arg("-p").output() {
        if String::from_utf8_lossy(&out.stdout).contains("libcuda.so.1") {
            return true;
        }
    }
    [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib64/libcuda.so.1",
        "/usr/local/nvidia/lib64/libcuda.so.1",
        "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

/// Cargo's target directory, honouring `CARGO_TARGET_DIR`.
pub fn target_dir(workspace: &Path) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
}

/// The path of cust_raw's bindings, found through `cargo metadata` (no build needed).
fn cust_raw_bindings(workspace: &Path) -> Result<PathBuf, String> {
    let out = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1"])
        .current_dir(workspace)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed invalid JSON: {e}"))?;
    let manifest = meta["packages"]
        .as_array()
        .and_then(|pkgs| pkgs.iter().find(|p| p["name"] == "cust_raw"))
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("cust_raw is not in the dependency graph")?;
    Ok(Path::new(manifest)
        .parent()
        .ok_or("cust_raw's manifest has no parent directory")?
        .join("src/cuda.rs"))
}

/// Every `cu*` function cust_raw declares, sorted and without duplicates.
pub fn entry_points(bindings: &str) -> Vec<String> {
    let mut names: Vec<String> = bindings
        .split("pub fn ")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (name.starts_with("cu") && rest[name.len()..].starts_with('(')).then_some(name)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Entry points the stand-in implements by hand: they write their out-parameter when
/// scripted to succeed, so that a test can get past them to the call it means to fail.
const HAND_WRITTEN: &[&str] = &[
    "cuGetErrorString",
    "cuGetErrorName",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDriverGetVersion",
];

/// Rust source of the stand-in library.
///
/// Every entry point answers `CUDA_ERROR_NO_DEVICE` (100), unless the environment
/// variable `MEMTOPO_STAND_IN` lists it as `name=code` (comma-separated), e.g.
/// `cuInit=0,cuDeviceGetCount=0,cuDeviceGet=0,cuCtxCreate_v2=46`: then it answers that
/// code. Scripted to succeed, `cuDeviceGetCount` reports one device, `cuDeviceGet` the
/// ordinal asked for and `cuDriverGetVersion` 12080; the others write nothing. The error
/// text functions describe only code 100 and answer `CUDA_ERROR_INVALID_VALUE` for any
/// other code, as a driver does for a code it does not know.
pub fn stand_in_source(entry_points: &[String]) -> String {
    let mut src = String::from(
        "// Generated by `cargo xtask`: a link-time stand-in for libcuda.so.1. Do not edit.\n\
         #![allow(non_snake_case, clippy::missing_safety_doc)]\n\
         use std::os::raw::{c_char, c_int};\n\
         const NO_DEVICE: u32 = 100;\n\
         const INVALID_VALUE: u32 = 1;\n\
         static NO_DEVICE_TEXT: &[u8] = b\"no CUDA driver on this machine (memtopo's link stand-in for libcuda answered)\\0\";\n\
         static NO_DEVICE_NAME: &[u8] = b\"CUDA_ERROR_NO_DEVICE\\0\";\n\
         /// The scripted answer of `name`, else NO_DEVICE.\n\
         fn answer(name: &str) -> u32 {\n\
         \x20   let Ok(script) = std::env::var(\"MEMTOPO_STAND_IN\") else { return NO_DEVICE };\n\
         \x20   script.split(',').filter_map(|e| e.split_once('=')).find(|(n, _)| n.trim() == name)\n\
         \x20       .and_then(|(_, code)| code.trim().parse().ok()).unwrap_or(NO_DEVICE)\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuGetErrorString(error: u32, text: *mut *const c_char) -> u32 {\n\
         \x20   if text.is_null() || error != NO_DEVICE { return INVALID_VALUE; }\n\
         \x20   unsafe { *text = NO_DEVICE_TEXT.as_ptr().cast() };\n\
         \x20   0\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuGetErrorName(error: u32, name: *mut *const c_char) -> u32 {\n\
         \x20   if name.is_null() || error != NO_DEVICE { return INVALID_VALUE; }\n\
         \x20   unsafe { *name = NO_DEVICE_NAME.as_ptr().cast() };\n\
         \x20   0\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDeviceGetCount(count: *mut c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDeviceGetCount\");\n\
         \x20   if code == 0 && !count.is_null() { unsafe { *count = 1 }; }\n\
         \x20   code\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDeviceGet\");\n\
         \x20   if code == 0 && !device.is_null() { unsafe { *device = ordinal }; }\n\
         \x20   code\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDriverGetVersion(version: *mut c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDriverGetVersion\");\n\
         \x20   if code == 0 && !version.is_null() { unsafe { *version = 12080 }; }\n\
         \x20   code\n\
         }\n",
    );
    for name in entry_points {
        if HAND_WRITTEN.contains(&name.as_str()) {
            continue;
        }
        // The arguments are never read, so one signature serves every entry point under
        // the C calling convention.
        src.push_str(&format!(
            "#[no_mangle]\npub extern \"C\" fn {name}() -> u32 {{ answer(\"{name}\") }}\n"
        ));
    }
    src
}

fn build_stand_in(workspace: &Path, root: &Path) -> Result<(), String> {
    let bindings_path = cust_raw_bindings(workspace)?;
    let bindings = fs::read_to_string(&bindings_path)
        .map_err(|e| format!("cannot read {}: {e}", bindings_path.display()))?;
    let names = entry_points(&bindings);
    if names.len() < 100 {
        return Err(format!(
            "found only {} cu* entry points in {}; the bindings changed shape",
            names.len(),
            bindings_path.display()
        ));
    }
    let source = stand_in_source(&names);
    let lib64 = root.join("lib64");
    let src_path = root.join("libcuda_stand_in.rs");
    let lib = lib64.join("libcuda.so");
    let soname = lib64.join("libcuda.so.1");
    let up_to_date = fs::read_to_string(&src_path).is_ok_and(|old| old == source)
        && lib.is_file()
        && soname.is_file();
    if up_to_date {
        return Ok(());
    }
    fs::create_dir_all(&lib64).map_err(|e| format!("cannot create {}: {e}", lib64.display()))?;
    fs::write(&src_path, &source).map_err(|e| format!("cannot write stand-in source: {e}"))?;
    let status = Command::new(env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--crate-type", "cdylib", "--edition", "2021", "-O"])
        .args(["--crate-name", "cuda"])
        .args(["-C", "link-arg=-Wl,-soname,libcuda.so.1"])
        .arg("-o")
        .arg(&lib)
        .arg(&src_path)
        .status()
        .map_err(|e| format!("cannot run rustc for the stand-in: {e}"))?;
    if !status.success() {
        return Err("rustc failed to build the libcuda stand-in".into());
    }
    fs::copy(&lib, &soname).map_err(|e| format!("cannot copy the stand-in to its soname: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_are_parsed_from_bindgen_output() {
        let text = "extern \"C\" {\n    pub fn cuInit(Flags: c_uint) -> CUresult;\n}\n\
                    extern \"C\" {\n    pub fn cuCtxCreate_v2(pctx: *mut CUcontext) -> CUresult;\n}\n\
                    pub fn not_cuda() {}\n pub fn cuInit(Flags: c_uint) -> CUresult;";
        assert_eq!(entry_points(text), vec!["cuCtxCreate_v2", "cuInit"]);
    }

    #[test]
    fn error_text_functions_are_written_once() {
        let names = vec!["cuGetErrorName".to_string(), "cuInit".to_string()];
        let src = stand_in_source(&names);
        assert_eq!(src.matches("fn cuGetErrorName").count(), 1);
        assert_eq!(src.matches("fn cuInit()").count(), 1);
        assert!(src.contains("answer(\"cuInit\")"));
    }
}
