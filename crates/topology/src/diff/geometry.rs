//! An SM cache's geometry in a diff (schema 1.6): sets and ways exactly (a geometry is a
//! count), the set mapping and the replacement policy.

use crate::model::{CacheGeometry, Element};

use super::Differ;

/// The geometry of an element, where it has one.
pub(super) fn geometry_of(element: Option<&Element>) -> Option<&CacheGeometry> {
    element.and_then(|e| e.geometry.as_ref())
}

pub(super) fn diff(
    d: &mut Differ,
    field: &dyn Fn(&str) -> String,
    ga: Option<&CacheGeometry>,
    gb: Option<&CacheGeometry>,
) {
    for (name, a, b) in [
        ("sets", ga.and_then(|g| g.sets), gb.and_then(|g| g.sets)),
        (
            "associativity",
            ga.and_then(|g| g.associativity),
            gb.and_then(|g| g.associativity),
        ),
    ] {
        d.exact(
            &field(&format!("geometry.{name}")),
            a.map(|c| c.value),
            b.map(|c| c.value),
        );
    }
    d.exact(
        &field("geometry.set_mapping"),
        ga.and_then(|g| g.set_mapping.as_ref()),
        gb.and_then(|g| g.set_mapping.as_ref()),
    );
    d.exact(
        &field("geometry.replacement"),
        ga.and_then(|g| g.replacement.as_ref()),
        gb.and_then(|g| g.replacement.as_ref()),
    );
}
