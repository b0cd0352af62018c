//! The JSON Schema in `docs/schema/` is the one generated from the types, and
//! the example files and every written document validate against it.

use std::path::{Path, PathBuf};

use serde_json::Value;
use topology::*;

use crate::fixtures::{
    check_golden_file, h200_illustrative, k20c_partial, results_dir, schema_copies, schema_path,
};

fn committed_schema() -> Value {
    serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap()
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&committed_schema()).unwrap()
}

#[test]
fn committed_schema_is_the_generated_one() {
    let mut text = serde_json::to_string_pretty(&json_schema()).unwrap();
    text.push('\n');
    for copy in schema_copies("topology.schema.json") {
        check_golden_file(copy, &text);
    }
    // What the crate publishes is the committed file.
    assert_eq!(topology::schema::TOPOLOGY, text);
}

/// Every `.json` file under `dir` (recursively), sorted; none where `dir` does not exist.
fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    out.sort();
}

/// Every committed document the schemas describe: the results and node or fleet documents
/// under `docs/results/`, the illustrative result in `examples/data/`, the test data, and the
/// simulator's golden results.
/// Found at test time, so the folders may change. MT4G exports and progress logs are other
/// formats and are left out.
#[test]
fn every_committed_document_validates_against_its_schema() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in [
        "docs/results",
        "crates/topology/examples/data",
        "crates/topology/tests/data",
        "crates/pchase-runner/tests/golden",
    ] {
        json_files(&root.join(dir), &mut files);
    }
    let topology = validator();
    let fleet_schema: Value = serde_json::from_str(topology::schema::FLEET).unwrap();
    let fleet = jsonschema::validator_for(&fleet_schema).unwrap();
    let (mut results, mut fleets, mut failures) = (0, 0, Vec::new());
    for path in &files {
        let name = path.display().to_string();
        if name.ends_with(".mt4g.json") {
            continue;
        }
        let Ok(document) = serde_json::from_str::<Value>(&std::fs::read_to_string(path).unwrap())
        else {
            continue; // JSON Lines (progress logs), not a document
        };
        let (validator, document) = if document.get("fleet_schema_version").is_some() {
            fleets += 1;
            (&fleet, &document)
        } else if document.get("schema_version").is_some() {
            results += 1;
            (&topology, &document)
        } else if let Some(golden) = document.get("topology") {
            results += 1;
            (&topology, golden)
        } else {
            continue;
        };
        failures.extend(
            validator
                .iter_errors(document)
                .take(3)
                .map(|e| format!("{name}: {} at {}", e, e.instance_path())),
        );
    }
    // The examples and the goldens are always there: at least seven results.
    assert!(results >= 7, "only {results} results found");
    assert!(failures.is_empty(), "{failures:#?}");
    eprintln!("validated {results} results and {fleets} node or fleet documents");
}

#[test]
fn the_schema_refuses_a_newer_minor_version_as_the_loader_does() {
    let validator = validator();
    let mut good: Value =
        serde_json::from_str(&h200_illustrative().to_json_string().unwrap()).unwrap();
    assert!(validator.is_valid(&good));
    good["schema_version"] = "1.0".into();
    assert!(validator.is_valid(&good));
    let newer = SchemaVersion {
        minor: SchemaVersion::CURRENT.minor + 1,
        ..SchemaVersion::CURRENT
    };
    good["schema_version"] = newer.to_string().into();
    assert!(!validator.is_valid(&good));
    let err = Topology::from_json_str(&good.to_string()).unwrap_err();
    assert!(matches!(err, Error::NewerSchemaVersion { .. }), "{err}");
    assert!(err.to_string().contains("newer"), "{err}");
}

#[test]
fn example_result_files_validate_against_the_schema() {
    let validator = validator();
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(results_dir().join("h200-illustrative.json")).unwrap(),
    )
    .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&json)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // TOML has the same data model; validate its tree too.
    let toml_tree: Value = toml::from_str(
        &std::fs::read_to_string(results_dir().join("h200-illustrative.toml")).unwrap(),
    )
    .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&toml_tree)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn written_documents_validate_against_the_schema() {
    let validator = validator();
    for topo in [
        k20c_partial(),
        Topology::new(DeviceInfo::new("bare", ComputeCapability::new(5, 0), 1)),
    ] {
        let json: Value = serde_json::from_str(&topo.to_json_string().unwrap()).unwrap();
        assert!(validator.is_valid(&json), "{json}");
    }
}

#[test]
fn schema_rejects_what_the_loader_rejects_structurally() {
    let validator = validator();
    let good: Value = serde_json::from_str(&h200_illustrative().to_json_string().unwrap()).unwrap();
    let mut no_version = good.clone();
    no_version.as_object_mut().unwrap().remove("schema_version");
    assert!(!validator.is_valid(&no_version));
    let mut wrong_unit = good.clone();
    wrong_unit["elements"]["l2"]["latency"]["unit"] = "ns".into();
    assert!(!validator.is_valid(&wrong_unit));
    let mut newer_major = good.clone();
    newer_major["schema_version"] = "2.0".into();
    assert!(!validator.is_valid(&newer_major));
    let mut bad_bound = good;
    bad_bound["elements"]["l1_data"]["size"]["bound"] = "roughly".into();
    assert!(!validator.is_valid(&bad_bound));
}
