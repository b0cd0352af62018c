//! `--progress json` (every line on stderr is one JSON event), `-q` (failures and
//! warnings still on stderr) and device indices.

use std::process::{Command, Output};

use serde_json::Value;

fn memtopo() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memtopo"));
    cmd.env("MEMTOPO_LOCK_DIR", std::env::temp_dir());
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every line of standard error, each parsed as one JSON object with `event` and `t`.
fn events(out: &Output) -> Vec<Value> {
    stderr(out)
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            assert!(event["event"].is_string(), "{line}");
            assert!(event["t"].as_f64().is_some_and(|t| t >= 0.0), "{line}");
            event
        })
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

#[test]
fn json_progress_is_one_event_per_line_ending_in_the_summary() {
    let out = memtopo()
        .args([
            "--simulate",
            "volta",
            "--only",
            "l1,shared",
            "--progress",
            "json",
        ])
        .args(["-o", "-"])
        .output()
        .unwrap();
    let events = events(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        topology::Topology::from_json_str(&String::from_utf8_lossy(&out.stdout)).is_ok(),
        "standard output still carries the JSON document alone"
    );
    let started = of_kind(&events, "measure_started");
    assert_eq!(started.len(), 1);
    let planned = started[0]["steps"].as_u64().unwrap();
    let benchmarks = of_kind(&events, "benchmark_started");
    let finished = of_kind(&events, "benchmark_finished");
    assert!(benchmarks.len() > 3, "{benchmarks:?}");
    assert_eq!(benchmarks.len(), finished.len());
    for (i, (b, f)) in benchmarks.iter().zip(&finished).enumerate() {
        assert_eq!(b["step"].as_u64(), Some(i as u64 + 1), "{b}");
        assert_eq!(b["benchmark"], f["benchmark"]);
        assert!(b["steps"].as_u64().unwrap() >= b["step"].as_u64().unwrap());
        assert!(b["elapsed_s"].as_f64().is_some(), "{b}");
        assert!(f["wall_s"].as_f64().is_some_and(|w| w >= 0.0), "{f}");
        // The time left is known once a step is done.
        assert_eq!(b["eta_s"].is_null(), i == 0, "{b}");
    }
    assert_eq!(
        planned,
        benchmarks.len() as u64,
        "the plan of l1,shared on Volta is exact"
    );
    assert!(benchmarks[0]["benchmark"] == "clock calibration");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "summary", "{last}");
    assert_eq!(last["exit_code"], 0);
    assert!(last["error"].is_null());
    assert_eq!(last["benchmarks"].as_u64(), Some(benchmarks.len() as u64));
    assert_eq!(of_kind(&events, "measure_finished").len(), 1);
}

#[test]
fn json_progress_reports_an_early_error_in_the_summary() {
    let out = memtopo()
        .args(["--simulate", "no-such-gpu", "--progress", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let events = events(&out);
    let message = of_kind(&events, "message");
    assert_eq!(message.len(), 1, "{events:?}");
    assert_eq!(message[0]["level"], "error");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "summary");
    assert_eq!(last["exit_code"], 5);
    assert!(
        last["error"].as_str().unwrap().contains("no-such-gpu"),
        "{last}"
    );
    assert!(of_kind(&events, "measure_started").is_empty());
}

#[test]
fn quiet_still_prints_failures_and_warnings() {
    // A Volta whose L1 does not serve texture loads: the texture benchmark fails (exit 1).
    let volta =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/profiles/volta.toml");
    let text = std::fs::read_to_string(volta).unwrap().replace(
        r#"paths = ["global_ca", "global_nc", "texture"]"#,
        r#"paths = ["global_ca", "global_nc"]"#,
    );
    let profile = std::env::temp_dir().join(format!("memtopo-notex-{}.toml", std::process::id()));
    std::fs::write(&profile, text).unwrap();
    let out = memtopo()
        .arg("--simulate")
        .arg(&profile)
        .args(["--only", "texture", "-q"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&profile);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "no table under -q");
    assert!(
        err.lines()
            .any(|l| l.starts_with("memtopo: error: Texture: not measured: no SM cache serves")),
        "{err}"
    );
    // Volta's constant L1.5 is only a bound: a warning, also under -q.
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "constant-l15", "-q"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("memtopo: warning: Constant L1.5: only a lower bound"),
        "{err}"
    );
}

#[test]
fn a_negative_device_index_says_what_indices_are() {
    let out = memtopo().args(["--device", "-1"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`-1` is not a device index"), "{err}");
    assert!(
        err.contains("0 to N-1") && err.contains("nvidia-smi -L"),
        "{err}"
    );
}

#[test]
fn a_device_index_past_the_last_is_exit_4_with_the_count() {
    // The stand-in driver (`cargo xtask test`) reports one device when scripted so.
    if std::env::var_os("MEMTOPO_STAND_IN_LOADED").is_none() {
        return;
    }
    let out = memtopo()
        .args(["--device", "3", "--only", "shared", "-q"])
        .env("MEMTOPO_STAND_IN", "cuInit=0,cuDeviceGetCount=0")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("device 3 does not exist: this machine has 1 CUDA device(s)"),
        "{err}"
    );
    assert!(err.contains("numbered 0 to N-1"), "{err}");
}

#[test]
fn usage_errors_under_json_progress_are_events_ending_in_the_summary() {
    for args in [
        &["--simulate", "volta", "--progress", "json", "--bogus"][..],
        &["--progress=json", "--samples", "many"],
        &["--progress", "json", "--device", "-1"],
    ] {
        let out = memtopo().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let events = events(&out);
        let messages = of_kind(&events, "message");
        assert_eq!(messages.len(), 1, "{args:?}: {events:?}");
        assert_eq!(messages[0]["level"], "error");
        let last = events.last().unwrap();
        assert_eq!(last["event"], "summary", "{last}");
        assert_eq!(last["exit_code"], 2);
        assert_eq!(last["error"], messages[0]["message"]);
    }
    // Without json progress: clap's own text.
    let out = memtopo().args(["--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("Usage:"), "{}", stderr(&out));
}
