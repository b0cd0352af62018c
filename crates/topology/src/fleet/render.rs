//! A fleet document as a terminal table, Markdown and HTML: the GPUs side by side with
//! their key values, the flags with the values beside each other, the failures, each
//! model's spread, and each node's peer links.

use std::fmt::Write as _;

use super::{Fleet, FleetKind, GpuEntry, KeyValue, PeerLink, Severity, ValueKind};
use crate::render::{escape, number, STYLE};

/// The columns of the side-by-side table: (path, header).
const KEY_COLUMNS: [(&str, &str); 7] = [
    ("conditions.sm_clock_mhz", "SM clock"),
    ("elements.l1_data.size", "L1 size"),
    ("elements.l1_data.latency", "L1 latency"),
    ("elements.l2.size", "L2 size"),
    ("elements.l2.latency", "L2 latency"),
    ("elements.device_memory.latency", "memory latency"),
    ("device.memory_bytes", "memory"),
];

/// Rows of text cells with a header row.
struct Grid {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    fn new(headers: &[&str]) -> Grid {
        Grid {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    fn text(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            format!("{}\n", padded.join("  ").trim_end())
        };
        let mut out = line(&self.headers);
        let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
        out.push_str(&line(&rule));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }

    fn markdown(&self) -> String {
        let cell = |c: &String| c.replace('|', "\\|");
        let mut out = format!(
            "| {} |\n|{}\n",
            self.headers
                .iter()
                .map(cell)
                .collect::<Vec<_>>()
                .join(" | "),
            " --- |".repeat(self.headers.len())
        );
        for row in &self.rows {
            let _ = writeln!(
                out,
                "| {} |",
                row.iter().map(cell).collect::<Vec<_>>().join(" | ")
            );
        }
        out
    }

    fn html(&self) -> String {
        let mut out = String::from("<table><tr>");
        for h in &self.headers {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for c in row {
                let _ = write!(out, "<td>{}</td>", escape(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        out
    }
}

/// A value of `gpu`, marked `⚑` where it is flagged degraded and `≠` where it differs.
fn cell(fleet: &Fleet, gpu: &GpuEntry, path: &str) -> String {
    let Some(value) = gpu.values.get(path) else {
        return "-".into();
    };
    let flag = fleet
        .flags
        .iter()
        .find(|f| f.path == path && f.is_about(gpu));
    match flag.map(|f| f.severity) {
        Some(Severity::Degraded) => format!("{} ⚑", value.display()),
        Some(Severity::Differs) => format!("{} ≠", value.display()),
        None => value.display(),
    }
}

/// `2 degraded, 1 differs`.
fn flag_counts(fleet: &Fleet) -> String {
    let degraded = fleet.degraded().count();
    format!(
        "{degraded} degraded, {} differ(s)",
        fleet.flags.len() - degraded
    )
}

fn plain(kind: ValueKind, x: f64) -> String {
    KeyValue {
        kind,
        value: x,
        bound: super::ValueBound::Exact,
        high: None,
        error: None,
    }
    .display()
}

/// The sections of a report, each a title and its grid or lines.
enum Part {
    Grid(String, Grid),
    Lines(String, Vec<String>),
}

fn title(fleet: &Fleet) -> String {
    let nodes = fleet
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect::<Vec<_>>();
    match fleet.kind {
        FleetKind::Node => format!(
            "Node {}: {} GPU(s) measured, {} failed, {}",
            nodes.first().copied().unwrap_or("?"),
            fleet.gpus.len(),
            fleet.failures.len(),
            flag_counts(fleet)
        ),
        FleetKind::Fleet => format!(
            "Fleet: {} GPU(s) on {} node(s), {} failed, {}",
            fleet.gpus.len(),
            fleet.nodes.len().max(distinct_nodes(fleet)),
            fleet.failures.len(),
            flag_counts(fleet)
        ),
    }
}

fn distinct_nodes(fleet: &Fleet) -> usize {
    let mut names: Vec<&str> = fleet
        .gpus
        .iter()
        .filter_map(|g| g.node.as_deref())
        .collect();
    names.sort_unstable();
    names.dedup();
    names.len()
}

fn link_row(link: &PeerLink) -> Vec<String> {
    let latency = |l: Option<&crate::quantity::Latency>| match (l, link.nanoseconds(l)) {
        (Some(l), Some(ns)) => format!("{:.0} cycles ({} ns)", l.mean.0, number(ns)),
        (Some(l), None) => format!("{:.0} cycles", l.mean.0),
        _ => "-".into(),
    };
    vec![
        format!("{} → {}", link.from, link.to),
        if link.peer_access { "yes" } else { "no" }.into(),
        link.nvlink_links.map_or_else(
            || "-".into(),
            |n| if n == 0 { "none".into() } else { n.to_string() },
        ),
        latency(link.latency_warm.as_ref()),
        latency(link.latency_cold.as_ref()),
        link.copy_gib_per_s
            .map_or_else(|| "-".into(), |b| format!("{} GiB/s", number(b))),
        link.notes.join("; "),
    ]
}

fn parts(fleet: &Fleet, full: bool) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut headers = vec!["GPU", "node", "#", "model", "exit"];
    headers.extend(KEY_COLUMNS.iter().map(|(_, h)| *h));
    let mut gpus = Grid::new(&headers);
    for gpu in &fleet.gpus {
        let mut row = vec![
            gpu.label(),
            gpu.node.clone().unwrap_or_else(|| "-".into()),
            gpu.device_index
                .map_or_else(|| "-".into(), |i| i.to_string()),
            gpu.model.clone(),
            gpu.exit_code.map_or_else(|| "-".into(), |c| c.to_string()),
        ];
        row.extend(KEY_COLUMNS.iter().map(|(path, _)| cell(fleet, gpu, path)));
        gpus.rows.push(row);
    }
    parts.push(Part::Grid("GPUs".into(), gpus));

    let mut flags = Grid::new(&[
        "GPU",
        "node",
        "flag",
        "quantity",
        "value",
        "median",
        "allowed",
        "the others",
    ]);
    for f in &fleet.flags {
        let others: Vec<String> = f.siblings.iter().map(|s| plain(f.kind, s.value)).collect();
        flags.rows.push(vec![
            f.label(),
            f.node.clone().unwrap_or_else(|| "-".into()),
            f.severity.as_str().into(),
            f.path.clone(),
            plain(f.kind, f.value),
            plain(f.kind, f.median),
            format!(
                "{} … {}",
                plain(f.kind, f.allowed[0].max(0.0)),
                plain(f.kind, f.allowed[1])
            ),
            others.join(", "),
        ]);
    }
    if flags.rows.is_empty() {
        parts.push(Part::Lines(
            "Flags".into(),
            vec!["none: every value lies within its model's spread".into()],
        ));
    } else {
        parts.push(Part::Grid("Flags".into(), flags));
    }

    if !fleet.failures.is_empty() {
        let mut failures = Grid::new(&["node", "#", "GPU", "exit", "error"]);
        for f in &fleet.failures {
            failures.rows.push(vec![
                f.node.clone().unwrap_or_else(|| "-".into()),
                f.device_index.map_or_else(|| "-".into(), |i| i.to_string()),
                f.uuid.clone().unwrap_or_else(|| "-".into()),
                f.exit_code.to_string(),
                f.error.clone(),
            ]);
        }
        parts.push(Part::Grid("Not measured".into(), failures));
    }

    for node in &fleet.nodes {
        if node.links.is_empty() {
            if !node.notes.is_empty() {
                parts.push(Part::Lines(
                    format!("Node {}", node.name),
                    node.notes.clone(),
                ));
            }
            continue;
        }
        let mut links = Grid::new(&[
            "reader → owner",
            "peer access",
            "NVLink links",
            "latency, warm",
            "latency, cold",
            "peer copy",
            "notes",
        ]);
        links.rows.extend(node.links.iter().map(link_row));
        parts.push(Part::Grid(
            format!("Interconnect of node {}", node.name),
            links,
        ));
        if !node.notes.is_empty() {
            parts.push(Part::Lines(
                format!("Node {}", node.name),
                node.notes.clone(),
            ));
        }
    }

    for model in &fleet.models {
        let name = format!("Spread over {} GPU(s) of {}", model.gpus.len(), model.model);
        if let Some(note) = &model.note {
            parts.push(Part::Lines(name, vec![note.clone()]));
            continue;
        }
        let mut spread = Grid::new(&["quantity", "GPUs", "median", "MAD", "min", "max", "flagged"]);
        let mut equal = 0;
        for q in &model.quantities {
            if !full && q.min == q.max {
                equal += 1;
                continue;
            }
            let flagged = fleet
                .flags
                .iter()
                .filter(|f| f.model == model.model && f.path == q.path)
                .count();
            spread.rows.push(vec![
                q.path.clone(),
                q.gpus.to_string(),
                plain(q.kind, q.median),
                number(q.mad),
                plain(q.kind, q.min),
                plain(q.kind, q.max),
                flagged.to_string(),
            ]);
        }
        if spread.rows.is_empty() {
            parts.push(Part::Lines(
                name,
                vec![format!("all {equal} quantities are equal on every GPU")],
            ));
        } else if equal > 0 {
            let name = format!("{name} ({equal} further quantities equal on every GPU)");
            parts.push(Part::Grid(name, spread));
        } else {
            parts.push(Part::Grid(name, spread));
        }
    }
    if !fleet.notes.is_empty() {
        parts.push(Part::Lines("Notes".into(), fleet.notes.clone()));
    }
    parts
}

/// The document as a terminal table.
///
/// ```
/// use topology::fleet::*;
/// let fleet = Fleet::build(FleetKind::Fleet, Vec::new(), Vec::new(), Vec::new(), SpreadOptions::default());
/// assert!(table(&fleet).starts_with("Fleet: 0 GPU(s)"));
/// ```
pub fn table(fleet: &Fleet) -> String {
    let mut out = format!("{}\n", title(fleet));
    for part in parts(fleet, false) {
        match part {
            Part::Grid(name, grid) => {
                let _ = write!(out, "\n{name}\n{}", grid.text());
            }
            Part::Lines(name, lines) => {
                let _ = writeln!(out, "\n{name}");
                for line in lines {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
    }
    out
}

/// The document as Markdown.
pub fn markdown(fleet: &Fleet) -> String {
    let mut out = format!("# {}\n", title(fleet));
    for part in parts(fleet, true) {
        match part {
            Part::Grid(name, grid) => {
                let _ = write!(out, "\n## {name}\n\n{}", grid.markdown());
            }
            Part::Lines(name, lines) => {
                let _ = writeln!(out, "\n## {name}\n");
                for line in lines {
                    let _ = writeln!(out, "- {}", line.replace('|', "\\|"));
                }
            }
        }
    }
    out
}

/// The document as one self-contained HTML file (the style of [`crate::render::html`]).
pub fn html(fleet: &Fleet) -> String {
    let name = title(fleet);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title>\
         <style>{STYLE}</style></head>\n<body>\n<h1>{0}</h1>\n",
        escape(&name)
    );
    for part in parts(fleet, true) {
        match part {
            Part::Grid(name, grid) => {
                let _ = write!(out, "<h2>{}</h2>\n{}", escape(&name), grid.html());
            }
            Part::Lines(name, lines) => {
                let _ = write!(out, "<h2>{}</h2>\n<ul>", escape(&name));
                for line in lines {
                    let _ = write!(out, "<li>{}</li>", escape(&line));
                }
                out.push_str("</ul>\n");
            }
        }
    }
    out.push_str("</body></html>\n");
    out
}
