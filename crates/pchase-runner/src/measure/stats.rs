//! Quantiles, runs of slow loads, and the "did the latency change" decision used while searching.

/// The `q` quantile of sorted values, by linear interpolation between order statistics.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Runs of consecutive slow loads (`> threshold`) in a window: `(first index, length)`.
/// A run that reaches the end of the window is cut off and left out.
pub fn slow_runs(latencies: &[u32], threshold: f64) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, &v) in latencies.iter().enumerate() {
        match (f64::from(v) > threshold, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push((s, i - s));
                start = None;
            }
            _ => {}
        }
    }
    runs
}

/// Decides whether a size's replicas show a higher latency than the baseline's.
///
/// Each sample set is summarised by its median, and the baseline's spread by its median
/// absolute deviation (scaled to a standard deviation), so that one replica disturbed by
/// an outlier load moves neither. A size has changed when its median exceeds the
/// baseline's by more than the largest of: 0.1 cycle, 2 % of the baseline, and four
/// robust standard deviations. Whole-pass means over thousands of loads are steady to a
/// fraction of a cycle on a GPU, so one overflowing set (a miss in every few dozen loads,
/// each a hundred or more cycles slower) stands out, while rare outlier loads (interrupts,
/// refreshes) that move a mean by a fraction of a cycle do not.
#[derive(Debug, Clone, PartialEq)]
pub struct ShiftDetector {
    baseline: f64,
    margin: f64,
}

/// Median of unsorted values (`NaN` for none).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile(&sorted, 0.5)
}

impl ShiftDetector {
    /// A detector calibrated on the baseline's replica means; `None` when empty.
    pub fn new(baseline: &[f64]) -> Option<ShiftDetector> {
        ShiftDetector::with_relative_margin(baseline, 0.02)
    }

    /// Like [`ShiftDetector::new`] with `relative` instead of 2 % as the relative margin.
    pub fn with_relative_margin(baseline: &[f64], relative: f64) -> Option<ShiftDetector> {
        if baseline.is_empty() || baseline.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let center = median(baseline);
        let deviations: Vec<f64> = baseline.iter().map(|v| (v - center).abs()).collect();
        let robust_sd = 1.4826 * median(&deviations);
        Some(ShiftDetector {
            baseline: center,
            margin: (relative * center).max(0.1).max(4.0 * robust_sd),
        })
    }

    /// Whether `values` has a clearly higher median than the baseline.
    pub fn changed(&self, values: &[f64]) -> bool {
        !values.is_empty() && median(values) > self.baseline + self.margin
    }

    /// The median above which a size counts as changed.
    pub fn threshold(&self) -> f64 {
        self.baseline + self.margin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_runs_leave_out_a_run_cut_by_the_window() {
        let latencies = [280, 660, 670, 281, 650, 282, 700];
        assert_eq!(slow_runs(&latencies, 450.0), vec![(1, 2), (4, 1)]);
        assert!(slow_runs(&[280, 281], 450.0).is_empty());
    }

    #[test]
    fn detector_sees_a_few_misses_but_not_outliers_or_sm_differences() {
        let baseline = [38.00, 38.02, 37.99, 38.01, 45.0];
        let detector = ShiftDetector::new(&baseline).unwrap();
        assert!(!detector.changed(&[38.03, 38.0, 38.02, 37.98]));
        // 2 % of loads missing to a 290-cycle L2: +5 cycles.
        assert!(detector.changed(&[43.0, 43.1, 42.9, 43.0]));
        // One replica with an outlier does not make a change.
        assert!(!detector.changed(&[38.0, 38.01, 52.0, 38.02]));
        assert!(!detector.changed(&[]));
        assert!(ShiftDetector::new(&[]).is_none());
        assert!(ShiftDetector::new(&[f64::NAN]).is_none());
    }

    #[test]
    fn quantiles_interpolate() {
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&sorted, 0.5), 3.0);
        assert!((quantile(&sorted, 0.95) - 4.8).abs() < 1e-12);
    }
}
