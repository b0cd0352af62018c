//! Output faults: a closed pipe, a full disk, paths that cannot be written.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

fn memtopo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memtopo"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memtopo-outputs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_closed_pipe_neither_panics_nor_loses_the_files() {
    let dir = scratch("pipe");
    let json = dir.join("t.json");
    let mut child = memtopo()
        .args(["--simulate", "volta", "--only", "shared", "--timings", "-o"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before memtopo prints anything: every write gets EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        topology::Topology::load(&json).is_ok(),
        "the file was written"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_missing_directory_is_refused_before_any_gpu_work() {
    // Without --simulate this would reach the driver (exit 3 without a GPU); the path
    // check comes first.
    let out = memtopo()
        .args(["-q", "-o", "/nonexistent-memtopo-dir/x.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

#[test]
fn a_path_below_a_file_is_refused_before_any_gpu_work() {
    let dir = scratch("below-file");
    let file = dir.join("plain");
    std::fs::write(&file, "x").unwrap();
    let out = memtopo()
        .arg("-q")
        .arg("-o")
        .arg(file.join("x.md"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a directory"), "{}", stderr(&out));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_directory_where_no_file_can_be_created_is_refused() {
    // /proc refuses new files even to root, unlike a chmod-ed directory.
    if !std::path::Path::new("/proc/self").exists() {
        return;
    }
    let out = memtopo()
        .args(["-q", "-o", "/proc/memtopo-test.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot create files in /proc"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_full_disk_fails_one_output_and_the_others_are_written() {
    let dir = scratch("full");
    let full = dir.join("full.json");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    let good = dir.join("good.toml");
    let md = dir.join("report.md");
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "shared", "-q"])
        .arg("-o")
        .arg(&full)
        .arg("-o")
        .arg(&good)
        .arg("-o")
        .arg(&md)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(
        err.contains("full.json") && err.contains("No space left"),
        "{err}"
    );
    assert!(topology::Topology::load(&good).is_ok(), "{err}");
    assert!(std::fs::read_to_string(&md)
        .unwrap()
        .starts_with("# Memory topology"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_full_standard_output_is_exit_code_6_after_the_files() {
    let dir = scratch("stdout-full");
    let json = dir.join("t.json");
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "shared", "-o"])
        .arg(&json)
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("standard output"), "{err}");
    assert!(topology::Topology::load(&json).is_ok());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_html_report_carries_the_runs_curves_and_their_change_points() {
    let dir = scratch("html");
    let html = dir.join("report.html");
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "l1", "-q", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let text = std::fs::read_to_string(&html).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
    assert!(text.starts_with("<!DOCTYPE html>"), "{text}");
    assert!(!text.contains("<script"));
    // The curves come from the run itself, each with the change its sweep found.
    assert!(text.contains("<figure>"), "no curve in the report");
    assert!(
        text.contains("change points (detected in this run)"),
        "{text}"
    );
}
