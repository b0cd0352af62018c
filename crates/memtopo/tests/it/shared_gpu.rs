//! A shared GPU, simulated: other work on it is refused or marked (`--allow-busy`), one
//! memtopo at a time per GPU, and a co-tenant that arrives mid-run — stealing L1
//! capacity, inflating latencies, pulling the clock down — is detected and never
//! reported as a clean value (exit 9, a warning in every output).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

use topology::Topology;

fn memtopo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memtopo"))
}

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch("shared", name)
}

/// The bundled Volta profile with `top` before its first table and `tail` after its last.
fn profile(dir: &Path, top: &str, tail: &str) -> PathBuf {
    let volta = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/profiles/volta.toml");
    let text = std::fs::read_to_string(volta).unwrap();
    let path = dir.join("gpu.toml");
    std::fs::write(&path, format!("{top}\n{text}\n{tail}\n")).unwrap();
    path
}

fn run(profile: &Path, dir: &Path, extra: &[&str]) -> Output {
    run_only("l1", profile, dir, extra)
}

fn run_only(only: &str, profile: &Path, dir: &Path, extra: &[&str]) -> Output {
    memtopo()
        .arg("--simulate")
        .arg(profile)
        .args(["--only", only])
        .args(extra)
        .env("MEMTOPO_LOCK_DIR", dir)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many launches a clean `--only ONLY` run of the Volta profile takes.
fn clean_launches(only: &str, dir: &Path) -> u64 {
    let clean = profile(dir, "", "");
    let out = memtopo()
        .arg("--simulate")
        .arg(&clean)
        .args(["--only", only, "-v"])
        .env("MEMTOPO_LOCK_DIR", dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = stderr(&out);
    log.lines()
        .find_map(|l| {
            l.split("the simulated GPU ran ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or_else(|| panic!("no launch count in: {log}"))
}

#[test]
fn a_visible_process_on_the_gpu_is_refused_with_exit_8() {
    let dir = scratch("visible");
    let gpu = profile(&dir, "", "[co_tenant]\npid = 4711\nname = \"python3\"");
    let json = dir.join("t.json");
    let out = run(&gpu, &dir, &["-o", json.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(err.contains("pid 4711 (python3, compute)"), "{err}");
    assert!(err.contains("--allow-busy"), "{err}");
    assert!(!json.exists(), "nothing measured, nothing written");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn utilisation_without_a_visible_process_is_refused_too() {
    let dir = scratch("invisible");
    let gpu = profile(
        &dir,
        "",
        "[co_tenant]\nvisible = false\nutilization_percent = 93",
    );
    let out = run(&gpu, &dir, &["-q"]);
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(stderr(&out).contains("93 % utilised"), "{}", stderr(&out));
}

#[test]
fn allow_busy_measures_and_marks_every_output() {
    let dir = scratch("allow");
    let gpu = profile(&dir, "", "[co_tenant]\npid = 4711\nname = \"python3\"");
    let files: Vec<PathBuf> = ["t.json", "t.toml", "t.md", "t.svg", "t.mt4g.json"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    let mut args = vec!["--allow-busy".to_string()];
    for f in &files {
        args.push("-o".into());
        args.push(f.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&gpu, &dir, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("WARNING: TAKEN ON A BUSY GPU"),
        "{}",
        stdout(&out)
    );
    for file in &files[..2] {
        let topo = Topology::load(file).unwrap();
        let run = topo.run.unwrap();
        assert!(run.busy);
        assert_eq!(run.other_processes[0].pid, 4711);
        assert_eq!(
            run.simulated_profile
                .as_deref()
                .map(|p| p.starts_with("volta")),
            Some(true)
        );
    }
    for file in &files[2..] {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.contains("TAKEN ON A BUSY GPU"), "{}", file.display());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_result_records_its_conditions() {
    let dir = scratch("conditions");
    let json = dir.join("t.json");
    let out = memtopo()
        .args(["--simulate", "volta", "--only", "shared", "-q", "-o"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = Topology::load(&json).unwrap().run.unwrap();
    assert!(run.date_utc.unwrap().ends_with('Z'));
    assert!(run.host.is_some());
    assert_eq!(run.tool_version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    assert!(run.git_commit.is_some());
    assert!(run.command_line.iter().any(|a| a == "--simulate"));
    assert_eq!(run.before.unwrap().sm_clock_mhz, Some(1380));
    assert!(run.after.is_some());
    assert!(!run.busy && run.disturbances.is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_second_memtopo_on_the_same_gpu_waits_then_gives_up_with_exit_8() {
    let dir = scratch("lock");
    let gpu = profile(&dir, "uuid = \"GPU-0000-test\"", "");
    let first = memtopo()
        .arg("--simulate")
        .arg(&gpu)
        .args(["--only", "l1", "-q"])
        .env("MEMTOPO_LOCK_DIR", &dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let second = run(&gpu, &dir, &["--wait", "0.5"]);
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(8), "{err}");
    assert!(err.contains("is being measured by memtopo pid"), "{err}");
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
    // A third that waits long enough measures after the first.
    let third = run(&gpu, &dir, &["--wait", "60", "-q"]);
    assert_eq!(third.status.code(), Some(0), "{}", stderr(&third));
    let first = first.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A co-tenant arriving at `start` with `effect`: the run must exit 9 with `expect` among
/// its disturbances, in the file and in the table.
fn detected(name: &str, only: &str, effect: &str, start: impl Fn(u64) -> u64, expect: &str) {
    let dir = scratch(name);
    let start = start(clean_launches(only, &dir));
    let gpu = profile(
        &dir,
        "",
        &format!("[co_tenant]\nvisible = false\nstart_launch = {start}\n{effect}"),
    );
    let json = dir.join("t.json");
    let out = run_only(only, &gpu, &dir, &["-o", json.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(9), "{effect}: {err}");
    let topo = Topology::load(&json).unwrap();
    let run = topo.run.as_ref().unwrap();
    assert!(
        run.disturbances.iter().any(|d| d.contains(expect)),
        "{effect}: {:?}",
        run.disturbances
    );
    assert!(topo
        .notes
        .iter()
        .any(|n| n.message.starts_with("disturbed: ")));
    assert!(
        stdout(&out).contains("WARNING: DISTURBED WHILE MEASURING"),
        "{}",
        stdout(&out)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_clock_drop_mid_run_is_detected() {
    detected(
        "clock",
        "shared",
        "sm_clock_factor = 0.7",
        |n| n / 2,
        "SM clock",
    );
}

#[test]
fn inflated_latencies_mid_run_are_detected() {
    detected(
        "latency",
        "shared",
        "latency_factor = 1.5",
        |n| n / 2,
        "L2 hit",
    );
}

#[test]
fn l1_capacity_stolen_after_the_sweep_is_detected() {
    // Half-way through the run: after the L1 sweeps (the first benchmarks of `--only l1`),
    // before the confirming probe.
    detected(
        "l1-stolen",
        "l1",
        "l1_stolen_bytes = 49152",
        |n| n / 2,
        "not confirmed",
    );
}

#[test]
fn a_size_the_second_probe_does_not_confirm_is_marked_on_its_element() {
    // The L1 loses 48 KiB half-way through `--only l1`: the sweeps are done, the
    // confirming probe (and its repeat) find the size no longer holds. The L1 element is
    // marked, not only the run.
    let dir = scratch("l1-marked");
    let start = clean_launches("l1", &dir) / 2;
    let gpu = profile(
        &dir,
        "",
        &format!("[co_tenant]\nvisible = false\nstart_launch = {start}\nl1_stolen_bytes = 49152"),
    );
    let json = dir.join("t.json");
    let out = run_only("l1", &gpu, &dir, &["-o", json.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(9), "{err}");
    let topo = Topology::load(&json).unwrap();
    let l1 = topo
        .element(topology::ElementKind::L1Data)
        .expect("the L1 is in the result");
    let marked = l1.disturbed.as_deref().unwrap_or_default();
    assert!(marked.contains("not confirmed"), "{marked:?}");
    assert!(stdout(&out).contains("[DISTURBED]"), "{}", stdout(&out));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_clean_run_of_the_same_profile_is_not_disturbed() {
    let dir = scratch("clean");
    let gpu = profile(
        &dir,
        "",
        "[co_tenant]\nvisible = false\nstart_launch = 100000\nsm_clock_factor = 0.5",
    );
    let out = run(&gpu, &dir, &["-q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_benchmark_disturbed_after_its_repeat_is_marked_on_its_element() {
    let dir = scratch("element");
    let start = clean_launches("shared", &dir) / 2;
    let gpu = profile(
        &dir,
        "",
        &format!("[co_tenant]\nvisible = false\nstart_launch = {start}\nlatency_factor = 1.5"),
    );
    let json = dir.join("t.json");
    let out = run_only("shared", &gpu, &dir, &["-o", json.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert!(err.contains("shared latency: disturbed"), "{err}");
    let topo = Topology::load(&json).unwrap();
    let note = topo
        .notes
        .iter()
        .find(|n| n.element == Some(topology::ElementKind::SharedMemory))
        .expect("a note on shared memory");
    assert_eq!(note.severity, topology::NoteSeverity::Warning);
    assert!(
        note.message.starts_with("disturbed: shared latency: ")
            && note.message.ends_with("(still after a repeat)"),
        "{}",
        note.message
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The disturbed element itself is marked, in every output and in `diff`, so its values
/// are never written plain.
#[test]
fn a_disturbed_value_is_never_written_plain() {
    let dir = scratch("plain");
    let start = clean_launches("shared", &dir) / 2;
    let clean = profile(&dir, "", "");
    let clean_json = dir.join("clean.json");
    let out = run_only(
        "shared",
        &clean,
        &dir,
        &["-o", clean_json.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stdout(&out).contains("[DISTURBED]"));
    let gpu = profile(
        &dir,
        "",
        &format!("[co_tenant]\nvisible = false\nstart_launch = {start}\nlatency_factor = 1.5"),
    );
    let files = ["t.json", "t.toml", "t.md", "t.svg", "t.html", "t.mt4g.json"];
    let mut args = Vec::new();
    for f in files {
        args.push("-o".to_owned());
        args.push(dir.join(f).to_str().unwrap().to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_only("shared", &gpu, &dir, &args);
    assert_eq!(out.status.code(), Some(9), "{}", stderr(&out));
    let table = stdout(&out);
    let row = table
        .lines()
        .find(|l| l.starts_with("Shared memory"))
        .unwrap_or_else(|| panic!("no shared-memory row: {table}"));
    assert!(row.starts_with("Shared memory [DISTURBED]"), "{row}");
    let topo = Topology::load(dir.join("t.json")).unwrap();
    let shared = topo
        .element(topology::ElementKind::SharedMemory)
        .expect("shared memory");
    assert!(
        shared
            .disturbed
            .as_deref()
            .is_some_and(|d| d.starts_with("shared latency: ")),
        "{shared:?}"
    );
    // Only the disturbed benchmark's element is marked.
    for kind in topology::ElementKind::ALL {
        if kind != topology::ElementKind::SharedMemory {
            assert!(
                topo.element(kind).is_none_or(|e| e.disturbed.is_none()),
                "{kind}"
            );
        }
    }
    let toml = Topology::load(dir.join("t.toml")).unwrap();
    assert_eq!(
        toml.element(topology::ElementKind::SharedMemory),
        Some(shared)
    );
    for (file, mark) in [
        ("t.md", "Shared memory [DISTURBED]"),
        ("t.svg", "Shared memory [DISTURBED]"),
        ("t.html", "Shared memory [DISTURBED]"),
        ("t.mt4g.json", "memtopoDisturbed"),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(text.contains(mark), "{file} lacks {mark}");
    }
    // The Markdown never names the element without the mark where it shows a value.
    let md = std::fs::read_to_string(dir.join("t.md")).unwrap();
    assert!(
        md.lines()
            .filter(|l| l.starts_with("| Shared memory"))
            .all(|l| l.starts_with("| Shared memory [DISTURBED]")),
        "{md}"
    );
    let diff = memtopo()
        .arg("diff")
        .arg(&clean_json)
        .arg(dir.join("t.json"))
        .output()
        .unwrap();
    let text = stdout(&diff);
    assert!(
        text.contains("elements.shared_memory.disturbed: - → true"),
        "{text}"
    );
    assert!(
        text.lines()
            .filter(|l| l.contains("elements.shared_memory.latency"))
            .all(|l| l.ends_with("[DISTURBED]")),
        "{text}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
