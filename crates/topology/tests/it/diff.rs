//! Diffs report changes beyond the uncertainty and nothing else.

use topology::diff::{diff, diff_with, DiffOptions};
use topology::*;

use crate::fixtures::{h200_illustrative, k20c_partial, latency};

#[test]
fn a_topology_does_not_differ_from_itself() {
    let topo = h200_illustrative();
    let d = diff(&topo, &topo);
    assert!(d.is_empty());
    assert_eq!(d.within_uncertainty, 0);
    assert_eq!(d.to_string(), "no changes beyond the uncertainty\n");
}

#[test]
fn noise_within_the_uncertainty_is_not_a_change() {
    let a = h200_illustrative();
    let mut b = a.clone();
    // 1 cycle on a 219-cycle latency with stdev 11.6: within 3 standard errors.
    b.element_mut(ElementKind::L2)
        .set_latency(latency(220.3, 222.0, 231.0, 11.6, 256));
    // 256 bytes on a change point with a 256-byte resolution.
    b.element_mut(ElementKind::L1Data)
        .size
        .as_mut()
        .unwrap()
        .bound = SizeBound::Exact(Bytes(238_848 + 256));
    let d = diff(&a, &b);
    assert!(d.is_empty(), "{d}");
    assert_eq!(d.within_uncertainty, 2);
}

#[test]
fn real_changes_are_reported_with_their_paths() {
    let a = h200_illustrative();
    let mut b = a.clone();
    b.element_mut(ElementKind::L2).partitions_mut().far_latency =
        Some(latency(450.0, 452.0, 470.0, 14.0, 256));
    b.element_mut(ElementKind::L1Data)
        .size
        .as_mut()
        .unwrap()
        .bound = SizeBound::Exact(Bytes::kib(200));
    b.element_mut(ElementKind::Texture).latency = None;
    b.device.sm_count = 114;
    let d = diff(&a, &b);
    let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "device.sm_count",
            "elements.l1_data.size",
            "elements.texture.latency",
            "elements.l2.partitions.far_latency",
        ]
    );
    let text = d.to_string();
    assert!(
        text.contains(
            "elements.l2.partitions.far_latency: 392.5 ± 14.2 cycles → 450.0 ± 14.0 cycles"
        ),
        "{text}"
    );
    assert!(
        text.contains("elements.texture.latency: 38.8 cycles → -"),
        "{text}"
    );
}

#[test]
fn api_sizes_compare_exactly_and_bounds_compare_as_intervals() {
    let a = h200_illustrative();
    let mut b = a.clone();
    b.element_mut(ElementKind::SharedMemory)
        .set_size(Size::api(Bytes(233_472 - 1024)));
    // ≥ 64 KiB against an exact 80 KiB: consistent, not a change.
    b.element_mut(ElementKind::ConstantL15)
        .set_size(Size::exact(Bytes::kib(80), Provenance::Benchmark));
    let d = diff(&a, &b);
    let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["elements.shared_memory.size"]);
    // But an exact 32 KiB contradicts ≥ 64 KiB.
    b.element_mut(ElementKind::ConstantL15)
        .set_size(Size::exact(Bytes::kib(32), Provenance::Benchmark));
    assert!(diff(&a, &b)
        .changes
        .iter()
        .any(|c| c.path == "elements.constant_l15.size"));
}

#[test]
fn stricter_options_report_more() {
    let a = k20c_partial();
    let mut b = a.clone();
    b.element_mut(ElementKind::L2)
        .set_latency(latency(226.0, 226.0, 233.0, 3.0, 256));
    assert!(
        diff(&a, &b).is_empty(),
        "1.3 % is under the default 2 % tolerance"
    );
    let strict = DiffOptions {
        sigmas: 3.0,
        relative_tolerance: 0.005,
        ..DiffOptions::default()
    };
    assert_eq!(diff_with(&a, &b, strict).changes.len(), 1);
}

#[test]
fn shared_cache_groups_are_compared() {
    let a = k20c_partial();
    let mut b = a.clone();
    b.share_physical_cache(
        [ElementKind::L1Data, ElementKind::Texture],
        Provenance::Benchmark,
    );
    let d = diff(&a, &b);
    assert_eq!(d.changes.len(), 1);
    assert_eq!(d.changes[0].before, "read_only+texture");
    assert_eq!(d.changes[0].after, "l1_data+read_only+texture");
}

#[test]
fn bandwidths_differ_by_their_measured_run_to_run_tolerance() {
    let with = |near: f64, read: f64| {
        let mut topo = k20c_partial();
        topo.element_mut(ElementKind::L2).bandwidth = Some(Bandwidths {
            read_near_partition: Some(Bandwidth::gib_per_second(near, Provenance::Benchmark)),
            ..Bandwidths::default()
        });
        topo.element_mut(ElementKind::DeviceMemory).bandwidth = Some(Bandwidths {
            read: Some(Bandwidth::gib_per_second(read, Provenance::Benchmark)),
            ..Bandwidths::default()
        });
        topo
    };
    // Two runs of one H200 (docs/evidence/2026-11-26-h200-default-runs): the near
    // partition's read took 14,646 and then 12,910 GiB/s; the memory's read 4,652 and 4,666.
    let d = diff(&with(14645.6, 4651.9), &with(12910.1, 4666.2));
    assert!(d.is_empty(), "{d}");
    // A device memory 3 % slower is a change (its runs moved by 1.4 % at most); the near
    // partition's read 40 % lower is one too (its runs take values up to 27.5 % apart).
    let d = diff(&with(14645.6, 4651.9), &with(8787.0, 4512.0));
    let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "elements.l2.bandwidth.read_near_partition",
            "elements.device_memory.bandwidth.read"
        ]
    );
}
