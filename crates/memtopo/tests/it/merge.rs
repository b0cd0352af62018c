//! `memtopo merge`: node summaries and results joined into one fleet report, its flags and
//! exit codes, every output format, and the inputs it refuses.

use std::path::{Path, PathBuf};

use topology::fleet::{Fleet, FleetKind};

use crate::fleet::{code, memtopo, scratch, text};

#[test]
fn merge_joins_nodes_flags_across_them_and_writes_every_format() {
    let dir = scratch("merge");
    for (node, spec) in [("n1", "2xvolta"), ("n2", "volta,volta:clock=-25%")] {
        let out = memtopo(&dir)
            .env("SLURMD_NODENAME", node)
            .args([
                "--simulate",
                spec,
                "-d",
                "all",
                "--only",
                "shared",
                "-q",
                "--no-peers",
            ])
            .arg("-o")
            .arg(dir.join(format!("shared/{node}/")))
            .output()
            .unwrap();
        // The node with the slow GPU says so in its exit code.
        let expected = if node == "n2" { 1 } else { 0 };
        assert_eq!(code(&out), Some(expected), "{}", text(&out.stderr));
    }
    let (json, md, html) = (
        dir.join("fleet.json"),
        dir.join("fleet.md"),
        dir.join("fleet.html"),
    );
    let out = memtopo(&dir)
        .arg("merge")
        .arg(dir.join("shared"))
        .args(["-o", json.to_str().unwrap(), "-o", md.to_str().unwrap()])
        .args(["-o", html.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(1), "a flag: exit 1; {}", text(&out.stderr));
    let fleet = Fleet::from_json_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(fleet.kind, FleetKind::Fleet);
    assert_eq!(fleet.gpus.len(), 4);
    assert_eq!(fleet.nodes.len(), 2);
    assert_eq!(fleet.flags.len(), 1);
    assert_eq!(fleet.flags[0].node.as_deref(), Some("n2"));
    assert!(text(&out.stderr).contains("conditions.sm_clock_mhz"));
    assert!(std::fs::read_to_string(&md).unwrap().contains("## Flags"));
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    // Loose enough a tolerance: nothing flagged, exit 0.
    let out = memtopo(&dir)
        .arg("merge")
        .arg(dir.join("shared"))
        .args(["--latency-tolerance", "50", "-o", "-"])
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    assert!(Fleet::from_json_str(&text(&out.stdout))
        .unwrap()
        .flags
        .is_empty());
}

#[test]
fn merge_refuses_bad_inputs_with_a_named_file() {
    let dir = scratch("bad");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{\"schema_version\": \"1.4\", \"device\": ").unwrap();
    let out = memtopo(&dir).arg("merge").arg(&broken).output().unwrap();
    assert_eq!(code(&out), Some(11), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("broken.json"),
        "{}",
        text(&out.stderr)
    );
    let fleet = dir.join("fleet.json");
    std::fs::write(
        &fleet,
        "{\"fleet_schema_version\": \"1.0\", \"kind\": \"galaxy\"}",
    )
    .unwrap();
    let out = memtopo(&dir).arg("merge").arg(&fleet).output().unwrap();
    assert_eq!(code(&out), Some(11), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("kind"), "{}", text(&out.stderr));
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = memtopo(&dir).arg("merge").arg(&empty).output().unwrap();
    assert_eq!(code(&out), Some(11), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no .json file"),
        "{}",
        text(&out.stderr)
    );
    let out = memtopo(&dir).arg("merge").output().unwrap();
    assert_eq!(code(&out), Some(2), "no input: usage");
    let out = memtopo(&dir)
        .args(["merge", "missing.json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(11), "{}", text(&out.stderr));
    let out = memtopo(&dir).args(["merge", "notes.txt"]).output().unwrap();
    assert_eq!(code(&out), Some(11), "{}", text(&out.stderr));
}

/// One simulated GPU of `spec` measured with `--only shared` into `file`.
fn one_result(dir: &Path, spec: &str, file: &Path) {
    let out = memtopo(dir)
        .args(["--simulate", spec, "--only", "shared", "-q", "-o"])
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
}

#[test]
fn merge_tells_apart_results_without_a_uuid_and_counts_each_gpu_once() {
    let dir = scratch("merge-names");
    let files: Vec<PathBuf> = ["a.json", "b.json", "c.json", "d.json"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    for (file, spec) in files
        .iter()
        .zip(["volta", "volta", "volta", "volta:clock=-25%"])
    {
        one_result(&dir, spec, file);
    }
    let out = memtopo(&dir).arg("merge").args(&files).output().unwrap();
    let (table, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), Some(1), "a flag: {stderr}");
    assert!(table.starts_with("Fleet: 4 GPU(s)"), "{table}");
    let gpu_rows: Vec<&str> = table.lines().filter(|l| l.contains(".json ")).collect();
    assert!(gpu_rows.len() >= 4, "{table}");
    let flagged_rows = table.lines().filter(|l| l.contains('⚑')).count();
    let flags = Fleet::from_json_str(&text(
        &memtopo(&dir)
            .arg("merge")
            .args(&files)
            .args(["-o", "-"])
            .output()
            .unwrap()
            .stdout,
    ))
    .unwrap()
    .flags;
    assert!(!flags.is_empty());
    assert!(
        flags.iter().all(|f| f.file.as_deref() == files[3].to_str()),
        "{flags:?}"
    );
    // Every flag of d.json is one ⚑ in d.json's row, none in the others.
    assert_eq!(flagged_rows, 1, "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("d.json") && l.contains('⚑')),
        "{table}"
    );
    assert!(!table.contains(" ? "), "{table}");
    assert!(stderr.contains("d.json"), "{stderr}");

    // One file twice, by name or through its folder: read once, said so.
    let twice = memtopo(&dir)
        .args(["merge", "-o", "-"])
        .arg(&files[0])
        .arg(&files[0])
        .output()
        .unwrap();
    let fleet = Fleet::from_json_str(&text(&twice.stdout)).unwrap();
    assert_eq!(fleet.gpus.len(), 1, "{}", text(&twice.stderr));
    assert!(
        text(&twice.stderr).contains("given more than once"),
        "{}",
        text(&twice.stderr)
    );

    // One GPU in two results: counted once, said so.
    let (x, y) = (dir.join("x.json"), dir.join("y.json"));
    one_result(&dir, "volta:uuid=GPU-same", &x);
    std::fs::copy(&x, &y).unwrap();
    let same = memtopo(&dir)
        .args(["merge", "-o", "-"])
        .arg(&x)
        .arg(&y)
        .output()
        .unwrap();
    let fleet = Fleet::from_json_str(&text(&same.stdout)).unwrap();
    assert_eq!(fleet.gpus.len(), 1);
    assert!(
        text(&same.stderr).contains("GPU-same is the GPU of two results"),
        "{}",
        text(&same.stderr)
    );

    // A missing input says so.
    let missing = memtopo(&dir)
        .args(["merge", "nosuchdir/"])
        .output()
        .unwrap();
    assert_eq!(code(&missing), Some(11));
    assert!(
        text(&missing.stderr).contains("nosuchdir/: no such file or folder"),
        "{}",
        text(&missing.stderr)
    );
}
