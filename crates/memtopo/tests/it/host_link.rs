//! The host link end to end on the simulator: a simulated H100 reports the profile's
//! host-link rates against its Gen5 x16 peak, and a node with one GPU's host link slower
//! has that GPU, and only it, flagged as differing (not degraded).

use std::path::PathBuf;
use std::process::Command;

use topology::fleet::Fleet;
use topology::{RowValue, Topology};

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch("host-link", name)
}

fn memtopo(dir: &std::path::Path) -> Command {
    crate::common::memtopo_on(dir, "hostlink")
}

#[test]
fn a_simulated_h100_reports_its_host_link_against_the_gen5_peak() {
    let dir = scratch("one");
    let out = memtopo(&dir)
        .args(["--simulate", "h100", "--only", "host-link", "-q", "-o"])
        .arg(dir.join("h100.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let topo =
        Topology::from_json_str(&std::fs::read_to_string(dir.join("h100.json")).unwrap()).unwrap();
    let section = &topo.sections["host-link"];
    let value = |key: &str| {
        section
            .row(key)
            .and_then(|r| r.value.as_number())
            .unwrap_or_else(|| panic!("no {key}: {section:#?}"))
    };
    // The profile's model: 55.0 and 53.5 GB/s by the copy engine, 1100 ns; Gen5 x16.
    assert!(
        (value("copy_h2d") - 55.0).abs() < 0.3,
        "{}",
        value("copy_h2d")
    );
    assert!((value("copy_d2h") - 53.5).abs() < 0.3);
    assert!((value("both_sum") - 100.0).abs() < 0.5);
    assert!((value("peak") - 63.015).abs() < 0.01);
    assert!((value("copy_h2d_of_peak") - 100.0 * 55.0 / 63.015).abs() < 0.5);
    assert!(
        (value("latency_ns") - 1100.0).abs() < 25.0,
        "{}",
        value("latency_ns")
    );
    assert!(matches!(
        section.row("latency").map(|r| &r.value),
        Some(RowValue::Latency(_))
    ));
    // Every renderer shows it.
    let markdown = memtopo(&dir)
        .args(["render", "--format", "md"])
        .arg(dir.join("h100.json"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&markdown.stdout);
    assert!(
        text.contains("Host link") && text.contains("GB/s"),
        "{text}\n{}",
        String::from_utf8_lossy(&markdown.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node of three simulated H100s, GPU 1 perturbed by `perturbation`: the exit code and
/// the fleet summary.
fn node(name: &str, perturbation: Option<&str>) -> (i32, Fleet) {
    let dir = scratch(name);
    let node = crate::common::simulated_h100_node(
        &dir,
        3,
        10,
        perturbation.map(|p| (1, p)),
        "host-link",
        false,
    );
    let _ = std::fs::remove_dir_all(&dir);
    node
}

#[test]
fn a_slower_host_link_differs_on_its_gpu_only_and_degrades_nothing() {
    let (code, fleet) = node("slow", Some("host_link=-20%"));
    // A host shared with others' traffic slows copies on healthy links: the rates are
    // shown, flagged as differing, never degraded (the PCIe link's training is).
    let differing: Vec<_> = fleet
        .flags
        .iter()
        .filter(|f| f.path.starts_with("sections.host-link."))
        .collect();
    assert!(
        differing
            .iter()
            .any(|f| f.device_index == Some(1) && f.path == "sections.host-link.copy_h2d"),
        "{:#?}",
        fleet.flags
    );
    assert!(
        differing
            .iter()
            .all(|f| f.device_index == Some(1) && f.severity == topology::fleet::Severity::Differs),
        "{differing:#?}"
    );
    assert!(
        !differing.iter().any(|f| f.path.contains("pageable")),
        "pageable copies are not compared: {differing:#?}"
    );
    assert_eq!(fleet.degraded().count(), 0, "{:#?}", fleet.flags);
    assert_eq!(code, 0, "differing is not degraded");
    let (code, fleet) = node("healthy", None);
    assert_eq!(fleet.degraded().count(), 0, "{:#?}", fleet.flags);
    assert_eq!(code, 0);
}
