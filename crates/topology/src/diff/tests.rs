//! Diffs of topologies built in the tests.

use super::*;
use crate::model::{ComputeCapability, DeviceInfo, QuantityKind};
use crate::quantity::Provenance;

fn gpu() -> Topology {
    Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132))
}

#[test]
fn a_note_on_one_side_only_is_a_difference() {
    let a = gpu();
    let mut b = gpu();
    b.warn(Some(ElementKind::L2), "disturbed: l2 latency");
    b.not_measured(
        ElementKind::Texture,
        Some(QuantityKind::Size),
        "launch failed",
    );
    let d = diff(&a, &b);
    assert!(d.changes.is_empty());
    assert!(!d.is_empty(), "notes count");
    let after: Vec<&str> = d.notes.iter().map(|c| c.after.as_str()).collect();
    assert_eq!(
        after,
        [
            "warning l2: disturbed: l2 latency",
            "not measured texture (size): launch failed"
        ]
    );
    assert!(d.notes.iter().all(|c| c.before == "-"));
    assert!(d.to_string().contains("notes on one side only"), "{d}");
    // Reversed, the same notes are the ones that went away.
    assert!(diff(&b, &a).notes.iter().all(|c| c.after == "-"));
    assert!(diff(&b, &b).is_empty());
    // Info notes quote measured numbers: not compared.
    let mut c = a.clone();
    c.notes.push(Note {
        severity: NoteSeverity::Info,
        element: Some(ElementKind::L2),
        quantity: None,
        message: "levels: near hit p50 282 cycles".into(),
    });
    assert!(diff(&a, &c).is_empty());
}

#[test]
fn a_note_given_twice_on_one_side_is_one_difference() {
    let mut a = gpu();
    a.warn(None, "x");
    let mut b = a.clone();
    b.warn(None, "x");
    assert_eq!(diff(&a, &b).notes.len(), 1);
}

#[test]
fn counts_within_their_tolerance_are_not_changes() {
    let mut a = gpu();
    a.element_mut(ElementKind::L1Data).count_per_sm = Some(Count::new(1, Provenance::Benchmark));
    let mut b = a.clone();
    b.element_mut(ElementKind::L1Data).count_per_sm = Some(Count::new(2, Provenance::Benchmark));
    assert_eq!(diff(&a, &b).changes.len(), 1);
    let loose = DiffOptions {
        count_tolerance: 1,
        ..DiffOptions::default()
    };
    let d = diff_with(&a, &b, loose);
    assert!(d.is_empty(), "{d}");
    assert_eq!(d.within_uncertainty, 1);
}
