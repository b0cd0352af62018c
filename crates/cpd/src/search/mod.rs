//! Searches for change points over any [`SegmentCost`].
//!
//! * [`single_change_point`]: the exact best single split (the thesis' "Opt").
//! * [`dynp`]: the exact best segmentation with a given number of change points.
//! * [`pelt`]: the exact best penalised segmentation.
//! * [`binseg`]: greedy binary segmentation.
//!
//! All report change points as exclusive segment ends (ruptures' convention):
//! a [`Segmentation`] of 100 samples with one change at 40 has segment ends
//! `[40, 100]`. Change points are restricted to multiples of
//! [`SearchOptions::jump`], and every segment has at least
//! [`SearchOptions::min_size`] samples (or the cost's own minimum, if larger).

mod binseg;
mod dynp;
// The AVX-512 paths: x86-64, and Rust 1.89 for the intrinsics (build.rs sets
// `cpd_avx512`; older compilers build the portable paths only).
#[cfg(all(target_arch = "x86_64", cpd_avx512))]
#[clippy::msrv = "1.89"]
mod l2_avx512;
mod l2_fast;
mod pelt;
#[cfg(all(target_arch = "x86_64", cpd_avx512))]
#[clippy::msrv = "1.89"]
mod rbf_avx512;
mod rbf_fast;
mod single;

pub use binseg::{binseg, BinsegStop};
pub use dynp::dynp;
pub use pelt::pelt;
pub use single::{single_change_point, single_change_point_l2, SingleChangePoint};

use crate::cost::SegmentCost;
use crate::error::{CpdError, Result};

/// Constraints on admissible segmentations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// Smallest admissible segment length (at least 1; the cost's own minimum
    /// applies if it is larger). Default 2, as in ruptures.
    pub min_size: usize,
    /// Change points must be multiples of `jump` (at least 1). Default 1.
    pub jump: usize,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            min_size: 2,
            jump: 1,
        }
    }
}

impl SearchOptions {
    /// Options with the given minimum segment length and jump.
    pub fn new(min_size: usize, jump: usize) -> Self {
        Self { min_size, jump }
    }

    /// Validates the options against a cost and returns the effective minimum
    /// segment length.
    pub(crate) fn effective_min_size<C: SegmentCost + ?Sized>(&self, cost: &C) -> Result<usize> {
        if self.min_size == 0 {
            return Err(CpdError::InvalidParameter {
                name: "min_size",
                reason: "must be at least 1".into(),
            });
        }
        if self.jump == 0 {
            return Err(CpdError::InvalidParameter {
                name: "jump",
                reason: "must be at least 1".into(),
            });
        }
        let min_size = self.min_size.max(cost.min_segment_len()).max(1);
        let n = cost.n_samples();
        if n == 0 {
            return Err(CpdError::Empty { what: "signal" });
        }
        Ok(min_size)
    }

    /// The largest number of change points an `n`-sample series admits.
    pub fn max_change_points(&self, n_samples: usize, min_size: usize) -> usize {
        let jump = self.jump.max(1);
        let min_size = min_size.max(1);
        let mut count = 0;
        let mut last = 0;
        loop {
            let next = (last + min_size).div_ceil(jump) * jump;
            if next + min_size > n_samples {
                return count;
            }
            count += 1;
            last = next;
        }
    }
}

/// A segmentation and its cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Segmentation {
    /// Exclusive segment ends, increasing; the last equals the number of samples.
    pub segment_ends: Vec<usize>,
    /// The cost of each segment, in order.
    pub segment_costs: Vec<f64>,
    /// Penalty charged per change point (0 for searches without a penalty).
    pub penalty: f64,
    /// Sum of segment costs plus `penalty ×` the number of change points.
    pub objective: f64,
}

impl Segmentation {
    /// Builds a segmentation from its ends, evaluating the cost of each segment.
    pub fn from_ends<C: SegmentCost + ?Sized>(
        cost: &C,
        segment_ends: Vec<usize>,
        penalty: f64,
    ) -> Self {
        let segment_costs = crate::cost::segment_costs(cost, &segment_ends);
        Self::from_parts(segment_ends, segment_costs, penalty)
    }

    /// A segmentation from its ends and the already computed segment costs.
    pub(crate) fn from_parts(
        segment_ends: Vec<usize>,
        segment_costs: Vec<f64>,
        penalty: f64,
    ) -> Self {
        let n_changes = segment_ends.len().saturating_sub(1);
        let objective = segment_costs.iter().sum::<f64>() + penalty * n_changes as f64;
        Self {
            segment_ends,
            segment_costs,
            penalty,
            objective,
        }
    }

    /// The change points: every segment end except the last (which is `n`).
    pub fn change_points(&self) -> &[usize] {
        &self.segment_ends[..self.segment_ends.len().saturating_sub(1)]
    }

    /// Sum of the segment costs, without the penalty.
    pub fn total_cost(&self) -> f64 {
        self.segment_costs.iter().sum()
    }
}

/// Rejects a penalty that is not positive and finite.
pub(crate) fn check_penalty(penalty: f64) -> Result<()> {
    if !penalty.is_finite() {
        return Err(CpdError::InvalidPenalty {
            value: penalty,
            reason: "must be finite",
        });
    }
    if penalty <= 0.0 {
        return Err(CpdError::InvalidPenalty {
            value: penalty,
            reason: "must be positive (a zero penalty makes every split free)",
        });
    }
    Ok(())
}

/// Rejects a series too short for two segments.
pub(crate) fn check_length(n: usize, min_size: usize) -> Result<()> {
    if n < 2 * min_size {
        return Err(CpdError::TooShort {
            len: n,
            needed: 2 * min_size,
        });
    }
    Ok(())
}

/// Admissible change points inside `start..end`: multiples of `jump` leaving at
/// least `min_size` samples on each side.
pub(crate) fn admissible_splits(
    start: usize,
    end: usize,
    min_size: usize,
    jump: usize,
) -> Vec<usize> {
    let first = (start + min_size).div_ceil(jump) * jump;
    if end < min_size {
        return Vec::new();
    }
    (first..=end - min_size).step_by(jump).collect()
}

/// The grid of segment ends: multiples of `jump` from the first admissible
/// one, then `n`.
pub(crate) fn segment_ends(n: usize, min_size: usize, jump: usize) -> Vec<usize> {
    let mut ends: Vec<usize> = (min_size.div_ceil(jump) * jump..=n.saturating_sub(min_size))
        .step_by(jump)
        .collect();
    if ends.last() != Some(&n) {
        ends.push(n);
    }
    ends
}

/// PELT's pruning test runs at ends that are multiples of this (the fast RBF and L2
/// searches, portable and AVX-512 alike).
const PRUNE_EVERY: usize = 4;

/// `min_i prev[i] + cost[i]` and its first minimiser (`usize::MAX` if every
/// sum is infinite), in eight lanes that the compiler vectorises. Indices are
/// carried as doubles (exact below 2^53) so that the selection stays in
/// vector registers.
#[inline(always)]
fn argmin_of_sums(prev: &[f64], cost: &[f64]) -> (f64, usize) {
    const LANES: usize = 8;
    let len = prev.len().min(cost.len());
    let body = len / LANES * LANES;
    let mut best = [f64::INFINITY; LANES];
    let mut arg = [-1.0f64; LANES];
    let mut index: [f64; LANES] = std::array::from_fn(|j| j as f64);
    for (p, c) in prev[..body]
        .chunks_exact(LANES)
        .zip(cost[..body].chunks_exact(LANES))
    {
        for j in 0..LANES {
            let v = p[j] + c[j];
            let better = v < best[j];
            best[j] = if better { v } else { best[j] };
            arg[j] = if better { index[j] } else { arg[j] };
            index[j] += LANES as f64;
        }
    }
    let mut value = f64::INFINITY;
    let mut first = usize::MAX;
    for j in 0..LANES {
        if arg[j] < 0.0 {
            continue;
        }
        let i = arg[j] as usize;
        if best[j] < value || (best[j] == value && i < first) {
            value = best[j];
            first = i;
        }
    }
    for i in body..len {
        let v = prev[i] + cost[i];
        if v < value {
            value = v;
            first = i;
        }
    }
    (value, first)
}
