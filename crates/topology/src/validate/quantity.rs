//! The checks of single quantities (sizes, latencies, their evidence and conditions) that
//! the element checks in the parent module apply to each field.

use super::*;
use crate::quantity::{ChangePointEvidence, Conditions, Latency, Size, SizeBound};

impl Checker {
    pub(super) fn conditions(&mut self, path: &str, conditions: &Conditions) {
        if let Some(percent) = conditions.shared_memory_carveout_percent {
            if percent > 100 {
                self.fail(
                    format!("{path}.shared_memory_carveout_percent"),
                    format!("must be at most 100, found {percent}"),
                );
            }
        }
        if let Some(clock) = conditions.sm_clock_mhz {
            self.positive_finite(format!("{path}.sm_clock_mhz"), clock.0);
            if clock.0 > MAX_CLOCK_MHZ {
                self.fail(
                    format!("{path}.sm_clock_mhz"),
                    format!(
                        "{} MHz is beyond any GPU (at most {MAX_CLOCK_MHZ})",
                        clock.0
                    ),
                );
            }
        }
        if let Some(date) = &conditions.date {
            if !looks_like_date(date) {
                self.fail(
                    format!("{path}.date"),
                    format!("must start with a date YYYY-MM-DD, found \"{date}\""),
                );
            }
        }
    }

    pub(super) fn evidence(&mut self, path: &str, evidence: &ChangePointEvidence) {
        if let Some(p) = evidence.p_value {
            self.probability(format!("{path}.p_value"), p);
        }
        if let Some(c) = evidence.confidence {
            self.probability(format!("{path}.confidence"), c);
        }
        if let Some(s) = evidence.statistic {
            if !(s.is_finite() && s >= 0.0) {
                self.fail(
                    format!("{path}.statistic"),
                    format!("a test statistic is finite and ≥ 0, found {s}"),
                );
            }
            // A Kolmogorov–Smirnov statistic is a distance between two distribution
            // functions: at most 1.
            let ks = evidence
                .method
                .as_deref()
                .map(str::to_ascii_lowercase)
                .is_some_and(|m| m.contains("ks") || m.contains("kolmogorov"));
            if ks && s > 1.0 {
                self.fail(
                    format!("{path}.statistic"),
                    format!("a KS statistic lies in [0, 1], found {s}"),
                );
            }
        }
    }

    pub(super) fn size(&mut self, path: &str, size: &Size) {
        match size.bound {
            SizeBound::Exact(v) | SizeBound::AtLeast(v) | SizeBound::AtMost(v) if v.0 == 0 => {
                self.fail(format!("{path}.value"), "a size must be at least one byte");
            }
            SizeBound::Between(low, high) if low > high => self.fail(
                format!("{path}.upper"),
                format!(
                    "the range {} – {} is empty: upper is below value",
                    low.0, high.0
                ),
            ),
            _ => {}
        }
        let largest = size.bound.upper().unwrap_or(size.bound.lower());
        if largest.0 > MAX_BYTES {
            self.fail(
                format!("{path}.value"),
                format!(
                    "{} B is beyond any GPU's memory (at most {MAX_BYTES} B)",
                    largest.0
                ),
            );
        }
        if let Some(evidence) = &size.evidence {
            self.evidence(&format!("{path}.evidence"), evidence);
        }
        if let Some(conditions) = &size.conditions {
            self.conditions(&format!("{path}.conditions"), conditions);
        }
    }

    pub(super) fn latency(&mut self, path: &str, latency: &Latency) {
        let quartiles = [("p25", latency.p25), ("p75", latency.p75)]
            .into_iter()
            .filter_map(|(name, value)| Some((name, value?.0)));
        for (name, value) in [
            ("mean", latency.mean.0),
            ("p50", latency.p50.0),
            ("p95", latency.p95.0),
            ("stdev", latency.stdev.0),
        ]
        .into_iter()
        .chain(quartiles)
        {
            if !(value.is_finite() && value >= 0.0) {
                self.fail(
                    format!("{path}.{name}"),
                    format!("must be finite and ≥ 0, found {value}"),
                );
            } else if value > MAX_CYCLES {
                self.fail(
                    format!("{path}.{name}"),
                    format!("{value} cycles is no load latency (at most {MAX_CYCLES})"),
                );
            }
        }
        if latency.p50.0 > latency.p95.0 {
            self.fail(
                format!("{path}.p95"),
                format!(
                    "the 95th percentile {} is below the median {}",
                    latency.p95.0, latency.p50.0
                ),
            );
        }
        // Schema 1.4's quartiles, where present: p25 ≤ p50 ≤ p75 ≤ p95.
        if let Some(p25) = latency.p25.filter(|q| q.0 > latency.p50.0) {
            self.fail(
                format!("{path}.p25"),
                format!(
                    "the 25th percentile {} is above the median {}",
                    p25.0, latency.p50.0
                ),
            );
        }
        if let Some(p75) = latency.p75 {
            if p75.0 < latency.p50.0 || p75.0 > latency.p95.0 {
                self.fail(
                    format!("{path}.p75"),
                    format!(
                        "the 75th percentile {} lies outside [median {}, 95th percentile {}]",
                        p75.0, latency.p50.0, latency.p95.0
                    ),
                );
            }
        }
        if latency.samples == 0 {
            self.fail(
                format!("{path}.samples"),
                "a latency needs at least one sample",
            );
        }
        if let Some(conditions) = &latency.conditions {
            self.conditions(&format!("{path}.conditions"), conditions);
        }
    }

    /// A smaller structure (a line) must fit in a larger one (its cache).
    pub(super) fn fits(
        &mut self,
        path: &str,
        inner: &Size,
        inner_name: &str,
        outer: &Size,
        outer_name: &str,
    ) {
        if let Some(upper) = outer.bound.upper() {
            let lower = inner.bound.lower();
            if lower > upper {
                self.fail(
                    path.to_owned(),
                    format!("the {inner_name} ({lower}) is larger than the {outer_name} ({upper})"),
                );
            }
        }
    }
}
