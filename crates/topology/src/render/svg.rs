//! The SVG diagram of the hierarchy (its boxes: `svg_blocks.rs`): one SM (standing for all of them) with its
//! private caches, the constant L1.5, the L2 split into near and far
//! partitions, and device memory, each annotated with size, line and latency.

use std::fmt::Write as _;

use crate::model::{ElementKind, Topology};
use crate::quantity::Size;

use super::number;
use super::svg_blocks::{
    element_lines, escape, latency_text, present, sm_blocks, Block, LINE_HEIGHT,
};

const WIDTH: f64 = 1000.0;
const MARGIN: f64 = 40.0;
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

fn arrow(out: &mut String, x: f64, y1: f64, y2: f64, label: &str) {
    let _ = writeln!(
        out,
        r##"<line x1="{x:.1}" y1="{y1:.1}" x2="{x:.1}" y2="{:.1}" stroke="#475569" stroke-width="2.5" marker-end="url(#arrow)"/>"##,
        y2 - 2.0
    );
    if !label.is_empty() {
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#475569">{}</text>"##,
            x + 10.0,
            (y1 + y2) / 2.0 + 4.0,
            escape(label)
        );
    }
}

/// The diagram as an SVG document.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// topo.element_mut(ElementKind::L2).set_size(Size::api(Bytes::mib(50)));
/// let svg = render::svg(&topo);
/// assert!(svg.starts_with("<svg"));
/// assert!(svg.contains("50 MiB"));
/// ```
pub fn svg(topo: &Topology) -> String {
    let d = &topo.device;
    let mut body = String::new();
    let inner_width = WIDTH - 2.0 * MARGIN;

    // Title.
    let _ = writeln!(
        body,
        r#"<text x="{MARGIN}" y="34" font-size="22" font-weight="bold">{} — memory topology</text>"#,
        escape(&d.name)
    );
    let mut subtitle = format!(
        "compute capability {} · {} SMs",
        d.compute_capability, d.sm_count
    );
    match (topo.conditions.sm_clock_mhz, d.sm_clock_mhz) {
        (Some(clock), _) => {
            let _ = write!(subtitle, " · SM clock {clock} (measured)");
        }
        (None, Some(clock)) => {
            let _ = write!(subtitle, " · SM clock {clock} (nominal)");
        }
        (None, None) => {}
    }
    if let Some(percent) = topo.conditions.shared_memory_carveout_percent {
        let _ = write!(subtitle, " · carveout {percent} %");
    }
    let _ = writeln!(
        body,
        r##"<text x="{MARGIN}" y="56" font-size="13" fill="#475569">{}</text>"##,
        escape(&subtitle)
    );
    let mut y = 76.0;
    if let Some(banner) = super::busy_banner(topo) {
        let _ = writeln!(
            body,
            r##"<text x="{MARGIN}" y="{y}" font-size="13" font-weight="bold" fill="#b91c1c">{}</text>"##,
            escape(&banner)
        );
        y += 20.0;
    }

    // The SM, drawn over two offset shadows that stand for the other SMs.
    let blocks = sm_blocks(topo);
    let gap = 14.0;
    let sm_padding = 16.0;
    let mut rows: Vec<Vec<(f64, &Block)>> = vec![Vec::new()];
    let mut row_width = 0.0;
    let usable = inner_width - 2.0 * sm_padding - 16.0;
    for block in &blocks {
        let width = block.width().min(usable);
        if row_width > 0.0 && row_width + gap + width > usable {
            rows.push(Vec::new());
            row_width = 0.0;
        }
        row_width += if row_width > 0.0 { gap + width } else { width };
        if let Some(row) = rows.last_mut() {
            row.push((width, block));
        }
    }
    // Stretch each row to the SM's width so the boxes read as one unit.
    for row in &mut rows {
        let natural: f64 = row.iter().map(|(w, _)| w).sum::<f64>() + gap * (row.len() as f64 - 1.0);
        let scale = usable / natural;
        if scale > 1.0 {
            for (width, _) in row.iter_mut() {
                *width *= scale;
            }
        }
    }
    let row_heights: Vec<f64> = rows
        .iter()
        .map(|r| r.iter().map(|(_, b)| b.height()).fold(0.0, f64::max))
        .collect();
    let sm_height = 40.0
        + row_heights.iter().sum::<f64>()
        + gap * (rows.len() as f64 - 1.0).max(0.0)
        + sm_padding;
    let sm_width = inner_width - 16.0;
    for shadow in [2.0, 1.0] {
        let _ = writeln!(
            body,
            r##"<rect x="{:.1}" y="{:.1}" width="{sm_width:.1}" height="{sm_height:.1}" rx="10" fill="#f1f5f9" stroke="#94a3b8"/>"##,
            MARGIN + 8.0 * shadow,
            y + 8.0 * shadow
        );
    }
    let _ = writeln!(
        body,
        r##"<rect x="{MARGIN}" y="{y:.1}" width="{sm_width:.1}" height="{sm_height:.1}" rx="10" fill="#ffffff" stroke="#334155" stroke-width="2"/>"##
    );
    let _ = writeln!(
        body,
        r#"<text x="{:.1}" y="{:.1}" font-size="16" font-weight="bold">Streaming multiprocessor (× {})</text>"#,
        MARGIN + sm_padding,
        y + 26.0,
        d.sm_count
    );
    let mut block_y = y + 40.0;
    for (row, height) in rows.iter().zip(&row_heights) {
        let mut block_x = MARGIN + sm_padding;
        for (width, block) in row {
            block.draw(&mut body, block_x, block_y, *width, *height);
            block_x += width + gap;
        }
        block_y += height + gap;
    }
    y += sm_height + 16.0;

    // Constant L1.5, between the SMs and L2 on the constant path.
    if present(topo, ElementKind::ConstantL15) {
        let block = Block {
            title: topo.label(ElementKind::ConstantL15),
            lines: element_lines(topo, ElementKind::ConstantL15),
            fill: "#f3e8ff",
            stroke: "#9333ea",
            store: None,
        };
        let width = block.width();
        let height = block.height();
        arrow(
            &mut body,
            MARGIN + inner_width - width / 2.0,
            y,
            y + 26.0,
            "",
        );
        block.draw(
            &mut body,
            MARGIN + inner_width - width,
            y + 28.0,
            width,
            height,
        );
        arrow(
            &mut body,
            MARGIN + 120.0,
            y,
            y + 28.0 + height + 26.0,
            "loads that miss the SM",
        );
        y += 28.0 + height;
        arrow(
            &mut body,
            MARGIN + inner_width - width / 2.0,
            y,
            y + 26.0,
            "",
        );
        y += 28.0;
    } else {
        arrow(
            &mut body,
            MARGIN + 120.0,
            y,
            y + 30.0,
            "loads that miss the SM",
        );
        y += 32.0;
    }

    // L2 and its partitions.
    if present(topo, ElementKind::L2) || d.l2_bytes.is_some() {
        let l2 = topo.element(ElementKind::L2);
        let mut title = "L2 cache".to_owned();
        let total = l2
            .and_then(|e| e.size.as_ref())
            .map(Size::to_string)
            .or_else(|| d.l2_bytes.map(|b| b.to_string()));
        if let Some(total) = total {
            let _ = write!(title, " · {total} total");
        }
        if let Some(line) = l2.and_then(|e| e.line_size.as_ref()) {
            let _ = write!(title, " · line {line}");
        }
        if let Some(latency) = l2.and_then(|e| e.latency.as_ref()) {
            let _ = write!(title, " · {}", latency_text(topo, latency));
        }
        let partitions = topo.l2_partitions();
        let count = partitions
            .and_then(|p| p.count)
            .map_or(1, |c| c.value.max(1)) as usize;
        let drawn = count.min(8);
        let part_height = if partitions.is_some() { 80.0 } else { 0.0 };
        let map_height = if partitions.is_some_and(|p| !p.sm_partition.is_empty()) {
            46.0
        } else {
            0.0
        };
        let l2_height =
            44.0 + part_height + map_height + if partitions.is_some() { 14.0 } else { 0.0 };
        let _ = writeln!(
            body,
            r##"<rect x="{MARGIN}" y="{y:.1}" width="{inner_width:.1}" height="{l2_height:.1}" rx="10" fill="#fff7ed" stroke="#ea580c" stroke-width="2"/>"##
        );
        let _ = writeln!(
            body,
            r#"<text x="{:.1}" y="{:.1}" font-size="16" font-weight="bold">{}</text>"#,
            MARGIN + 16.0,
            y + 27.0,
            escape(&title)
        );
        if let Some(p) = partitions {
            let px0 = MARGIN + 16.0;
            let pwidth = (inner_width - 32.0 - 12.0 * (drawn as f64 - 1.0)) / drawn as f64;
            let each = p.size_each.as_ref().map(Size::to_string);
            let far_size = p
                .far_size
                .as_ref()
                .map(Size::to_string)
                .or_else(|| each.clone());
            for i in 0..drawn {
                let near = i == 0;
                let px = px0 + i as f64 * (pwidth + 12.0);
                let py = y + 40.0;
                let (fill, stroke) = if near {
                    ("#dcfce7", "#16a34a")
                } else {
                    ("#ffedd5", "#ea580c")
                };
                let _ = writeln!(
                    body,
                    r#"<rect x="{px:.1}" y="{py:.1}" width="{pwidth:.1}" height="{part_height:.1}" rx="6" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>"#
                );
                let name = if near {
                    "near partition".to_owned()
                } else if count > drawn && i == drawn - 1 {
                    format!("far partitions (+{})", count - drawn + 1)
                } else {
                    "far partition".to_owned()
                };
                let latency = if near {
                    p.near_latency.as_ref()
                } else {
                    p.far_latency.as_ref()
                };
                let lines = [
                    Some(name),
                    if near { each.clone() } else { far_size.clone() },
                    latency.map(|l| latency_text(topo, l)),
                ];
                for (j, line) in lines.iter().flatten().enumerate() {
                    let weight = if j == 0 { r#" font-weight="bold""# } else { "" };
                    let _ = writeln!(
                        body,
                        r#"<text x="{:.1}" y="{:.1}" font-size="13"{weight}>{}</text>"#,
                        px + 10.0,
                        py + 22.0 + j as f64 * LINE_HEIGHT,
                        escape(line)
                    );
                }
            }
            if !p.sm_partition.is_empty() {
                sm_map(
                    &mut body,
                    p,
                    px0,
                    y + 40.0 + part_height + 8.0,
                    inner_width - 32.0,
                );
            }
            if let (Some(penalty), Some(ratio)) = (p.far_penalty(), p.far_ratio()) {
                let _ = writeln!(
                    body,
                    r##"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="end" fill="#9a3412">far hit: +{} cy ({}× near)</text>"##,
                    MARGIN + inner_width - 16.0,
                    y + 27.0,
                    number(penalty),
                    number(ratio)
                );
            }
        }
        y += l2_height;
        arrow(&mut body, MARGIN + 120.0, y + 2.0, y + 32.0, "");
        y += 34.0;
    }

    // The GPCs, where cluster placement gave them (schema 1.5).
    y += super::clusters::svg_gpcs(&mut body, topo, MARGIN, y, inner_width);
    // The instruction-fetch levels (schema 1.6).
    y += super::icache::svg_levels(&mut body, topo, MARGIN, y, inner_width);

    // Sets, ways and replacement (schema 1.6), one line per cache; then one line per
    // benchmark section (schema 1.8).
    for line in super::geometry_lines(topo)
        .into_iter()
        .chain(super::sections::svg_lines(topo))
    {
        let _ = writeln!(
            body,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#374151">{}</text>"##,
            MARGIN,
            y + 14.0,
            super::svg_blocks::escape(&line)
        );
        y += 18.0;
    }

    // Device memory.
    if present(topo, ElementKind::DeviceMemory) || d.memory_bytes.is_some() {
        let mut parts = vec!["Device memory".to_owned()];
        let size = topo
            .element(ElementKind::DeviceMemory)
            .and_then(|e| e.size.as_ref())
            .map(Size::to_string)
            .or_else(|| d.memory_bytes.map(|b| b.to_string()));
        parts.extend(size);
        parts.extend(d.memory_bus_width_bits.map(|b| format!("{b}-bit bus")));
        if let Some(latency) = topo
            .element(ElementKind::DeviceMemory)
            .and_then(|e| e.latency.as_ref())
        {
            parts.push(latency_text(topo, latency));
        }
        let _ = writeln!(
            body,
            r##"<rect x="{MARGIN}" y="{y:.1}" width="{inner_width:.1}" height="44" rx="10" fill="#e2e8f0" stroke="#334155" stroke-width="2"/>"##
        );
        let _ = writeln!(
            body,
            r#"<text x="{:.1}" y="{:.1}" font-size="16" font-weight="bold">{}</text>"#,
            MARGIN + 16.0,
            y + 28.0,
            escape(&parts.join(" · "))
        );
        y += 44.0;
    }

    // Footer: what was not measured, and how to read the numbers.
    y += 26.0;
    let mut footer: Vec<(String, &str)> = super::tlb_lines(topo)
        .into_iter()
        .map(|line| (line, "#475569"))
        .collect();
    for note in &topo.notes {
        let about = match (note.element, note.quantity) {
            (Some(kind), Some(quantity)) => format!("{kind} {quantity}: "),
            (Some(kind), None) => format!("{kind}: "),
            _ => String::new(),
        };
        let (prefix, colour) = match note.severity {
            crate::model::NoteSeverity::NotMeasured => ("not measured: ", "#b91c1c"),
            crate::model::NoteSeverity::Warning => ("warning: ", "#b45309"),
            crate::model::NoteSeverity::Info => ("note: ", "#475569"),
        };
        footer.push((format!("{about}{prefix}{}", note.message), colour));
    }
    let clock = if topo.conditions.sm_clock_mhz.is_some() {
        "measured"
    } else {
        "nominal"
    };
    footer.push((
        format!("latency: median load latency in SM cycles; ns at the {clock} SM clock"),
        "#475569",
    ));
    if let Some(remark) = &topo.conditions.remark {
        footer.push((remark.clone(), "#475569"));
    }
    // Wrapped to the diagram's width (about 6.6 px per character at 12 px).
    let columns = (inner_width / 6.6) as usize;
    for (text, colour) in footer {
        for (i, line) in textwrap::wrap(&text, columns).iter().enumerate() {
            let indent = if i == 0 { 0.0 } else { 12.0 };
            let _ = writeln!(
                body,
                r#"<text x="{:.1}" y="{y:.1}" font-size="12" fill="{colour}">{}</text>"#,
                MARGIN + indent,
                escape(line)
            );
            y += 16.0;
        }
    }
    let height = y + 10.0;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="{FONT}">"#
    );
    let _ = writeln!(
        out,
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#475569"/></marker></defs>"##
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    out.push_str(&body);
    out.push_str("</svg>\n");
    out
}

/// The SMs as a strip of squares coloured by their L2 partition (the map's reference SM's
/// partition green, the other orange, unknown grey), with a caption.
fn sm_map(out: &mut String, p: &crate::model::L2Partitions, x: f64, y: f64, width: f64) {
    let count = p.sm_partition.len().max(1);
    let cell = (width / count as f64).min(12.0);
    let reference = p
        .map_reference_sm
        .map_or_else(String::new, |sm| format!(", SM {sm}'s partition green"));
    let _ = writeln!(
        out,
        r##"<text x="{x:.1}" y="{:.1}" font-size="12" fill="#374151">SMs by L2 partition (partition map{reference}; grey: not told)</text>"##,
        y + 10.0
    );
    for (sm, partition) in p.sm_partition.iter().enumerate() {
        let fill = match partition {
            Some(0) => "#16a34a",
            Some(_) => "#ea580c",
            None => "#9ca3af",
        };
        let _ = writeln!(
            out,
            r#"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="14" fill="{fill}"><title>SM {sm}</title></rect>"#,
            x + sm as f64 * cell,
            y + 16.0,
            (cell - 1.0).max(0.5)
        );
    }
}
