//! The SVG diagram's boxes: one per physical cache or other SM-level element, the L1's
//! store with what the carveout splits, and the text in them.

use std::fmt::Write as _;

use crate::model::{ElementKind, QuantityKind, Topology};
use crate::quantity::{Latency, Size};

use super::number;
use super::store::{draw_splits, splits_height, unified_store, Store};

pub(super) const LINE_HEIGHT: f64 = 17.0;
/// A rough advance per character of the 13 px body font, to size boxes to text.
pub(super) const CHAR_WIDTH: f64 = 7.4;

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A box with a bold title and lines of text.
pub(super) struct Block {
    pub title: String,
    pub lines: Vec<String>,
    pub fill: &'static str,
    pub stroke: &'static str,
    /// The configurations of a unified L1/shared store, drawn as bars below the lines.
    pub store: Option<Store>,
}

impl Block {
    pub fn width(&self) -> f64 {
        // The title is set larger and bold: about 1.25 times the body advance.
        let title = self.title.chars().count() as f64 * CHAR_WIDTH * 1.25;
        let body = self
            .lines
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0) as f64
            * CHAR_WIDTH;
        (title.max(body) + 28.0).max(150.0)
    }

    pub fn height(&self) -> f64 {
        30.0 + self.lines.len() as f64 * LINE_HEIGHT
            + 8.0
            + self.store.as_ref().map_or(0.0, splits_height)
    }

    pub fn draw(&self, out: &mut String, x: f64, y: f64, width: f64, height: f64) {
        let _ = writeln!(
            out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{height:.1}" rx="8" fill="{}" stroke="{}" stroke-width="1.5"/>"#,
            self.fill, self.stroke
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="15" font-weight="bold">{}</text>"#,
            x + 12.0,
            y + 22.0,
            escape(&self.title)
        );
        for (i, line) in self.lines.iter().enumerate() {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" font-size="13">{}</text>"#,
                x + 12.0,
                y + 42.0 + i as f64 * LINE_HEIGHT,
                escape(line)
            );
        }
        if let Some(store) = &self.store {
            let top = y + 30.0 + self.lines.len() as f64 * LINE_HEIGHT;
            draw_splits(out, store, x + 12.0, top, width - 24.0);
        }
    }
}

/// The median latency in cycles and nanoseconds, to the one precision rule.
pub(super) fn latency_text(topo: &Topology, latency: &Latency) -> String {
    match topo.clock_for(latency) {
        Some(clock) => format!(
            "{} cy · {} ns",
            number(latency.p50.0),
            number(latency.p50.to_nanoseconds(clock).0)
        ),
        None => format!("{} cy", number(latency.p50.0)),
    }
}

pub(super) fn size_text(
    topo: &Topology,
    kind: ElementKind,
    quantity: QuantityKind,
    size: Option<&Size>,
) -> Option<String> {
    match size {
        Some(size) => Some(size.to_string()),
        None => topo
            .not_measured_reason(kind, quantity)
            .map(|_| "not measured".to_owned()),
    }
}

/// Size, line and latency lines for one element.
pub(super) fn element_lines(topo: &Topology, kind: ElementKind) -> Vec<String> {
    let element = topo.element(kind);
    let mut lines = Vec::new();
    if let Some(size) = size_text(
        topo,
        kind,
        QuantityKind::Size,
        element.and_then(|e| e.size.as_ref()),
    ) {
        lines.push(format!("size {size}"));
    }
    if let Some(line) = size_text(
        topo,
        kind,
        QuantityKind::LineSize,
        element.and_then(|e| e.line_size.as_ref()),
    ) {
        lines.push(format!("line {line}"));
    }
    match element.and_then(|e| e.latency.as_ref()) {
        Some(latency) => lines.push(format!("latency {}", latency_text(topo, latency))),
        None if topo
            .not_measured_reason(kind, QuantityKind::Latency)
            .is_some() =>
        {
            lines.push("latency not measured".to_owned());
        }
        None => {}
    }
    lines.extend(super::bandwidth::diagram_lines(topo, kind));
    lines
}

pub(super) fn present(topo: &Topology, kind: ElementKind) -> bool {
    topo.element(kind).is_some() || topo.not_measured_reason(kind, QuantityKind::Size).is_some()
}

pub(super) fn count_suffix(topo: &Topology, kind: ElementKind) -> String {
    match topo.element(kind).and_then(|e| e.count_per_sm) {
        Some(count) if count.value > 1 => format!(" ×{}", count.value),
        _ => String::new(),
    }
}

/// The SM-private blocks: one per physical cache group, one per other element.
pub(super) fn sm_blocks(topo: &Topology) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut drawn: Vec<ElementKind> = Vec::new();
    if let Some(store) = unified_store(topo) {
        let block = store_block(topo, store);
        drawn.extend(block.1);
        blocks.push(block.0);
    }
    let private = [
        ElementKind::L1Data,
        ElementKind::Texture,
        ElementKind::ReadOnly,
        ElementKind::ConstantL1,
        ElementKind::SharedMemory,
    ];
    for kind in private {
        if drawn.contains(&kind) || !present(topo, kind) {
            continue;
        }
        let group: Vec<ElementKind> = std::iter::once(kind)
            .chain(topo.shared_with(kind))
            .filter(|k| present(topo, *k))
            .collect();
        drawn.extend(&group);
        if group.len() > 1 {
            // One physical cache: the size and line once (from the first member
            // that has them), then each logical path's latency.
            let names: Vec<String> = group
                .iter()
                .map(
                    |k| match topo.element(*k).and_then(|e| e.disturbed.as_ref()) {
                        Some(_) => {
                            format!("{} [{}]", k.abbreviation(), crate::Element::DISTURBED_MARK)
                        }
                        None => k.abbreviation().to_owned(),
                    },
                )
                .collect();
            let mut lines = Vec::new();
            let first = |f: fn(&crate::model::Element) -> Option<&Size>| {
                group.iter().find_map(|k| topo.element(*k).and_then(f))
            };
            if let Some(size) = first(|e| e.size.as_ref()) {
                lines.push(format!("size {size}"));
            }
            if let Some(line) = first(|e| e.line_size.as_ref()) {
                lines.push(format!("line {line}"));
            }
            for member in &group {
                let text = match topo.element(*member).and_then(|e| e.latency.as_ref()) {
                    Some(latency) => latency_text(topo, latency),
                    None => "latency not measured".to_owned(),
                };
                lines.push(format!("{}: {text}", member.abbreviation()));
            }
            blocks.push(Block {
                title: format!(
                    "{} (one cache){}",
                    names.join(" + "),
                    count_suffix(topo, kind)
                ),
                lines,
                fill: "#dbeafe",
                stroke: "#2563eb",
                store: None,
            });
        } else {
            let (fill, stroke) = match kind {
                ElementKind::SharedMemory => ("#dcfce7", "#16a34a"),
                ElementKind::ConstantL1 => ("#f3e8ff", "#9333ea"),
                _ => ("#dbeafe", "#2563eb"),
            };
            blocks.push(Block {
                title: format!("{}{}", topo.label(kind), count_suffix(topo, kind)),
                lines: element_lines(topo, kind),
                fill,
                stroke,
                store: None,
            });
        }
    }
    blocks
}

/// The L1's cache group and shared memory as the one store they are, with what the
/// carveout splits; returns the block and the elements it shows.
pub(super) fn store_block(topo: &Topology, store: Store) -> (Block, Vec<ElementKind>) {
    let names: Vec<&str> = store.caches.iter().map(|k| k.abbreviation()).collect();
    let mut lines = Vec::new();
    let l1 = topo.element(ElementKind::L1Data);
    let mut cache = format!("{}: one cache", names.join(" + "));
    if let Some(size) = l1.and_then(|e| e.size.as_ref()) {
        let _ = write!(cache, ", up to {size}");
    }
    if let Some(line) = l1.and_then(|e| e.line_size.as_ref()) {
        let _ = write!(cache, ", line {line}");
    }
    lines.push(cache);
    let latencies: Vec<String> = store
        .caches
        .iter()
        .filter_map(|k| {
            let latency = topo.element(*k).and_then(|e| e.latency.as_ref())?;
            Some(format!(
                "{} {}",
                k.abbreviation(),
                latency_text(topo, latency)
            ))
        })
        .collect();
    if !latencies.is_empty() {
        lines.push(format!("  latency: {}", latencies.join(" · ")));
    }
    let mut shown = store.caches.clone();
    if present(topo, ElementKind::SharedMemory) {
        let shared = topo.element(ElementKind::SharedMemory);
        let mut text = "shared memory".to_owned();
        if let Some(size) = shared.and_then(|e| e.size.as_ref()) {
            let _ = write!(text, ": up to {size}");
        }
        if let Some(latency) = shared.and_then(|e| e.latency.as_ref()) {
            let _ = write!(text, ", latency {}", latency_text(topo, latency));
        }
        lines.push(text);
        shown.push(ElementKind::SharedMemory);
    }
    lines.push(store.summary());
    let block = Block {
        title: format!(
            "One L1 / shared-memory store per SM{}",
            count_suffix(topo, ElementKind::L1Data)
        ),
        lines,
        fill: "#eff6ff",
        stroke: "#2563eb",
        store: Some(store),
    };
    (block, shown)
}
