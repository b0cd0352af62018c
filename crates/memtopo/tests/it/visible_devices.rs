//! `CUDA_VISIBLE_DEVICES` renumbers CUDA devices: the lock must follow the
//! physical GPU, by its UUID, whatever index this process sees it under. The stand-in
//! driver (`docs/building.md`) plays a machine of `MEMTOPO_STAND_IN_GPUS` GPUs whose UUIDs
//! end in their physical index, and renumbers them by `CUDA_VISIBLE_DEVICES` as the real
//! driver does. Context creation is scripted to fail, so each run stops right after the
//! lock: exit 8 where the lock is held, exit 7 (the context) where it is not.

use std::{fs::OpenOptions, path::Path, process::Output};

/// The UUID the stand-in gives physical GPU `index`, as memtopo writes it.
fn uuid(index: u8) -> String {
    format!("GPU-a05a5a5a-5a5a-5a5a-5a5a-5a5a5a5a5a{index:02x}")
}

fn memtopo(lock_dir: &Path, device: u32, visible: Option<&str>) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memtopo"));
    cmd.args(["--only", "shared", "-q", "--wait", "0", "--device"])
        .arg(device.to_string())
        .env(
            "MEMTOPO_STAND_IN",
            "cuInit=0,cuDeviceGetCount=0,cuDeviceGet=0,cuDeviceGetName=0,\
             cuDeviceGetUuid_v2=0,cuDeviceGetPCIBusId=0,cuDriverGetVersion=0,cuCtxCreate_v2=999",
        )
        .env("MEMTOPO_STAND_IN_GPUS", "2")
        .env("MEMTOPO_LOCK_DIR", lock_dir)
        .env_remove("CUDA_VISIBLE_DEVICES");
    if let Some(list) = visible {
        cmd.env("CUDA_VISIBLE_DEVICES", list);
    }
    cmd.output().expect("memtopo runs")
}

fn stand_in_loaded() -> bool {
    std::env::var_os("MEMTOPO_STAND_IN_LOADED").is_some()
}

#[test]
fn the_lock_follows_the_uuid_not_the_index() {
    if !stand_in_loaded() {
        eprintln!("skipped: the stand-in driver is not loaded (run under cargo xtask test)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("memtopo-visible-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("lock dir");
    // Unlocked, device 0 of `CUDA_VISIBLE_DEVICES=1` is physical GPU 1: its lock file is
    // named by GPU 1's UUID, and the run goes on to the context (exit 7).
    let out = memtopo(&dir, 0, Some("1"));
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let lock_path = dir.join(format!("{}.lock", uuid(1)));
    assert!(lock_path.exists(), "no lock file {}", lock_path.display());
    assert!(!dir.join(format!("{}.lock", uuid(0))).exists());

    // Another process holds GPU 1's lock: every index that names GPU 1 waits for it.
    let held = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
        .expect("lock file opens");
    fs4::FileExt::try_lock(&held).expect("the test takes the lock");
    for (device, visible) in [
        (0, Some("1")),
        (1, None),
        (1, Some("0,1")),
        (0, Some("1,0")),
    ] {
        let out = memtopo(&dir, device, visible);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(8),
            "device {device}, CUDA_VISIBLE_DEVICES {visible:?}: {stderr}"
        );
        assert!(stderr.contains(&uuid(1)), "{stderr}");
    }
    // GPU 0 is free under any index.
    for (device, visible) in [(0, None), (1, Some("1,0")), (0, Some("0"))] {
        let out = memtopo(&dir, device, visible);
        assert_eq!(
            out.status.code(),
            Some(7),
            "device {device}, CUDA_VISIBLE_DEVICES {visible:?}: {out:?}"
        );
    }
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}
