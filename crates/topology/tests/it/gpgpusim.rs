//! The GPGPU-Sim export: every option traced to a measurement or the base, nothing
//! invented, a base's other lines kept.

use std::path::PathBuf;

use topology::gpgpusim::{export, settings, Base};
use topology::*;

use crate::fixtures::h200_illustrative;

/// The simulated H100 as the runner's golden file records it (the default benchmarks:
/// no cache geometry).
fn simulated_h100() -> Topology {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../pchase-runner/tests/golden/h100.json");
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Topology::from_json_str(&golden["topology"].to_string()).unwrap()
}

/// A base of our own: cache strings with policy and MSHR fields, the memory channels, the
/// clocks, and lines memtopo does not touch (one value spread over two lines).
const BASE: &str = "\
# a base configuration
-gpgpu_n_clusters 80
-gpgpu_n_cores_per_cluster 1
-gpgpu_n_mem 80
-gpgpu_n_sub_partition_per_mchannel 2
-gpgpu_cache:dl1  S:4:128:64,L:T:m:L:L,A:512:8,16:0,32
-gpgpu_l1_latency 20   # hand-tuned
-gpgpu_cache:dl2 S:64:128:16,L:B:m:L:P,A:192:4,32:0,32
-gpgpu_clock_domains 1000.0:1100.0:1200.0:850.0
-gpgpu_dram_timing_opt \"nbk=16:CCD=1:RRD=3
                        CL=12:WL=2\"
-gpgpu_dram_scheduler 1
";

/// The option lines of a configuration, each with the comment line before it.
fn options(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with('-'))
        .map(|(i, l)| {
            let before = if i > 0 { lines[i - 1] } else { "" };
            (l.to_string(), before.to_string())
        })
        .collect()
}

#[test]
fn without_a_base_every_option_comes_from_a_measurement_with_its_comment() {
    let text = export(&simulated_h100(), None);
    for (line, comment) in options(&text) {
        assert!(
            comment.starts_with("# memtopo: "),
            "{line} has no source: {comment:?}"
        );
    }
    let has = |line: &str| text.lines().any(|l| l == line);
    assert!(has("-gpgpu_n_clusters 132"), "{text}");
    assert!(has("-gpgpu_l1_latency 39"), "{text}");
    // The shared-memory latency's mean, rounded (30.0 cycles in the golden, whose p50 is
    // the simulated 30).
    assert!(has("-gpgpu_smem_latency 30"), "{text}");
    assert!(has("-gpgpu_shmem_size 233472"), "{text}");
    assert!(
        has("-gpgpu_shmem_option 8,16,32,64,100,132,164,196,228"),
        "{text}"
    );
    assert!(has("-gpgpu_unified_l1d_size 249"), "{text}");
    assert!(has("-gpgpu_adaptive_cache_config 1"), "{text}");
    assert!(has("-gpgpu_gmem_skip_L1D 0"), "{text}");
    // L2 hit minus L1 hit; memory minus L2 hit (Accel-Sim's micro-benchmarks' rule).
    let s = settings(&simulated_h100(), None);
    let mean = |k| {
        simulated_h100()
            .element(k)
            .unwrap()
            .latency
            .as_ref()
            .unwrap()
            .mean
            .0
    };
    let rop = (mean(ElementKind::L2) - mean(ElementKind::L1Data)).round();
    assert_eq!(
        s.value("-gpgpu_l2_rop_latency"),
        Some(rop.to_string().as_str())
    );
    // The cache strings need the base's policies and MSHRs: comments only, with the
    // measured geometry.
    assert!(
        !text.lines().any(|l| l.starts_with("-gpgpu_cache:")),
        "{text}"
    );
    assert!(
        text.contains("# memtopo: -gpgpu_cache:dl1 not set"),
        "{text}"
    );
    assert!(
        text.contains("# memtopo: -gpgpu_cache:dl2 not set"),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("-gpgpu_clock_domains")),
        "{text}"
    );
}

#[test]
fn a_base_keeps_its_other_lines_and_supplies_the_unmeasured_fields() {
    let base = Base::parse(BASE);
    let text = export(&simulated_h100(), Some(&base));
    // Lines memtopo does not set survive as they were, in order.
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| BASE.lines().any(|b| b == *l))
        .collect();
    for line in [
        "# a base configuration",
        "-gpgpu_n_mem 80",
        "-gpgpu_n_sub_partition_per_mchannel 2",
        "-gpgpu_dram_timing_opt \"nbk=16:CCD=1:RRD=3",
        "                        CL=12:WL=2\"",
        "-gpgpu_dram_scheduler 1",
    ] {
        assert!(kept.contains(&line), "{line:?} lost:\n{text}");
    }
    // memtopo's values replace the base's in place, quoting the base's.
    assert!(!text.contains("-gpgpu_l1_latency 20"), "{text}");
    assert!(
        text.contains("(the base had 20)\n-gpgpu_l1_latency 39\n"),
        "{text}"
    );
    assert!(text.contains("-gpgpu_n_clusters 132\n"), "{text}");
    // The L1: 249 KiB unified over the base's 4 sets of 128 B: 498 ways, sectored; the
    // base's policies and MSHRs.
    assert!(
        text.contains("\n-gpgpu_cache:dl1 S:4:128:498,L:T:m:L:L,A:512:8,16:0,32\n"),
        "{text}"
    );
    // The L2: 50 MiB over 80 x 2 sub-partitions, the base's 64 sets of 128 B: 40 ways.
    assert!(
        text.contains("\n-gpgpu_cache:dl2 S:64:128:40,L:B:m:L:P,A:192:4,32:0,32\n"),
        "{text}"
    );
    // The clocks: the SM's and the memory's measured or reported, the others the base's.
    let s = settings(&simulated_h100(), Some(&base));
    let clocks = s.value("-gpgpu_clock_domains").unwrap();
    assert!(clocks.contains(":1100.0:1200.0:2619.0"), "{clocks}");
    // Each option once.
    for option in ["-gpgpu_l1_latency", "-gpgpu_cache:dl1", "-gpgpu_n_clusters"] {
        let n = text
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(option))
            .count();
        assert_eq!(n, 1, "{option}:\n{text}");
    }
}

#[test]
fn a_quantity_not_measured_is_never_invented() {
    let mut topo = h200_illustrative();
    topo.element_mut(ElementKind::L2).latency = None;
    if let Some(p) = topo.element_mut(ElementKind::L2).partitions.as_mut() {
        p.near_latency = None;
    }
    topo.elements.remove(ElementKind::SharedMemory);
    let base =
        Base::parse("-gpgpu_l2_rop_latency 160\n-dram_latency 100\n-gpgpu_smem_latency 20\n");
    let text = export(&topo, Some(&base));
    // Without an L2 latency neither L2 option can be derived: the base's stay.
    assert!(text.contains("\n-gpgpu_l2_rop_latency 160\n"), "{text}");
    assert!(text.contains("\n-dram_latency 100\n"), "{text}");
    assert!(text.contains("\n-gpgpu_smem_latency 20\n"), "{text}");
    assert!(
        text.contains("-gpgpu_l2_rop_latency not set: needs the L1 and L2"),
        "{text}"
    );
    let s = settings(&topo, Some(&base));
    assert!(s.value("-gpgpu_l2_rop_latency").is_none());
    assert!(s.value("-gpgpu_smem_latency").is_none());
    // A bare device: only the SM count.
    let bare = Topology::new(DeviceInfo::new("bare", ComputeCapability::new(9, 0), 8));
    let s = settings(&bare, None);
    let set: Vec<&str> = s.set.iter().map(|x| x.option.as_str()).collect();
    assert_eq!(set, ["-gpgpu_n_clusters", "-gpgpu_n_cores_per_cluster"]);
}

#[test]
fn a_measured_geometry_sets_the_sets_and_a_cache_that_does_not_divide_is_left_alone() {
    let mut topo = simulated_h100();
    let l1 = topo.element_mut(ElementKind::L1Data);
    l1.geometry_mut().sets = Some(Count::new(4, Provenance::Benchmark));
    let base = Base::parse("-gpgpu_cache:dl1 S:8:128:32,L:T:m:L:L,A:512:8,16:0,32\n");
    let s = settings(&topo, Some(&base));
    // Measured sets win over the base's 8.
    assert_eq!(
        s.value("-gpgpu_cache:dl1"),
        Some("S:4:128:498,L:T:m:L:L,A:512:8,16:0,32")
    );
    // 249 KiB is no whole number of 5 sets of 128-byte lines.
    topo.element_mut(ElementKind::L1Data).geometry_mut().sets =
        Some(Count::new(5, Provenance::Benchmark));
    let s = settings(&topo, Some(&base));
    assert!(s.value("-gpgpu_cache:dl1").is_none());
    assert!(s
        .unset
        .iter()
        .any(|u| u.option == "-gpgpu_cache:dl1" && u.reason.contains("whole number")));
}
