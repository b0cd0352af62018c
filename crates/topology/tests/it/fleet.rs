//! Fleet documents: key values, the spread and its flags, merging, the file format and its
//! schema.

use serde_json::Value;
use topology::fleet::*;
use topology::*;

use crate::fixtures::{check_golden_file, h200_illustrative, latency};

/// A result of model `model` with the given L2 latency mean (stdev 15, 768 samples, as a
/// real H100's) and its UUID in the run record.
fn gpu(model: &str, uuid: &str, l2: f64) -> Topology {
    let mut topo = Topology::new(DeviceInfo::new(model, ComputeCapability::new(9, 0), 132));
    topo.element_mut(ElementKind::L2)
        .set_latency(latency(l2, l2, l2 + 30.0, 15.0, 768))
        .set_size(Size::api(Bytes::mib(50)));
    topo.run = Some(RunRecord {
        gpu_uuid: Some(uuid.into()),
        host: Some("n1".into()),
        ..RunRecord::default()
    });
    topo
}

fn entry(model: &str, uuid: &str, l2: f64) -> GpuEntry {
    GpuEntry::from_topology(&gpu(model, uuid, l2), None, None)
}

fn build(gpus: Vec<GpuEntry>) -> Fleet {
    Fleet::build(
        FleetKind::Fleet,
        gpus,
        Vec::new(),
        Vec::new(),
        SpreadOptions::default(),
    )
}

fn flagged(fleet: &Fleet) -> Vec<(&str, &str)> {
    fleet
        .flags
        .iter()
        .map(|f| (f.uuid.as_deref().unwrap(), f.path.as_str()))
        .collect()
}

#[test]
fn the_odd_gpu_of_eight_is_flagged_with_its_siblings_values() {
    let mut gpus: Vec<GpuEntry> = (0..7)
        .map(|i| entry("H100", &format!("GPU-{i}"), 283.0 + f64::from(i) * 0.4))
        .collect();
    gpus.push(entry("H100", "GPU-7", 330.0));
    let fleet = build(gpus);
    assert_eq!(flagged(&fleet), [("GPU-7", "elements.l2.latency")]);
    let flag = &fleet.flags[0];
    assert_eq!(flag.value, 330.0);
    assert_eq!(flag.siblings.len(), 7);
    assert!(flag
        .siblings
        .iter()
        .all(|s| (283.0..286.0).contains(&s.value)));
    assert!(flag.allowed[1] < 330.0 && flag.allowed[0] < flag.median);
    assert!(flag.reason.contains("over 8 GPUs"), "{}", flag.reason);
    // The table and the reports show the values beside each other.
    for text in [table(&fleet), markdown(&fleet), html(&fleet)] {
        assert!(text.contains("330.0 cycles"), "{text}");
        assert!(text.contains("283.0 cycles"), "{text}");
    }
    assert!(table(&fleet).contains("330.0 cycles ⚑"));
}

#[test]
fn noise_within_the_diff_tolerance_is_not_flagged() {
    // All alike but one 1.5 % off: MAD is tiny, the latency tolerance (2 %) is the floor.
    let mut gpus: Vec<GpuEntry> = (0..5)
        .map(|i| entry("H100", &format!("GPU-{i}"), 283.0))
        .collect();
    gpus.push(entry("H100", "GPU-5", 283.0 * 1.015));
    assert!(build(gpus.clone()).flags.is_empty());
    // A stricter tolerance flags it: the floor is diff's.
    let strict = SpreadOptions {
        relative_tolerance: 0.005,
        ..SpreadOptions::default()
    };
    let fleet = Fleet::build(FleetKind::Fleet, gpus, Vec::new(), Vec::new(), strict);
    assert_eq!(flagged(&fleet), [("GPU-5", "elements.l2.latency")]);
}

#[test]
fn only_gpus_of_one_model_are_compared() {
    let gpus = vec![
        entry("H100", "GPU-a", 283.0),
        entry("H100", "GPU-b", 283.5),
        entry("H100", "GPU-c", 284.0),
        entry("H200", "GPU-d", 400.0),
    ];
    let fleet = build(gpus);
    assert!(fleet.flags.is_empty(), "{:?}", fleet.flags);
    assert_eq!(fleet.models.len(), 2);
    let h200 = fleet.models.iter().find(|m| m.model == "H200").unwrap();
    assert!(h200.note.as_deref().unwrap().contains("nothing to compare"));
}

#[test]
fn two_gpus_that_disagree_are_both_flagged_without_a_majority() {
    let fleet = build(vec![
        entry("H100", "GPU-a", 283.0),
        entry("H100", "GPU-b", 330.0),
    ]);
    let mut got = flagged(&fleet);
    got.sort_unstable();
    assert_eq!(
        got,
        [
            ("GPU-a", "elements.l2.latency"),
            ("GPU-b", "elements.l2.latency")
        ]
    );
    assert!(fleet.flags[0].reason.contains("no majority"));
    assert!(build(vec![
        entry("H100", "GPU-a", 283.0),
        entry("H100", "GPU-b", 283.2)
    ])
    .flags
    .is_empty());
}

#[test]
fn a_driver_size_that_differs_at_all_is_flagged_but_a_bound_that_fits_is_not() {
    let mut gpus: Vec<GpuEntry> = (0..4)
        .map(|i| entry("H100", &format!("GPU-{i}"), 283.0))
        .collect();
    // ECC on one GPU: a little less memory.
    let mut odd = gpu("H100", "GPU-9", 283.0);
    odd.device.memory_bytes = Some(Bytes(79_000_000_000));
    let mut others = gpu("H100", "GPU-8", 283.0);
    others.device.memory_bytes = Some(Bytes(80_000_000_000));
    for g in &mut gpus {
        g.values.insert(
            "device.memory_bytes".into(),
            key_values(&others)["device.memory_bytes"].clone(),
        );
    }
    gpus.push(GpuEntry::from_topology(&odd, None, None));
    // A size known only as a bound that includes the others' value is consistent.
    let mut bounded = gpu("H100", "GPU-10", 283.0);
    bounded.device.memory_bytes = Some(Bytes(80_000_000_000));
    bounded
        .element_mut(ElementKind::L2)
        .set_size(Size::at_least(Bytes::mib(40), Provenance::Benchmark));
    gpus.push(GpuEntry::from_topology(&bounded, None, None));
    let fleet = build(gpus);
    assert_eq!(flagged(&fleet), [("GPU-9", "device.memory_bytes")]);
}

#[test]
fn merge_keeps_a_gpu_once_and_fills_what_it_lacks() {
    let node = Fleet::build(
        FleetKind::Node,
        vec![GpuEntry {
            device_index: Some(3),
            ..entry("H100", "GPU-a", 283.0)
        }],
        vec![GpuFailure {
            node: Some("n1".into()),
            device_index: Some(4),
            uuid: None,
            exit_code: 8,
            error: "the GPU is busy".into(),
        }],
        vec![Node {
            name: "n1".into(),
            host: None,
            devices_requested: Some("all".into()),
            device_count: Some(8),
            schedule: Some("sequential".into()),
            links: Vec::new(),
            notes: Vec::new(),
        }],
        SpreadOptions::default(),
    );
    let merged = Fleet::merge(
        vec![
            (
                "GPU-a.json".into(),
                Input::Result(gpu("H100", "GPU-a", 283.0)),
            ),
            ("node-n1.json".into(), Input::Fleet(node)),
            (
                "GPU-b.json".into(),
                Input::Result(gpu("H100", "GPU-b", 283.2)),
            ),
        ],
        SpreadOptions::default(),
    );
    assert_eq!(merged.kind, FleetKind::Fleet);
    assert_eq!(merged.gpus.len(), 2);
    let a = &merged.gpus[0];
    assert_eq!(
        (a.uuid.as_deref(), a.device_index, a.file.as_deref()),
        (Some("GPU-a"), Some(3), Some("GPU-a.json"))
    );
    assert_eq!(merged.failures.len(), 1);
    assert_eq!(merged.nodes.len(), 1);
    assert!(merged.notes.is_empty(), "{:?}", merged.notes);
    // The same GPU with other values: kept once, with a note.
    let twice = Fleet::merge(
        vec![
            ("x.json".into(), Input::Result(gpu("H100", "GPU-a", 283.0))),
            ("y.json".into(), Input::Result(gpu("H100", "GPU-a", 300.0))),
        ],
        SpreadOptions::default(),
    );
    assert_eq!(twice.gpus.len(), 1);
    assert!(
        twice.notes[0].contains("different values"),
        "{:?}",
        twice.notes
    );
    let empty = Fleet::merge(Vec::new(), SpreadOptions::default());
    assert!(empty.gpus.is_empty() && empty.notes[0].contains("no GPU"));
}

#[test]
fn documents_round_trip_and_bad_ones_name_the_field() {
    let fleet = build(vec![
        GpuEntry::from_topology(&h200_illustrative(), Some("GPU-1".into()), None),
        entry("H100", "GPU-a", 283.0),
    ]);
    let json = fleet.to_json_string().unwrap();
    assert_eq!(Fleet::from_json_str(&json).unwrap(), fleet);
    assert!(matches!(Input::from_json_str(&json), Ok(Input::Fleet(_))));
    let result = h200_illustrative().to_json_string().unwrap();
    assert!(matches!(
        Input::from_json_str(&result),
        Ok(Input::Result(_))
    ));

    let mut tree: Value = serde_json::from_str(&json).unwrap();
    tree["fleet_schema_version"] = "2.0".into();
    let err = Fleet::from_json_str(&tree.to_string()).unwrap_err();
    assert!(err.to_string().contains("major"), "{err}");
    let mut tree: Value = serde_json::from_str(&json).unwrap();
    tree["gpus"][1]["values"]["elements.l2.latency"]["value"] = (-1.0).into();
    let err = Fleet::from_json_str(&tree.to_string()).unwrap_err();
    assert!(
        err.to_string()
            .contains("gpus[1].values.elements.l2.latency"),
        "{err}"
    );
    let mut tree: Value = serde_json::from_str(&json).unwrap();
    tree["gpus"][0]["model"] = 7.into();
    let err = Fleet::from_json_str(&tree.to_string()).unwrap_err();
    assert!(err.to_string().contains("gpus[0].model"), "{err}");
    assert!(Fleet::from_json_str("{\"gpus\": [").is_err());
}

#[test]
fn committed_fleet_schema_is_the_generated_one_and_documents_validate() {
    let mut text = serde_json::to_string_pretty(&topology::fleet::json_schema()).unwrap();
    text.push('\n');
    for copy in crate::fixtures::schema_copies("fleet.schema.json") {
        check_golden_file(copy, &text);
    }
    assert_eq!(topology::schema::FLEET, text);
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let fleet = build(vec![
        entry("H100", "GPU-a", 283.0),
        entry("H100", "GPU-b", 330.0),
    ]);
    let doc: Value = serde_json::from_str(&fleet.to_json_string().unwrap()).unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut bad = doc;
    bad["kind"] = "cluster".into();
    assert!(!validator.is_valid(&bad));
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// GPUs within the latency tolerance of each other are never flagged, and one
        /// GPU 20 % off always is, whatever the order of the GPUs.
        #[test]
        fn flags_follow_the_tolerance_not_the_order(
            noise in proptest::collection::vec(-0.009f64..0.009, 3..12),
            odd_at in 0usize..12,
            rotate in 0usize..12,
        ) {
            let gpus: Vec<GpuEntry> = noise
                .iter()
                .enumerate()
                .map(|(i, n)| entry("H100", &format!("GPU-{i}"), 283.0 * (1.0 + n)))
                .collect();
            prop_assert!(build(gpus.clone()).flags.is_empty());
            let mut with_odd = gpus;
            let odd = odd_at % with_odd.len();
            let value = with_odd[odd].values["elements.l2.latency"].value * 1.2;
            with_odd[odd]
                .values
                .get_mut("elements.l2.latency")
                .unwrap()
                .value = value;
            let n = with_odd.len();
            with_odd.rotate_left(rotate % n);
            let fleet = build(with_odd);
            let expected = format!("GPU-{odd}");
            prop_assert_eq!(flagged(&fleet), vec![(expected.as_str(), "elements.l2.latency")]);
        }
    }
}

/// Four H200s with the values a healthy node gave: `(constant L1.5 latency, L2
/// near-partition read GiB/s)` per GPU.
fn healthy_h200s(values: [(f64, f64); 4]) -> Fleet {
    let gpus = values
        .iter()
        .enumerate()
        .map(|(i, &(l15, near))| {
            let mut gpu = GpuEntry::from_topology(
                &gpu("NVIDIA H200", &format!("GPU-{i}"), 287.0),
                None,
                None,
            );
            gpu.values.insert(
                "elements.constant_l15.latency".into(),
                KeyValue {
                    error: Some(0.05),
                    ..KeyValue::exact(ValueKind::Latency, l15)
                },
            );
            gpu.values.insert(
                "elements.l2.bandwidth.read_near_partition".into(),
                KeyValue::exact(ValueKind::Bandwidth, near),
            );
            gpu
        })
        .collect();
    build(gpus)
}

#[test]
fn a_healthy_nodes_stable_and_bimodal_differences_are_not_degraded() {
    // One GPU's constant L1.5 at 103 cycles against 98–99 (stable per GPU, as between two
    // H100s); one GPU's near-partition read at 13.2 TiB/s against 14.3–14.7 (bimodal from
    // run to run on one GPU).
    let tib = 1024.0;
    let fleet = healthy_h200s([
        (98.0, 14.3 * tib),
        (99.0, 14.5 * tib),
        (98.5, 14.7 * tib),
        (103.0, 13.2 * tib),
    ]);
    assert_eq!(fleet.degraded().count(), 0, "{:#?}", fleet.flags);
    // The L1.5 is still shown, as a stable difference; the bandwidth lies within its
    // run-to-run tolerance (35 %).
    assert_eq!(fleet.flags.len(), 1, "{:#?}", fleet.flags);
    let flag = &fleet.flags[0];
    assert_eq!(flag.severity, Severity::Differs);
    assert_eq!(flag.path, "elements.constant_l15.latency");
    assert_eq!(flag.uuid.as_deref(), Some("GPU-3"));
    assert!(flag.reason.contains("stable difference"), "{}", flag.reason);
    assert!(!table(&fleet).contains("⚑"), "{}", table(&fleet));
    // Beyond its spread the L1.5 is degraded (110 cycles, 12 % above); a near-partition read
    // at 8.5 TiB/s (42 % below) only differs: that figure moves between modes from run to
    // run, and the whole-L2 read and write are the L2's bandwidth health.
    let fleet = healthy_h200s([
        (98.0, 14.3 * tib),
        (99.0, 14.5 * tib),
        (98.5, 14.7 * tib),
        (110.0, 8.5 * tib),
    ]);
    let degraded: Vec<&str> = fleet.degraded().map(|f| f.path.as_str()).collect();
    assert_eq!(degraded, ["elements.constant_l15.latency"]);
    assert!(
        fleet
            .flags
            .iter()
            .any(|f| f.path == "elements.l2.bandwidth.read_near_partition"
                && f.severity == Severity::Differs),
        "{:#?}",
        fleet.flags
    );
    // A GPU faster than its peers differs, it is not degraded.
    let fleet = healthy_h200s([
        (98.0, 14.3 * tib),
        (98.0, 14.5 * tib),
        (98.0, 14.7 * tib),
        (90.0, 14.5 * tib),
    ]);
    assert_eq!(fleet.degraded().count(), 0, "{:#?}", fleet.flags);
    assert_eq!(fleet.flags.len(), 1);
    assert!(fleet.flags[0].reason.contains("better side"));
}

#[test]
fn a_pcie_link_below_its_maximum_is_degraded_even_when_every_peer_is_alike() {
    let gpus = (0..2)
        .map(|i| {
            let mut topo = gpu("NVIDIA H100", &format!("GPU-{i}"), 283.0);
            let state = GpuState {
                pcie_generation: Some(5),
                pcie_width: Some(8),
                pcie_max_generation: Some(5),
                pcie_max_width: Some(16),
                ..GpuState::default()
            };
            topo.run.as_mut().unwrap().after = Some(state);
            GpuEntry::from_topology(&topo, None, None)
        })
        .collect();
    let fleet = build(gpus);
    let flags: Vec<(&str, &str, Severity)> = fleet
        .flags
        .iter()
        .map(|f| (f.uuid.as_deref().unwrap(), f.path.as_str(), f.severity))
        .collect();
    assert_eq!(
        flags,
        [
            ("GPU-0", "pcie.width", Severity::Degraded),
            ("GPU-1", "pcie.width", Severity::Degraded)
        ]
    );
    assert!(fleet.flags[0].reason.contains("trained down"));
}

#[test]
fn the_two_h100s_of_one_node_read_by_the_rule() {
    // GPU-9ff66c60 and GPU-5fee84f8 (docs/evidence/2026-11-25-h100x2-node): constant L1.5,
    // device-memory read and copy, L2 read and write.
    let values = |l15: f64, read: f64, copy: f64, l2_read: f64, l2_write: f64| {
        [
            ("elements.constant_l15.latency", ValueKind::Latency, l15),
            (
                "elements.device_memory.bandwidth.read",
                ValueKind::Bandwidth,
                read,
            ),
            (
                "elements.device_memory.bandwidth.copy",
                ValueKind::Bandwidth,
                copy,
            ),
            ("elements.l2.bandwidth.read", ValueKind::Bandwidth, l2_read),
            (
                "elements.l2.bandwidth.write",
                ValueKind::Bandwidth,
                l2_write,
            ),
        ]
    };
    let gpus = [
        ("GPU-9ff66c60", values(98.0, 2858.3, 2742.4, 7508.0, 3618.6)),
        (
            "GPU-5fee84f8",
            values(103.0, 2934.7, 2829.9, 8962.0, 3839.1),
        ),
    ]
    .into_iter()
    .map(|(uuid, values)| {
        let mut gpu = entry("NVIDIA H100 80GB HBM3", uuid, 283.0);
        for (path, kind, value) in values {
            gpu.values.insert(path.into(), KeyValue::exact(kind, value));
        }
        gpu
    })
    .collect();
    let fleet = build(gpus);
    let flags: Vec<(&str, &str, &str)> = fleet
        .flags
        .iter()
        .map(|f| {
            (
                f.uuid.as_deref().unwrap(),
                f.path.as_str(),
                f.severity.as_str(),
            )
        })
        .collect();
    assert_eq!(
        flags,
        [
            ("GPU-9ff66c60", "elements.constant_l15.latency", "differs"),
            ("GPU-5fee84f8", "elements.constant_l15.latency", "differs"),
            (
                "GPU-9ff66c60",
                "elements.device_memory.bandwidth.read",
                "degraded"
            ),
            (
                "GPU-5fee84f8",
                "elements.device_memory.bandwidth.read",
                "differs"
            ),
            ("GPU-9ff66c60", "elements.l2.bandwidth.read", "degraded"),
            ("GPU-5fee84f8", "elements.l2.bandwidth.read", "differs"),
            ("GPU-9ff66c60", "elements.l2.bandwidth.write", "degraded"),
            ("GPU-5fee84f8", "elements.l2.bandwidth.write", "differs"),
        ]
    );
}
