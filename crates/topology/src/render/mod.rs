//! Renderers: a terminal table, a Markdown report and an SVG diagram.
//!
//! All renderers are pure functions of the topology and produce the same text
//! for the same input, so their output is compared against golden files.
//! A quantity that is absent shows as `not measured [n]` when a note explains
//! why (the footnote gives the reason) and as `-` otherwise.

mod svg;

use std::fmt::Write as _;

use crate::model::{CarveoutRole, ElementKind, NoteSeverity, QuantityKind, Topology};
use crate::quantity::{Latency, Size};

pub use svg::svg;

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
    "Latency (cycles)",
    "Latency (ns)",
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
    format!("{:.1} ± {:.1}", latency.mean.0, latency.stdev.0)
}

fn ns_cell(topo: &Topology, latency: &Latency) -> String {
    topo.clock_for(latency).map_or_else(
        || "-".to_owned(),
        |clock| format!("{:.1}", latency.mean_ns(clock).0),
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
            element: kind.display_name().to_owned(),
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
                size: partitions.far_size.as_ref().map_or(each, Size::to_string),
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
    let mut widths = HEADERS.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row_cells(row)) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = headline(topo);
    out.push('\n');
    if let Some(banner) = busy_banner(topo) {
        let _ = writeln!(out, "{banner}");
    }
    let line = |cells: [&str; 7], out: &mut String| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(HEADERS, &mut out);
    let rule = widths.map(|w| "─".repeat(w));
    line(rule.each_ref().map(String::as_str), &mut out);
    for row in &rows {
        line(row_cells(row), &mut out);
    }
    unreferenced_not_measured(topo, &mut notes);
    for (i, entry) in notes.entries.iter().enumerate() {
        let _ = writeln!(out, "[{}] {entry}", i + 1);
    }
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

fn md_escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// A Markdown report: device, conditions, the element table, L2 partitions,
/// latency distributions, size evidence, relations and notes.
///
/// ```
/// use topology::*;
/// let topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(8, 6), 84));
/// assert!(render::markdown(&topo).starts_with("# Memory topology of GPU"));
/// ```
pub fn markdown(topo: &Topology) -> String {
    let d = &topo.device;
    let mut out = String::new();
    let _ = writeln!(out, "# Memory topology of {}\n", md_escape(&d.name));
    let _ = writeln!(out, "{}\n", md_escape(&headline(topo)));
    if let Some(banner) = busy_banner(topo) {
        let _ = writeln!(out, "> **{}**\n", md_escape(&banner));
    }

    let _ = writeln!(out, "## Device\n\n| property | value |\n| --- | --- |");
    let mut property = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            let _ = writeln!(out, "| {name} | {} |", md_escape(&value));
        }
    };
    property("compute capability", Some(d.compute_capability.to_string()));
    property("SMs", Some(d.sm_count.to_string()));
    property("cores per SM", d.cores_per_sm.map(|v| v.to_string()));
    property("SM clock (nominal)", d.sm_clock_mhz.map(|v| v.to_string()));
    property("memory clock", d.memory_clock_mhz.map(|v| v.to_string()));
    property("device memory", d.memory_bytes.map(|v| v.to_string()));
    property(
        "memory bus width",
        d.memory_bus_width_bits.map(|v| format!("{v} bit")),
    );
    property("L2 (API)", d.l2_bytes.map(|v| v.to_string()));
    property("driver", d.driver_version.clone());
    property(
        "CUDA driver API",
        d.cuda_driver_api_version.map(|v| v.to_string()),
    );
    property(
        "CUDA runtime",
        d.cuda_runtime_version.map(|v| v.to_string()),
    );
    let l = &d.limits;
    property(
        "shared memory per SM",
        l.shared_memory_per_sm_bytes.map(|v| v.to_string()),
    );
    property(
        "shared memory per block",
        l.shared_memory_per_block_bytes.map(|v| v.to_string()),
    );
    property(
        "shared memory per block (opt-in)",
        l.shared_memory_per_block_optin_bytes.map(|v| v.to_string()),
    );
    property(
        "reserved shared memory per block",
        l.reserved_shared_memory_per_block_bytes
            .map(|v| v.to_string()),
    );
    property(
        "constant memory",
        l.total_constant_memory_bytes.map(|v| v.to_string()),
    );
    property(
        "persisting L2 max",
        l.persisting_l2_max_bytes.map(|v| v.to_string()),
    );
    property(
        "registers per SM",
        l.registers_per_sm.map(|v| v.to_string()),
    );
    property(
        "registers per block",
        l.registers_per_block.map(|v| v.to_string()),
    );
    property(
        "threads per SM",
        l.max_threads_per_sm.map(|v| v.to_string()),
    );
    property(
        "threads per block",
        l.max_threads_per_block.map(|v| v.to_string()),
    );
    property("blocks per SM", l.max_blocks_per_sm.map(|v| v.to_string()));
    property("warp size", l.warp_size.map(|v| v.to_string()));

    let c = &topo.conditions;
    let _ = writeln!(
        out,
        "\n## Conditions\n\n| condition | value |\n| --- | --- |"
    );
    let mut condition = |name: &str, value: Option<String>| {
        let _ = writeln!(
            out,
            "| {name} | {} |",
            md_escape(&value.unwrap_or_else(|| "-".into()))
        );
    };
    condition(
        "shared-memory carveout",
        c.shared_memory_carveout_percent.map(|p| format!("{p} %")),
    );
    condition("measured SM clock", c.sm_clock_mhz.map(|v| v.to_string()));
    condition("date", c.date.clone());
    condition("tool", c.tool.clone());
    condition("tool version", c.tool_version.clone());
    condition("remark", c.remark.clone());
    if let Some(run) = &topo.run {
        let _ = writeln!(out, "\n## Run\n\n| condition | value |\n| --- | --- |");
        for (name, value) in run.fields() {
            if !value.is_empty() && value != "-" {
                let _ = writeln!(out, "| {name} | {} |", md_escape(&value));
            }
        }
    }

    let mut notes = Footnotes {
        entries: Vec::new(),
    };
    let rows = rows(topo, &mut notes);
    let _ = writeln!(out, "\n## Elements\n");
    let _ = writeln!(out, "| {} |", HEADERS.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(HEADERS.len()));
    for row in &rows {
        let cells: Vec<String> = row_cells(row)
            .iter()
            .map(|c| md_escape(c.trim_start()))
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    unreferenced_not_measured(topo, &mut notes);
    if !notes.entries.is_empty() {
        out.push('\n');
        for (i, entry) in notes.entries.iter().enumerate() {
            let _ = writeln!(out, "{}. \\[{}\\] {}", i + 1, i + 1, md_escape(entry));
        }
    }

    if let Some(p) = topo.l2_partitions() {
        let _ = writeln!(out, "\n## L2 partitions as one SM sees them\n");
        if let Some(count) = p.count {
            let _ = writeln!(out, "- partitions: {} ({})", count.value, count.provenance);
        }
        if let Some(each) = &p.size_each {
            let _ = writeln!(out, "- size of each: {each} ({})", each.provenance);
        }
        if let Some(far) = &p.far_size {
            let _ = writeln!(out, "- far side: {far} ({})", far.provenance);
        }
        if let Some(copies) = p.near_keeps_far_copies {
            let _ = writeln!(
                out,
                "- the near partition {} copies of far lines",
                if copies { "keeps" } else { "keeps no" }
            );
        }
        if let (Some(penalty), Some(ratio)) = (p.far_penalty(), p.far_ratio()) {
            let _ = writeln!(
                out,
                "- a far hit costs {penalty:.1} cycles more than a near one ({ratio:.2}×)"
            );
        }
    }

    let _ = writeln!(out, "\n## Latency distributions\n");
    let _ = writeln!(
        out,
        "| element | mean (cycles) | p50 | p95 | stdev | samples | mean (ns) | provenance |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut latency_row = |name: &str, latency: &Latency| {
        let _ = writeln!(
            out,
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {} |",
            latency.mean.0,
            latency.p50.0,
            latency.p95.0,
            latency.stdev.0,
            latency.samples,
            ns_cell(topo, latency),
            latency.provenance
        );
    };
    for (kind, element) in topo.elements.iter() {
        if let Some(latency) = &element.latency {
            latency_row(kind.display_name(), latency);
        }
        if let Some(p) = &element.partitions {
            if let Some(latency) = &p.near_latency {
                latency_row("L2 near partition", latency);
            }
            if let Some(latency) = &p.far_latency {
                latency_row("L2 far partition", latency);
            }
        }
    }

    let _ = writeln!(out, "\n## Sizes and their evidence\n");
    let _ = writeln!(
        out,
        "| element | quantity | value | provenance | confidence | p-value | statistic | method |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    let number = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.4}"));
    for (kind, element) in topo.elements.iter() {
        let sizes = [
            ("size", element.size.as_ref()),
            ("line size", element.line_size.as_ref()),
            ("fetch granularity", element.fetch_granularity.as_ref()),
            ("sector size", element.sector_size.as_ref()),
            (
                "partition size",
                element
                    .partitions
                    .as_ref()
                    .and_then(|p| p.size_each.as_ref()),
            ),
            (
                "far side size",
                element
                    .partitions
                    .as_ref()
                    .and_then(|p| p.far_size.as_ref()),
            ),
        ];
        for (name, size) in sizes {
            let Some(size) = size else { continue };
            let e = size.evidence.clone().unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {name} | {} | {} | {} | {} | {} | {} |",
                kind.display_name(),
                size,
                size.provenance,
                number(e.confidence),
                number(e.p_value),
                number(e.statistic),
                md_escape(e.method.as_deref().unwrap_or("-"))
            );
        }
        for entry in &element.size_per_carveout {
            let _ = writeln!(
                out,
                "| {} | size at {} | {} | {} | - | - | - | - |",
                kind.display_name(),
                carveout_row_label(entry),
                entry.l1_size,
                entry.l1_size.provenance
            );
        }
    }

    let _ = writeln!(out, "\n## Relations\n");
    if topo.shared_physical_caches.is_empty() {
        let _ = writeln!(
            out,
            "- no logical caches were found to share a physical cache"
        );
    }
    for group in &topo.shared_physical_caches {
        let names: Vec<_> = group.members.iter().map(|k| k.display_name()).collect();
        let _ = writeln!(
            out,
            "- one physical cache: {} ({})",
            names.join(", "),
            group.provenance
        );
    }
    for (kind, element) in topo.elements.iter() {
        if let Some(next) = element.backed_by {
            let _ = writeln!(out, "- {kind} misses go to {next}");
        }
    }

    let general = general_notes(topo);
    if !general.is_empty() {
        let _ = writeln!(out, "\n## Notes\n");
        for note in general {
            let _ = writeln!(out, "- {}", md_escape(&note));
        }
    }
    out
}

/// How a row of the L1's carveout table is named: the shared memory in force, the carveout
/// and shared bytes the kernel asked for, and what the row is.
pub fn carveout_row_label(entry: &crate::model::CarveoutL1Size) -> String {
    let mut parts = Vec::new();
    if let Some(shared) = entry.shared_memory_bytes {
        parts.push(format!("{} shared", shared));
    }
    match entry.carveout_percent {
        Some(p) => parts.push(format!("carveout {p} % requested")),
        None => parts.push("no carveout requested".to_string()),
    }
    if let Some(kernel) = entry.kernel_shared_bytes {
        parts.push(format!("{kernel} per block"));
    }
    let what = parts.join(", ");
    match entry.role {
        Some(role) if role != CarveoutRole::Configuration => {
            format!("{} ({what})", role.label())
        }
        _ => what,
    }
}
