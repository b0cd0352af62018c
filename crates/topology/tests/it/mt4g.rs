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
        serde_json::json!(["Texture", "Read Only"])
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
