//! The bandwidth section every report shows: per element and kind (read, near-
//! partition read, write, copy) the best value in GB/s (10⁹ B/s, the unit peaks are quoted
//! in), the median, bytes per clock per SM where that is the natural unit, the share of the
//! theoretical peak, and the launch that reached it.

use crate::{Bandwidth, ElementKind, Topology};

/// Column heads of the bandwidth table.
pub(super) const HEADERS: [&str; 6] = [
    "Bandwidth",
    "Best (GB/s)",
    "Median (GB/s)",
    "B/clk/SM",
    "Of peak",
    "Launch",
];

/// How a kind of bandwidth is named after its element.
fn kind_label(key: &str) -> &'static str {
    match key {
        "read_near_partition" => "read, near partition",
        "write" => "write",
        "copy" => "copy (read + write)",
        _ => "read",
    }
}

/// GB/s of a bandwidth stored in GiB/s.
fn gb(gib_per_second: f64) -> String {
    format!("{:.1}", gib_per_second * (1u64 << 30) as f64 / 1e9)
}

/// The peak column: the share, and what it is a share of.
pub(super) fn peak_cell(b: &Bandwidth) -> String {
    match &b.peak {
        Some(p) => match p.bytes_per_clock_per_sm {
            Some(per_sm) => format!("{:.1} % of {per_sm:.0} B/clk/SM", 100.0 * p.fraction),
            None => format!("{:.1} % of {} GB/s", 100.0 * p.fraction, gb(p.value)),
        },
        None => "-".to_owned(),
    }
}

/// One row per present bandwidth, from the SM outwards.
pub(super) fn rows(topo: &Topology) -> Vec<[String; 6]> {
    let mut rows = Vec::new();
    for (kind, element) in topo.elements.iter() {
        let Some(bandwidths) = &element.bandwidth else {
            continue;
        };
        for (key, b) in bandwidths.iter() {
            rows.push([
                format!("{} {}", kind.display_name(), kind_label(key)),
                gb(b.value),
                b.median.map_or("-".to_owned(), gb),
                b.bytes_per_clock_per_sm
                    .map_or("-".to_owned(), |v| format!("{v:.1}")),
                peak_cell(b),
                b.launch.as_ref().map_or("-".to_owned(), |l| l.to_string()),
            ]);
        }
    }
    rows
}

/// The short line the diagram shows in an element's box, e.g. `read 3121 GB/s (93 %)`.
pub(super) fn diagram_lines(topo: &Topology, kind: ElementKind) -> Vec<String> {
    let Some(bandwidths) = topo.element(kind).and_then(|e| e.bandwidth.as_ref()) else {
        return Vec::new();
    };
    bandwidths
        .iter()
        .map(|(key, b)| {
            let label = match key {
                "read_near_partition" => "near read",
                "copy" => "copy",
                "write" => "write",
                _ => "read",
            };
            let value = match b.bytes_per_clock_per_sm {
                Some(per_sm) => format!("{per_sm:.1} B/clk/SM"),
                None => format!("{:.0} GB/s", b.value * (1u64 << 30) as f64 / 1e9),
            };
            match &b.peak {
                Some(p) => format!("{label} {value} ({:.0} %)", 100.0 * p.fraction),
                None => format!("{label} {value}"),
            }
        })
        .collect()
}

/// The bandwidth table as aligned text, with a heading line; empty without bandwidths.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// topo.element_mut(ElementKind::DeviceMemory).bandwidth_mut().read =
///     Some(Bandwidth::from_bytes_per_second(3.1e12, Provenance::Benchmark));
/// let text = render::table(&topo);
/// assert!(text.lines().any(|l| l.starts_with("Device memory read") && l.contains("3100.0")));
/// ```
pub(super) fn text_table(topo: &Topology) -> String {
    let rows = rows(topo);
    if rows.is_empty() {
        return String::new();
    }
    let cells: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| r.iter().map(String::as_str).collect())
        .collect();
    format!("\n{}", super::aligned(&HEADERS, &cells))
}
