//! Records the git commit memtopo is built from (`MEMTOPO_GIT_COMMIT`) for the run record.
//! A build outside a git checkout may set `MEMTOPO_GIT_COMMIT` itself; else "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=MEMTOPO_GIT_COMMIT");
    let commit = std::env::var("MEMTOPO_GIT_COMMIT").ok().or_else(|| {
        let hash = git(&["rev-parse", "--short=12", "HEAD"])?;
        let dirty =
            git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        Some(if dirty { format!("{hash}-dirty") } else { hash })
    });
    // Rebuild when HEAD moves (a commit, a checkout) or the index changes.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
                println!("cargo:rerun-if-changed={common}/{head}");
            }
        }
    }
    println!(
        "cargo:rustc-env=MEMTOPO_GIT_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
}
