//! The L2's own structures: the home partition of an address (schema 1.10) and the ways
//! of its sets (schema 1.12).

use super::Checker;

impl Checker {
    /// The L2's home function: bits below the page, ascending and distinct; counts that
    /// add up; a share in [0, 1].
    pub(super) fn address_map(&mut self, path: &str, map: &crate::L2AddressMap) {
        if !map.page_bytes.0.is_power_of_two() {
            self.fail(format!("{path}.page_bytes"), "must be a power of two");
        }
        let page_bits = map.page_bytes.0.trailing_zeros();
        if map.bits.windows(2).any(|w| w[0] >= w[1]) {
            self.fail(format!("{path}.bits"), "must be ascending, each once");
        }
        if map.bits.iter().any(|&b| b >= page_bits) {
            self.fail(
                format!("{path}.bits"),
                format!("a bit at or above the page's ({page_bits})"),
            );
        }
        self.probability(format!("{path}.fit_agreement"), map.fit_agreement);
        if map.predicted_right.unwrap_or(0) > map.predicted_lines.unwrap_or(0) {
            self.fail(
                format!("{path}.predicted_right"),
                "more lines predicted right than predicted",
            );
        }
    }

    /// The L2's ways: a count of at least one that at least two minimal sets of that size
    /// agree on, or a reason; positive derived sets; a hit below the threshold below the
    /// miss.
    pub(super) fn l2_ways(&mut self, path: &str, ways: &crate::L2Ways) {
        match (ways.ways, &ways.not_determined) {
            (Some(0), _) => self.fail(format!("{path}.ways"), "must be at least 1"),
            (Some(w), _) if ways.agreeing(u64::from(w)) < 2 => self.fail(
                format!("{path}.ways"),
                format!("{w} ways, but fewer than two minimal sets of {w} lines"),
            ),
            (Some(_), Some(_)) => self.fail(
                format!("{path}.not_determined"),
                "a reason beside a determined count",
            ),
            (None, None) => self.fail(format!("{path}.ways"), "neither a count nor a reason"),
            _ => {}
        }
        if ways.sets_per_partition == Some(0) {
            self.fail(format!("{path}.sets_per_partition"), "must be at least 1");
        }
        if ways.sets_per_partition.is_some() && ways.ways.is_none() {
            self.fail(
                format!("{path}.sets_per_partition"),
                "derived from ways that were not determined",
            );
        }
        for (name, value) in [
            ("hit_cycles", ways.hit_cycles),
            ("miss_cycles", ways.miss_cycles),
            ("threshold_cycles", ways.threshold_cycles),
        ] {
            self.positive_finite(format!("{path}.{name}"), value);
        }
        if !(ways.hit_cycles < ways.threshold_cycles && ways.threshold_cycles < ways.miss_cycles) {
            self.fail(
                format!("{path}.threshold_cycles"),
                "must lie between the hit and the miss",
            );
        }
        for (i, target) in ways.targets.iter().enumerate() {
            if target.needed.unwrap_or(0) > target.lines {
                self.fail(
                    format!("{path}.targets[{i}].needed"),
                    "more lines needed than the set holds",
                );
            }
            let minimal = target.outcome == crate::EvictionOutcome::Minimal;
            if minimal && (target.lines == 0 || target.needed != Some(target.lines)) {
                self.fail(
                    format!("{path}.targets[{i}]"),
                    "a minimal set needs each of its lines",
                );
            }
        }
    }
}
