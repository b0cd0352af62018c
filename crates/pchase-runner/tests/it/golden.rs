//! What every bundled profile measures, compared with what it measured before: a
//! refactoring that changes a value, a note or the order of the benchmarks fails here.
//!
//! The files in `tests/golden/` are the topology (without its run record) and the list of
//! benchmarks that ran, in order. `MEMTOPO_BLESS=1 cargo xtask test` rewrites them; do
//! that only for a change that is meant to change results, and say so in its commit.

use std::path::PathBuf;

use pchase_runner::{
    measure::{report, Measurements},
    sim::SimProfile,
};
use serde_json::{json, Value};

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"))
}

/// The comparable record of a session: its topology and the benchmarks it ran.
fn record(profile: &SimProfile, m: &Measurements) -> Value {
    let topo = report::to_topology(&profile.device, m, "golden");
    let mut topo: Value =
        serde_json::from_str(&topo.to_json_string().expect("topology serialises"))
            .expect("topology JSON parses");
    if let Some(map) = topo.as_object_mut() {
        map.remove("run");
        // Each benchmark writes its own notes: their order follows the registry, which
        // is not a result.
        if let Some(Value::Array(notes)) = map.get_mut("notes") {
            notes.sort_by_key(|n| n.to_string());
        }
    }
    let benchmarks: Vec<&str> = m.timings.iter().map(|t| t.benchmark.as_str()).collect();
    json!({ "topology": topo, "benchmarks": benchmarks })
}

/// Panics with the first difference when `m` differs from the golden record of `name`.
pub fn compare(name: &str, profile: &SimProfile, m: &Measurements) {
    let now = record(profile, m);
    let path = golden_path(name);
    if std::env::var_os("MEMTOPO_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir golden");
        let text = serde_json::to_string_pretty(&now).expect("serialises");
        std::fs::write(&path, text + "\n").expect("write golden");
        return;
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (MEMTOPO_BLESS=1 writes it)", path.display()));
    let before: Value = serde_json::from_str(&text).expect("golden JSON parses");
    if let Some(at) = first_difference(&before, &now, String::new()) {
        panic!("{name}: the results changed at {at}");
    }
}

/// The JSON path of the first place where `a` and `b` differ, with both values.
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                first_difference(va, vb, format!("{at}.{k}"))
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (va, vb))| first_difference(va, vb, format!("{at}[{i}]"))),
        // The analysis sums in parallel: the last bits of a float may differ between runs.
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(p), Some(q)) if (p - q).abs() <= 1e-9 * p.abs().max(q.abs()) => None,
            _ => Some(format!("{at}: before {a}, now {b}")),
        },
        _ if a == b => None,
        _ => Some(format!("{at}: before {a}, now {b}")),
    }
}

#[test]
fn differences_are_located() {
    let a = json!({"x": [1, {"y": 2}]});
    let b = json!({"x": [1, {"y": 3}]});
    assert_eq!(
        first_difference(&a, &b, String::new()).as_deref(),
        Some(".x[1].y: before 2, now 3")
    );
    assert_eq!(first_difference(&a, &a, String::new()), None);
    let (p, q) = (json!(6.330191723326985e-10), json!(6.330191723326986e-10));
    assert_eq!(first_difference(&p, &q, String::new()), None);
    assert!(first_difference(&json!(1.0), &json!(1.001), String::new()).is_some());
}
