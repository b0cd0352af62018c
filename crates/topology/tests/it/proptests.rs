//! The loaders never panic, whatever they are given.

use proptest::prelude::*;
use serde_json::Value;
use topology::*;

use crate::fixtures::h200_illustrative;

/// Replaces the value at a pseudo-random position of `tree` with `replacement`.
fn mutate(tree: &mut Value, mut choice: usize, replacement: Value) {
    let mut node = tree;
    loop {
        let children = match node {
            Value::Object(map) => map.len(),
            Value::Array(items) => items.len(),
            _ => 0,
        };
        if children == 0 || choice % 4 == 0 {
            *node = replacement;
            return;
        }
        let index = (choice / 4) % children;
        choice /= 3;
        node = match node {
            Value::Object(map) => map.values_mut().nth(index).expect("index < len"),
            Value::Array(items) => &mut items[index],
            _ => unreachable!("children > 0 only for containers"),
        };
    }
}

fn arbitrary_json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z_0-9.]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn json_loader_never_panics_on_arbitrary_text(text in ".{0,400}") {
        let _ = Topology::from_json_str(&text);
    }

    #[test]
    fn toml_loader_never_panics_on_arbitrary_text(text in ".{0,400}") {
        let _ = Topology::from_toml_str(&text);
    }

    #[test]
    fn loaders_never_panic_on_mutated_documents(
        choice in any::<usize>(),
        replacement in arbitrary_json_value(),
    ) {
        let mut tree: Value = serde_json::from_str(&h200_illustrative().to_json_string().unwrap()).unwrap();
        mutate(&mut tree, choice, replacement);
        let text = tree.to_string();
        if let Ok(topo) = Topology::from_json_str(&text) {
            // Whatever loads is valid, renders, and writes back to itself.
            prop_assert!(topo.validate().is_ok());
            let _ = render::table(&topo);
            let _ = render::svg(&topo);
            let _ = mt4g::export(&topo);
            let again = Topology::from_json_str(&topo.to_json_string().unwrap()).unwrap();
            prop_assert_eq!(again, topo);
        }
        if let Ok(toml_text) = toml::to_string(&tree) {
            let _ = Topology::from_toml_str(&toml_text);
        }
    }

    #[test]
    fn valid_sizes_round_trip_through_both_formats(
        value in 1u64..(1 << 40),
        extra in 0u64..(1 << 20),
        kind in 0usize..4,
    ) {
        let bound = match kind {
            0 => SizeBound::Exact(Bytes(value)),
            1 => SizeBound::AtLeast(Bytes(value)),
            2 => SizeBound::AtMost(Bytes(value)),
            _ => SizeBound::Between(Bytes(value), Bytes(value + extra)),
        };
        let mut topo = Topology::new(DeviceInfo::new("p", ComputeCapability::new(8, 0), 1));
        topo.element_mut(ElementKind::ConstantL15).set_size(Size {
            bound,
            provenance: Provenance::Benchmark,
            evidence: None,
            conditions: None,
        });
        prop_assert_eq!(&Topology::from_json_str(&topo.to_json_string().unwrap()).unwrap(), &topo);
        prop_assert_eq!(&Topology::from_toml_str(&topo.to_toml_string().unwrap()).unwrap(), &topo);
    }
}

/// The loaders' physical bounds (`validate.rs`): sizes up to 2⁴⁴ B, latencies up to 10⁷
/// cycles.
const MAX_BYTES: u64 = 1 << 44;
const MAX_CYCLES: f64 = 1e7;

/// A raw curve as `memtopo --keep-raw` writes it: sizes ascending, one row per replica,
/// the mean to four decimals.
fn curve_rows() -> impl Strategy<Value = Vec<(u64, u32, Option<u32>, f64)>> {
    prop::collection::vec(
        (
            1u64..(1 << 30),
            0u32..64,
            prop::option::of(0u32..1024),
            0.0f64..MAX_CYCLES,
        ),
        0..40,
    )
    .prop_map(|mut rows| {
        rows.sort_by_key(|r| r.0);
        rows
    })
}

fn curve_text(rows: &[(u64, u32, Option<u32>, f64)]) -> String {
    let mut text = format!("{}\n", raw::CURVE_CSV_HEADER);
    for (bytes, replica, smid, mean) in rows {
        let smid = smid.map_or(String::new(), |s| s.to_string());
        text.push_str(&format!("{bytes},{replica},{smid},{mean:.4}\n"));
    }
    text
}

/// A quartet p25 ≤ p50 ≤ p75 ≤ p95 of cycles.
fn quartiles() -> impl Strategy<Value = [f64; 4]> {
    prop::array::uniform4(0.0f64..1e5).prop_map(|mut q| {
        q.sort_by(f64::total_cmp);
        q
    })
}

fn with_latency(latency: Latency) -> Topology {
    let mut topo = Topology::new(DeviceInfo::new("p", ComputeCapability::new(9, 0), 1));
    topo.element_mut(ElementKind::L2).set_latency(latency);
    topo
}

proptest! {
    #[test]
    fn raw_csv_readers_never_panic_on_arbitrary_text(text in ".{0,400}") {
        let _ = raw::read_curve_csv(&text);
        let _ = raw::read_samples_csv(&text);
    }

    #[test]
    fn raw_csv_readers_never_panic_below_a_valid_header(
        rows in prop::collection::vec("[0-9eE.,+-]{0,40}|[^\n]{0,40}", 0..8),
    ) {
        let body = rows.join("\n");
        let _ = raw::read_curve_csv(&format!("{}\n{body}", raw::CURVE_CSV_HEADER));
        let _ = raw::read_samples_csv(&format!("{}\n{body}", raw::SAMPLES_CSV_HEADER));
    }

    #[test]
    fn raw_curves_round_trip_as_the_binary_writes_them(rows in curve_rows()) {
        let points = raw::read_curve_csv(&curve_text(&rows)).unwrap();
        prop_assert_eq!(points.len(), rows.len());
        for (point, (bytes, replica, smid, mean)) in points.iter().zip(&rows) {
            prop_assert_eq!((point.bytes, point.replica, point.smid), (*bytes, *replica, *smid));
            prop_assert!((point.mean_cycles - mean).abs() <= 5e-5 + mean * 1e-15, "{} vs {mean}", point.mean_cycles);
        }
    }

    #[test]
    fn raw_curves_out_of_bounds_are_typed_row_errors(
        rows in curve_rows().prop_filter("a row to break", |r| !r.is_empty()),
        which in any::<prop::sample::Index>(),
        bad in prop_oneof![
            (MAX_BYTES + 1..=u64::MAX).prop_map(|b| (Some(b), None)),
            Just((Some(0u64), None)),
            (MAX_CYCLES * 1.000_001..1e300).prop_map(|c| (None, Some(c))),
            (-1e300f64..-1e-3).prop_map(|c| (None, Some(c))),
        ],
    ) {
        let mut rows = rows;
        let i = which.index(rows.len());
        match bad {
            // An oversized size goes last, so the order check does not answer first.
            (Some(bytes), _) if bytes > 0 => {
                rows.truncate(i + 1);
                rows[i].0 = bytes;
            }
            (Some(_), _) => rows[i].0 = 0,
            (_, Some(cycles)) => rows[i].3 = cycles,
            _ => unreachable!("each case sets one field"),
        }
        match raw::read_curve_csv(&curve_text(&rows)) {
            Err(raw::RawCsvError::Row { line, message }) => {
                // Line 1 is the header; a zero size may also be caught as sizes going down.
                prop_assert!(line >= 2 && line <= i + 2, "line {line}, row {i}: {message}");
            }
            other => prop_assert!(false, "expected a row error, got {:?}", other),
        }
    }

    #[test]
    fn latencies_with_quartiles_round_trip_through_both_formats(
        q in quartiles(),
        extra in 0.0f64..100.0,
        stdev in 0.0f64..1e3,
        samples in 1u32..100_000,
    ) {
        let topo = with_latency(Latency::measured(LatencySummary {
            mean: Cycles(q[1] + extra),
            p25: Some(Cycles(q[0])),
            p50: Cycles(q[1]),
            p75: Some(Cycles(q[2])),
            p95: Cycles(q[3]),
            stdev: Cycles(stdev),
            samples,
        }));
        prop_assert_eq!(&Topology::from_json_str(&topo.to_json_string().unwrap()).unwrap(), &topo);
        prop_assert_eq!(&Topology::from_toml_str(&topo.to_toml_string().unwrap()).unwrap(), &topo);
    }

    #[test]
    fn quartiles_out_of_order_or_bounds_are_refused_naming_the_field(
        q in quartiles().prop_filter("distinct", |q| q[0] < q[1] && q[1] < q[2]),
        fault in 0usize..4,
        huge in MAX_CYCLES * 1.01..1e300,
    ) {
        let mut latency = Latency::measured(LatencySummary {
            mean: Cycles(q[1]),
            p25: Some(Cycles(q[0])),
            p50: Cycles(q[1]),
            p75: Some(Cycles(q[2])),
            p95: Cycles(q[3]),
            stdev: Cycles(1.0),
            samples: 10,
        });
        let field = match fault {
            0 => { latency.p25 = Some(Cycles(q[2])); "p25" }
            1 => { latency.p75 = Some(Cycles(q[0])); "p75" }
            2 => { latency.p75 = Some(Cycles(huge)); "p75" }
            _ => { latency.mean = Cycles(huge); "mean" }
        };
        let json = serde_json::to_string(&with_latency(latency)).unwrap();
        match Topology::from_json_str(&json) {
            Err(err @ Error::Invalid { .. }) => {
                let paths = err.field_paths();
                prop_assert!(
                    paths.iter().any(|p| p.ends_with(&format!("latency.{field}"))),
                    "{paths:?}"
                );
            }
            other => prop_assert!(false, "expected Invalid, got {:?}", other),
        }
    }

    #[test]
    fn sizes_beyond_any_gpu_are_refused(value in MAX_BYTES + 1..=u64::MAX) {
        let mut topo = Topology::new(DeviceInfo::new("p", ComputeCapability::new(8, 0), 1));
        topo.element_mut(ElementKind::L2).set_size(Size::api(Bytes(1 << 20)));
        let json = serde_json::to_string(&topo).unwrap().replace("1048576", &value.to_string());
        let err = Topology::from_json_str(&json).unwrap_err();
        prop_assert!(matches!(err, Error::Invalid { .. }), "{err}");
        prop_assert!(err.field_paths().iter().any(|p| p.contains("l2.size")), "{err}");
    }

    #[test]
    fn results_before_schema_1_4_load_without_quartiles(mean in 1.0f64..1e4) {
        let topo = with_latency(Latency::measured(LatencySummary::from_samples(&[mean, mean + 1.0]).unwrap()));
        let mut tree: Value = serde_json::from_str(&topo.to_json_string().unwrap()).unwrap();
        tree["schema_version"] = "1.3".into();
        let latency = &mut tree["elements"]["l2"]["latency"];
        latency.as_object_mut().unwrap().remove("p25");
        latency.as_object_mut().unwrap().remove("p75");
        let back = Topology::from_json_str(&tree.to_string()).unwrap();
        let l = back.element(ElementKind::L2).and_then(|e| e.latency.clone()).unwrap();
        prop_assert_eq!((l.p25, l.p75, l.iqr()), (None, None, None));
        prop_assert_eq!(render::median_iqr(&l), render::number(l.p50.0));
    }
}

/// Every float of a JSON tree, in document order, as bits.
fn float_bits(tree: &Value, out: &mut Vec<u64>) {
    match tree {
        Value::Number(n) if n.is_f64() => out.push(n.as_f64().expect("an f64").to_bits()),
        Value::Array(items) => items.iter().for_each(|v| float_bits(v, out)),
        Value::Object(map) => map.values().for_each(|v| float_bits(v, out)),
        _ => {}
    }
}

proptest! {
    /// JSON → JSON and JSON → TOML → JSON keep every float to the bit: the latency
    /// statistics and a p-value drawn from the whole range of doubles.
    #[test]
    fn floats_survive_conversion_bit_exact(
        mean in 1e-3f64..1e6,
        spread in 0.0f64..1e3,
        p_value in prop_oneof![0.0f64..=1.0, f64::MIN_POSITIVE..1e-200],
        statistic in 0.0f64..=1.0,
    ) {
        let mut topo = h200_illustrative();
        let latency = topo.element_mut(ElementKind::L2).latency.as_mut().unwrap();
        latency.mean = Cycles(mean);
        latency.p25 = Some(Cycles(mean));
        latency.p50 = Cycles(mean + spread / 3.0);
        latency.p75 = Some(Cycles(mean + spread / 2.0));
        latency.p95 = Cycles(mean + spread);
        latency.stdev = Cycles(spread / 7.0);
        let size = topo.element_mut(ElementKind::L1Data).size.as_mut().unwrap();
        let evidence = size.evidence.get_or_insert_with(Default::default);
        evidence.p_value = Some(p_value);
        evidence.statistic = Some(statistic);
        let json = topo.to_json_string().unwrap();
        let mut before = Vec::new();
        float_bits(&serde_json::from_str(&json).unwrap(), &mut before);
        let again = Topology::from_json_str(&json).unwrap().to_json_string().unwrap();
        prop_assert_eq!(&again, &json);
        let toml = Topology::from_json_str(&json).unwrap().to_toml_string().unwrap();
        let back = Topology::from_toml_str(&toml).unwrap();
        prop_assert_eq!(&back, &topo);
        let round = back.to_json_string().unwrap();
        let mut after = Vec::new();
        float_bits(&serde_json::from_str(&round).unwrap(), &mut after);
        prop_assert_eq!(before, after);
        prop_assert_eq!(round, json);
    }
}
