//! The copies section (schema 1.6): one row per path and size with the latency of one copy
//! in flight (p5, p50, p95) and the bandwidth with many in flight, for the table, the
//! Markdown report and the HTML report; the paths the device lacks on a line of their own.
//! The SVG diagram shows memory elements and their relations, not copy paths, so it has no
//! copies part (the HTML report around it has the table).

use crate::model::Topology;

/// Column heads of the copies table.
pub(super) const HEADERS: [&str; 7] = [
    "Copy to shared",
    "Size",
    "Latency p5 / p50 / p95 (cycles)",
    "B/clk/SM",
    "GB/s",
    "Launch",
    "Best",
];

fn cycles(value: f64) -> String {
    format!("{value:.0}")
}

/// One row per path and size; the last column marks the path with the lowest latency and
/// the one with the highest bandwidth at that size (among the linear copies; the tensor
/// form's tiles are compared with the linear sizes of the same bytes).
pub(super) fn rows(topo: &Topology) -> Vec<[String; 7]> {
    let Some(copies) = &topo.copies_to_shared else {
        return Vec::new();
    };
    let best = |bytes: u64, key: fn(&crate::CopyAtSize) -> Option<f64>, lowest: bool| {
        copies
            .paths
            .iter()
            .filter_map(|p| {
                let size = p.sizes.iter().find(|s| s.bytes.0 == bytes)?;
                Some((p.path, key(size)?))
            })
            .fold(
                None,
                |acc: Option<(crate::CopyPathKind, f64)>, (path, v)| match acc {
                    Some((_, b)) if (lowest && b <= v) || (!lowest && b >= v) => acc,
                    _ => Some((path, v)),
                },
            )
            .map(|(path, _)| path)
    };
    let mut rows = Vec::new();
    for result in &copies.paths {
        for size in &result.sizes {
            let latency = match &size.latency {
                Some(l) => format!(
                    "{} / {} / {}",
                    size.latency_p5.map_or("-".to_owned(), |p| cycles(p.0)),
                    cycles(l.p50.0),
                    cycles(l.p95.0)
                ),
                None => "-".to_owned(),
            };
            let label = match size.tile {
                Some([w, h]) => format!("{} ({w}x{h})", size.bytes),
                None => size.bytes.to_string(),
            };
            let mut wins = Vec::new();
            if best(size.bytes.0, |s| s.latency.as_ref().map(|l| l.p50.0), true)
                == Some(result.path)
            {
                wins.push("latency");
            }
            if best(size.bytes.0, |s| s.bytes_per_clock_per_sm, false) == Some(result.path) {
                wins.push("bandwidth");
            }
            rows.push([
                result.path.label().to_owned(),
                label,
                latency,
                size.bytes_per_clock_per_sm
                    .map_or("-".to_owned(), |v| format!("{v:.1}")),
                size.gigabytes_per_second
                    .map_or("-".to_owned(), |v| format!("{v:.0}")),
                size.launch.map_or("-".to_owned(), |l| {
                    format!(
                        "{} x {} thr, {} in flight",
                        l.blocks_per_sm, l.threads_per_block, l.copies_in_flight
                    )
                }),
                wins.join(", "),
            ]);
        }
    }
    rows
}

/// Where the copies read from, and the paths the device lacks where no note says so.
pub(super) fn lines(topo: &Topology) -> Vec<String> {
    let Some(copies) = &topo.copies_to_shared else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if let Some(source) = &copies.source {
        lines.push(format!("Copies to shared memory read {source}"));
    }
    // Paths the device lacks, once per reason; the notes usually carry the same sentence
    // (then it is not repeated here).
    let mut reasons: Vec<&str> = Vec::new();
    for na in &copies.not_applicable {
        let noted = topo.notes.iter().any(|n| n.message == na.reason);
        if !noted && !reasons.contains(&na.reason.as_str()) {
            reasons.push(&na.reason);
        }
    }
    lines.extend(reasons.into_iter().map(str::to_owned));
    lines
}

/// The copies table as aligned text with its lines; empty without a copies section.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// let size = CopyAtSize {
///     bytes: Bytes(4096), tile: None,
///     latency: Some(Latency::measured(LatencySummary::from_samples(&[600.0, 610.0, 650.0]).unwrap())),
///     latency_p5: Some(Cycles(600.0)), bytes_per_clock_per_sm: Some(90.0),
///     gigabytes_per_second: Some(20000.0), launch: None,
/// };
/// topo.copies_to_shared = Some(CopiesToShared {
///     paths: vec![CopyPathResult { path: CopyPathKind::Bulk, sizes: vec![size] }],
///     ..Default::default()
/// });
/// let text = render::table(&topo);
/// assert!(text.lines().any(|l| l.starts_with("TMA bulk") && l.contains("600 / 610 / 650")));
/// ```
pub(super) fn text_table(topo: &Topology) -> String {
    let rows = rows(topo);
    let lines = lines(topo);
    if rows.is_empty() && lines.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    if !rows.is_empty() {
        let cells: Vec<Vec<&str>> = rows
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        out.push('\n');
        out.push_str(&super::aligned(&HEADERS, &cells));
    }
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}
