//! The instruction caches (schema 1.6) in the renderers: one line per level for the table,
//! the Markdown and HTML reports, and a strip of boxes in the SVG.

use std::fmt::Write as _;

use crate::model::Topology;

use super::svg_blocks::escape;

/// One line per instruction-fetch level, nearest first; empty where none was measured.
///
/// ```
/// use topology::{render, Bytes, ComputeCapability, DeviceInfo, InstructionCacheLevel, Provenance, Size, Topology};
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 4));
/// assert!(render::instruction_cache_lines(&topo).is_empty());
/// topo.instruction_caches.push(InstructionCacheLevel {
///     level: 1,
///     size: Some(Size::exact(Bytes::kib(32), Provenance::Benchmark)),
///     cycles_per_instruction: 1.0,
///     tried_up_to: None,
/// });
/// let lines = render::instruction_cache_lines(&topo);
/// assert_eq!(lines[1], "  level 1: 32 KiB, 1 cycles/instruction");
/// ```
pub fn instruction_cache_lines(topo: &Topology) -> Vec<String> {
    if topo.instruction_caches.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![
        "instruction caches (one warp's loop over straight-line code, 16-byte instructions):"
            .to_owned(),
    ];
    lines.extend(
        topo.instruction_caches
            .iter()
            .map(|level| format!("  {}", level.describe())),
    );
    lines
}

/// Draws the levels at `y` as a row of boxes, nearest first; returns the height used (0
/// without levels).
pub(super) fn svg_levels(out: &mut String, topo: &Topology, x: f64, y: f64, width: f64) -> f64 {
    let levels = &topo.instruction_caches;
    if levels.is_empty() {
        return 0.0;
    }
    let _ = writeln!(
        out,
        r##"<text x="{x:.1}" y="{:.1}" font-size="13" font-weight="bold" fill="#374151">Instruction fetch (one warp, straight-line code)</text>"##,
        y + 12.0
    );
    let gap = 8.0;
    let w = (width - gap * (levels.len() as f64 - 1.0)) / levels.len() as f64;
    let top = y + 20.0;
    for (i, level) in levels.iter().enumerate() {
        let left = x + i as f64 * (w + gap);
        let line = level.describe();
        let (head, cost) = line
            .split_once(", ")
            .map_or((line.as_str(), ""), |(h, c)| (h, c));
        let size = level
            .size
            .as_ref()
            .map_or_else(|| "beyond".to_owned(), |s| format!("≤ {s}"));
        let _ = writeln!(
            out,
            r##"<rect x="{left:.1}" y="{top:.1}" width="{w:.1}" height="40" rx="6" fill="#ede9fe" stroke="#5b21b6"><title>{}</title></rect>"##,
            escape(&line)
        );
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" fill="#111827">{}</text>"##,
            left + 6.0,
            top + 16.0,
            escape(&format!(
                "i-fetch {} · {size}",
                head.trim_start_matches("level ")
            ))
        );
        let cost = cost.rsplit(", ").next().unwrap_or(cost);
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#374151">{}</text>"##,
            left + 6.0,
            top + 32.0,
            escape(cost)
        );
    }
    68.0
}
