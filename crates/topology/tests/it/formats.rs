//! JSON and TOML round trips, the example result files and file loading.

use topology::*;

use crate::fixtures::{check_golden_file, h200_illustrative, k20c_partial, results_dir};

#[test]
fn json_round_trip_preserves_every_field() {
    for topo in [h200_illustrative(), k20c_partial()] {
        let text = topo.to_json_string().unwrap();
        assert_eq!(Topology::from_json_str(&text).unwrap(), topo);
    }
}

#[test]
fn toml_round_trip_preserves_every_field() {
    for topo in [h200_illustrative(), k20c_partial()] {
        let text = topo.to_toml_string().unwrap();
        assert_eq!(Topology::from_toml_str(&text).unwrap(), topo, "{text}");
    }
}

#[test]
fn json_and_toml_hold_the_same_topology() {
    let topo = h200_illustrative();
    let via_toml = Topology::from_toml_str(&topo.to_toml_string().unwrap()).unwrap();
    let via_json = Topology::from_json_str(&topo.to_json_string().unwrap()).unwrap();
    assert_eq!(via_toml, via_json);
}

#[test]
fn example_result_files_are_the_illustrative_fixture() {
    let topo = h200_illustrative();
    let dir = results_dir();
    check_golden_file(
        dir.join("h200-illustrative.json"),
        &topo.to_json_string().unwrap(),
    );
    check_golden_file(
        dir.join("h200-illustrative.toml"),
        &topo.to_toml_string().unwrap(),
    );
    assert_eq!(
        Topology::load(dir.join("h200-illustrative.json")).unwrap(),
        topo
    );
    assert_eq!(
        Topology::load(dir.join("h200-illustrative.toml")).unwrap(),
        topo
    );
}

#[test]
fn example_files_say_they_are_illustrative() {
    let topo = Topology::load(results_dir().join("h200-illustrative.json")).unwrap();
    let remark = topo.conditions.remark.unwrap();
    assert!(remark.contains("not a measurement"), "{remark}");
    assert!(topo.conditions.tool.unwrap().contains("illustrative"));
}

#[test]
fn files_carry_units_and_bounds_explicitly() {
    let json: serde_json::Value =
        serde_json::from_str(&h200_illustrative().to_json_string().unwrap()).unwrap();
    let l15 = &json["elements"]["constant_l15"];
    assert_eq!(l15["size"]["unit"], "B");
    assert_eq!(l15["size"]["bound"], "at_least");
    assert_eq!(l15["size"]["value"], 65_536);
    assert_eq!(l15["latency"]["unit"], "cycles");
    assert_eq!(json["schema_version"], SchemaVersion::CURRENT.to_string());
}

#[test]
fn save_and_load_pick_the_format_from_the_extension() {
    let dir = std::env::temp_dir().join(format!("topology-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = k20c_partial();
    for name in ["k20c.json", "k20c.toml"] {
        topo.save(dir.join(name)).unwrap();
        assert_eq!(Topology::load(dir.join(name)).unwrap(), topo);
    }
    let err = topo.save(dir.join("k20c.yaml")).unwrap_err();
    assert!(matches!(err, Error::UnknownExtension { .. }), "{err}");
    let err = Topology::load(dir.join("absent.json")).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn writing_refuses_an_invalid_topology() {
    let mut topo = k20c_partial();
    topo.element_mut(ElementKind::L2)
        .set_latency(crate::fixtures::latency(f64::NAN, 1.0, 2.0, 0.0, 3));
    let err = topo.to_json_string().unwrap_err();
    assert!(
        err.field_paths().contains(&"elements.l2.latency.mean"),
        "{err}"
    );
    assert!(topo.to_toml_string().is_err());
}

#[test]
fn a_newer_minor_version_with_unknown_fields_loads() {
    let mut json: serde_json::Value =
        serde_json::from_str(&k20c_partial().to_json_string().unwrap()).unwrap();
    json["schema_version"] = "1.7".into();
    json["elements"]["l2"]["added_in_1_7"] = 42.into();
    let topo = Topology::from_json_str(&json.to_string()).unwrap();
    assert_eq!(topo.schema_version, SchemaVersion { major: 1, minor: 7 });
}

#[test]
fn latency_nanoseconds_use_the_measured_clock() {
    let topo = h200_illustrative();
    // 219.3 cycles at the measured 1755 MHz, not the nominal 1980 MHz.
    let ns = topo.latency_ns(ElementKind::L2).unwrap().get();
    assert!((ns - 219.3 * 1000.0 / 1755.0).abs() < 1e-9, "{ns}");
    let mut nominal_only = topo.clone();
    nominal_only.conditions.sm_clock_mhz = None;
    let ns = nominal_only.latency_ns(ElementKind::L2).unwrap().get();
    assert!((ns - 219.3 * 1000.0 / 1980.0).abs() < 1e-9, "{ns}");
}

#[test]
fn builder_merges_overlapping_shared_cache_groups() {
    let mut topo = k20c_partial();
    topo.share_physical_cache(
        [ElementKind::L1Data, ElementKind::Texture],
        Provenance::Benchmark,
    );
    assert_eq!(topo.shared_physical_caches.len(), 1);
    assert_eq!(
        topo.shared_with(ElementKind::ReadOnly),
        vec![ElementKind::L1Data, ElementKind::Texture]
    );
    topo.validate().unwrap();
}

#[test]
fn not_measured_reason_is_found_per_quantity_and_per_element() {
    let mut topo = k20c_partial();
    assert_eq!(
        topo.not_measured_reason(ElementKind::ConstantL15, QuantityKind::Latency),
        Some("kernel launch failed: too many resources requested")
    );
    assert_eq!(
        topo.not_measured_reason(ElementKind::ConstantL15, QuantityKind::Size),
        None
    );
    topo.not_measured(ElementKind::Texture, None, "texture objects unsupported");
    assert_eq!(
        topo.not_measured_reason(ElementKind::Texture, QuantityKind::LineSize),
        Some("texture objects unsupported")
    );
}

#[test]
fn latency_summary_from_samples_matches_hand_computation() {
    let samples: Vec<f64> = (1..=20).map(f64::from).collect();
    let s = LatencySummary::from_samples(&samples).unwrap();
    assert_eq!(s.mean.get(), 10.5);
    assert_eq!(s.p50.get(), 10.0);
    assert_eq!(s.p95.get(), 19.0);
    assert!((s.stdev.get() - 5.916_079_783).abs() < 1e-6);
    assert_eq!(s.samples, 20);
    assert!(LatencySummary::from_samples(&[]).is_none());
    assert!(LatencySummary::from_samples(&[1.0, f64::INFINITY]).is_none());
}

/// The committed results: every float reads back and writes out to the same bits, through
/// TOML too (serde_json's default float parser can be an ulp off; `float_roundtrip` is on).
#[test]
fn committed_results_convert_without_changing_a_float() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut checked = 0;
    for path in [
        root.join("crates/topology/examples/data/h200-illustrative.json"),
        root.join("crates/topology/tests/data/h100-result.json"),
        root.join("crates/topology/tests/data/h100-result-second-run.json"),
    ] {
        let text = std::fs::read_to_string(&path).unwrap();
        let original: serde_json::Value = serde_json::from_str(&text).unwrap();
        let topo = Topology::from_json_str(&text).unwrap();
        let via_toml = Topology::from_toml_str(&topo.to_toml_string().unwrap()).unwrap();
        for written in [
            topo.to_json_string().unwrap(),
            via_toml.to_json_string().unwrap(),
        ] {
            let written: serde_json::Value = serde_json::from_str(&written).unwrap();
            assert_eq!(written, original, "{}", path.display());
        }
        checked += 1;
    }
    assert_eq!(checked, 3);
}
