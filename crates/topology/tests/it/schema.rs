//! The JSON Schema in `docs/schema/` is the one generated from the types, and
//! the example files and every written document validate against it.

use serde_json::Value;
use topology::*;

use crate::fixtures::{
    check_golden_file, h200_illustrative, k20c_partial, results_dir, schema_path,
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
    check_golden_file(schema_path(), &text);
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
