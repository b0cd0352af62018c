//! The command line end to end, on simulated GPUs and on bad input.

use std::process::Command;

fn memtopo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memtopo"))
}

#[test]
fn simulated_volta_prints_a_table_and_writes_json() {
    let dir = std::env::temp_dir().join(format!("memtopo-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("volta.json");
    let raw = dir.join("raw");
    let out = memtopo()
        .args(["--simulate", "volta", "-q", "--only", "l1,shared", "-o"])
        .arg(&json)
        .arg("--keep-raw")
        .arg(&raw)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let topo = topology::Topology::load(&json).unwrap();
    let l1 = topo.element(topology::ElementKind::L1Data).unwrap();
    assert!(l1.size.is_some(), "L1 size measured");
    assert!(raw.join("l1-size-8_KiB_shared_config.csv").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_profile_is_exit_code_5() {
    let out = memtopo()
        .args(["--simulate", "no-such-gpu"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(stderr.contains("no-such-gpu"), "{stderr}");
}

#[test]
fn unknown_element_is_a_usage_error() {
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "l3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The message lists the registered benchmarks.
    assert!(
        stderr.contains("'l3'") && stderr.contains("constant-l15"),
        "{stderr}"
    );
}

#[test]
fn a_bad_memtopo_jit_is_a_usage_error_and_0_or_1_are_taken() {
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "shared"])
        .env("MEMTOPO_JIT", "yes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(stderr.contains("MEMTOPO_JIT must be 1"), "{stderr}");
    assert!(stderr.contains("\"yes\""), "{stderr}");
    for value in ["0", "1"] {
        let out = memtopo()
            .args(["--simulate", "volta", "--only", "shared"])
            .env("MEMTOPO_JIT", value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "MEMTOPO_JIT={value}");
    }
}

#[test]
fn unknown_output_format_is_refused_before_measuring() {
    let out = memtopo()
        .args(["--simulate", "volta", "-o", "x.xlsx"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn real_gpu_or_clear_error() {
    // On a machine without a GPU this is the README's main command failing cleanly;
    // with a GPU, the run has to succeed (restricted to one quick benchmark).
    let out = memtopo().args(["--only", "shared", "-q"]).output().unwrap();
    match out.status.code() {
        Some(0) => {}
        Some(3) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.starts_with("memtopo: error: no CUDA"), "{stderr}");
        }
        other => panic!("exit {other:?}: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

#[test]
fn bad_device_index_is_exit_code_4_or_no_gpu() {
    let out = memtopo().args(["--device", "999", "-q"]).output().unwrap();
    assert!(matches!(out.status.code(), Some(3 | 4)), "{:?}", out.status);
}

#[test]
fn a_simulated_device_past_the_last_speaks_of_the_simulation() {
    let out = memtopo()
        .args(["--simulate", "h100", "--device", "99", "-q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("device 99 does not exist: the simulated GPU is one device"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("CUDA") && !stderr.contains("nvidia-smi"),
        "{stderr}"
    );
}

/// Runs memtopo with `args` and `-o -`, expects exit 0, and returns the JSON document it
/// printed on standard output and what it wrote to standard error.
fn json_run(args: &[&str]) -> (topology::Topology, String) {
    let out = memtopo().args(args).args(["-o", "-"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let topo = topology::Topology::from_json_str(&String::from_utf8_lossy(&out.stdout))
        .expect("one JSON document on stdout");
    (topo, stderr)
}

/// [`json_run`] with `-q`: the topology alone.
fn measured(args: &[&str]) -> topology::Topology {
    json_run(&[args, &["-q"]].concat()).0
}

/// An L1 that does not cache global loads (the Maxwell profile) is an answer: exit 0 and
/// one note saying so, not a failed benchmark.
#[test]
fn an_l1_without_global_caching_is_an_answer() {
    let topo = measured(&["--simulate", "maxwell", "--only", "l1,texture"]);
    let l1 = topo.element(topology::ElementKind::L1Data).unwrap();
    assert_eq!(l1.global_loads_cached, Some(false));
    let notes: Vec<_> = topo
        .notes
        .iter()
        .filter(|n| n.message.contains("does not cache global loads"))
        .collect();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].severity, topology::NoteSeverity::Info);
}

/// `--only constant-l15` brings in the constant L1 it depends on instead of failing.
#[test]
fn only_constant_l15_measures_its_dependency_too() {
    let topo = measured(&["--simulate", "kepler", "--only", "constant-l15"]);
    for kind in [
        topology::ElementKind::ConstantL1,
        topology::ElementKind::ConstantL15,
    ] {
        assert!(
            topo.element(kind).is_some_and(|e| e.size.is_some()),
            "{kind:?}"
        );
    }
}

/// `-o -` puts the JSON document alone on standard output (the table goes to standard
/// error); given twice it is a usage error.
#[test]
fn dash_writes_json_to_stdout() {
    let (topo, stderr) = json_run(&["--simulate", "volta", "--only", "l1,shared"]);
    assert!(topo.element(topology::ElementKind::L1Data).is_some());
    assert!(stderr.contains("L1 data"), "the table on stderr");
    let twice = memtopo()
        .args([
            "--simulate",
            "volta",
            "--only",
            "shared",
            "-o",
            "-",
            "-o",
            "-",
        ])
        .output()
        .unwrap();
    assert_eq!(twice.status.code(), Some(2));
}

/// An L2 whose lines are homed by a plain hash fills its far partition unevenly: SM 0's far
/// hits go on past the far partition's share, so the far side does not fit beside the near
/// partition (a warning says so) and the table's far-partition row says "not reported",
/// not a size.
#[test]
fn a_far_side_not_reported_is_not_shown_with_a_size() {
    let dir = std::env::temp_dir().join(format!("memtopo-cli-hash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("h200-hash.toml");
    let bundled = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/profiles/h200.toml"
    ))
    .unwrap();
    assert!(bundled.contains("interleave = \"masked\""));
    // The hash takes no home bits, page or page-hashed set index: those lines go.
    let hashed: String = bundled
        .lines()
        .filter(|l| {
            !l.starts_with("home_bits")
                && !l.starts_with("home_page_bytes")
                && !l.starts_with("set_index")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(
        &profile,
        hashed
            .replace("interleave = \"masked\"", "interleave = \"hash\"")
            .replace("name = \"h200\"", "name = \"h200-hash\""),
    )
    .unwrap();
    let out = memtopo()
        .arg("--simulate")
        .arg(&profile)
        .args(["--only", "l2", "-o", "-"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{table}");
    let topo = topology::Topology::from_json_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let partitions = topo
        .element(topology::ElementKind::L2)
        .and_then(|l2| l2.partitions.as_ref())
        .expect("the L2's partitions");
    assert!(partitions.far_size.is_none());
    let warnings = table.matches("far side not reported").count();
    assert_eq!(warnings, 1, "{table}");
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("far partition"))
        .expect("a far-partition row");
    assert!(row.contains("not reported"), "{row}");
    assert!(!row.contains("MiB"), "{row}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The simulated H200 reports its L2 as the real H200s do (docs/results/h200.json): near
/// partition 30 MiB, far side 30 to 31.419 MiB, and no warning but the constant L1.5's
/// bound, which real H200s give too.
#[test]
fn the_simulated_h200_reads_its_l2_as_the_gpu_does() {
    let out = memtopo()
        .args(["--simulate", "h200", "--only", "l2,constant-l15", "-o", "-"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{table}");
    let warnings: Vec<&str> = table.lines().filter(|l| l.starts_with("warning")).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("Constant L1.5: only a lower bound"),
        "{warnings:?}"
    );
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("far partition"))
        .expect("a far-partition row");
    assert!(row.contains("30 MiB – 31.419 MiB"), "{row}");
}
