//! The caches' organisation (sets, ways, set mapping, replacement; schema 1.6) as lines
//! every renderer shows: one summary line per cache, and its evidence.

use std::fmt::Write as _;

use crate::model::{ElementKind, Topology};

/// One line per element with a measured geometry: `name: summary`; empty when none was
/// measured.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// assert!(render::geometry_lines(&topo).is_empty());
/// topo.element_mut(ElementKind::ConstantL1).geometry = Some(CacheGeometry {
///     sets: Some(Count::new(8, Provenance::Benchmark)),
///     associativity: Some(Count::new(4, Provenance::Benchmark)),
///     ..CacheGeometry::default()
/// });
/// assert_eq!(render::geometry_lines(&topo), ["Constant L1: 8 sets × 4 ways"]);
/// ```
pub fn geometry_lines(topo: &Topology) -> Vec<String> {
    ElementKind::ALL
        .into_iter()
        .filter_map(|kind| {
            let element = topo.element(kind)?;
            let geometry = element.geometry.as_ref()?;
            Some(format!("{}: {}", topo.label(kind), geometry.summary()))
        })
        .collect()
}

/// The evidence behind each element's geometry, `(element label, evidence line)`.
pub(super) fn evidence_lines(topo: &Topology) -> Vec<(String, String)> {
    ElementKind::ALL
        .into_iter()
        .flat_map(|kind| {
            topo.element(kind)
                .and_then(|e| e.geometry.as_ref())
                .map(|g| g.evidence.clone())
                .unwrap_or_default()
                .into_iter()
                .map(move |line| (topo.label(kind), line))
        })
        .collect()
}

/// The Markdown section: the summaries, then the evidence per element.
pub(super) fn markdown_section(topo: &Topology, out: &mut String, escape: fn(&str) -> String) {
    let lines = geometry_lines(topo);
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n## Sets, ways and replacement\n");
    for line in lines {
        let _ = writeln!(out, "- {}", escape(&line));
    }
    let evidence = evidence_lines(topo);
    if !evidence.is_empty() {
        let _ = writeln!(out, "\nEvidence:\n");
        for (label, line) in evidence {
            let _ = writeln!(out, "- {}: {}", escape(&label), escape(&line));
        }
    }
}
