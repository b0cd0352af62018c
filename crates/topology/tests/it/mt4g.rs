//! The MT4G export has the layout of MT4G 1.2's output.

use serde_json::Value;
use topology::*;

use crate::fixtures::{check_golden, h200_illustrative, k20c_partial};

fn sample() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/data/mt4g-v1.2-sample-H100-80GB-HBM3.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every key path of `ours` must exist in `reference` with the same JSON type.
fn assert_layout_within(ours: &Value, reference: &Value, path: &str) {
    match (ours, reference) {
        (Value::Object(ours), Value::Object(reference)) => {
            for (key, value) in ours {
                let child = format!("{path}/{key}");
                // memtopo's own keys, which MT4G readers ignore.
                if key.starts_with("memtopo") {
                    continue;
                }
                let Some(expected) = reference.get(key) else {
                    panic!("{child} is not in MT4G's layout");
                };
                assert_layout_within(value, expected, &child);
            }
        }
        (Value::Array(ours), Value::Array(reference)) => {
            if let (Some(a), Some(b)) = (ours.first(), reference.first()) {
                assert_layout_within(a, b, &format!("{path}[0]"));
            }
        }
        (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_))
        | (Value::Bool(_), Value::Bool(_)) => {}
        (ours, reference) => panic!("{path}: {ours} has another type than MT4G's {reference}"),
    }
}

fn key_paths(value: &Value, path: &str, out: &mut Vec<String>) {
    if let Value::Object(map) = value {
        for (key, child) in map {
            let child_path = format!("{path}/{key}");
            out.push(child_path.clone());
            key_paths(child, &child_path, out);
        }
    }
}

#[test]
fn export_uses_only_mt4g_keys_and_types() {
    for topo in [h200_illustrative(), k20c_partial()] {
        assert_layout_within(&mt4g::export(&topo), &sample(), "");
    }
}

#[test]
fn export_of_a_full_topology_covers_the_sample_layout() {
    let mut ours = Vec::new();
    key_paths(&mt4g::export(&h200_illustrative()), "", &mut ours);
    let mut theirs = Vec::new();
    key_paths(&sample(), "", &mut theirs);
    // Fields memtopo does not model (documented in docs/topology.md).
    let unmodelled = [
        "/compute/concurrentKernels",
        "/compute/supportsCooperativeLaunch",
        "/general/asicRevision",
        "/memory/l1/localL1CacheSupported",
        "/meta/gpuCompiler",
        "/meta/hostCompiler",
        "/meta/hostCpu",
        "/meta/os",
    ];
    let missing: Vec<&String> = theirs
        .iter()
        .filter(|p| !ours.contains(p) && !unmodelled.contains(&p.as_str()))
        .collect();
    assert!(missing.is_empty(), "export lacks {missing:?}");
}

#[test]
fn export_maps_values() {
    let doc = mt4g::export(&h200_illustrative());
    let memory = &doc["memory"];
    assert_eq!(memory["l1"]["size"]["size"], 238_848);
    assert_eq!(memory["l1"]["size"]["confidence"], 0.97);
    assert_eq!(memory["l1"]["size"]["unit"], "bytes");
    assert_eq!(
        memory["l1"]["sharedWith"],
        serde_json::json!(["Read Only", "Texture"])
    );
    assert_eq!(memory["l1"]["amountPerMultiprocessor"], 1);
    assert_eq!(memory["l1"]["globalL1CacheSupported"], true);
    assert_eq!(memory["l2"]["size"]["value"], 52_428_800);
    assert_eq!(memory["l2"]["segmentSize"]["size"], 26_214_400);
    assert_eq!(memory["l2"]["latency"]["mean"], 219.3);
    let penalty = memory["l2"]["missPenalty"]["value"].as_f64().unwrap();
    assert!((penalty - (834.5 - 219.3)).abs() < 1e-9, "{penalty}");
    assert_eq!(memory["constant"]["l1.5"]["size"]["confidence"], 0.0);
    assert_eq!(memory["constant"]["l1.5"]["size"]["size"], 65_536);
    assert_eq!(memory["main"]["memoryBusWidth"]["value"], 6144);
    assert_eq!(memory["main"]["memoryClockRate"]["value"], 3_201_000);
    assert_eq!(doc["general"]["clockRate"]["value"], 1_980_000);
    assert_eq!(doc["meta"]["driver"], 12040);
}

#[test]
fn export_of_h200_matches_golden() {
    check_golden("h200-mt4g.json", &mt4g::export_string(&h200_illustrative()));
}

/// The keys sys-sage's MT4G parser (`ParseMt4g_v1_x` at caps-tum/sys-sage 9a71fb5) reads
/// without checking that they exist, as `(object, key)`, with the condition under which it
/// reads them; a missing one aborts the parser.
fn sys_sage_required(doc: &Value) -> Vec<String> {
    let mut required: Vec<&str> = vec![
        "/general/name",
        "/general/vendor",
        "/general/computeCapability/major",
        "/general/computeCapability/minor",
        "/general/clockRate/value",
        "/compute/multiProcessorCount",
        "/compute/numberOfCoresPerMultiProcessor",
        "/compute/maxThreadsPerBlock",
        "/compute/warpSize",
        "/compute/maxThreadsPerMultiProcessor",
        "/compute/maxBlocksPerMultiProcessor",
        "/memory/main/totalGlobalMem/value",
        "/memory/main/memoryClockRate/value",
        "/memory/main/memoryBusWidth/value",
        "/memory/l2/size/value",
        "/memory/shared/sharedMemPerBlock/value",
        "/memory/shared/sharedMemPerMultiProcessor/value",
        "/memory/l1",
        "/memory/constant",
    ];
    for level in ["main", "l2"] {
        if doc["memory"][level].get("latency").is_some() {
            required.push(if level == "main" {
                "/memory/main/readBandwidth/value"
            } else {
                "/memory/l2/readBandwidth/value"
            });
            required.push(if level == "main" {
                "/memory/main/writeBandwidth/value"
            } else {
                "/memory/l2/writeBandwidth/value"
            });
        }
    }
    let constant = doc["memory"]["constant"].as_object().unwrap();
    if constant.len() == 1 {
        required.push("/memory/constant/totalConstMem/value");
    } else {
        required.extend([
            "/memory/constant/l1.5/fetchGranularity/size",
            "/memory/constant/l1.5/size/size",
        ]);
        if doc["memory"]["constant"]["l1"].get("sharedWith").is_none() {
            required.extend([
                "/memory/constant/l1/fetchGranularity/size",
                "/memory/constant/l1/size/size",
                "/memory/constant/l1/latency/mean",
            ]);
        }
    }
    let shared = |object: &str, name: &str| {
        doc["memory"][object]["sharedWith"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == name))
    };
    let texture = doc["memory"].get("texture").is_some() && !shared("l1", "Texture");
    if texture {
        required.extend([
            "/memory/texture/fetchGranularity/size",
            "/memory/texture/size/size",
            "/memory/texture/latency/mean",
        ]);
    }
    if doc["memory"].get("readOnly").is_some()
        && !shared("l1", "Read Only")
        && !(texture && shared("texture", "Read Only"))
    {
        required.extend([
            "/memory/readOnly/fetchGranularity/size",
            "/memory/readOnly/size/size",
            "/memory/readOnly/latency/mean",
        ]);
    }
    required
        .into_iter()
        .filter(|path| doc.pointer(path).is_none())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_sample_and_every_export_hold_every_key_sys_sage_requires() {
    assert!(sys_sage_required(&sample()).is_empty());
    let bare = Topology::new(DeviceInfo::new("bare", ComputeCapability::new(9, 0), 2));
    for topo in [h200_illustrative(), k20c_partial(), bare] {
        let doc = mt4g::export(&topo);
        let missing = sys_sage_required(&doc);
        assert!(
            missing.is_empty(),
            "{}: lacks {missing:?}",
            topo.device.name
        );
    }
}

#[test]
fn keys_without_a_value_are_filled_as_mt4g_marks_them_and_listed() {
    let mut topo = k20c_partial();
    topo.device.limits.max_threads_per_block = None;
    let doc = mt4g::export(&topo);
    let listed = doc["meta"]["memtopoNotMeasured"].as_object().unwrap();
    // The L1.5's fetch granularity was not measured: size 0, confidence 0.
    let granularity = &doc["memory"]["constant"]["l1.5"]["fetchGranularity"];
    assert_eq!(granularity["size"], 0);
    assert_eq!(granularity["confidence"], 0.0);
    assert!(
        listed.contains_key("memory.constant.l1.5.fetchGranularity"),
        "{listed:?}"
    );
    // The L1.5's size was measured: kept, not listed.
    assert_eq!(doc["memory"]["constant"]["l1.5"]["size"]["size"], 33_600);
    assert!(!listed.contains_key("memory.constant.l1.5.size"));
    // An API value the result lacks is 0 and listed; cores and blocks per SM come from the
    // compute capability (3.5: 192 cores, 16 blocks), listed as derived.
    assert_eq!(doc["compute"]["maxThreadsPerBlock"], 0);
    assert!(listed.contains_key("compute.maxThreadsPerBlock"));
    assert_eq!(doc["compute"]["numberOfCoresPerMultiProcessor"], 192);
    assert_eq!(doc["compute"]["maxBlocksPerMultiProcessor"], 16);
    assert!(listed["compute.numberOfCoresPerMultiProcessor"]
        .as_str()
        .unwrap()
        .contains("compute capability 3.5"));
    // Everything the full illustrative result has is measured: nothing listed but what
    // comes from the API it lacks.
    let full = mt4g::export(&h200_illustrative());
    let listed = full["meta"]["memtopoNotMeasured"].as_object();
    assert!(
        listed.is_none_or(|l| l.keys().all(|k| !k.contains("l1.5.size"))),
        "{listed:?}"
    );
}

#[test]
fn miss_penalties_follow_the_hierarchy_without_backed_by() {
    let mut topo = h200_illustrative();
    for kind in ElementKind::ALL {
        if let Some(element) = topo.elements.get(kind).cloned() {
            let mut element = element;
            element.backed_by = None;
            *topo.element_mut(kind) = element;
        }
    }
    let doc = mt4g::export(&topo);
    let mean = |kind: ElementKind| topo.element(kind).unwrap().latency.as_ref().unwrap().mean.0;
    let penalty = |path: &str| doc.pointer(path).and_then(Value::as_f64).unwrap();
    let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    close(
        penalty("/memory/l1/missPenalty/value"),
        mean(ElementKind::L2) - mean(ElementKind::L1Data),
    );
    close(
        penalty("/memory/constant/l1/missPenalty/value"),
        mean(ElementKind::ConstantL15) - mean(ElementKind::ConstantL1),
    );
    close(
        penalty("/memory/l2/missPenalty/value"),
        mean(ElementKind::DeviceMemory) - mean(ElementKind::L2),
    );
    // MT4G writes no miss penalty for the L1.5.
    assert!(doc.pointer("/memory/constant/l1.5/missPenalty").is_none());
}

#[test]
fn confidence_carries_the_statistic_behind_each_value() {
    let doc = mt4g::export(&h200_illustrative());
    // The illustrative L1 size has a detector confidence of 0.97.
    assert_eq!(doc["memory"]["l1"]["size"]["confidence"], 0.97);
    // A value reported by the driver: 1.
    let mut topo = h200_illustrative();
    topo.element_mut(ElementKind::Texture).line_size = Some(Size::api(Bytes(128)));
    let doc = mt4g::export(&topo);
    assert_eq!(doc["memory"]["texture"]["lineSize"]["confidence"], 1.0);
    assert_eq!(doc["memory"]["texture"]["lineSize"]["method"], "api");
    // A p-value: 1 − p.
    topo.element_mut(ElementKind::Texture).size = Some(Size::measured(
        Bytes(243_456),
        ChangePointEvidence {
            p_value: Some(0.25),
            ..Default::default()
        },
    ));
    let doc = mt4g::export(&topo);
    assert_eq!(doc["memory"]["texture"]["size"]["confidence"], 0.75);
    // Nothing recorded: 0, which MT4G's readers take as "not established".
    topo.element_mut(ElementKind::Texture).size =
        Some(Size::exact(Bytes(243_456), Provenance::Benchmark));
    let doc = mt4g::export(&topo);
    assert_eq!(doc["memory"]["texture"]["size"]["confidence"], 0.0);
}
