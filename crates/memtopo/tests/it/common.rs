//! What several test modules need: a fresh scratch folder per test, memtopo with a lock
//! folder of its own, and a node run of simulated H100s with one GPU perturbed.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use topology::fleet::Fleet;

/// An empty folder for test `name` of module `topic`, unique to this test process.
pub fn scratch(topic: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memtopo-{topic}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// memtopo with its own lock folder in `dir` (tests run in parallel), on a node named
/// `node`.
pub fn memtopo_on(dir: &Path, node: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memtopo"));
    command
        .env("MEMTOPO_LOCK_DIR", dir.join("locks"))
        .env("SLURMD_NODENAME", node)
        .env_remove("RUST_LOG");
    command
}

/// A node run (`-d all -q`, results in `dir/res/`, removed after) of `gpus` simulated
/// H100s, GPU i with the noise of seed `seed + i` and GPU `faulty.0` perturbed by
/// `faulty.1`, measuring `only`, the links too where `peers`: its exit code and the node
/// summary.
pub fn simulated_h100_node(
    dir: &Path,
    gpus: usize,
    seed: u64,
    faulty: Option<(usize, &str)>,
    only: &str,
    peers: bool,
) -> (i32, Fleet) {
    let specs: Vec<String> = (0..gpus)
        .map(|i| match faulty.filter(|(at, _)| *at == i) {
            Some((_, perturbation)) => format!("h100:seed={}:{perturbation}", seed + i as u64),
            None => format!("h100:seed={}", seed + i as u64),
        })
        .collect();
    let mut command = memtopo_on(dir, "simnode");
    command
        .args([
            "--simulate",
            &specs.join(","),
            "-d",
            "all",
            "--only",
            only,
            "-q",
        ])
        .arg("-o")
        .arg(dir.join("res/"));
    if !peers {
        command.arg("--no-peers");
    }
    let out = command.output().unwrap();
    let text = std::fs::read_to_string(dir.join("res/node-simnode.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let _ = std::fs::remove_dir_all(dir.join("res"));
    (
        out.status.code().unwrap(),
        Fleet::from_json_str(&text).unwrap(),
    )
}
