//! The subcommands on saved results: render, convert, diff, validate, completions, man.
//! None needs a GPU or the driver.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use topology::{ElementKind, Latency, LatencySummary, Topology};

fn memtopo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memtopo"))
}

fn run(args: &[&str]) -> Output {
    memtopo().args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The example result in the repository.
fn example(ext: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../topology/examples/data/h200-illustrative.{ext}"))
        .display()
        .to_string()
}

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch("sub", name)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A readable one-line error with exit 11 for a file that is not a result.
fn assert_unreadable(out: &Output, what: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(11), "{stderr}");
    assert!(
        stderr.starts_with("memtopo: error: cannot read "),
        "{stderr}"
    );
    assert!(stderr.contains(what), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn render_prints_the_table_by_default_and_writes_every_format() {
    let out = run(&["render", &example("json")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("L1 data"),
        "{}",
        text(&out.stdout)
    );

    let dir = scratch("render");
    let files: Vec<PathBuf> = ["t.json", "t.toml", "t.md", "t.svg", "t.mt4g.json"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    let mut cmd = memtopo();
    cmd.args(["render", &example("toml")]);
    for f in &files {
        cmd.arg("-o").arg(f);
    }
    let out = cmd.args(["-o", "-"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let original = Topology::load(example("json")).unwrap();
    assert_eq!(
        Topology::from_json_str(&text(&out.stdout)).unwrap(),
        original
    );
    assert_eq!(Topology::load(&files[0]).unwrap(), original);
    assert_eq!(Topology::load(&files[1]).unwrap(), original);
    assert!(std::fs::read_to_string(&files[2]).unwrap().starts_with('#'));
    assert!(std::fs::read_to_string(&files[3]).unwrap().contains("<svg"));
    let mt4g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[4]).unwrap()).unwrap();
    assert!(mt4g.get("compute").is_some(), "MT4G layout");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn render_reads_standard_input_in_any_format_to_stdout() {
    let toml = std::fs::read(example("toml")).unwrap();
    let mut child = memtopo()
        .args(["render", "-", "--format", "md"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&toml).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("| L1 data |"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn render_refuses_bad_requests_with_usage_errors() {
    let out = run(&["render", &example("json"), "-o", "x.xlsx"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("unknown output format"));
    // --format without standard output among the outputs.
    let out = run(&["render", &example("json"), "-o", "x.md", "--format", "svg"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["render", &example("json"), "--format", "docx"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["render", &example("json"), "-o", "-", "-o", "-"]);
    assert_eq!(out.status.code(), Some(2));
    // Measuring flags do not mix with a subcommand.
    let out = run(&["--simulate", "volta", "render", &example("json")]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn render_of_a_missing_or_malformed_file_is_exit_11() {
    assert_unreadable(&run(&["render", "/nonexistent/r.json"]), "No such file");
    let dir = scratch("malformed");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, "{\"schema_version\": \"1.3\", \"device\": ").unwrap();
    assert_unreadable(&run(&["render", path(&broken)]), "JSON syntax error");
    let report = dir.join("r.md");
    std::fs::write(&report, "# not a result").unwrap();
    assert_unreadable(&run(&["render", path(&report)]), "use .json or .toml");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn results_without_an_extension_are_read_by_their_content() {
    let dir = scratch("no-extension");
    let (json, toml) = (dir.join("result"), dir.join("result-toml"));
    std::fs::copy(example("json"), &json).unwrap();
    std::fs::copy(example("toml"), &toml).unwrap();
    let out = run(&["render", path(&json)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("L1 data"));
    let out = run(&["validate", path(&json), path(&toml)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(&["diff", path(&json), path(&toml)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let back = dir.join("back.json");
    assert_eq!(
        run(&["convert", path(&toml), path(&back)]).status.code(),
        Some(0)
    );
    assert_eq!(
        Topology::load(&back).unwrap(),
        Topology::load(example("json")).unwrap()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn convert_round_trips_and_refuses_what_render_refuses() {
    let dir = scratch("convert");
    let toml = dir.join("r.toml");
    let out = run(&["convert", &example("json"), path(&toml)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let back = dir.join("back.json");
    assert_eq!(
        run(&["convert", path(&toml), path(&back)]).status.code(),
        Some(0)
    );
    assert_eq!(
        Topology::load(&back).unwrap(),
        Topology::load(example("json")).unwrap()
    );
    // --format overrides the extension; `-` is standard output.
    let out = run(&["convert", path(&toml), "-", "--format", "svg"]);
    assert!(
        text(&out.stdout).starts_with("<svg"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        run(&["convert", path(&toml), "x.docx"]).status.code(),
        Some(2)
    );
    assert_unreadable(
        &run(&["convert", "/nonexistent.toml", "x.json"]),
        "No such file",
    );
    // An output that cannot be written: exit 6, the reason named.
    let out = run(&["convert", path(&toml), "/nonexistent-dir/x.json"]);
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("cannot write /nonexistent-dir/x.json"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The example with its L2 latency's mean scaled by `factor` (everything else equal).
fn with_l2_latency(factor: f64) -> Topology {
    let mut topo = Topology::load(example("json")).unwrap();
    let old = topo
        .element(ElementKind::L2)
        .unwrap()
        .latency
        .clone()
        .unwrap();
    let mean = old.mean.0 * factor;
    let summary = LatencySummary {
        mean: topology::Cycles(mean),
        p25: None,
        p50: topology::Cycles(mean),
        p75: None,
        p95: topology::Cycles(mean + 2.0),
        stdev: old.stdev,
        samples: old.samples,
    };
    topo.element_mut(ElementKind::L2)
        .set_latency(Latency::measured(summary));
    topo
}

#[test]
fn diff_exits_0_when_equal_and_1_on_a_change_beyond_the_tolerance() {
    let dir = scratch("diff");
    let (same, slower) = (dir.join("same.json"), dir.join("slower.json"));
    with_l2_latency(1.0).save(&same).unwrap();
    with_l2_latency(1.10).save(&slower).unwrap();
    let out = run(&["diff", path(&same), path(&same)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("no changes beyond the uncertainty"));

    let out = run(&["diff", path(&same), path(&slower)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("elements.l2.latency"),
        "{}",
        text(&out.stdout)
    );
    // A 10 % change is within a 15 % latency tolerance.
    let out = run(&[
        "diff",
        path(&same),
        path(&slower),
        "--latency-tolerance",
        "15%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("within the uncertainty"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn diff_compares_notes_and_shows_conditions() {
    let dir = scratch("notes");
    let (a, b) = (dir.join("a.json"), dir.join("b.toml"));
    let base = Topology::load(example("json")).unwrap();
    base.save(&a).unwrap();
    let mut other = base.clone();
    other.warn(
        Some(ElementKind::L2),
        "disturbed: l2 latency (still after a repeat)",
    );
    other.run = Some(topology::RunRecord {
        host: Some("node7".into()),
        ..topology::RunRecord::default()
    });
    other.save(&b).unwrap();
    let out = run(&["diff", path(&a), path(&b)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("warning l2: disturbed: l2 latency"),
        "{stdout}"
    );
    assert!(stdout.contains("run.host: - → node7"), "{stdout}");
    let out = run(&["diff", path(&a), path(&b), "--ignore-notes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn diff_errors_have_their_own_codes() {
    assert_eq!(run(&["diff", &example("json")]).status.code(), Some(2));
    assert_eq!(
        run(&["diff", &example("json"), &example("toml"), "--sigmas", "-1"])
            .status
            .code(),
        Some(2)
    );
    assert_unreadable(
        &run(&["diff", &example("json"), "/nonexistent.json"]),
        "/nonexistent.json",
    );
}

#[test]
fn validate_accepts_results_and_lists_every_reason_for_a_bad_one() {
    let out = run(&["validate", &example("json"), &example("toml")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).matches(": valid (schema").count(), 2);

    let dir = scratch("validate");
    let mut tree: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("json")).unwrap()).unwrap();
    // Beyond the physical bounds: a line larger than its cache, and no SMs.
    tree["elements"]["l1_data"]["line_size"]["value"] = serde_json::json!(1u64 << 40);
    tree["device"]["sm_count"] = serde_json::json!(0);
    let bad = dir.join("bad.json");
    std::fs::write(&bad, tree.to_string()).unwrap();
    let out = run(&["validate", &example("json"), path(&bad)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(11), "{stderr}");
    assert!(
        text(&out.stdout).contains(": valid"),
        "the good file still reported"
    );
    assert!(
        stderr.contains("bad.json: invalid (2 reason(s))"),
        "{stderr}"
    );
    assert!(stderr.contains("elements.l1_data.line_size"), "{stderr}");
    assert!(stderr.contains("device.sm_count"), "{stderr}");
    assert_eq!(run(&["validate"]).status.code(), Some(2));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn completions_and_the_manual_page_come_from_the_command_line() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        assert!(
            script.contains("memtopo") && script.contains("diff"),
            "{shell}"
        );
    }
    assert_eq!(run(&["completions", "tcsh"]).status.code(), Some(2));
    let out = run(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = text(&out.stdout);
    assert!(page.contains(".TH memtopo 1"), "{page}");
    assert!(page.contains("validate"), "{page}");
}

#[test]
fn measure_is_the_default_subcommand() {
    let out = run(&[
        "measure",
        "--simulate",
        "volta",
        "--only",
        "shared",
        "-q",
        "-o",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let topo = Topology::from_json_str(&text(&out.stdout)).unwrap();
    assert!(topo.element(ElementKind::SharedMemory).is_some());
}
