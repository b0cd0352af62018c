//! The L2's ways (schema 1.12): how many lines of one set a partition holds, from minimal
//! eviction sets.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How one target's reduction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvictionOutcome {
    /// A set that evicts the target, none of whose lines can go: without any one of them the
    /// target stays. Under LRU-like replacement it holds as many lines as the set has ways.
    Minimal,
    /// A small set that evicts the target, but the check found lines it does not need (a
    /// noisy test, or a replacement that is not LRU-like).
    NotMinimal,
    /// The reduction stopped with many lines left: removing any part of the set stopped the
    /// eviction, or its tests ran out.
    Stalled,
    /// No candidate set evicted the target, or the target was no hit to begin with.
    NotEvicted,
}

impl EvictionOutcome {
    /// The outcome in words.
    pub fn name(self) -> &'static str {
        match self {
            EvictionOutcome::Minimal => "minimal",
            EvictionOutcome::NotMinimal => "not minimal",
            EvictionOutcome::Stalled => "stalled",
            EvictionOutcome::NotEvicted => "not evicted",
        }
    }
}

/// One target line's reduction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct L2WaysTarget {
    /// How it ended.
    pub outcome: EvictionOutcome,
    /// Lines of the set when it ended (0 where nothing evicted the target).
    pub lines: u64,
    /// Of them, the lines found needed one by one (checked only for a small set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed: Option<u64>,
    /// Eviction tests it took (each one launch, decided by the majority of its rounds).
    pub tests: u64,
}

/// The ways of the L2's sets, from minimal eviction sets: a target line is loaded, then a
/// set of lines homed in the same partition, then the target is timed again; group testing
/// reduces a set that evicts it to one none of whose lines can go, and that set holds as
/// many lines as the target's set has ways. `ways` is the size the majority of the minimal
/// sets agree on, where at least two do; otherwise `not_determined` says why, and the
/// targets show what each reduction found.
///
/// ```
/// use topology::{EvictionOutcome, L2Ways, L2WaysTarget};
/// let target = |outcome, lines| L2WaysTarget { outcome, lines, needed: None, tests: 400 };
/// let ways = L2Ways {
///     ways: Some(16),
///     not_determined: None,
///     targets: vec![
///         target(EvictionOutcome::Minimal, 16),
///         target(EvictionOutcome::Minimal, 16),
///         target(EvictionOutcome::Stalled, 3712),
///     ],
///     sets_per_partition: Some(15360),
///     measuring_sm: 0,
///     hit_cycles: 290.0,
///     miss_cycles: 560.0,
///     threshold_cycles: 425.0,
///     launches: 1210,
/// };
/// assert_eq!(ways.count(EvictionOutcome::Minimal), 2);
/// assert!(ways.to_string().starts_with("16: 2 of 3 targets"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct L2Ways {
    /// The ways of a set: the size the majority of the minimal eviction sets agree on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<u32>,
    /// Why there is no `ways`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_determined: Option<String>,
    /// Every target line tried, in order.
    pub targets: Vec<L2WaysTarget>,
    /// Sets per partition, derived (not measured): a partition's size over ways × line,
    /// where both are known and it divides evenly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sets_per_partition: Option<u64>,
    /// The SM that loaded and timed the lines (all homed in its partition).
    pub measuring_sm: u32,
    /// The target's reload with no set loaded in between (a hit), median cycles.
    pub hit_cycles: f64,
    /// The target's reload after every candidate line (a miss), median cycles.
    pub miss_cycles: f64,
    /// A reload at or above this many cycles is a miss: midway between the two.
    pub threshold_cycles: f64,
    /// Launches of the probe in all.
    pub launches: u64,
}

impl L2Ways {
    /// The targets whose reduction ended with `outcome`.
    pub fn count(&self, outcome: EvictionOutcome) -> usize {
        self.targets.iter().filter(|t| t.outcome == outcome).count()
    }

    /// The targets whose minimal set holds `lines` lines.
    pub fn agreeing(&self, lines: u64) -> usize {
        self.targets
            .iter()
            .filter(|t| t.outcome == EvictionOutcome::Minimal && t.lines == lines)
            .count()
    }
}

impl fmt::Display for L2Ways {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let agreeing = self.ways.map_or(0, |w| self.agreeing(u64::from(w)));
        match (self.ways, &self.not_determined) {
            (Some(ways), _) => write!(
                f,
                "{ways}: {agreeing} of {} targets reduced to a minimal eviction set of {ways} lines",
                self.targets.len()
            )?,
            (None, Some(why)) => write!(f, "not determined: {why}")?,
            (None, None) => write!(f, "not determined")?,
        }
        // The targets that did not agree, by how they ended.
        let others: Vec<String> = [
            EvictionOutcome::Minimal,
            EvictionOutcome::NotMinimal,
            EvictionOutcome::Stalled,
            EvictionOutcome::NotEvicted,
        ]
        .into_iter()
        .filter_map(|o| {
            let n = self.count(o)
                - if o == EvictionOutcome::Minimal {
                    agreeing
                } else {
                    0
                };
            let name = match (o, self.ways) {
                (EvictionOutcome::Minimal, Some(_)) => "minimal of another size",
                _ => o.name(),
            };
            (n > 0).then(|| format!("{n} {name}"))
        })
        .collect();
        if !others.is_empty() {
            write!(f, " ({})", others.join(", "))?;
        }
        if let (Some(sets), Some(ways)) = (self.sets_per_partition, self.ways) {
            write!(
                f,
                "; {sets} sets per partition (derived: the partition's size over {ways} ways × the line)"
            )?;
        }
        write!(
            f,
            "; SM {}, reload hit {:.0} / miss {:.0} cycles, {} launches",
            self.measuring_sm, self.hit_cycles, self.miss_cycles, self.launches
        )
    }
}
