//! Every `CUresult` the driver can return, known or newer than memtopo, gets one clear
//! line and a documented exit code, never undefined behaviour. The codes come from the
//! stand-in driver that `cargo xtask test` loads (`docs/building.md`), scripted by
//! `MEMTOPO_STAND_IN`; on a machine with a real driver the stand-in is not loaded and
//! these tests check nothing more than that.

use std::process::{Command, Output};

use pchase_runner::cuda::{error_name, known_error_codes};

/// Codes no table of memtopo knows (newer drivers, or garbage).
const UNKNOWN: [u32; 5] = [47, 917, 1000, 4242, u32::MAX];

fn memtopo(script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memtopo"))
        .args(["--only", "shared", "-q"])
        .env("MEMTOPO_STAND_IN", script)
        .env("MEMTOPO_LOCK_DIR", std::env::temp_dir())
        .output()
        .unwrap()
}

/// Whether the scriptable stand-in, not a driver, answers. Under `cargo xtask`, which
/// sets `MEMTOPO_STAND_IN_LOADED` when it puts the stand-in on the loader path, it must.
fn stand_in_loaded() -> bool {
    let out = memtopo("cuInit=101");
    let scripted = String::from_utf8_lossy(&out.stderr).contains("CUDA_ERROR_INVALID_DEVICE (101)");
    if std::env::var_os("MEMTOPO_STAND_IN_LOADED").is_some() {
        assert!(
            scripted,
            "the stand-in is loaded but does not follow MEMTOPO_STAND_IN"
        );
    }
    scripted
}

fn check_line(out: &Output, code: u32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let last = stderr.lines().last().unwrap_or_default().to_string();
    assert!(
        last.starts_with("memtopo: error: "),
        "code {code}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "code {code}: {stderr}");
    match error_name(code) {
        Some(name) => assert!(last.contains(&format!("{name} ({code})")), "{last}"),
        None => assert!(
            last.contains(&format!("CUDA error {code}, unknown to memtopo")),
            "{last}"
        ),
    }
    last
}

#[test]
fn every_code_from_cu_init_is_named_and_exits_3() {
    if !stand_in_loaded() {
        return;
    }
    for code in known_error_codes().filter(|&c| c != 0).chain(UNKNOWN) {
        let out = memtopo(&format!("cuInit={code}"));
        let expected = match code {
            100 => {
                // NO_DEVICE has its own short message.
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(stderr.contains("no CUDA-capable GPU found"), "{stderr}");
                assert_eq!(out.status.code(), Some(3));
                continue;
            }
            46 => 8,
            _ => 3,
        };
        check_line(&out, code);
        assert_eq!(out.status.code(), Some(expected), "code {code}");
    }
}

#[test]
fn every_code_from_context_creation_is_named_and_a_busy_gpu_is_exit_8() {
    if !stand_in_loaded() {
        return;
    }
    let ok = "cuInit=0,cuDeviceGetCount=0,cuDeviceGet=0,cuDeviceGetName=0,\
              cuDeviceGetUuid_v2=0,cuDeviceGetPCIBusId=0,cuDriverGetVersion=0";
    for code in known_error_codes().filter(|&c| c != 0).chain(UNKNOWN) {
        let out = memtopo(&format!("{ok},cuCtxCreate_v2={code}"));
        let last = check_line(&out, code);
        if code == 46 {
            assert_eq!(out.status.code(), Some(8), "{last}");
            assert!(last.contains("busy"), "{last}");
        } else {
            assert_eq!(out.status.code(), Some(7), "code {code}: {last}");
            assert!(last.contains("cuCtxCreate"), "{last}");
        }
    }
}
