//! The scriptable stand-in driver for tests (`cargo xtask test`).
//!
//! memtopo loads the CUDA driver at run time (`crates/cuda-shim`, `docs/building.md`), so
//! nothing needs a stand-in to build or link. Tests of how memtopo reports every driver
//! error (`crates/memtopo/tests/it/driver_errors.rs`) need a driver that answers chosen
//! codes: on a machine without a real driver, `cargo xtask test` builds this one, a
//! shared library exporting every `cu*` entry point cust_raw declares, and points
//! `MEMTOPO_LIBCUDA` at it (and sets `MEMTOPO_STAND_IN_LOADED=1`, so that those tests
//! insist that it works). Each entry point answers `CUDA_ERROR_NO_DEVICE` (100) unless the
//! environment variable `MEMTOPO_STAND_IN` scripts another answer (see
//! [`stand_in_source`]). On a GPU machine the tests run against the real driver.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

/// Where the stand-in was built, if this machine has no real driver and tests should load it.
#[derive(Debug)]
pub struct StandIn {
    library: Option<PathBuf>,
}

impl StandIn {
    /// Builds the stand-in under the target directory when no real driver is present.
    pub fn prepare(workspace: &Path) -> Result<StandIn, String> {
        if real_driver_present() {
            return Ok(StandIn { library: None });
        }
        let root = super::target_dir(workspace).join("cuda-stand-in");
        Ok(StandIn {
            library: Some(build_stand_in(workspace, &root)?),
        })
    }

    /// Points a command (cargo running tests) at the stand-in, if one was built.
    pub fn apply(&self, cmd: &mut Command) {
        if let Some(library) = &self.library {
            cmd.env("MEMTOPO_LIBCUDA", library);
            cmd.env("MEMTOPO_STAND_IN_LOADED", "1");
        }
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        match &self.library {
            None => "CUDA: a driver is installed; tests run against it".to_string(),
            Some(lib) => format!(
                "CUDA: no driver found; tests load the scriptable stand-in {} (MEMTOPO_LIBCUDA)",
                lib.display()
            ),
        }
    }
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

/// The Rust identifier `text` starts with (empty if none).
pub fn leading_identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Every `cu*` function cust_raw declares, sorted and without duplicates.
pub fn entry_points(bindings: &str) -> Vec<String> {
    let mut names: Vec<String> = bindings
        .split("pub fn ")
        .skip(1)
        .filter_map(|rest| {
            let name = leading_identifier(rest);
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
    "cuDeviceGetUuid_v2",
    "cuDeviceGetPCIBusId",
    "cuDriverGetVersion",
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemCreate",
];

/// Rust source of the stand-in library.
///
/// Every entry point answers `CUDA_ERROR_NO_DEVICE` (100), unless the environment
/// variable `MEMTOPO_STAND_IN` lists it as `name=code` (comma-separated), e.g.
/// `cuInit=0,cuDeviceGetCount=0,cuDeviceGet=0,cuCtxCreate_v2=46`: then it answers that
/// code. Scripted to succeed, `cuDeviceGetCount` reports the GPUs visible,
/// `cuDeviceGet` the physical GPU of the ordinal asked for, `cuDeviceGetUuid_v2` and
/// `cuDeviceGetPCIBusId` that GPU's UUID (`a0 5a … 5a i`, i its physical index) and bus id
/// (`00000000:0i:00.0`), `cuDriverGetVersion` 12080, and of the virtual memory management
/// API `cuMemGetAllocationGranularity` 2 MiB, `cuMemAddressReserve` the address 2^44 and
/// `cuMemCreate` handles 1, 2, 3, … (so that the chunked TLB region's teardown after each
/// failing call is covered, `crates/pchase-runner/tests/vmm.rs`); the others write nothing. The
/// machine has `MEMTOPO_STAND_IN_GPUS` GPUs (default 1), of which `CUDA_VISIBLE_DEVICES`
/// (indices, comma-separated) makes those listed visible, renumbered from 0 in its order,
/// as the real driver does. The error
/// text functions describe only code 100 and answer `CUDA_ERROR_INVALID_VALUE` for any
/// other code, as a driver does for a code it does not know.
pub fn stand_in_source(entry_points: &[String]) -> String {
    let mut src = String::from(
        "// Generated by `cargo xtask`: a scriptable stand-in for libcuda.so.1, for tests. Do not edit.\n\
         #![allow(non_snake_case, clippy::missing_safety_doc)]\n\
         use std::os::raw::{c_char, c_int};\n\
         const NO_DEVICE: u32 = 100;\n\
         const INVALID_VALUE: u32 = 1;\n\
         static NO_DEVICE_TEXT: &[u8] = b\"no CUDA driver on this machine (memtopo's test stand-in for libcuda answered)\\0\";\n\
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
         /// The physical GPUs visible, in CUDA's order (`CUDA_VISIBLE_DEVICES` renumbers).\n\
         fn visible() -> Vec<c_int> {\n\
         \x20   let gpus: c_int = std::env::var(\"MEMTOPO_STAND_IN_GPUS\").ok().and_then(|n| n.trim().parse().ok()).unwrap_or(1);\n\
         \x20   match std::env::var(\"CUDA_VISIBLE_DEVICES\") {\n\
         \x20       Ok(list) => list.split(',').map_while(|i| i.trim().parse::<c_int>().ok().filter(|i| (0..gpus).contains(i))).collect(),\n\
         \x20       Err(_) => (0..gpus).collect(),\n\
         \x20   }\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDeviceGetCount(count: *mut c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDeviceGetCount\");\n\
         \x20   if code == 0 && !count.is_null() { unsafe { *count = visible().len() as c_int }; }\n\
         \x20   code\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDeviceGet\");\n\
         \x20   if code != 0 || device.is_null() { return code; }\n\
         \x20   match usize::try_from(ordinal).ok().and_then(|o| visible().get(o).copied()) {\n\
         \x20       Some(physical) => { unsafe { *device = physical }; 0 }\n\
         \x20       None => 101,\n\
         \x20   }\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDeviceGetUuid_v2(uuid: *mut u8, device: c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDeviceGetUuid_v2\");\n\
         \x20   if code == 0 && !uuid.is_null() {\n\
         \x20       let mut bytes = [0x5au8; 16];\n\
         \x20       bytes[0] = 0xa0;\n\
         \x20       bytes[15] = device as u8;\n\
         \x20       unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), uuid, 16) };\n\
         \x20   }\n\
         \x20   code\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDeviceGetPCIBusId(bus: *mut c_char, len: c_int, device: c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDeviceGetPCIBusId\");\n\
         \x20   let text = format!(\"00000000:{:02x}:00.0\\0\", device);\n\
         \x20   if code == 0 && !bus.is_null() && len as usize >= text.len() {\n\
         \x20       unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), bus, text.len()) };\n\
         \x20   }\n\
         \x20   code\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuDriverGetVersion(version: *mut c_int) -> u32 {\n\
         \x20   let code = answer(\"cuDriverGetVersion\");\n\
         \x20   if code == 0 && !version.is_null() { unsafe { *version = 12080 }; }\n\
         \x20   code\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuMemGetAllocationGranularity(granularity: *mut usize, _prop: *const u8, _option: c_int) -> u32 {\n\
         \x20   let code = answer(\"cuMemGetAllocationGranularity\");\n\
         \x20   if code == 0 && !granularity.is_null() { unsafe { *granularity = 2 << 20 }; }\n\
         \x20   code\n\
         }\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuMemAddressReserve(ptr: *mut u64, _size: usize, _alignment: usize, _addr: u64, _flags: u64) -> u32 {\n\
         \x20   let code = answer(\"cuMemAddressReserve\");\n\
         \x20   if code == 0 && !ptr.is_null() { unsafe { *ptr = 1 << 44 }; }\n\
         \x20   code\n\
         }\n\
         static NEXT_HANDLE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn cuMemCreate(handle: *mut u64, _size: usize, _prop: *const u8, _flags: u64) -> u32 {\n\
         \x20   let code = answer(\"cuMemCreate\");\n\
         \x20   if code == 0 && !handle.is_null() { unsafe { *handle = NEXT_HANDLE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) }; }\n\
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

/// Builds the stand-in as `root/libcuda.so.1` (if its source changed) and returns its path.
fn build_stand_in(workspace: &Path, root: &Path) -> Result<PathBuf, String> {
    let bindings_path = crate::metadata::package_dir(workspace, "cust_raw")?.join("src/cuda.rs");
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
    let src_path = root.join("libcuda_stand_in.rs");
    let lib = root.join("libcuda.so.1");
    if fs::read_to_string(&src_path).is_ok_and(|old| old == source) && lib.is_file() {
        return Ok(lib);
    }
    fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    fs::write(&src_path, &source).map_err(|e| format!("cannot write stand-in source: {e}"))?;
    let status = Command::new(env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--crate-type", "cdylib", "--edition", "2021", "-O"])
        .args(["--crate-name", "cuda_stand_in"])
        .arg("-o")
        .arg(&lib)
        .arg(&src_path)
        .status()
        .map_err(|e| format!("cannot run rustc for the stand-in: {e}"))?;
    if !status.success() {
        return Err("rustc failed to build the libcuda stand-in".into());
    }
    Ok(lib)
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
