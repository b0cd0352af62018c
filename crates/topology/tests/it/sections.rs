//! Benchmark sections (schema 1.8): they round-trip through both formats, validation
//! names the offending row, `diff` compares each row by the rule of its kind, and every
//! renderer shows every row without knowing the benchmark.

use topology::*;

fn latency(samples: &[f64]) -> RowValue {
    RowValue::latency(LatencySummary::from_samples(samples).unwrap())
}

fn with_section(section: Section) -> Topology {
    let mut topo = Topology::new(DeviceInfo::new(
        "Example GPU",
        ComputeCapability::new(9, 0),
        132,
    ));
    topo.sections.insert("bank-probe".into(), section);
    topo
}

fn banks(cost: f64, ways_at_period: u32, period: u64) -> Section {
    Section::new("Shared-memory bank conflicts")
        .with_method("one warp, dependent loads")
        .with_row(
            "conflict_free",
            "one way",
            latency(&[29.0, 29.0, 30.0, 29.0]),
        )
        .with_row(
            "cost_per_way",
            "each further way",
            RowValue::Number(Number {
                value: cost,
                unit: "cycles".into(),
                provenance: Provenance::Benchmark,
                standard_error: Some(0.01),
            }),
        )
        .with_row(
            "period",
            "bank period",
            RowValue::size(Size::exact(Bytes(period), Provenance::Benchmark)),
        )
        .with_row(
            "ways_at_period",
            "ways at the period",
            RowValue::count(ways_at_period, Provenance::Benchmark),
        )
}

#[test]
fn sections_round_trip_through_json_and_toml() {
    let topo = with_section(banks(2.0, 32, 128));
    let json = topo.to_json_string().unwrap();
    assert!(json.contains("\"bank-probe\""), "{json}");
    assert!(json.contains("\"cost_per_way\""), "{json}");
    assert_eq!(Topology::from_json_str(&json).unwrap(), topo);
    let toml = topo.to_toml_string().unwrap();
    assert_eq!(Topology::from_toml_str(&toml).unwrap(), topo);
}

#[test]
fn a_topology_without_sections_writes_no_key() {
    let topo = with_section(Section::new("x"));
    let mut empty = topo.clone();
    empty.sections.clear();
    assert!(!empty.to_json_string().unwrap().contains("sections"));
}

#[test]
fn validation_names_the_bad_row() {
    let mut section = banks(2.0, 32, 128);
    section.push(
        "cost_per_way",
        "again",
        RowValue::count(1, Provenance::Benchmark),
    );
    section.push("Bad Key", "bad", RowValue::count(1, Provenance::Benchmark));
    section.push(
        "nan",
        "not a number",
        RowValue::number(f64::NAN, "cycles", Provenance::Benchmark),
    );
    section.push(
        "empty",
        "empty size",
        RowValue::size(Size::exact(Bytes(0), Provenance::Benchmark)),
    );
    let mut topo = with_section(section);
    topo.sections.insert("Not A Name".into(), Section::new(" "));
    let err = topo.validate().unwrap_err().to_string();
    for expected in [
        "sections.bank-probe.rows[4].key: `cost_per_way` is the key of an earlier row",
        "sections.bank-probe.rows[5].key",
        "sections.bank-probe.rows[6].number.value: must be finite",
        "sections.bank-probe.rows[7].size",
        "sections.Not A Name: a section's name",
        "sections.Not A Name.title: must not be empty",
    ] {
        assert!(err.contains(expected), "missing `{expected}` in:\n{err}");
    }
    assert!(with_section(banks(2.0, 32, 128)).validate().is_ok());
}

#[test]
fn diff_compares_rows_by_their_kind() {
    let a = with_section(banks(2.0, 32, 128));
    // Within the uncertainty: a number within the relative tolerance, the same size.
    assert!(diff::diff(&a, &with_section(banks(2.02, 32, 128))).is_empty());
    // Beyond it: a number, a count and a size each change.
    let d = diff::diff(&a, &with_section(banks(3.0, 16, 256)));
    let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "sections.bank-probe.cost_per_way",
            "sections.bank-probe.period",
            "sections.bank-probe.ways_at_period",
        ]
    );
    assert_eq!(d.changes[0].before, "2.00 cycles");
    assert_eq!(d.changes[0].after, "3.00 cycles");
    // A row on one side only, and a row whose kind changed.
    let mut b = banks(2.0, 32, 128);
    b.rows.retain(|r| r.key != "period");
    b.rows
        .iter_mut()
        .find(|r| r.key == "ways_at_period")
        .unwrap()
        .value = RowValue::number(32.0, "ways", Provenance::Benchmark);
    let d = diff::diff(&a, &with_section(b));
    let changes: Vec<String> = d.changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        changes,
        [
            "sections.bank-probe.period: 128 B → -",
            "sections.bank-probe.ways_at_period: 32 → 32.0 ways",
        ]
    );
    // A whole section on one side.
    let mut none = a.clone();
    none.sections.clear();
    assert_eq!(diff::diff(&none, &a).changes.len(), 4);
}

#[test]
fn every_renderer_shows_every_row() {
    let topo = with_section(banks(2.0, 32, 128));
    let table = render::table(&topo);
    let markdown = render::markdown(&topo);
    let html = render::html(&topo, None);
    let svg = render::svg(&topo);
    for (name, text) in [
        ("table", &table),
        ("markdown", &markdown),
        ("html", &html),
        ("svg", &svg),
    ] {
        for expected in [
            "Shared-memory bank conflicts",
            "each further way",
            "2.00 cycles",
            "128 B",
            "29.0",
        ] {
            assert!(
                text.contains(expected),
                "{name} lacks `{expected}`:\n{text}"
            );
        }
    }
    assert!(table.contains("  one way"), "{table}");
    assert!(markdown.contains("\n## Shared-memory bank conflicts\n\none warp, dependent loads\n"));
    assert!(
        markdown.contains("| each further way | 2.00 cycles | benchmark |"),
        "{markdown}"
    );
}

#[test]
fn the_quantity_table_has_every_row_of_every_section() {
    let rows = quantities(&with_section(banks(2.0, 32, 128)));
    let of = |key: &str, statistic: &str| {
        rows.iter()
            .find(|r| {
                r.path == "sections.bank-probe" && r.quantity == key && r.statistic == statistic
            })
            .unwrap_or_else(|| panic!("no row {key} {statistic}"))
    };
    assert_eq!(
        (
            of("cost_per_way", "value").value,
            of("cost_per_way", "value").unit.as_str()
        ),
        (2.0, "cycles")
    );
    assert_eq!(of("cost_per_way", "standard_error").value, 0.01);
    assert_eq!(of("conflict_free", "p50").value, 29.0);
    assert_eq!(
        (
            of("period", "value").value,
            of("period", "value").unit.as_str()
        ),
        (128.0, "B")
    );
    assert_eq!(of("ways_at_period", "value").value, 32.0);
}
