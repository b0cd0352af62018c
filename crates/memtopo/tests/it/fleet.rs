//! Several GPUs: `--device all` and lists on a simulated node, the node summary, `merge`
//! and its flags, and the exit codes of both, bad inputs included.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use topology::fleet::{Fleet, FleetKind};

pub(crate) fn scratch(name: &str) -> PathBuf {
    crate::common::scratch("fleet", name)
}

/// memtopo with its own lock folder in `dir` (tests run in parallel).
pub(crate) fn memtopo(dir: &Path) -> Command {
    crate::common::memtopo_on(dir, "testnode")
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// A simulated node of `spec` measured with `--only shared` (fast), files in `dir/res/`.
fn node_run(dir: &Path, spec: &str, extra: &[&str]) -> Output {
    memtopo(dir)
        .args(["--simulate", spec, "--only", "shared", "-q", "-o"])
        .arg(dir.join("res/"))
        .args(extra)
        .output()
        .unwrap()
}

fn summary(dir: &Path) -> Fleet {
    let text = std::fs::read_to_string(dir.join("res/node-testnode.json")).unwrap();
    Fleet::from_json_str(&text).unwrap()
}

#[test]
fn a_simulated_node_gives_one_result_per_gpu_and_a_summary_with_the_odd_one_flagged() {
    let dir = scratch("node");
    let out = node_run(&dir, "3xvolta,volta:clock=-20%", &["--device", "all"]);
    // A GPU degraded against its peers: exit 1, and a warning names it.
    assert_eq!(code(&out), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("degraded: conditions.sm_clock_mhz"),
        "{}",
        text(&out.stderr)
    );
    let node = summary(&dir);
    assert_eq!(node.kind, FleetKind::Node);
    assert_eq!(node.gpus.len(), 4);
    assert!(node.failures.is_empty());
    let mut uuids: Vec<&str> = node.gpus.iter().filter_map(|g| g.uuid.as_deref()).collect();
    uuids.sort_unstable();
    uuids.dedup();
    assert_eq!(uuids.len(), 4, "one UUID per GPU");
    for gpu in &node.gpus {
        let file = dir.join("res").join(gpu.file.as_deref().unwrap());
        let topo = topology::Topology::load(&file).unwrap();
        assert_eq!(topo.run.unwrap().gpu_uuid.as_deref(), gpu.uuid.as_deref());
        assert_eq!(file.file_stem().unwrap(), gpu.uuid.as_deref().unwrap());
    }
    // The GPU with the slow clock, and only it, is flagged.
    assert_eq!(node.flags.len(), 1, "{:?}", node.flags);
    assert_eq!(node.flags[0].path, "conditions.sm_clock_mhz");
    assert_eq!(node.flags[0].device_index, Some(3));
    assert_eq!(node.flags[0].severity, topology::fleet::Severity::Degraded);
    // Every ordered pair of the four has a link, from the simulator's model.
    assert_eq!(node.nodes[0].links.len(), 12);
    assert!(node.nodes[0]
        .links
        .iter()
        .all(|l| l.peer_access && l.latency_cold.is_some() && l.copy_gib_per_s.is_some()));
    // The same UUIDs on a second run: the same files again.
    let again = node_run(
        &dir,
        "3xvolta,volta:clock=-20%",
        &["--device", "0,1", "--no-peers"],
    );
    assert_eq!(code(&again), Some(0), "{}", text(&again.stderr));
    let files = std::fs::read_dir(dir.join("res")).unwrap().count();
    assert_eq!(files, 5, "four results and the summary");
    let two = summary(&dir);
    assert_eq!(two.gpus.len(), 2);
    assert!(two.nodes[0].notes[0].contains("--no-peers"));
}

#[test]
fn mixed_models_on_one_node_are_compared_only_with_their_own() {
    let dir = scratch("mixed");
    let out = node_run(&dir, "volta,volta,kepler", &["-d", "all", "--no-peers"]);
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    let node = summary(&dir);
    assert_eq!(node.models.len(), 2);
    assert!(node.flags.is_empty(), "{:?}", node.flags);
    // The table names both models and the summary is printed unless -q.
    let out = memtopo(&dir)
        .args(["merge"])
        .arg(dir.join("res"))
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Kepler"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_device_that_does_not_exist_is_exit_4_before_anything_is_measured() {
    let dir = scratch("index");
    let out = node_run(&dir, "volta,volta", &["--device", "0,5"]);
    assert_eq!(code(&out), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("device 5 does not exist: the simulated node has 2 GPUs"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("res/node-testnode.json").exists());
    // A single simulated GPU is a node of one.
    let out = memtopo(&dir)
        .args(["--simulate", "volta", "-d", "1", "--only", "shared", "-q"])
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(4), "{}", text(&out.stderr));
    // A bad profile anywhere in the node: exit 5 before anything is measured.
    let out = node_run(&dir, "volta,volta:memory=fast", &["--device", "all"]);
    assert_eq!(code(&out), Some(5), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("memory=fast"),
        "{}",
        text(&out.stderr)
    );
    assert!(!dir.join("res/node-testnode.json").exists());
    // Bad lists are usage errors.
    for bad in ["0,0", "0,", ",", "", "all,1", "-1"] {
        let out = node_run(&dir, "volta,volta", &["--device", bad]);
        assert_eq!(code(&out), Some(2), "{bad}: {}", text(&out.stderr));
    }
}

/// Two simulated V100s, `--device all --only shared -q`, and `extra`.
fn two_gpus(dir: &Path, extra: &[&str]) -> Output {
    memtopo(dir)
        .args([
            "--simulate",
            "2xvolta",
            "-d",
            "all",
            "--only",
            "shared",
            "-q",
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn several_gpus_need_per_gpu_file_names() {
    let dir = scratch("names");
    let out = two_gpus(&dir, &["-o", p(&dir.join("one.json"))]);
    assert_eq!(code(&out), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("{uuid}"),
        "{}",
        text(&out.stderr)
    );
    let out = two_gpus(&dir, &["-o", "-"]);
    assert_eq!(code(&out), Some(2), "{}", text(&out.stderr));
    // A template with {index} and an explicit summary in Markdown.
    let (template, md) = (dir.join("gpu-{index}.json"), dir.join("{node}.md"));
    let out = two_gpus(&dir, &["-o", p(&template), "--summary", p(&md)]);
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    assert!(dir.join("gpu-0.json").exists() && dir.join("gpu-1.json").exists());
    let md = std::fs::read_to_string(dir.join("testnode.md")).unwrap();
    assert!(md.starts_with("# Node testnode: 2 GPU(s) measured"), "{md}");
    let out = two_gpus(
        &dir,
        &["-o", p(&template), "--summary", p(&dir.join("s.svg"))],
    );
    assert_eq!(code(&out), Some(2), "{}", text(&out.stderr));
    // One GPU with a per-GPU name is a node of one: the name is expanded, no links.
    let out = memtopo(&dir)
        .args(["--simulate", "volta", "--only", "shared", "-q", "-o"])
        .arg(dir.join("single/"))
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    let single = std::fs::read_dir(dir.join("single")).unwrap().count();
    assert_eq!(single, 2, "the result and the summary");
}

#[test]
fn a_gpu_that_fails_loses_nothing_of_the_others_and_the_node_exits_12() {
    let dir = scratch("partial");
    // The second GPU's profile names a UUID whose lock another process holds.
    let locks = dir.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let held = std::fs::File::create(locks.join("GPU-held.lock")).unwrap();
    fs4::FileExt::try_lock(&held).unwrap();
    let out = node_run(
        &dir,
        "volta,volta:uuid=GPU-held,volta",
        &["-d", "all", "--wait", "0"],
    );
    assert_eq!(code(&out), Some(12), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("GPU 1 (GPU-held): not measured"),
        "{stderr}"
    );
    let node = summary(&dir);
    assert_eq!(node.gpus.len(), 2);
    assert_eq!(node.failures.len(), 1);
    assert_eq!(node.failures[0].exit_code, 8);
    assert_eq!(node.failures[0].uuid.as_deref(), Some("GPU-held"));
    // The links are measured between the GPUs that were.
    assert_eq!(node.nodes[0].links.len(), 2);
    // merge reports the failure: exit 1.
    let out = memtopo(&dir)
        .arg("merge")
        .arg(dir.join("res"))
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Not measured"),
        "{}",
        text(&out.stdout)
    );
    // Every GPU failing: the GPUs' own code.
    let out = node_run(&dir, "volta:uuid=GPU-held", &["-d", "all", "--wait", "0"]);
    assert_eq!(code(&out), Some(8), "{}", text(&out.stderr));
    drop(held);
}

#[test]
fn the_links_hold_what_the_gpus_handed_over_unless_a_gpu_had_to_wait() {
    let dir = scratch("handover");
    let run = |spec: &str, extra: &[&str]| {
        memtopo(&dir)
            .args(["--simulate", spec, "--only", "shared", "-vv", "-d", "all"])
            .arg("-o")
            .arg(dir.join("res/"))
            .args(extra)
            .output()
            .unwrap()
    };
    let (handed, again) = (
        "the links hold the locks the GPUs' runs handed over",
        "the links take the GPUs' locks again",
    );
    // At once or one after another, each GPU's run hands its lock over to the links.
    for schedule in [&[][..], &["--sequential"][..]] {
        let out = run("3xvolta", schedule);
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), Some(0), "{stderr}");
        assert!(
            stderr.contains(handed) && !stderr.contains(again),
            "{stderr}"
        );
        assert_eq!(summary(&dir).nodes[0].links.len(), 6);
    }
    // A GPU that has to wait for its lock (another process holds it) closes the hand-over:
    // the links take the locks of the GPUs measured again and are measured between them.
    let locks = dir.join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let held = std::fs::File::create(locks.join("GPU-held.lock")).unwrap();
    fs4::FileExt::try_lock(&held).unwrap();
    let out = run("volta,volta:uuid=GPU-held,volta", &["--wait", "0"]);
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), Some(12), "{stderr}");
    assert!(
        stderr.contains(again) && !stderr.contains(handed),
        "{stderr}"
    );
    let node = summary(&dir);
    assert_eq!(node.gpus.len(), 2);
    assert_eq!(node.nodes[0].links.len(), 2);
    drop(held);
}

/// memtopo on the stand-in driver of `cargo xtask test` (`docs/building.md`), scripted by
/// `script`; `None` where it is not loaded (plain `cargo test`, or a real driver).
fn on_stand_in(dir: &Path, script: &str, args: &[&str]) -> Option<Output> {
    let probe = memtopo(dir)
        .args(["-q", "--only", "shared"])
        .env("MEMTOPO_STAND_IN", "cuInit=101")
        .output()
        .unwrap();
    if !text(&probe.stderr).contains("CUDA_ERROR_INVALID_DEVICE (101)") {
        assert!(
            std::env::var_os("MEMTOPO_STAND_IN_LOADED").is_none(),
            "the stand-in is loaded but does not follow MEMTOPO_STAND_IN"
        );
        return None;
    }
    Some(
        memtopo(dir)
            .args(args)
            .env("MEMTOPO_STAND_IN", script)
            .output()
            .unwrap(),
    )
}

#[test]
fn real_gpus_on_the_stand_in_driver_index_and_failure() {
    let dir = scratch("stand-in");
    let one_device = "cuInit=0,cuDeviceGetCount=0";
    let Some(out) = on_stand_in(&dir, one_device, &["-q", "--device", "0,1"]) else {
        return;
    };
    assert_eq!(code(&out), Some(4), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("this machine has 1 CUDA device(s)"));
    // The one GPU cannot be opened (an exclusive GPU another process holds): its run fails
    // with 8, the summary says so, and the node's exit code is the GPU's.
    let busy = "cuInit=0,cuDeviceGetCount=0,cuDeviceGet=0,cuDeviceGetName=0,\
                cuDeviceGetUuid_v2=0,cuDeviceGetPCIBusId=0,cuDriverGetVersion=0,cuCtxCreate_v2=46";
    let res = dir.join("res/");
    let out = on_stand_in(&dir, busy, &["-q", "--device", "all", "-o", p(&res)]).unwrap();
    assert_eq!(code(&out), Some(8), "{}", text(&out.stderr));
    let node = summary(&dir);
    assert!(node.gpus.is_empty());
    assert_eq!(node.failures.len(), 1);
    assert_eq!(node.failures[0].exit_code, 8);
    assert_eq!(node.failures[0].device_index, Some(0));
}

#[test]
fn an_existing_folder_without_its_slash_is_refused() {
    let dir = scratch("folder-slash");
    let folder = dir.join("fleet");
    std::fs::create_dir_all(&folder).unwrap();
    let out = memtopo(&dir)
        .args(["--simulate", "volta", "--only", "shared", "-q", "-o"])
        .arg(&folder)
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("add a slash"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(&folder).unwrap().count(),
        0,
        "nothing written"
    );
}

/// Every GPU's result of a node run in `res`, by UUID, with the elements as JSON.
fn results_by_uuid(res: &Path) -> Vec<(String, serde_json::Value, Vec<String>)> {
    let mut results: Vec<(String, serde_json::Value, Vec<String>)> = std::fs::read_dir(res)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("GPU-"))
        .map(|path| {
            let topo = topology::Topology::load(&path).unwrap();
            let run = topo.run.clone().unwrap();
            let value: serde_json::Value =
                serde_json::from_str(&topo.to_json_string().unwrap()).unwrap();
            (
                run.gpu_uuid.unwrap(),
                value["elements"].clone(),
                run.concurrent_with,
            )
        })
        .collect();
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

#[test]
fn gpus_measured_at_once_give_what_they_give_one_after_another_and_print_in_order() {
    let dir = scratch("concurrent");
    let spec = "4xvolta";
    let all_at_once = memtopo(&dir)
        .args(["--simulate", spec, "--only", "shared", "-d", "all", "-o"])
        .arg(dir.join("at-once/"))
        .output()
        .unwrap();
    assert_eq!(code(&all_at_once), Some(0), "{}", text(&all_at_once.stderr));
    let sequential = memtopo(&dir)
        .args([
            "--simulate",
            spec,
            "--only",
            "shared",
            "-d",
            "all",
            "--sequential",
        ])
        .arg("-o")
        .arg(dir.join("sequential/"))
        .output()
        .unwrap();
    assert_eq!(code(&sequential), Some(0), "{}", text(&sequential.stderr));

    let at_once = results_by_uuid(&dir.join("at-once"));
    let one_by_one = results_by_uuid(&dir.join("sequential"));
    assert_eq!(at_once.len(), 4);
    let uuids: Vec<&String> = at_once.iter().map(|r| &r.0).collect();
    for ((uuid, elements, with), (uuid2, elements2, with2)) in at_once.iter().zip(&one_by_one) {
        assert_eq!(uuid, uuid2);
        // The simulated GPU's noise is its own: the same values either way.
        assert_eq!(elements, elements2, "{uuid}");
        // Measured at once, a GPU names the three others; one after another, none.
        let mut others: Vec<&String> = uuids.iter().copied().filter(|u| *u != uuid).collect();
        others.sort();
        let mut named: Vec<&String> = with.iter().collect();
        named.sort();
        assert_eq!(named, others, "{uuid}");
        assert!(with2.is_empty(), "{uuid}: {with2:?}");
    }
    let schedule = |sub: &str| {
        let text = std::fs::read_to_string(dir.join(sub).join("node-testnode.json")).unwrap();
        Fleet::from_json_str(&text).unwrap().nodes[0]
            .schedule
            .clone()
    };
    assert_eq!(schedule("at-once").as_deref(), Some("concurrent"));
    assert_eq!(schedule("sequential").as_deref(), Some("sequential"));

    // Standard output: each GPU's table whole, in device order, then the node's.
    let text_of = std::fs::read_to_string(dir.join("at-once/node-testnode.json")).unwrap();
    let mut gpus = Fleet::from_json_str(&text_of).unwrap().gpus;
    gpus.sort_by_key(|g| g.device_index);
    for out in [&all_at_once, &sequential] {
        let stdout = text(&out.stdout);
        let node_table = stdout.find("Node testnode").expect("the node's table");
        let mut last = 0;
        for gpu in &gpus {
            // Each GPU's table ends with its run record, which names it first.
            let table = stdout[..node_table]
                .find(&format!(
                    "GPU: simulated (volta), {}",
                    gpu.uuid.as_deref().unwrap()
                ))
                .unwrap_or_else(|| panic!("no table of {:?}:\n{stdout}", gpu.uuid));
            assert!(table >= last, "tables out of device order:\n{stdout}");
            // The table is whole: its header and rows lie between the previous GPU's and it.
            assert_eq!(
                stdout[last..table].matches("Shared memory").count(),
                1,
                "{stdout}"
            );
            last = table;
        }
    }
}

#[test]
fn the_node_script_diffs_gpus_measured_at_once_against_one_after_another() {
    let found = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !found("bash") {
        eprintln!("SKIPPED the node script's test: no bash");
        return;
    }
    let dir = scratch("node-script");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gpu/node.sh");
    let run = |args: &str, out: &str| {
        Command::new("bash")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_memtopo"))
            .arg(dir.join(out))
            .arg("2")
            .env("MEMTOPO_ARGS", args)
            .env("MEMTOPO_LOCK_DIR", dir.join("locks"))
            .env("SLURMD_NODENAME", "testnode")
            .output()
            .unwrap()
    };
    let out = run("--simulate 3xvolta --only shared", "good");
    assert_eq!(code(&out), Some(0), "{}", text(&out.stderr));
    let tsv = std::fs::read_to_string(dir.join("good/diffs.tsv")).unwrap();
    let rows: Vec<Vec<&str>> = tsv
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    // Three GPUs: each run at once against each sequential one (2 x 2), and the two
    // sequential runs against each other.
    let at_once = rows
        .iter()
        .filter(|r| r[0] == "at-once-vs-sequential")
        .count();
    let sequential = rows
        .iter()
        .filter(|r| r[0] == "sequential-vs-sequential")
        .count();
    assert_eq!((at_once, sequential), (12, 3), "{tsv}");
    assert!(rows.iter().all(|r| r[4] == "0"), "{tsv}");
    let summary = std::fs::read_to_string(dir.join("good/summary.txt")).unwrap();
    assert!(
        summary.contains("at-once-vs-sequential      12 / 12"),
        "{summary}"
    );
    for run in ["at-once-1", "sequential-2"] {
        let wall: f64 = std::fs::read_to_string(dir.join("good").join(run).join("wall.txt"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wall > 0.0, "{run}: {wall}");
    }
    // A node run that fails: the script exits with memtopo's own code for it.
    let own = memtopo(&dir)
        .args(["--simulate", "nosuchprofile", "-d", "all"])
        .output()
        .unwrap();
    assert_ne!(code(&own), Some(0));
    let out = run("--simulate nosuchprofile", "bad");
    assert_eq!(code(&out), code(&own), "{}", text(&out.stderr));
}
