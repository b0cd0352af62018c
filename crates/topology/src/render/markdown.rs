//! The Markdown report.

use std::fmt::Write as _;

use super::{
    busy_banner, general_notes, headline, ns_cell, number, p_value, row_cells, rows,
    unreferenced_not_measured, Footnotes, HEADERS,
};
use crate::model::{CarveoutRole, Topology};
use crate::quantity::Latency;
use crate::units::Cycles;

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
    for (name, value) in device_properties(topo) {
        let _ = writeln!(out, "| {name} | {} |", md_escape(&value));
    }

    let _ = writeln!(
        out,
        "\n## Conditions\n\n| condition | value |\n| --- | --- |"
    );
    for (name, value) in condition_rows(topo) {
        let _ = writeln!(out, "| {name} | {} |", md_escape(&value));
    }
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

    let bandwidth = super::bandwidth::rows(topo);
    if !bandwidth.is_empty() {
        let _ = writeln!(out, "\n## Bandwidth\n");
        let _ = writeln!(out, "| {} |", super::bandwidth::HEADERS.join(" | "));
        let _ = writeln!(out, "|{}", " --- |".repeat(super::bandwidth::HEADERS.len()));
        for row in &bandwidth {
            let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }

    let copies = super::copies::rows(topo);
    let copy_lines = super::copies::lines(topo);
    if !copies.is_empty() || !copy_lines.is_empty() {
        let _ = writeln!(out, "\n## Copies from global to shared memory\n");
        if !copies.is_empty() {
            let _ = writeln!(out, "| {} |", super::copies::HEADERS.join(" | "));
            let _ = writeln!(out, "|{}", " --- |".repeat(super::copies::HEADERS.len()));
            for row in &copies {
                let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
                let _ = writeln!(out, "| {} |", cells.join(" | "));
            }
        }
        for line in copy_lines {
            let _ = writeln!(out, "- {}", md_escape(&line));
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
                "- a far hit costs {} cycles more than a near one ({}×)",
                number(penalty),
                number(ratio)
            );
        }
        for line in super::l2_address_line(topo)
            .into_iter()
            .chain(super::l2_ways_line(topo))
        {
            let _ = writeln!(out, "- {}", md_escape(&line));
        }
    }

    let _ = writeln!(out, "\n## Latency distributions\n");
    let _ = writeln!(
        out,
        "| element | median (cycles) | p25 | p75 | p95 | mean | stdev | samples | median (ns) | provenance |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for (_, cells) in latency_rows(topo) {
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }

    let _ = writeln!(out, "\n## Sizes and their evidence\n");
    let _ = writeln!(
        out,
        "| element | quantity | value | provenance | confidence | p-value | statistic | method |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for cells in evidence_rows(topo) {
        let cells: Vec<String> = cells.iter().map(|c| md_escape(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
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

    let clusters = super::cluster_lines(topo);
    if !clusters.is_empty() {
        let _ = writeln!(out, "\n## Thread-block clusters\n");
        for line in clusters {
            let _ = writeln!(out, "- {}", md_escape(&line));
        }
    }
    if !topo.instruction_caches.is_empty() {
        let _ = writeln!(
            out,
            "\n## Instruction caches\n\nOne warp's loop over straight-line code (16-byte instructions), nearest level first:\n"
        );
        for level in &topo.instruction_caches {
            let _ = writeln!(out, "- {}", md_escape(&level.describe()));
        }
    }
    super::geometry::markdown_section(topo, &mut out, md_escape);
    let tlb = super::tlb_lines(topo);
    if !tlb.is_empty() {
        let _ = writeln!(out, "\n## TLBs\n");
        for line in tlb {
            let _ = writeln!(out, "- {}", md_escape(&line));
        }
    }
    super::sections::markdown(topo, &mut out, md_escape);
    let general = general_notes(topo);
    if !general.is_empty() {
        let _ = writeln!(out, "\n## Notes\n");
        for note in general {
            let _ = writeln!(out, "- {}", md_escape(&note));
        }
    }
    out
}

/// The device's properties that are known, `(name, value)`, for the reports.
pub(super) fn device_properties(topo: &Topology) -> Vec<(&'static str, String)> {
    let d = &topo.device;
    let mut out = Vec::new();
    let mut property = |name: &'static str, value: Option<String>| {
        if let Some(value) = value {
            out.push((name, value));
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
    out
}

/// The run's conditions, `(name, value)`, `-` where unset.
pub(super) fn condition_rows(topo: &Topology) -> Vec<(&'static str, String)> {
    let c = &topo.conditions;
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    vec![
        (
            "shared-memory carveout",
            dash(c.shared_memory_carveout_percent.map(|p| format!("{p} %"))),
        ),
        (
            "measured SM clock",
            dash(c.sm_clock_mhz.map(|v| v.to_string())),
        ),
        ("date", dash(c.date.clone())),
        ("tool", dash(c.tool.clone())),
        ("tool version", dash(c.tool_version.clone())),
        ("remark", dash(c.remark.clone())),
    ]
}

/// One row per latency (elements, then L2 partitions): the latency and its cells
/// element, median, p25, p75, p95, mean, stdev, samples, median (ns), provenance.
pub(super) fn latency_rows(topo: &Topology) -> Vec<(Latency, [String; 10])> {
    let quartile = |q: Option<Cycles>| q.map_or_else(|| "-".to_owned(), |c| number(c.0));
    let row = |name: &str, latency: &Latency| {
        (
            latency.clone(),
            [
                name.to_owned(),
                number(latency.p50.0),
                quartile(latency.p25),
                quartile(latency.p75),
                number(latency.p95.0),
                number(latency.mean.0),
                number(latency.stdev.0),
                latency.samples.to_string(),
                ns_cell(topo, latency),
                latency.provenance.to_string(),
            ],
        )
    };
    let mut rows = Vec::new();
    for (kind, element) in topo.elements.iter() {
        if let Some(latency) = &element.latency {
            rows.push(row(&topo.label(kind), latency));
        }
        if let Some(p) = &element.partitions {
            if let Some(latency) = &p.near_latency {
                rows.push(row("L2 near partition", latency));
            }
            if let Some(latency) = &p.far_latency {
                rows.push(row("L2 far partition", latency));
            }
        }
    }
    rows
}

/// One row per size with its evidence: element, quantity, value, provenance, confidence,
/// p-value, statistic, method.
pub(super) fn evidence_rows(topo: &Topology) -> Vec<[String; 8]> {
    let mut rows = Vec::new();
    let optional = |v: Option<f64>, show: fn(f64) -> String| v.map_or_else(|| "-".to_owned(), show);
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
            rows.push([
                topo.label(kind),
                name.to_owned(),
                size.to_string(),
                size.provenance.to_string(),
                optional(e.confidence, number),
                optional(e.p_value, p_value),
                optional(e.statistic, number),
                e.method.clone().unwrap_or_else(|| "-".to_owned()),
            ]);
        }
        for entry in &element.size_per_carveout {
            let dash = || "-".to_owned();
            rows.push([
                topo.label(kind),
                format!("size at {}", carveout_row_label(entry)),
                entry.l1_size.to_string(),
                entry.l1_size.provenance.to_string(),
                dash(),
                dash(),
                dash(),
                dash(),
            ]);
        }
    }
    rows
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
