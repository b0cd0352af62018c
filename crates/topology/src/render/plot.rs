//! Small SVG charts for the HTML report: a raw curve (log-scale sizes, y range fitted to the
//! data, change points and the level of each segment marked), a histogram of per-load
//! latencies, and a quartile strip for a latency summary.
//!
//! Written by hand rather than with a plotting crate: the charts are a few dozen
//! elements each, must come out byte-identical for golden tests, and need axis rules of
//! their own (ticks at binary sizes labelled in KiB/MiB on a log axis).

use std::fmt::Write as _;

use crate::quantity::Latency;
use crate::raw::Curve;

use super::number;

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A size as an axis label: the largest binary unit it reaches, up to two decimals.
pub(crate) fn size_label(bytes: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("GiB", 1024.0 * 1024.0 * 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    let (unit, scale) = UNITS
        .iter()
        .copied()
        .find(|(_, scale)| bytes >= *scale)
        .unwrap_or(("B", 1.0));
    let value = bytes / scale;
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// Ticks at 1, 2 or 5 times a power of ten (in `unit`s) covering `[lo, hi]`.
fn linear_ticks(lo: f64, hi: f64, unit: f64, count: usize) -> Vec<f64> {
    let span = ((hi - lo) / unit).max(f64::MIN_POSITIVE);
    let raw = span / count as f64;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power)
        * unit;
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Ticks for a size axis: powers of two on a wide (log) range, thinned to about six;
/// 1-2-5 steps in the range's binary unit on a narrow one.
fn size_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if hi / lo >= 4.0 {
        let first = lo.log2().ceil() as i32;
        let last = hi.log2().floor() as i32;
        let every = ((last - first + 1) as f64 / 6.0).ceil().max(1.0) as i32;
        (first..=last)
            .filter(|k| (k - first) % every == 0)
            .map(|k| 2f64.powi(k))
            .collect()
    } else {
        let unit = [1024.0 * 1024.0 * 1024.0, 1024.0 * 1024.0, 1024.0, 1.0]
            .into_iter()
            .find(|u| lo >= *u)
            .unwrap_or(1.0);
        linear_ticks(lo, hi, unit, 5)
    }
}

/// The plotting frame: data coordinates to pixels.
struct Frame {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    x: (f64, f64),
    y: (f64, f64),
    log_x: bool,
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        let (lo, hi, x) = if self.log_x {
            (self.x.0.ln(), self.x.1.ln(), x.max(f64::MIN_POSITIVE).ln())
        } else {
            (self.x.0, self.x.1, x)
        };
        self.left + (x - lo) / (hi - lo) * self.width
    }

    fn py(&self, y: f64) -> f64 {
        self.top + self.height - (y - self.y.0) / (self.y.1 - self.y.0) * self.height
    }

    fn axes(&self, out: &mut String, x_ticks: &[f64], x_label: fn(f64) -> String) {
        let bottom = self.top + self.height;
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#ffffff" stroke="#94a3b8"/>"##,
            self.left, self.top, self.width, self.height
        );
        for &t in x_ticks {
            let x = self.px(t);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#e2e8f0"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#475569">{}</text>"##,
                self.top,
                bottom + 14.0,
                escape(&x_label(t))
            );
        }
        for t in linear_ticks(self.y.0, self.y.1, 1.0, 4) {
            let y = self.py(t);
            let _ = writeln!(
                out,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e2e8f0"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#475569">{}</text>"##,
                self.left,
                self.left + self.width,
                self.left - 5.0,
                y + 4.0,
                number(t)
            );
        }
    }
}

/// The median of `values` (sorted in place); `None` when empty.
fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The median over replicas at each size, sizes ascending.
pub(crate) fn medians(curve: &Curve) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut i = 0;
    while i < curve.points.len() {
        let bytes = curve.points[i].bytes;
        let mut values: Vec<f64> = curve.points[i..]
            .iter()
            .take_while(|p| p.bytes == bytes)
            .map(|p| p.mean_cycles)
            .collect();
        i += values.len();
        if let Some(m) = median(&mut values) {
            out.push((bytes as f64, m));
        }
    }
    out
}

/// The level of each segment between change points: `(from, to, median latency)`.
pub(crate) fn levels(medians: &[(f64, f64)], changes: &[u64]) -> Vec<(f64, f64, f64)> {
    let (Some(first), Some(last)) = (medians.first(), medians.last()) else {
        return Vec::new();
    };
    let mut bounds = vec![first.0];
    bounds.extend(
        changes
            .iter()
            .map(|&c| c as f64)
            .filter(|c| *c > first.0 && *c < last.0),
    );
    bounds.push(last.0);
    bounds
        .windows(2)
        .filter_map(|w| {
            let mut inside: Vec<f64> = medians
                .iter()
                .filter(|(x, _)| *x >= w[0] && (*x < w[1] || w[1] == last.0))
                .map(|(_, y)| *y)
                .collect();
            median(&mut inside).map(|level| (w[0], w[1], level))
        })
        .collect()
}

/// A raw curve: every replica as a faint dot, the median per size as a line, each change
/// point as a red line with its size, and each segment's level as a dashed line.
pub(crate) fn curve_svg(curve: &Curve, changes: &[u64]) -> String {
    let (width, height) = (500.0, 240.0);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img"><title>{}</title>"#,
        escape(&curve.name)
    );
    out.push('\n');
    let line = medians(curve);
    let (Some(first), Some(last)) = (line.first(), line.last()) else {
        out.push_str(r##"<text x="20" y="40" font-size="13">no points</text></svg>"##);
        return out;
    };
    let (mut x_lo, mut x_hi) = (first.0, last.0);
    if x_hi <= x_lo {
        x_lo *= 0.9;
        x_hi *= 1.1;
    }
    let values = curve.points.iter().map(|p| p.mean_cycles);
    let y_min = values.clone().fold(f64::INFINITY, f64::min);
    let y_max = values.fold(f64::NEG_INFINITY, f64::max);
    let pad = ((y_max - y_min) * 0.06).max(0.5);
    let frame = Frame {
        left: 58.0,
        top: 14.0,
        width: width - 76.0,
        height: height - 58.0,
        x: (x_lo, x_hi),
        y: (y_min - pad, y_max + pad),
        log_x: true,
    };
    frame.axes(&mut out, &size_ticks(x_lo, x_hi), size_label);
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#334155">array size (log scale)</text><text x="14" y="{:.1}" font-size="11" text-anchor="middle" fill="#334155" transform="rotate(-90 14 {:.1})">cycles per load</text>"##,
        frame.left + frame.width / 2.0,
        height - 8.0,
        frame.top + frame.height / 2.0,
        frame.top + frame.height / 2.0
    );
    for p in &curve.points {
        let _ = write!(
            out,
            r##"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="#93c5fd"/>"##,
            frame.px(p.bytes as f64),
            frame.py(p.mean_cycles)
        );
    }
    out.push('\n');
    let path: Vec<String> = line
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", frame.px(*x), frame.py(*y)))
        .collect();
    let _ = writeln!(
        out,
        r##"<polyline points="{}" fill="none" stroke="#1d4ed8" stroke-width="1.6"/>"##,
        path.join(" ")
    );
    for (from, to, level) in levels(&line, changes) {
        let y = frame.py(level);
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#0f766e" stroke-width="1.2" stroke-dasharray="5 3"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#0f766e">level {} cy</text>"##,
            frame.px(from),
            frame.px(to),
            frame.px(from) + 4.0,
            if y - frame.top < 16.0 {
                y + 13.0
            } else {
                y - 4.0
            },
            number(level)
        );
    }
    for &change in changes {
        let x = change as f64;
        if x < x_lo || x > x_hi {
            continue;
        }
        let px = frame.px(x);
        let right = px > frame.left + frame.width * 0.7;
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="#dc2626" stroke-width="1.6"/><text x="{:.1}" y="{:.1}" font-size="11" font-weight="bold" fill="#dc2626" text-anchor="{}">change {}</text>"##,
            frame.top,
            frame.top + frame.height,
            if right { px - 4.0 } else { px + 4.0 },
            frame.top + 12.0,
            if right { "end" } else { "start" },
            escape(&size_label(x))
        );
    }
    out.push_str("</svg>");
    out
}

/// A small histogram of `values` (cycles) over their 0.5–99.5 % range; what lies outside
/// is counted in the caption rather than stretching the axis.
pub(crate) fn histogram_svg(title: &str, values: &[f64]) -> String {
    let (width, height) = (330.0, 140.0);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="histogram" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img"><title>{}</title>"#,
        escape(title)
    );
    out.push('\n');
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        out.push_str(r##"<text x="10" y="30" font-size="12">no samples</text></svg>"##);
        return out;
    }
    let at =
        |q: f64| sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)];
    let (lo, mut hi) = (at(0.005), at(0.995));
    if hi <= lo {
        hi = lo + 1.0;
    }
    let bins = 24usize;
    let mut counts = vec![0usize; bins];
    let mut outside = 0;
    for &v in &sorted {
        if v < lo || v > hi {
            outside += 1;
            continue;
        }
        let bin = (((v - lo) / (hi - lo)) * bins as f64) as usize;
        counts[bin.min(bins - 1)] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let frame = Frame {
        left: 10.0,
        top: 22.0,
        width: width - 20.0,
        height: height - 52.0,
        x: (lo, hi),
        y: (0.0, top),
        log_x: false,
    };
    let count = if outside > 0 {
        format!("n = {} ({outside} outside)", sorted.len())
    } else {
        format!("n = {}", sorted.len())
    };
    let _ = writeln!(
        out,
        r##"<text x="10" y="14" font-size="12" font-weight="bold" fill="#334155">{}</text><text x="{:.1}" y="14" font-size="11" text-anchor="end" fill="#475569">{}</text>"##,
        escape(title),
        width - 10.0,
        escape(&count)
    );
    let bar = frame.width / bins as f64;
    for (i, &count) in counts.iter().enumerate() {
        if count == 0 {
            continue;
        }
        let h = count as f64 / top * frame.height;
        let _ = write!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="#60a5fa"/>"##,
            frame.left + i as f64 * bar,
            frame.top + frame.height - h,
            (bar - 1.0).max(0.5)
        );
    }
    out.push('\n');
    let bottom = frame.top + frame.height;
    for t in linear_ticks(lo, hi, 1.0, 4) {
        let x = frame.px(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="#475569"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#475569">{}</text>"##,
            bottom + 4.0,
            bottom + 16.0,
            number(t)
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{:.1}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="#475569"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#475569">cycles</text></svg>"##,
        frame.left,
        frame.left + frame.width,
        frame.left + frame.width,
        height - 4.0
    );
    out
}

/// A quartile strip on the shared axis `[lo, hi]` (cycles, log scale): a box from p25 to
/// p75 (where known), the median as a bar, a whisker to p95 and the mean as a dot.
pub(crate) fn strip_svg(latency: &Latency, lo: f64, hi: f64) -> String {
    let (width, height) = (220.0, 18.0);
    let frame = Frame {
        left: 4.0,
        top: 2.0,
        width: width - 8.0,
        height: height - 4.0,
        x: (lo, hi),
        y: (0.0, 1.0),
        log_x: true,
    };
    let mid = height / 2.0;
    let mut out = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="strip" width="{width}" height="{height}" viewBox="0 0 {width} {height}"><line x1="{:.1}" y1="{mid}" x2="{:.1}" y2="{mid}" stroke="#e2e8f0"/>"##,
        frame.left,
        frame.left + frame.width
    );
    let p50 = frame.px(latency.p50.0);
    let _ = write!(
        out,
        r##"<line x1="{p50:.1}" y1="{mid}" x2="{:.1}" y2="{mid}" stroke="#64748b"/>"##,
        frame.px(latency.p95.0)
    );
    if let (Some(p25), Some(p75)) = (latency.p25, latency.p75) {
        let (a, b) = (frame.px(p25.0), frame.px(p75.0));
        let _ = write!(
            out,
            r##"<rect x="{a:.1}" y="3" width="{:.1}" height="{}" fill="#bfdbfe" stroke="#1d4ed8"/>"##,
            (b - a).max(1.0),
            height - 6.0
        );
    }
    let _ = write!(
        out,
        r##"<line x1="{p50:.1}" y1="2" x2="{p50:.1}" y2="{}" stroke="#1e3a8a" stroke-width="2"/><circle cx="{:.1}" cy="{mid}" r="2.2" fill="#dc2626"/></svg>"##,
        height - 2.0,
        frame.px(latency.mean.0)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::RawPoint;

    fn curve(points: &[(u64, f64)]) -> Curve {
        Curve {
            name: "l1-size".into(),
            points: points
                .iter()
                .map(|&(bytes, mean_cycles)| RawPoint {
                    bytes,
                    replica: 0,
                    smid: None,
                    mean_cycles,
                })
                .collect(),
            change_points: Vec::new(),
        }
    }

    #[test]
    fn size_labels_use_binary_units() {
        assert_eq!(size_label(512.0), "512 B");
        assert_eq!(size_label(246_784.0), "241 KiB");
        assert_eq!(size_label(1.5 * 1024.0 * 1024.0), "1.5 MiB");
    }

    #[test]
    fn ticks_cover_narrow_and_wide_ranges() {
        let narrow = size_ticks(21_120.0, 30_000.0);
        assert!(narrow.len() >= 3, "{narrow:?}");
        assert!(narrow.iter().all(|t| (21_120.0..=30_000.0).contains(t)));
        let wide = size_ticks(1024.0, 64.0 * 1024.0 * 1024.0);
        assert!(wide.len() <= 7 && wide.len() >= 4, "{wide:?}");
        assert!(wide.iter().all(|t| t.log2().fract() == 0.0));
    }

    #[test]
    fn levels_are_the_medians_between_changes() {
        let points: Vec<(f64, f64)> = [
            (1.0, 34.0),
            (2.0, 35.0),
            (3.0, 34.0),
            (4.0, 290.0),
            (5.0, 300.0),
        ]
        .into_iter()
        .collect();
        let found = levels(&points, &[4]);
        assert_eq!(found, vec![(1.0, 4.0, 34.0), (4.0, 5.0, 295.0)]);
    }

    #[test]
    fn the_y_axis_is_fitted_to_the_data_not_from_zero() {
        let svg = curve_svg(
            &curve(&[(1024, 300.0), (2048, 302.0), (4096, 310.0)]),
            &[2048],
        );
        assert!(svg.contains("change 2 KiB"), "{svg}");
        assert!(!svg.contains(">0</text>"), "an axis from 0: {svg}");
        assert!(
            svg.contains(">300</text>") || svg.contains(">302</text>"),
            "{svg}"
        );
    }

    #[test]
    fn histograms_count_what_they_leave_out() {
        let mut values: Vec<f64> = (0..1000).map(|i| 200.0 + f64::from(i % 20)).collect();
        values.push(1e6);
        let svg = histogram_svg("near hit", &values);
        assert!(svg.contains(">n = 1001 (1 outside)<"), "{svg}");
    }
}
