//! The clusters section (schema 1.5) in the renderers: summary lines for the table and the
//! Markdown report, and the GPC strip of the SVG, each SM coloured by its L2 partition.

use std::fmt::Write as _;

use crate::model::{Clusters, Topology};

use super::svg_blocks::escape;

fn number(value: f64) -> String {
    if (value - value.round()).abs() < 0.05 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// One line each: residency, GPCs, DSMEM latency per size, bandwidth; empty without a
/// clusters section.
///
/// ```
/// use topology::{render, ComputeCapability, Clusters, DeviceInfo, Gpc, Topology};
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 4));
/// assert!(render::cluster_lines(&topo).is_empty());
/// let gpc = |sms: Vec<u32>| Gpc { sms, sms_by_contention: vec![], l2_partitions: vec![0], dsmem_p50: None };
/// topo.clusters = Some(Clusters { gpcs: vec![gpc(vec![0, 2]), gpc(vec![1, 3])], ..Default::default() });
/// assert!(render::cluster_lines(&topo)[0].contains("2 GPCs"));
/// ```
pub fn cluster_lines(topo: &Topology) -> Vec<String> {
    let Some(c) = &topo.clusters else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if !c.gpcs.is_empty() {
        let sizes: Vec<String> = c.gpcs.iter().map(|g| g.sms.len().to_string()).collect();
        let total: usize = c.gpcs.iter().map(|g| g.sms.len()).sum();
        let consistent = match c.gpc_map_consistent {
            Some(true) => "; both halves of the launches agree",
            Some(false) => "; the halves of the launches differ",
            None => "",
        };
        let by_contention: Vec<String> = c
            .gpcs
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.sms_by_contention.is_empty())
            .map(|(i, g)| format!("{:?} in GPC {i}", g.sms_by_contention))
            .collect();
        let placed: usize = c.gpcs.iter().map(|g| g.sms_by_contention.len()).sum();
        let mut how = format!("{} SMs by cluster placement{consistent}", total - placed);
        if !by_contention.is_empty() {
            let sms: Vec<u32> = c
                .gpcs
                .iter()
                .flat_map(|g| g.sms_by_contention.iter().copied())
                .collect();
            let checks = c.contention.as_ref().map_or_else(String::new, |t| {
                let agree = t.checks.iter().filter(|k| k.gpc == k.expected_gpc).count();
                format!(
                    "; the same test found its own GPC for {agree} of {} placed TPCs",
                    t.checks.len()
                )
            });
            let mut sorted = sms.clone();
            sorted.sort_unstable();
            how.push_str(&format!(
                "; SMs {sorted:?} by contention at the GPCs' ports (no cluster of more than two blocks used them): {}{checks}",
                by_contention.join(", ")
            ));
        }
        let bound = if c.unassigned_sms.is_empty() {
            ""
        } else {
            let why = if c.contention.is_some() {
                "neither cluster placement nor contention told"
            } else {
                "they never shared a cluster of more than two blocks"
            };
            how.push_str(&format!(
                "; GPC not told for SMs {:?} ({why})",
                c.unassigned_sms
            ));
            "at least "
        };
        lines.push(format!(
            "GPCs: {bound}{} GPCs, SMs per GPC {} ({total} SMs): {how}",
            c.gpcs.len(),
            sizes.join(", ")
        ));
    }
    if let Some(max) = c.max_cluster_size() {
        let resident: Vec<String> = c
            .residency
            .iter()
            .map(|r| format!("{}×{}", r.clusters, r.cluster_size))
            .collect();
        lines.push(format!(
            "clusters: up to {max} blocks; resident at once (clusters×size) {}",
            resident.join(", ")
        ));
    }
    if !c.dsmem.is_empty() {
        let latency: Vec<String> = c
            .dsmem
            .iter()
            .map(|d| {
                let what = if d.cluster_size == 1 {
                    "own".to_string()
                } else {
                    format!("size {}", d.cluster_size)
                };
                format!("{what} {}", number(d.latency.p50.0))
            })
            .collect();
        lines.push(format!(
            "DSMEM latency, median cycles: {}",
            latency.join(", ")
        ));
        let rates: Vec<String> = c
            .dsmem
            .iter()
            .filter_map(|d| {
                let read = d.read_bytes_per_cycle?;
                let write = d
                    .write_bytes_per_cycle
                    .map_or_else(|| "-".to_string(), number);
                Some(format!(
                    "size {}: {} / {write}",
                    d.cluster_size,
                    number(read)
                ))
            })
            .collect();
        if !rates.is_empty() {
            let own = c.local_read_bytes_per_cycle.map_or_else(String::new, |r| {
                format!("; own shared memory read {}", number(r))
            });
            lines.push(format!(
                "DSMEM bytes per SM cycle, read / write: {}{own}",
                rates.join(", ")
            ));
        }
    }
    lines
}

/// Draws the GPCs at `y`: one box per GPC, as wide as its share of the SMs, holding one
/// square per SM (green: the L2 map's reference partition, orange: another, grey: not told);
/// returns the height used (0 without GPCs).
pub(super) fn svg_gpcs(out: &mut String, topo: &Topology, x: f64, y: f64, width: f64) -> f64 {
    let Some(Clusters { gpcs, .. }) = &topo.clusters else {
        return 0.0;
    };
    if gpcs.is_empty() {
        return 0.0;
    }
    let partition_of: Vec<Option<u32>> = topo
        .l2_partitions()
        .map(|p| p.sm_partition.clone())
        .unwrap_or_default();
    let total: usize = gpcs.iter().map(|g| g.sms.len()).sum();
    let gap = 6.0;
    let usable = width - gap * (gpcs.len() as f64 - 1.0);
    let _ = writeln!(
        out,
        r##"<text x="{x:.1}" y="{:.1}" font-size="13" font-weight="bold" fill="#374151">GPCs from thread-block cluster placement (SMs coloured by L2 partition)</text>"##,
        y + 12.0
    );
    let top = y + 20.0;
    let mut left = x;
    for (g, gpc) in gpcs.iter().enumerate() {
        let w = usable * gpc.sms.len() as f64 / total.max(1) as f64;
        let mut title = format!("GPC {g}: {} SMs", gpc.sms.len());
        if let Some(p50) = gpc.dsmem_p50 {
            let _ = write!(title, " · DSMEM {} cycles", number(p50.0));
        }
        let _ = writeln!(
            out,
            r##"<rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="40" rx="4" fill="#f1f5f9" stroke="#334155"><title>{}</title></rect>"##,
            escape(&title)
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#111827">{}</text>"##,
            left + 3.0,
            top + 13.0,
            escape(&format!("GPC {g} · {}", gpc.sms.len()))
        );
        let cell = ((w - 6.0) / gpc.sms.len().max(1) as f64).min(10.0);
        for (i, sm) in gpc.sms.iter().enumerate() {
            let fill = match partition_of.get(*sm as usize).copied().flatten() {
                Some(0) => "#16a34a",
                Some(_) => "#ea580c",
                None => "#9ca3af",
            };
            let _ = writeln!(
                out,
                r#"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="12" fill="{fill}"><title>SM {sm}</title></rect>"#,
                left + 3.0 + i as f64 * cell,
                top + 20.0,
                (cell - 1.0).max(0.5)
            );
        }
        left += w + gap;
    }
    let mut height = 66.0;
    for line in cluster_lines(topo).iter().skip(1) {
        let _ = writeln!(
            out,
            r##"<text x="{x:.1}" y="{:.1}" font-size="12" fill="#374151">{}</text>"##,
            y + height + 12.0,
            escape(line)
        );
        height += 16.0;
    }
    height + 8.0
}
