//! The TLB levels (schema 1.5, allocation 1.6) in the renderers: one line per level for
//! the table, the Markdown and HTML reports and the SVG's footer.

use crate::model::Topology;

/// One line per TLB level: path, allocation, level, entries, page size (where known),
/// reach with the span of one entry, and the miss cost's median and 95th percentile;
/// empty without levels.
///
/// ```
/// use topology::{render, Bytes, ComputeCapability, DeviceInfo, Provenance, Size, TlbLevel, Topology};
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 4));
/// assert!(render::tlb_lines(&topo).is_empty());
/// topo.tlb.push(TlbLevel {
///     level: 1,
///     coverage: Some(Size::exact(Bytes(256 << 20), Provenance::Benchmark)),
///     page_size: None,
///     miss_latency: None,
///     path: Some("global_cg".into()),
///     entries: Some(16),
///     allocation: Some("plain".into()),
///     interleave: None,
/// });
/// let line = &render::tlb_lines(&topo)[0];
/// assert!(line.contains("global_cg") && line.contains("plain") && line.contains("16 entries"), "{line}");
/// assert!(line.contains("reach 256 MiB (16 MiB per entry)"), "{line}");
/// ```
pub fn tlb_lines(topo: &Topology) -> Vec<String> {
    topo.tlb
        .iter()
        .map(|l| {
            let mut what = vec![l.path.clone().unwrap_or_else(|| "load".into())];
            if let Some(allocation) = &l.allocation {
                what.push(format!("{allocation} allocation"));
            }
            let mut parts = Vec::new();
            if let Some(entries) = l.entries {
                parts.push(format!("{entries} entries"));
            }
            if let Some(k) = l.interleave.filter(|&k| k > 1) {
                let each = l
                    .entries
                    .map(|e| format!(" of {}", e / k))
                    .unwrap_or_default();
                parts.push(format!("dealt by address to {k} groups{each}"));
            }
            if let Some(page) = &l.page_size {
                parts.push(format!("page {page}"));
            }
            if let Some(reach) = &l.coverage {
                let per_entry = match (l.entries, reach.bound.exact()) {
                    (Some(e), Some(crate::units::Bytes(b))) if e > 0 && b % e == 0 => {
                        format!(" ({} per entry)", crate::units::Bytes(b / e))
                    }
                    _ => String::new(),
                };
                parts.push(format!("reach {reach}{per_entry}"));
            }
            if let Some(miss) = &l.miss_latency {
                parts.push(format!(
                    "miss +{:.0} cycles (p50; p95 +{:.0})",
                    miss.p50.get(),
                    miss.p95.get()
                ));
            }
            format!(
                "TLB level {} ({}): {}",
                l.level,
                what.join(", "),
                parts.join(", ")
            )
        })
        .collect()
}
