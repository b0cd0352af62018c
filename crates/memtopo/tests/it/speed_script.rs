//! The speed benchmark, `scripts/gpu/speed.py`, on the simulator: its parsers (the doctests)
//! and a comparison of two builds, whose JSON must hold what each run's own `--timings`
//! table says. Skipped, saying so, where there is no `python3`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> Option<Command> {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED the speed script's tests: no python3");
        return None;
    }
    let mut cmd = Command::new("python3");
    cmd.current_dir(workspace());
    Some(cmd)
}

fn script() -> PathBuf {
    workspace().join("scripts/gpu/speed.py")
}

/// The memtopo total, GPU and analysis of the `--timings` table in `text`.
fn table_totals(text: &str) -> (f64, f64, f64) {
    let line = text
        .lines()
        .find(|l| l.starts_with("total (including context creation)"))
        .expect("a total line");
    let numbers: Vec<f64> = line
        .split_whitespace()
        .rev()
        .take(3)
        .map(|n| n.parse().expect("a number"))
        .collect();
    (numbers[2], numbers[1], numbers[0])
}

#[test]
fn the_parsers_read_both_log_formats_and_the_timings() {
    let Some(mut python) = python() else {
        return;
    };
    let out = python
        .args(["-m", "doctest", "-v"])
        .arg(script())
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("0 failed"), "{text}");
}

#[test]
fn two_builds_are_compared_run_by_run() {
    let Some(mut python) = python() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("memtopo-speed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let memtopo = env!("CARGO_BIN_EXE_memtopo");
    let out = python
        .arg(script())
        .arg(&dir)
        .arg(format!("before={memtopo}"))
        .arg(format!("after={memtopo}"))
        .args(["--runs", "2", "--no-deep", "--device-all", "yes"])
        .args(["--simulate", "2xh100", "--extra=--only", "--extra=shared"])
        .env("MEMTOPO_LOCK_DIR", std::env::temp_dir())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The summary: one column per build, a row per figure.
    for row in [
        "first run, empty JIT cache",
        "warm runs, median of 2",
        "  GPU",
        "  host (total - GPU - analysis)",
        "--device all",
    ] {
        assert!(stdout.contains(row), "{row} not in\n{stdout}");
    }
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("speed.json")).expect("speed.json"))
            .expect("JSON");
    assert_eq!(record["schema"], "memtopo-speed/1");
    assert!(record["gpu"]["name"]
        .as_str()
        .is_some_and(|n| n.contains("H100")));
    let builds = record["builds"].as_array().expect("builds");
    assert_eq!(builds.len(), 2);
    for build in builds {
        assert_eq!(build["git_commit"], env!("MEMTOPO_GIT_COMMIT"));
        assert_eq!(build["sha256"].as_str().map(str::len), Some(64));
        let warm = build["warm"].as_array().expect("warm runs");
        assert_eq!(warm.len(), 2);
        for run in warm.iter().chain([&build["first"]]) {
            assert_eq!(run["exit_code"], 0);
            // The run's own table says what the record holds.
            let table =
                std::fs::read_to_string(run["table"].as_str().expect("table")).expect("table file");
            let (total, gpu, analysis) = table_totals(&table);
            let timings = &run["timings"][0];
            assert_eq!(timings["total_ms"].as_f64(), Some(total));
            assert_eq!(timings["gpu_ms"].as_f64(), Some(gpu));
            assert_eq!(timings["analysis_ms"].as_f64(), Some(analysis));
            let host = timings["host_ms"].as_f64().expect("host");
            assert!((host - (total - gpu - analysis)).abs() < 0.01);
            let names: Vec<&str> = timings["benchmarks"]
                .as_array()
                .expect("benchmarks")
                .iter()
                .filter_map(|b| b["name"].as_str())
                .collect();
            assert_eq!(names, ["clock calibration", "shared latency"]);
            assert!(run["wall_s"].as_f64().is_some_and(|w| w * 1e3 >= total));
            assert!(Path::new(run["result"].as_str().expect("result")).is_file());
        }
        let all = &build["device_all"];
        assert_eq!(all["exit_code"], 0);
        assert_eq!(all["timings"].as_array().map(Vec::len), Some(2));
        assert_eq!(build["warm_summary"]["runs"], 2);
    }
    // A folder that holds a record is not overwritten.
    let again = Command::new("python3")
        .arg(script())
        .arg(&dir)
        .arg(memtopo)
        .output()
        .expect("python3 runs");
    assert_eq!(again.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_binary_is_refused() {
    let Some(mut python) = python() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("memtopo-speed-missing-{}", std::process::id()));
    let out = python
        .arg(script())
        .arg(&dir)
        .arg("x=/nonexistent/memtopo")
        .output()
        .expect("python3 runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("no executable memtopo at /nonexistent/memtopo"));
    assert!(!dir.join("speed.json").exists());
}
