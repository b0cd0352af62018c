//! Renderers: a terminal table, a Markdown report, an SVG diagram and a self-contained
//! HTML report.
//!
//! All renderers are pure functions of their input and produce the same text
//! for the same input, so their output is compared against golden files.
//! A quantity that is absent shows as `not measured [n]` when a note explains
//! why (the footnote gives the reason) and as `-` otherwise. Every number follows one
//! precision rule ([`number`], [`p_value`], [`median_iqr`]).

mod bandwidth;
mod clusters;
mod copies;
mod geometry;
mod html;
mod icache;
mod markdown;
mod plot;
mod sections;
mod store;
mod svg;
mod svg_blocks;
mod tlb;

use std::fmt::Write as _;

use crate::model::{CarveoutRole, ElementKind, NoteSeverity, QuantityKind, Topology};
use crate::quantity::{Latency, Size};

pub use crate::number::{median_iqr, number, p_value, P_VALUE_FLOOR};
pub use clusters::cluster_lines;
pub use geometry::geometry_lines;
pub use html::html;
pub(crate) use html::STYLE;
pub use icache::instruction_cache_lines;
pub use markdown::{carveout_row_label, markdown};
pub(crate) use plot::escape;
pub use svg::svg;
pub use tlb::tlb_lines;

/// Collects the reasons shown as numbered footnotes.
struct Footnotes {
    entries: Vec<String>,
}

impl Footnotes {
    fn reference(&mut self, text: String) -> usize {
        if let Some(i) = self.entries.iter().position(|e| *e == text) {
            return i + 1;
        }
        self.entries.push(text);
        self.entries.len()
    }
}

/// One row of the element table, already formatted.
struct Row {
    element: String,
    size: String,
    line: String,
    latency_cycles: String,
    latency_ns: String,
    shared_with: String,
    per_sm: String,
}

const HEADERS: [&str; 7] = [
    "Element",
    "Size",
    "Line",
    "Latency (cycles): median [IQR]",
    "Median (ns)",
    "Shared with",
    "#/SM",
];

fn missing(
    topo: &Topology,
    kind: ElementKind,
    quantity: QuantityKind,
    notes: &mut Footnotes,
) -> String {
    match topo.not_measured_reason(kind, quantity) {
        Some(reason) => {
            let n = notes.reference(format!("{kind} {quantity}: not measured: {reason}"));
            format!("not measured [{n}]")
        }
        None => "-".to_owned(),
    }
}

fn size_cell(
    topo: &Topology,
    kind: ElementKind,
    quantity: QuantityKind,
    size: Option<&Size>,
    notes: &mut Footnotes,
) -> String {
    match size {
        Some(size) => size.to_string(),
        None => missing(topo, kind, quantity, notes),
    }
}

fn cycles_cell(latency: &Latency) -> String {
    median_iqr(latency)
}

/// The median in nanoseconds at the clock that applies.
fn ns_cell(topo: &Topology, latency: &Latency) -> String {
    topo.clock_for(latency).map_or_else(
        || "-".to_owned(),
        |clock| number(latency.p50.to_nanoseconds(clock).0),
    )
}

fn rows(topo: &Topology, notes: &mut Footnotes) -> Vec<Row> {
    let mut rows = Vec::new();
    for kind in ElementKind::ALL {
        let element = topo.element(kind);
        let whole_missing = topo
            .notes
            .iter()
            .any(|n| n.severity == NoteSeverity::NotMeasured && n.element == Some(kind));
        if element.is_none() && !whole_missing {
            continue;
        }
        let latency = element.and_then(|e| e.latency.as_ref());
        let shared = topo.shared_with(kind);
        rows.push(Row {
            element: topo.label(kind),
            size: size_cell(
                topo,
                kind,
                QuantityKind::Size,
                element.and_then(|e| e.size.as_ref()),
                notes,
            ),
            // Where only the fetch granularity (sector) is known, show it, marked, rather
            // than an empty cell: it is what a miss moves.
            line: match element.and_then(|e| e.line_size.as_ref()) {
                Some(line) => line.to_string(),
                None => match element.and_then(|e| e.fetch_granularity.as_ref()) {
                    Some(granularity) => format!("{granularity} (fetch)"),
                    None => size_cell(topo, kind, QuantityKind::LineSize, None, notes),
                },
            },
            latency_cycles: latency.map_or_else(
                || missing(topo, kind, QuantityKind::Latency, notes),
                cycles_cell,
            ),
            latency_ns: latency.map_or_else(|| "-".to_owned(), |l| ns_cell(topo, l)),
            shared_with: if shared.is_empty() {
                "-".to_owned()
            } else {
                shared
                    .iter()
                    .map(|k| k.abbreviation())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            per_sm: element
                .and_then(|e| e.count_per_sm)
                .map_or_else(|| "-".to_owned(), |c| c.value.to_string()),
        });
        // The L1's two headline sizes, each named: the largest any kernel gets, and what
        // a kernel without shared memory gets from the driver.
        for role in [CarveoutRole::LargestL1, CarveoutRole::DriverDefault] {
            if let Some(row) = element.and_then(|e| e.carveout_row(role)) {
                let shared = row
                    .shared_memory_bytes
                    .map_or_else(String::new, |b| format!(", {b} shared"));
                rows.push(Row {
                    element: format!("  {}{shared}", role.label()),
                    size: row.l1_size.to_string(),
                    line: "-".to_owned(),
                    latency_cycles: "-".to_owned(),
                    latency_ns: "-".to_owned(),
                    shared_with: "-".to_owned(),
                    per_sm: "-".to_owned(),
                });
            }
        }
        if let Some(partitions) = element.and_then(|e| e.partitions.as_ref()) {
            let count = partitions.count.map(|c| c.value);
            let each = partitions
                .size_each
                .as_ref()
                .map_or_else(|| "-".to_owned(), Size::to_string);
            let dash = || "-".to_owned();
            rows.push(Row {
                element: "  near partition".to_owned(),
                size: each.clone(),
                line: dash(),
                latency_cycles: partitions
                    .near_latency
                    .as_ref()
                    .map_or_else(dash, cycles_cell),
                latency_ns: partitions
                    .near_latency
                    .as_ref()
                    .map_or_else(dash, |l| ns_cell(topo, l)),
                shared_with: dash(),
                per_sm: dash(),
            });
            rows.push(Row {
                element: match count {
                    Some(n) if n > 1 => format!("  far partition ×{}", n - 1),
                    _ => "  far partition".to_owned(),
                },
                // No far size where the run reported none (its warning says why), rather
                // than the near partition's size standing in for it.
                size: partitions
                    .far_size
                    .as_ref()
                    .map_or_else(|| "not reported".to_owned(), Size::to_string),
                line: dash(),
                latency_cycles: partitions
                    .far_latency
                    .as_ref()
                    .map_or_else(dash, cycles_cell),
                latency_ns: partitions
                    .far_latency
                    .as_ref()
                    .map_or_else(dash, |l| ns_cell(topo, l)),
                shared_with: dash(),
                per_sm: dash(),
            });
        }
    }
    rows
}

fn row_cells(row: &Row) -> [&str; 7] {
    [
        &row.element,
        &row.size,
        &row.line,
        &row.latency_cycles,
        &row.latency_ns,
        &row.shared_with,
        &row.per_sm,
    ]
}

fn headline(topo: &Topology) -> String {
    let d = &topo.device;
    let mut line = format!(
        "{} (compute capability {}, {} SMs",
        d.name, d.compute_capability, d.sm_count
    );
    match (topo.conditions.sm_clock_mhz, d.sm_clock_mhz) {
        (Some(measured), _) => {
            let _ = write!(line, ", SM clock {measured} measured");
        }
        (None, Some(nominal)) => {
            let _ = write!(line, ", SM clock {nominal} nominal");
        }
        (None, None) => {}
    }
    if let Some(percent) = topo.conditions.shared_memory_carveout_percent {
        let _ = write!(line, ", carveout {percent} %");
    }
    line.push(')');
    line
}

fn general_notes(topo: &Topology) -> Vec<String> {
    topo.notes
        .iter()
        .filter(|n| n.severity != NoteSeverity::NotMeasured)
        .map(|n| {
            let level = match n.severity {
                NoteSeverity::Warning => "warning",
                _ => "note",
            };
            match n.element {
                Some(kind) => format!("{level}: {kind}: {}", n.message),
                None => format!("{level}: {}", n.message),
            }
        })
        .collect()
}

/// The L2's address map in one line (schema 1.10): the home function or why there is none;
/// `None` where the result has neither.
///
/// ```
/// use topology::{render, Bytes, ComputeCapability, DeviceInfo, Topology};
/// let topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 4));
/// assert!(render::l2_address_line(&topo).is_none());
/// ```
pub fn l2_address_line(topo: &Topology) -> Option<String> {
    let p = topo.l2_partitions()?;
    match (&p.address_map, &p.address_map_not_determined) {
        (Some(map), _) => Some(format!("L2 home partition: {map}")),
        (None, Some(why)) => Some(format!("L2 home partition: not determined: {why}")),
        (None, None) => None,
    }
}

/// The L2's ways in one line (schema 1.12): the count and the targets behind it, or why it
/// was not determined; `None` where the ways were not measured.
///
/// ```
/// use topology::{render, ComputeCapability, DeviceInfo, Topology};
/// let topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 4));
/// assert!(render::l2_ways_line(&topo).is_none());
/// ```
pub fn l2_ways_line(topo: &Topology) -> Option<String> {
    let ways = topo.l2_partitions()?.ways.as_ref()?;
    Some(format!("L2 ways: {ways}"))
}

/// A plain-text table for the terminal, one row per element (the shape of the
/// thesis' tables 5.4–5.9), L2 partitions as indented rows, footnotes for what
/// was not measured and the run's warnings below.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(7, 0), 80));
/// topo.element_mut(ElementKind::L2).set_size(Size::api(Bytes::mib(6)));
/// let text = render::table(&topo);
/// assert!(text.lines().any(|l| l.starts_with("L2") && l.contains("6 MiB")));
/// ```
pub fn table(topo: &Topology) -> String {
    let mut notes = Footnotes {
        entries: Vec::new(),
    };
    let rows = rows(topo, &mut notes);
    let mut out = headline(topo);
    out.push('\n');
    if let Some(banner) = busy_banner(topo) {
        let _ = writeln!(out, "{banner}");
    }
    let cells: Vec<Vec<&str>> = rows.iter().map(|r| row_cells(r).to_vec()).collect();
    out.push_str(&aligned(&HEADERS, &cells));
    unreferenced_not_measured(topo, &mut notes);
    for (i, entry) in notes.entries.iter().enumerate() {
        let _ = writeln!(out, "[{}] {entry}", i + 1);
    }
    out.push_str(&bandwidth::text_table(topo));
    out.push_str(&copies::text_table(topo));
    for line in cluster_lines(topo).into_iter().chain(tlb_lines(topo)) {
        let _ = writeln!(out, "{line}");
    }
    for line in l2_address_line(topo).into_iter().chain(l2_ways_line(topo)) {
        let _ = writeln!(out, "{line}");
    }
    for line in instruction_cache_lines(topo) {
        let _ = writeln!(out, "{line}");
    }
    for line in geometry_lines(topo) {
        let _ = writeln!(out, "sets: {line}");
    }
    out.push_str(&sections::text(topo));
    for note in general_notes(topo) {
        let _ = writeln!(out, "{note}");
    }
    if let Some(run) = &topo.run {
        for line in run.summary() {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// Columns padded to their widest cell, two spaces apart, under a rule of `─`: the text
/// tables' layout.
pub(super) fn aligned(headers: &[&str], rows: &[Vec<&str>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(headers);
    let rule: Vec<String> = widths.iter().map(|&w| "─".repeat(w)).collect();
    line(&rule.iter().map(String::as_str).collect::<Vec<_>>());
    for row in rows {
        line(row);
    }
    out
}

/// The warning every output shows first when the result was taken beside other work.
pub(crate) fn busy_banner(topo: &Topology) -> Option<String> {
    let run = topo.run.as_ref()?;
    let mut reasons = run.busy_reasons.clone();
    reasons.extend(run.disturbances.iter().cloned());
    if !run.busy && run.disturbances.is_empty() {
        return None;
    }
    let what = if run.busy {
        "TAKEN ON A BUSY GPU"
    } else {
        "DISTURBED WHILE MEASURING"
    };
    Some(format!(
        "WARNING: {what}: values may be disturbed ({})",
        reasons.join("; ")
    ))
}

/// Adds the not-measured notes that no table cell referenced (quantities
/// without a column, such as geometry), so no reason is lost.
fn unreferenced_not_measured(topo: &Topology, notes: &mut Footnotes) {
    for note in topo
        .notes
        .iter()
        .filter(|n| n.severity == NoteSeverity::NotMeasured)
    {
        let about = match (note.element, note.quantity) {
            (Some(kind), Some(quantity)) => format!("{kind} {quantity}"),
            (Some(kind), None) => kind.to_string(),
            (None, Some(quantity)) => quantity.to_string(),
            (None, None) => "measurement".to_owned(),
        };
        notes.reference(format!("{about}: not measured: {}", note.message));
    }
}
