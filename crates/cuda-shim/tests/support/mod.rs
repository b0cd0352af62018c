//! Shared by the shim's integration tests: a log that records what the shim says, and the
//! fake driver built with the rustc of the running toolchain.
#![allow(dead_code)] // each test binary uses part of it

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Mutex, OnceLock},
};

/// Every log record of the test process, as text.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        LOG.lock()
            .unwrap()
            .push(format!("{} {}", record.level(), record.args()));
    }
    fn flush(&self) {}
}

/// Installs the recording logger (once per process).
pub fn record_log() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        log::set_logger(&Recorder).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
}

/// The log records so far that contain `needle`.
pub fn logged(needle: &str) -> Vec<String> {
    LOG.lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(needle))
        .cloned()
        .collect()
}

/// rustc beside the cargo that runs the tests (rustup and distribution installs both keep
/// them together), else the one on `PATH`.
fn rustc() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .and_then(|cargo| Some(cargo.parent()?.join("rustc")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("rustc"))
}

/// Builds `support/fake_driver.rs` as a shared library in `dir` and returns its path.
pub fn build_fake_driver(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let lib = dir.join("libcuda-fake.so");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fake_driver.rs");
    let status = Command::new(rustc())
        .args([
            "--crate-type",
            "cdylib",
            "--edition",
            "2021",
            "--crate-name",
            "cuda_fake",
        ])
        .arg("-o")
        .arg(&lib)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success(), "rustc could not build the fake driver");
    lib
}
