//! Output faults: a closed pipe, a full disk, paths that cannot be written.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

fn memtopo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memtopo"))
}

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch("outputs", name)
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

/// Waits up to `limit` for `child`; kills it when it runs longer. `None`: it had to be
/// killed.
fn wait_for(child: &mut std::process::Child, limit: std::time::Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_named_pipe_receives_the_whole_result() {
    let dir = scratch("fifo");
    let fifo = dir.join("result.json");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let mut child = memtopo()
        .args(["--simulate", "volta", "--only", "shared", "-q", "-o"])
        .arg(&fifo)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader, as `cat fifo` would read it: everything until the writer closes it.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let code = wait_for(&mut child, std::time::Duration::from_secs(120));
    if code.is_none() {
        // Unblock the reader if memtopo never opened the pipe.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    }
    let bytes = reader.join().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(code, Some(0), "memtopo ended? {err}");
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        topology::Topology::from_json_str(&text).is_ok(),
        "{} bytes through the pipe: {text}",
        text.len()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_read_only_output_is_refused_before_measuring() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("read-only");
    let kept = dir.join("kept.json");
    std::fs::write(&kept, "kept").unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = memtopo()
        .args([
            "--simulate",
            "volta",
            "--only",
            "shared",
            "-q",
            "--progress",
            "json",
        ])
        .arg("-o")
        .arg(&kept)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("read-only"), "{err}");
    assert!(
        !err.contains("measure_started"),
        "refused before measuring: {err}"
    );
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "kept");
    // A writable file is replaced and keeps its permissions.
    let private = dir.join("private.json");
    std::fs::write(&private, "old").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "shared", "-q", "-o"])
        .arg(&private)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(topology::Topology::load(&private).is_ok());
    let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::remove_dir_all(dir).unwrap();
}
