//! The one precision rule every renderer and every section row follows (`docs/topology.md`,
//! "Precision"); `topology::render` re-exports it.
//!
//! - A measured number (cycles, nanoseconds, a statistic, a confidence) shows three
//!   significant digits, but never rounds away an integer digit: `34.0`, `38.8`, `219`,
//!   `1126`, `0.953`.
//! - A p-value shows two significant digits in scientific notation below 0.001
//!   (`5.3e-11`), and `< 1e-300` where it underflows towards zero, so no test ever reads
//!   as `0.0000`.
//! - A latency reads as its median with the interquartile range, `222 [215–228]`; a
//!   result written before schema 1.4 has no quartiles and shows the median alone.
//! - Sizes are [`crate::Bytes`]' own display (exact bytes in the largest unit that
//!   divides them, else three decimals).

use crate::quantity::Latency;
use crate::units::Cycles;

/// The smallest p-value printed as a number; below it the test reads `< 1e-300`.
pub const P_VALUE_FLOOR: f64 = 1e-300;

/// A measured number to three significant digits, integer digits kept.
///
/// ```
/// use topology::render::number;
/// assert_eq!(number(34.0), "34.0");
/// assert_eq!(number(38.75), "38.8");
/// assert_eq!(number(219.3), "219");
/// assert_eq!(number(1126.4), "1126");
/// assert_eq!(number(0.95312), "0.953");
/// assert_eq!(number(0.0), "0");
/// ```
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 12) as usize;
    let text = format!("{value:.decimals$}");
    // Rounding may carry into a new digit (99.96 → "100.0"): drop the extra decimal.
    let rounded: f64 = text.parse().unwrap_or(value);
    if decimals > 0 && rounded.abs() >= 10f64.powi(magnitude + 1) {
        return format!("{value:.prec$}", prec = decimals - 1);
    }
    text
}

/// A p-value: plain to three decimals from 0.001 up, scientific with two significant
/// digits below, `< 1e-300` where it underflows.
///
/// ```
/// use topology::render::p_value;
/// assert_eq!(p_value(0.0), "< 1e-300");
/// assert_eq!(p_value(5.303e-11), "5.3e-11");
/// assert_eq!(p_value(0.0421), "0.042");
/// assert_eq!(p_value(1.0), "1.000");
/// ```
pub fn p_value(p: f64) -> String {
    if !p.is_finite() {
        return p.to_string();
    }
    if p < P_VALUE_FLOOR {
        return "< 1e-300".to_owned();
    }
    if p < 1e-3 {
        return format!("{p:.1e}");
    }
    format!("{p:.3}")
}

/// A latency in cycles: the median and, where known, the interquartile range.
///
/// ```
/// use topology::{render::median_iqr, Cycles, Latency, LatencySummary};
/// let l = Latency::measured(LatencySummary::from_samples(&[30.0, 31.0, 32.0, 33.0]).unwrap());
/// assert_eq!(median_iqr(&l), "31.0 [30.0–32.0]");
/// ```
pub fn median_iqr(latency: &Latency) -> String {
    quartiles(latency.p25, latency.p50, latency.p75, number)
}

fn quartiles(
    p25: Option<Cycles>,
    p50: Cycles,
    p75: Option<Cycles>,
    show: fn(f64) -> String,
) -> String {
    match (p25, p75) {
        (Some(low), Some(high)) => format!("{} [{}–{}]", show(p50.0), show(low.0), show(high.0)),
        _ => show(p50.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits_across_magnitudes() {
        let cases = [
            (0.000_123_4, "0.000123"),
            (0.5, "0.500"),
            (1.0, "1.00"),
            (9.996, "10.0"),
            (99.96, "100"),
            (157.2, "157"),
            (-38.75, "-38.8"),
            (123_456.0, "123456"),
        ];
        for (value, text) in cases {
            assert_eq!(number(value), text, "{value}");
        }
    }

    #[test]
    fn p_values_never_read_as_zero() {
        for p in [0.0, 1e-320, 9.9e-301] {
            assert_eq!(p_value(p), "< 1e-300");
        }
        assert_eq!(p_value(1e-300), "1.0e-300");
        assert_eq!(p_value(0.000_999), "1.0e-3");
        assert_eq!(p_value(0.5), "0.500");
    }
}
