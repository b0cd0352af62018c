//! Loading rejects bad documents with errors that name the field.

use serde_json::{json, Value};
use topology::*;

use crate::fixtures::{h200_illustrative, k20c_partial};

fn h200_json() -> Value {
    serde_json::from_str(&h200_illustrative().to_json_string().unwrap()).unwrap()
}

fn load(value: &Value) -> Result<Topology, Error> {
    Topology::from_json_str(&value.to_string())
}

fn assert_names(err: &Error, path: &str) {
    assert!(
        err.field_paths().contains(&path),
        "expected {path} in {:?}: {err}",
        err.field_paths()
    );
    assert!(
        err.to_string().contains(path),
        "message does not name {path}: {err}"
    );
}

#[test]
fn a_newer_major_version_is_rejected() {
    let mut doc = h200_json();
    doc["schema_version"] = "2.0".into();
    let err = load(&doc).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedSchemaVersion { found, supported: 1 } if found.major == 2),
        "{err}"
    );
    assert_names(&err, "schema_version");
}

#[test]
fn a_missing_or_malformed_schema_version_is_rejected() {
    let mut doc = h200_json();
    doc.as_object_mut().unwrap().remove("schema_version");
    assert!(matches!(
        load(&doc).unwrap_err(),
        Error::MissingSchemaVersion
    ));
    for bad in [json!(1.0), json!("1"), json!("one.two"), json!("1.")] {
        doc["schema_version"] = bad.clone();
        let err = load(&doc).unwrap_err();
        assert_names(&err, "schema_version");
    }
}

#[test]
fn a_missing_field_is_named_with_its_path() {
    let mut doc = h200_json();
    doc["elements"]["l1_data"]["latency"]
        .as_object_mut()
        .unwrap()
        .remove("p95");
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.l1_data.latency");
    assert!(err.to_string().contains("p95"), "{err}");

    let mut doc = h200_json();
    doc["device"].as_object_mut().unwrap().remove("sm_count");
    let err = load(&doc).unwrap_err();
    assert_names(&err, "device");
    assert!(err.to_string().contains("sm_count"), "{err}");
}

#[test]
fn a_wrong_unit_is_rejected() {
    let mut doc = h200_json();
    doc["elements"]["l2"]["latency"]["unit"] = "ns".into();
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.l2.latency.unit");

    let mut doc = h200_json();
    doc["elements"]["l2"]["size"]["unit"] = "KiB".into();
    let err = load(&doc).unwrap_err();
    assert!(err.to_string().contains("elements.l2.size"), "{err}");
}

#[test]
fn a_wrong_type_is_named() {
    let mut doc = h200_json();
    doc["elements"]["texture"]["count_per_sm"]["value"] = json!(-1);
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.texture.count_per_sm.value");
}

#[test]
fn partitions_larger_than_the_total_are_a_contradiction() {
    let mut doc = h200_json();
    doc["elements"]["l2"]["partitions"]["size_each"]["value"] = json!(40 * 1024 * 1024);
    let err = load(&doc).unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }));
    assert_names(&err, "elements.l2.partitions.size_each");
    assert!(err.to_string().contains("more than the L2 total"), "{err}");
}

#[test]
fn a_far_side_that_does_not_fit_beside_the_near_partition_is_a_contradiction() {
    let mut doc = h200_json();
    // 25 MiB near + 30 MiB far > the 50 MiB L2.
    doc["elements"]["l2"]["partitions"]["far_size"]["value"] = json!(30 * 1024 * 1024);
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.l2.partitions.far_size");
    assert!(err.to_string().contains("the far side"), "{err}");
    // 24 MiB fits: the fixture as it is loads.
    load(&h200_json()).expect("the fixture is valid");
}

#[test]
fn partitions_are_checked_against_the_api_total_when_no_size_was_measured() {
    let mut topo = k20c_partial();
    topo.elements.l2.as_mut().unwrap().size = None;
    topo.element_mut(ElementKind::L2).partitions_mut().size_each =
        Some(Size::exact(Bytes::mib(2), Provenance::Benchmark));
    let err = topo.validate().unwrap_err();
    assert_names(&err, "elements.l2.partitions.size_each");
}

#[test]
fn a_line_larger_than_its_cache_is_a_contradiction() {
    let mut doc = h200_json();
    doc["elements"]["constant_l1"]["line_size"]["value"] = json!(4096);
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.constant_l1.line_size");
    assert!(
        err.to_string().contains("larger than the cache size"),
        "{err}"
    );
}

#[test]
fn a_sector_larger_than_its_line_is_a_contradiction() {
    let mut doc = h200_json();
    doc["elements"]["l2"]["line_size"] =
        json!({"value": 128, "unit": "B", "provenance": "benchmark"});
    doc["elements"]["l2"]["sector_size"] =
        json!({"value": 32, "unit": "B", "provenance": "benchmark"});
    load(&doc).expect("a 32-byte sector in a 128-byte line is valid");
    doc["elements"]["l2"]["sector_size"]["value"] = json!(256);
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.l2.sector_size");
    assert!(
        err.to_string().contains("larger than the line size"),
        "{err}"
    );
}

#[test]
fn a_line_against_a_lower_bound_is_not_a_contradiction() {
    // The L1.5 is only known to be ≥ 64 KiB: any line fits.
    let mut topo = h200_illustrative();
    topo.element_mut(ElementKind::ConstantL15)
        .set_line_size(Size::exact(Bytes::mib(1), Provenance::Benchmark));
    topo.validate().unwrap();
}

#[test]
fn a_far_partition_faster_than_the_near_one_is_a_contradiction() {
    let mut doc = h200_json();
    doc["elements"]["l2"]["partitions"]["far_latency"]["mean"] = json!(100.0);
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.l2.partitions.far_latency.mean");
}

#[test]
fn kind_specific_fields_on_the_wrong_element_are_rejected() {
    let mut topo = k20c_partial();
    topo.element_mut(ElementKind::Texture)
        .partitions_mut()
        .count = Some(Count::new(2, Provenance::Derived));
    topo.element_mut(ElementKind::L2)
        .set_count_per_sm(Count::new(1, Provenance::Api));
    topo.element_mut(ElementKind::ReadOnly)
        .set_global_loads_cached(true);
    let err = topo.validate().unwrap_err();
    for path in [
        "elements.texture.partitions",
        "elements.read_only.global_loads_cached",
        "elements.l2.count_per_sm",
    ] {
        assert_names(&err, path);
    }
}

#[test]
fn relations_are_checked() {
    let mut topo = k20c_partial();
    topo.shared_physical_caches.push(SharedPhysicalCache {
        members: vec![ElementKind::ReadOnly, ElementKind::L2],
        provenance: Provenance::Benchmark,
    });
    topo.element_mut(ElementKind::L2)
        .set_backed_by(ElementKind::L2);
    topo.element_mut(ElementKind::L1Data)
        .set_backed_by(ElementKind::ConstantL1);
    topo.element_mut(ElementKind::ConstantL1)
        .set_backed_by(ElementKind::L1Data);
    let err = topo.validate().unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("read_only appears in more than one group"),
        "{message}"
    );
    assert!(
        message.contains("l2 is not an SM-private cache"),
        "{message}"
    );
    assert_names(&err, "shared_physical_caches[1].members");
    assert_names(&err, "elements.l2.backed_by");
    assert_names(&err, "elements.l1_data.backed_by");
    assert_names(&err, "elements.constant_l1.backed_by");
}

#[test]
fn out_of_range_statistics_and_conditions_are_named() {
    let mut doc = h200_json();
    doc["elements"]["l1_data"]["size"]["evidence"]["p_value"] = json!(1.5);
    doc["conditions"]["shared_memory_carveout_percent"] = json!(120);
    doc["conditions"]["date"] = json!("yesterday");
    doc["elements"]["l1_data"]["latency"]["p50"] = json!(90.0);
    let err = load(&doc).unwrap_err();
    for path in [
        "elements.l1_data.size.evidence.p_value",
        "conditions.shared_memory_carveout_percent",
        "conditions.date",
        "elements.l1_data.latency.p95",
    ] {
        assert_names(&err, path);
    }
}

#[test]
fn a_between_bound_needs_an_upper_end() {
    let mut doc = h200_json();
    doc["elements"]["constant_l15"]["size"]["bound"] = json!("between");
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.constant_l15.size");
    assert!(err.to_string().contains("upper"), "{err}");
    doc["elements"]["constant_l15"]["size"]["upper"] = json!(1024);
    let err = load(&doc).unwrap_err();
    assert_names(&err, "elements.constant_l15.size.upper");
}

#[test]
fn toml_errors_name_fields_too() {
    let text = h200_illustrative().to_toml_string().unwrap();
    let broken = text.replacen("sm_count = 132", "sm_count = 0", 1);
    assert_ne!(broken, text);
    let err = Topology::from_toml_str(&broken).unwrap_err();
    assert_names(&err, "device.sm_count");
    let err = Topology::from_toml_str("schema_version = \"1.0\"\n[device\n").unwrap_err();
    assert!(
        matches!(
            err,
            Error::Syntax {
                format: Format::Toml,
                ..
            }
        ),
        "{err}"
    );
}

/// Physical bounds: a size no GPU has, a latency no load takes, a KS statistic outside
/// [0, 1], a negative statistic, a clock no GPU runs at.
#[test]
fn values_beyond_any_gpu_are_rejected() {
    let mut doc = h200_json();
    doc["elements"]["l1_data"]["size"]["value"] = json!(u64::MAX);
    doc["elements"]["l2"]["latency"]["mean"] = json!(1e300);
    doc["elements"]["l2"]["latency"]["p50"] = json!(1e300);
    doc["elements"]["l2"]["latency"]["p95"] = json!(1e300);
    doc["elements"]["l1_data"]["size"]["evidence"]["statistic"] = json!(-1.0);
    doc["elements"]["texture"]["size"]["evidence"]["statistic"] = json!(1.5);
    doc["conditions"]["sm_clock_mhz"] = json!(1e9);
    let err = load(&doc).unwrap_err();
    for path in [
        "elements.l1_data.size.value",
        "elements.l2.latency.mean",
        "elements.l1_data.size.evidence.statistic",
        "elements.texture.size.evidence.statistic",
        "conditions.sm_clock_mhz",
    ] {
        assert_names(&err, path);
    }
}

/// A syntax error quotes at most a short excerpt of a huge line.
#[test]
fn syntax_errors_quote_a_short_excerpt() {
    let huge = format!(
        "schema_version = \"1.0\"\nremark = \"{}",
        "x".repeat(200_000)
    );
    let err = Topology::from_toml_str(&huge).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Syntax { .. }), "{message}");
    assert!(message.len() < 3_000, "{} characters", message.len());
}

#[test]
fn a_tlb_interleave_must_deal_its_entries_to_at_least_two_groups() {
    let mut doc = h200_json();
    let level = json!({
        "level": 3, "entries": 8678, "interleave": 2, "path": "global_cg", "allocation": "aliased"
    });
    doc["tlb"] = json!([level]);
    let topo = load(&doc).expect("an even interleave of 8678 entries is valid");
    assert_eq!(topo.tlb[0].interleave, Some(2));
    assert!(render::tlb_lines(&topo)[0].contains("dealt by address to 2 groups of 4339"));
    for bad in [1, 3] {
        doc["tlb"][0]["interleave"] = bad.into();
        assert_names(&load(&doc).unwrap_err(), "tlb[0].interleave");
    }
}

#[test]
fn an_address_map_with_bits_above_its_page_or_impossible_counts_is_rejected() {
    let good = json!({
        "bits": [12, 13, 15, 17, 19],
        "page_bytes": 2097152,
        "fitted_lines": 16896,
        "fit_agreement": 1.0,
        "predicted_lines": 16896,
        "predicted_right": 16890,
        "second_reference_sm": 2
    });
    let mut doc = h200_json();
    doc["elements"]["l2"]["partitions"]["address_map"] = good.clone();
    let topo = load(&doc).expect("a sound address map loads");
    let map = topo.l2_partitions().unwrap().address_map.as_ref().unwrap();
    assert_eq!(map.mask(), 0xab000);
    assert!(render::table(&topo)
        .contains("L2 home partition: home = XOR of address bits 12, 13, 15, 17, 19"));
    for (field, value, says) in [
        ("bits", json!([12, 21]), "at or above the page"),
        ("bits", json!([13, 12]), "ascending"),
        ("page_bytes", json!(3000000), "power of two"),
        ("fit_agreement", json!(1.5), "must lie in [0, 1]"),
        (
            "predicted_right",
            json!(20000),
            "more lines predicted right",
        ),
    ] {
        let mut doc = h200_json();
        let mut map = good.clone();
        map[field] = value;
        doc["elements"]["l2"]["partitions"]["address_map"] = map;
        let err = load(&doc).unwrap_err();
        assert_names(&err, &format!("elements.l2.partitions.address_map.{field}"));
        assert!(err.to_string().contains(says), "{field}: {err}");
    }
}

#[test]
fn l2_ways_need_two_agreeing_minimal_sets_and_a_threshold_between_hit_and_miss() {
    let target = |outcome: &str, lines: u64, needed: Option<u64>| json!({"outcome": outcome, "lines": lines, "needed": needed, "tests": 420});
    let good = json!({
        "ways": 16,
        "targets": [
            target("minimal", 16, Some(16)),
            target("minimal", 16, Some(16)),
            target("stalled", 3712, None),
            target("not_minimal", 19, Some(15)),
        ],
        "sets_per_partition": 15360,
        "measuring_sm": 0,
        "hit_cycles": 290.0,
        "miss_cycles": 560.0,
        "threshold_cycles": 425.0,
        "launches": 1800
    });
    let mut doc = h200_json();
    doc["elements"]["l2"]["partitions"]["ways"] = good.clone();
    let topo = load(&doc).expect("sound ways load");
    let ways = topo.l2_partitions().unwrap().ways.as_ref().unwrap();
    assert_eq!(ways.count(EvictionOutcome::Stalled), 1);
    let line = render::l2_ways_line(&topo).unwrap();
    assert!(
        line.starts_with("L2 ways: 16: 2 of 4 targets reduced to a minimal eviction set of 16 lines (1 not minimal, 1 stalled); 15360 sets per partition (derived"),
        "{line}"
    );
    assert!(render::table(&topo).contains(&line));
    assert!(render::markdown(&topo).contains("L2 ways: 16"));
    assert!(render::html(&topo, None).contains("L2 ways: 16"));
    for (field, value, path, says) in [
        ("ways", json!(0), "ways", "at least 1"),
        (
            "ways",
            json!(12),
            "ways",
            "fewer than two minimal sets of 12",
        ),
        ("ways", json!(null), "ways", "neither a count nor a reason"),
        (
            "threshold_cycles",
            json!(600.0),
            "threshold_cycles",
            "between the hit and the miss",
        ),
        (
            "sets_per_partition",
            json!(0),
            "sets_per_partition",
            "at least 1",
        ),
        (
            "targets",
            json!([
                target("minimal", 16, Some(15)),
                target("minimal", 16, Some(16))
            ]),
            "targets[0]",
            "needs each of its lines",
        ),
    ] {
        let mut doc = h200_json();
        let mut ways = good.clone();
        ways[field] = value;
        doc["elements"]["l2"]["partitions"]["ways"] = ways;
        let err = load(&doc).unwrap_err();
        assert_names(&err, &format!("elements.l2.partitions.ways.{path}"));
        assert!(err.to_string().contains(says), "{field}: {err}");
    }
    // Not determined: the reason, and no derived sets.
    let mut doc = h200_json();
    let mut ways = good.clone();
    ways["ways"] = json!(null);
    ways["sets_per_partition"] = json!(null);
    ways["not_determined"] = json!("fewer than two targets ended in a minimal set");
    doc["elements"]["l2"]["partitions"]["ways"] = ways;
    let topo = load(&doc).expect("a reason loads");
    let line = render::l2_ways_line(&topo).unwrap();
    assert!(
        line.starts_with("L2 ways: not determined: fewer than two targets ended in a minimal set (2 minimal, 1 not minimal, 1 stalled)"),
        "{line}"
    );
}
