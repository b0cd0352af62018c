//! The HTML report: one self-contained file (inline SVG and CSS, no script, nothing
//! fetched) that a person opens in any browser.

use std::fmt::Write as _;

use super::markdown::{condition_rows, device_properties, evidence_rows, latency_rows};
use super::plot::{curve_svg, escape, histogram_svg, size_label, strip_svg};
use super::store::unified_store;
use super::{
    busy_banner, carveout_row_label, general_notes, headline, row_cells, rows,
    unreferenced_not_measured, Footnotes, HEADERS,
};
use crate::model::{CarveoutRole, ElementKind, Topology};
use crate::raw::{Curve, RawData};

pub(crate) const STYLE: &str = "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;color:#0f172a;\
max-width:1060px;margin:24px auto;padding:0 16px;line-height:1.4}\
h1{font-size:26px;margin-bottom:4px}h2{font-size:19px;margin-top:32px;border-bottom:1px solid #cbd5e1}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}\
th,td{border:1px solid #cbd5e1;padding:3px 8px;text-align:left;vertical-align:middle}\
th{background:#f1f5f9}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}\
.banner{background:#fee2e2;border:2px solid #b91c1c;color:#7f1d1d;padding:8px;font-weight:bold}\
.sub{color:#475569}.grid{display:flex;flex-wrap:wrap;gap:12px}\
figure{margin:0;border:1px solid #e2e8f0;padding:6px;width:500px}figcaption{font-size:12px;color:#475569}\
svg{max-width:100%;height:auto}svg.strip{vertical-align:middle}";

/// A self-contained HTML report of `topo`: the diagram, the element table, latency
/// distributions (a quartile strip per latency), sizes with their evidence, the L1 at every
/// carveout, and the run's conditions; with `raw` (a `--keep-raw` directory read by
/// [`crate::raw::load_dir`], or curves the caller has), every raw curve on a log-scale size
/// axis with its change points and levels, and the L2 sweep's per-load histograms.
///
/// A curve whose [`Curve::change_points`] is empty gets them from the topology: the size
/// its name (`<element>-size-<setting>`, as `memtopo --keep-raw` names the files) stands
/// for (`l1-size-8_KiB_shared_config` → the L1 measured beside 8 KiB of shared memory,
/// `l2-size` → the near L2 partition).
///
/// ```
/// use topology::{raw, render, *};
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// topo.element_mut(ElementKind::L2).set_size(Size::api(Bytes::mib(50)));
/// let alone = render::html(&topo, None);
/// assert!(alone.starts_with("<!DOCTYPE html>") && alone.contains("50 MiB"));
/// let text = "bytes,replica,smid,mean_cycles_per_load\n1024,0,,30\n2048,0,,31\n4096,0,,290\n";
/// let curve = raw::Curve {
///     name: "l1-size".into(),
///     points: raw::read_curve_csv(text)?,
///     change_points: vec![4096],
/// };
/// let data = raw::RawData { curves: vec![curve], level_samples: Vec::new() };
/// let report = render::html(&topo, Some(&data));
/// assert!(report.contains("change 4 KiB"));
/// assert!(!report.contains("<script"));
/// # Ok::<(), raw::RawCsvError>(())
/// ```
pub fn html(topo: &Topology, raw: Option<&RawData>) -> String {
    let title = format!("Memory topology of {}", topo.device.name);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        escape(&title)
    );
    let _ = writeln!(
        out,
        "<h1>{}</h1><p class=\"sub\">{}</p>",
        escape(&title),
        escape(&headline(topo))
    );
    if let Some(banner) = busy_banner(topo) {
        let _ = writeln!(out, "<p class=\"banner\">{}</p>", escape(&banner));
    }
    let _ = writeln!(out, "<h2>Diagram</h2>\n{}", super::svg(topo));
    elements(&mut out, topo);
    let l2: Vec<String> = super::l2_address_line(topo)
        .into_iter()
        .chain(super::l2_ways_line(topo))
        .collect();
    if !l2.is_empty() {
        let _ = writeln!(out, "<h2>L2 partitions</h2><ul>");
        for line in l2 {
            let _ = writeln!(out, "<li>{}</li>", escape(&line));
        }
        let _ = writeln!(out, "</ul>");
    }
    let bandwidth = super::bandwidth::rows(topo);
    if !bandwidth.is_empty() {
        let _ = writeln!(out, "<h2>Bandwidth</h2>");
        table(
            &mut out,
            &super::bandwidth::HEADERS,
            &[1, 2, 3],
            bandwidth.into_iter().map(|r| r.to_vec()),
        );
    }
    let copies = super::copies::rows(topo);
    if !copies.is_empty() {
        let _ = writeln!(out, "<h2>Copies from global to shared memory</h2>");
        table(
            &mut out,
            &super::copies::HEADERS,
            &[2, 3, 4],
            copies.into_iter().map(|r| r.to_vec()),
        );
    }
    for line in super::copies::lines(topo) {
        let _ = writeln!(out, "<p>{}</p>", escape(&line));
    }
    carveout(&mut out, topo);
    let geometry = super::geometry_lines(topo);
    if !geometry.is_empty() {
        let _ = writeln!(out, "<h2>Sets, ways and replacement</h2>");
        table(
            &mut out,
            &["element", "evidence"],
            &[],
            super::geometry::evidence_lines(topo)
                .into_iter()
                .map(|(label, line)| vec![label, line]),
        );
        let _ = writeln!(out, "<ul>");
        for line in geometry {
            let _ = writeln!(out, "<li>{}</li>", escape(&line));
        }
        let _ = writeln!(out, "</ul>");
    }
    latencies(&mut out, topo);
    if !topo.instruction_caches.is_empty() {
        let _ = writeln!(out, "<h2>Instruction caches</h2><ul>");
        for level in &topo.instruction_caches {
            let _ = writeln!(out, "<li>{}</li>", escape(&level.describe()));
        }
        let _ = writeln!(out, "</ul>");
    }
    for (title, method, rows) in super::sections::html_tables(topo) {
        let _ = writeln!(out, "<h2>{}</h2>", escape(title));
        if let Some(method) = method {
            let _ = writeln!(out, "<p>{}</p>", escape(method));
        }
        table(
            &mut out,
            &["quantity", "value", "provenance"],
            &[1],
            rows.into_iter(),
        );
    }
    let _ = writeln!(out, "<h2>Sizes and their evidence</h2>");
    let head = [
        "element",
        "quantity",
        "value",
        "provenance",
        "confidence",
        "p-value",
        "statistic",
        "method",
    ];
    table(
        &mut out,
        &head,
        &[2, 4, 5, 6],
        evidence_rows(topo).iter().map(|r| r.to_vec()),
    );
    curves(&mut out, topo, raw);
    conditions(&mut out, topo);
    out.push_str("</body></html>\n");
    out
}

/// A table; the cells of the `numeric` columns are right-aligned.
fn table(
    out: &mut String,
    head: &[&str],
    numeric: &[usize],
    rows: impl Iterator<Item = Vec<String>>,
) {
    out.push_str("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.into_iter().enumerate() {
            let class = if numeric.contains(&i) {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

fn elements(out: &mut String, topo: &Topology) {
    let mut notes = Footnotes {
        entries: Vec::new(),
    };
    let rows = rows(topo, &mut notes);
    let _ = writeln!(out, "<h2>Elements</h2>");
    table(
        out,
        &HEADERS,
        &[1, 2, 3, 4, 6],
        rows.iter()
            .map(|r| row_cells(r).iter().map(|c| c.to_string()).collect()),
    );
    unreferenced_not_measured(topo, &mut notes);
    if !notes.entries.is_empty() {
        out.push_str("<ol>");
        for entry in &notes.entries {
            let _ = write!(out, "<li>{}</li>", escape(entry));
        }
        out.push_str("</ol>\n");
    }
    let groups: Vec<String> = topo
        .shared_physical_caches
        .iter()
        .map(|g| {
            let names: Vec<&str> = g.members.iter().map(|k| k.display_name()).collect();
            format!(
                "one physical cache: {} ({})",
                names.join(", "),
                g.provenance
            )
        })
        .collect();
    let mut general = super::tlb_lines(topo);
    general.extend(general_notes(topo));
    if !groups.is_empty() || !general.is_empty() {
        out.push_str("<ul>");
        for line in groups.iter().chain(&general) {
            let _ = write!(out, "<li>{}</li>", escape(line));
        }
        out.push_str("</ul>\n");
    }
}

fn carveout(out: &mut String, topo: &Topology) {
    let Some(l1) = topo.element(ElementKind::L1Data) else {
        return;
    };
    if l1.size_per_carveout.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>The L1 at every carveout</h2>");
    if let Some(store) = unified_store(topo) {
        let _ = writeln!(out, "<p>{}.</p>", escape(&store.summary()));
    }
    let rows = l1.size_per_carveout.iter().map(|row| {
        let shared = row.shared_memory_bytes.map(|b| b.0);
        let l1 = row.l1_size.bound.exact().map(|b| b.0);
        vec![
            carveout_row_label(row),
            row.l1_size.to_string(),
            match (shared, l1) {
                (Some(s), Some(l)) => size_label((s + l) as f64),
                _ => "-".to_owned(),
            },
            match row.role {
                Some(CarveoutRole::LargestL1) => "largest L1".to_owned(),
                Some(CarveoutRole::DriverDefault) => "driver default".to_owned(),
                _ => String::new(),
            },
        ]
    });
    table(
        out,
        &["configuration", "L1", "L1 + shared", "role"],
        &[1, 2],
        rows,
    );
}

fn latencies(out: &mut String, topo: &Topology) {
    let rows = latency_rows(topo);
    if rows.is_empty() {
        return;
    }
    // One log axis for every strip, so they compare at a glance.
    let lo = rows
        .iter()
        .map(|(l, _)| l.p25.unwrap_or(l.p50).0.min(l.mean.0))
        .fold(f64::INFINITY, f64::min)
        .max(1.0)
        / 1.15;
    let hi = rows
        .iter()
        .map(|(l, _)| l.p95.0.max(l.mean.0))
        .fold(0.0, f64::max)
        * 1.15;
    let _ = writeln!(
        out,
        "<h2>Latency distributions</h2><p class=\"sub\">Strip: box p25–p75, bar the median, \
         whisker to p95, red dot the mean, on one log axis from {} to {} cycles. A result \
         written before schema 1.4 has no quartiles (no box).</p>",
        super::number(lo),
        super::number(hi)
    );
    let head = [
        "element",
        "median (cycles)",
        "p25",
        "p75",
        "p95",
        "mean",
        "stdev",
        "samples",
        "median (ns)",
        "provenance",
        "distribution",
    ];
    out.push_str("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr>\n");
    for (latency, cells) in &rows {
        out.push_str("<tr>");
        for (i, cell) in cells.iter().enumerate() {
            let class = if (1..9).contains(&i) {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        let _ = writeln!(out, "<td>{}</td></tr>", strip_svg(latency, lo, hi));
    }
    out.push_str("</table>\n");
}

/// The change points of a curve: its own, else the topology's size its name stands for.
fn changes_of(topo: &Topology, curve: &Curve) -> (Vec<u64>, &'static str) {
    if !curve.change_points.is_empty() {
        return (curve.change_points.clone(), "detected in this run");
    }
    let name = curve.name.replace(' ', "_");
    let kinds = [
        ("constant-l15-size", ElementKind::ConstantL15),
        ("constant-l1-size", ElementKind::ConstantL1),
        ("texture-size", ElementKind::Texture),
        ("readonly-size", ElementKind::ReadOnly),
        ("l1-size", ElementKind::L1Data),
        ("shared-size", ElementKind::SharedMemory),
        ("l2-size", ElementKind::L2),
    ];
    let Some((prefix, kind)) = kinds.iter().find(|(p, _)| name.starts_with(p)) else {
        return (Vec::new(), "none known");
    };
    let Some(element) = topo.element(*kind) else {
        return (Vec::new(), "none known");
    };
    let setting = name[prefix.len()..].trim_start_matches('-');
    let row = element.size_per_carveout.iter().find(|row| {
        match setting.strip_suffix("_KiB_shared_config") {
            Some(kib) => row
                .shared_memory_bytes
                .is_some_and(|b| kib.parse::<u64>().is_ok_and(|k| b.0 == k * 1024)),
            None if setting == "driver_default" => row.role == Some(CarveoutRole::DriverDefault),
            None if setting == "max_L1" => row.role == Some(CarveoutRole::LargestL1),
            None => false,
        }
    });
    let size = match (row, *kind) {
        (Some(row), _) => Some(&row.l1_size),
        (None, ElementKind::L2) => topo
            .l2_partitions()
            .and_then(|p| p.size_each.as_ref())
            .or(element.size.as_ref()),
        (None, _) => element.size.as_ref(),
    };
    match size.and_then(|s| s.bound.exact()) {
        Some(bytes) => (vec![bytes.0], "the result's size"),
        None => (Vec::new(), "none known"),
    }
}

fn curves(out: &mut String, topo: &Topology, raw: Option<&RawData>) {
    let _ = writeln!(out, "<h2>Raw curves</h2>");
    let Some(raw) = raw.filter(|r| !r.curves.is_empty() || !r.level_samples.is_empty()) else {
        let _ = writeln!(
            out,
            "<p>No raw curves: measure with <code>--keep-raw DIR</code> and render the result \
             with that directory to see every sweep.</p>"
        );
        return;
    };
    let _ = writeln!(
        out,
        "<p class=\"sub\">Dots: each replica's mean cycles per load; line: the median per \
         size; red: the change point; dashed: the level (median) of each segment. Sizes on a \
         log scale; the latency axis is fitted to the data.</p>"
    );
    out.push_str("<div class=\"grid\">\n");
    for curve in &raw.curves {
        let (changes, source) = changes_of(topo, curve);
        let sizes: Vec<String> = changes.iter().map(|&c| size_label(c as f64)).collect();
        let _ = writeln!(
            out,
            "<figure>{}<figcaption>{} · {} points · change points ({source}): {}</figcaption></figure>",
            curve_svg(curve, &changes),
            escape(&curve.name),
            curve.points.len(),
            if sizes.is_empty() { "none".to_owned() } else { escape(&sizes.join(", ")) }
        );
    }
    out.push_str("</div>\n");
    if raw.level_samples.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2>L2 sweep: per-load latency by level</h2><div class=\"grid\">"
    );
    let mut levels: Vec<&str> = Vec::new();
    for s in &raw.level_samples {
        let name = s.level.as_deref().unwrap_or("between levels");
        if !levels.contains(&name) {
            levels.push(name);
        }
    }
    for level in levels {
        let values: Vec<f64> = raw
            .level_samples
            .iter()
            .filter(|s| s.level.as_deref().unwrap_or("between levels") == level)
            .map(|s| s.cycles)
            .collect();
        out.push_str(&histogram_svg(level, &values));
        out.push('\n');
    }
    out.push_str("</div>\n");
}

fn conditions(out: &mut String, topo: &Topology) {
    let pairs = |rows: Vec<(&'static str, String)>| {
        rows.into_iter()
            .map(|(k, v)| vec![k.to_owned(), v])
            .collect::<Vec<_>>()
    };
    let _ = writeln!(out, "<h2>Run conditions</h2>");
    table(
        out,
        &["condition", "value"],
        &[],
        pairs(condition_rows(topo)).into_iter(),
    );
    if let Some(run) = &topo.run {
        for line in run.summary() {
            let _ = writeln!(out, "<p>{}</p>", escape(&line));
        }
        let rows = run
            .fields()
            .into_iter()
            .filter(|(_, v)| !v.is_empty() && v != "-")
            .map(|(k, v)| vec![k, v]);
        table(out, &["recorded", "value"], &[], rows);
    }
    let _ = writeln!(out, "<h2>Device</h2>");
    table(
        out,
        &["property", "value"],
        &[],
        pairs(device_properties(topo)).into_iter(),
    );
}
