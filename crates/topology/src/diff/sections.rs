//! The benchmarks' sections ([`crate::Section`], schema 1.8) in a diff: rows matched by
//! section name and row key, each compared by the rule of its kind (sizes as sizes,
//! latencies as latencies, counts as counts; a number when it moved by more than three
//! combined standard errors and the relative tolerance). A section or row on one side only
//! is a change, and so is a row whose kind changed.

use std::collections::{BTreeMap, BTreeSet};

use crate::section::{Number, RowValue, Section};

use super::{show, Differ};

pub(super) fn diff(
    d: &mut Differ,
    before: &BTreeMap<String, Section>,
    after: &BTreeMap<String, Section>,
) {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for name in names {
        let (a, b) = (before.get(name), after.get(name));
        let keys: Vec<&str> = a
            .into_iter()
            .chain(b)
            .flat_map(|s| s.rows.iter().map(|r| r.key.as_str()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        for key in keys {
            let path = format!("sections.{name}.{key}");
            let (x, y) = (value(a, key), value(b, key));
            row(d, path, x, y);
        }
    }
}

fn value<'a>(section: Option<&'a Section>, key: &str) -> Option<&'a RowValue> {
    section.and_then(|s| s.row(key)).map(|r| &r.value)
}

fn row(d: &mut Differ, path: String, a: Option<&RowValue>, b: Option<&RowValue>) {
    match (a, b) {
        (Some(RowValue::Size(x)), Some(RowValue::Size(y))) => d.size(path, Some(x), Some(y)),
        (Some(RowValue::Latency(x)), Some(RowValue::Latency(y))) => {
            d.latency(path, Some(x), Some(y));
        }
        (Some(RowValue::Count(x)), Some(RowValue::Count(y))) => {
            d.count(path, Some(*x), Some(*y));
        }
        (Some(RowValue::Number(x)), Some(RowValue::Number(y))) => number(d, path, x, y),
        (None, None) => {}
        (x, y) => d.change(path, show(x), show(y)),
    }
}

fn number(d: &mut Differ, path: String, a: &Number, b: &Number) {
    if a.value == b.value && a.unit == b.unit {
        return;
    }
    let delta = (a.value - b.value).abs();
    let error = a
        .standard_error
        .unwrap_or(0.0)
        .hypot(b.standard_error.unwrap_or(0.0));
    let largest = a.value.abs().max(b.value.abs());
    // A row's measured run-to-run tolerance where the table has one, never below the kind's.
    let relative = crate::tolerance::relative(&path, d.options.relative_tolerance);
    if a.unit == b.unit && (delta <= d.options.sigmas * error || delta <= relative * largest) {
        d.result.within_uncertainty += 1;
    } else {
        d.change(
            path,
            RowValue::Number(a.clone()).to_string(),
            RowValue::Number(b.clone()).to_string(),
        );
    }
}
