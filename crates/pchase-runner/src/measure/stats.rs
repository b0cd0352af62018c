//! Quantiles and the "did the latency change" decision used while searching.

/// The `q` quantile of sorted values, by linear interpolation between order statistics.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Decides whether a set of latency samples shows loads slower than a baseline's hits.
///
/// A load counts as slow when it exceeds the baseline's 99th percentile by a margin
/// (4 cycles or 10 % of the baseline median, whichever is larger); a sample set has
/// changed when its share of slow loads exceeds the baseline's by more than
/// `min_share`. Outliers that the baseline has too (interrupts, clock jitter) therefore do
/// not count, while even a small fraction of real misses does.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowLoadDetector {
    threshold: f64,
    baseline_share: f64,
    min_share: f64,
}

impl SlowLoadDetector {
    /// A detector calibrated on `baseline` (cycles; need not be sorted).
    ///
    /// Returns `None` for an empty baseline.
    pub fn new(baseline: &[u32], min_share: f64) -> Option<SlowLoadDetector> {
        if baseline.is_empty() {
            return None;
        }
        let mut sorted: Vec<f64> = baseline.iter().map(|&v| f64::from(v)).collect();
        sorted.sort_by(f64::total_cmp);
        let p50 = quantile(&sorted, 0.5);
        let p99 = quantile(&sorted, 0.99);
        let threshold = p99 + (0.1 * p50).max(4.0);
        let mut detector = SlowLoadDetector {
            threshold,
            baseline_share: 0.0,
            min_share,
        };
        detector.baseline_share = detector.slow_share(baseline);
        Some(detector)
    }

    /// The share of loads in `samples` slower than the threshold.
    pub fn slow_share(&self, samples: &[u32]) -> f64 {
        if samples.is_empty() {
            return 0.0;
        }
        let slow = samples
            .iter()
            .filter(|&&v| f64::from(v) > self.threshold)
            .count();
        slow as f64 / samples.len() as f64
    }

    /// Whether `samples` has clearly more slow loads than the baseline.
    pub fn changed(&self, samples: &[u32]) -> bool {
        self.slow_share(samples) > self.baseline_share + self.min_share
    }

    /// The latency above which a load counts as slow.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detector_ignores_baseline_outliers_and_sees_misses() {
        // 1 % outliers in the baseline.
        let mut baseline = vec![30u32; 990];
        baseline.extend([900u32; 10]);
        let detector = SlowLoadDetector::new(&baseline, 0.02).unwrap();
        assert!(!detector.changed(&baseline));
        let mut with_misses = baseline.clone();
        for v in with_misses.iter_mut().take(50) {
            *v = 250;
        }
        assert!(detector.changed(&with_misses));
        let mut few = baseline.clone();
        for v in few.iter_mut().take(5) {
            *v = 250;
        }
        assert!(!detector.changed(&few), "0.5 % slow loads are within min_share");
    }
}
