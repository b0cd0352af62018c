//! The exact single change point: `argmin_t c(0, t) + c(t, n)`.

use super::{admissible_splits, check_length, SearchOptions, Segmentation};
use crate::cost::SegmentCost;
use crate::error::Result;

/// The best split of a series into two segments.
#[derive(Debug, Clone, PartialEq)]
pub struct SingleChangePoint {
    /// Exclusive end of the left segment (first sample of the right one).
    pub change_point: usize,
    /// Cost of `0..change_point`.
    pub left_cost: f64,
    /// Cost of `change_point..n`.
    pub right_cost: f64,
    /// `left_cost + right_cost`, the minimum over admissible splits.
    pub objective: f64,
    /// Cost of the whole series as one segment.
    pub unsplit_cost: f64,
    /// Number of samples.
    pub n_samples: usize,
}

impl SingleChangePoint {
    /// How much the split lowers the cost: `unsplit_cost − objective` (≥ 0 for
    /// every built-in cost).
    pub fn gain(&self) -> f64 {
        self.unsplit_cost - self.objective
    }

    /// The split as a two-segment [`Segmentation`].
    pub fn segmentation(&self) -> Segmentation {
        Segmentation {
            segment_ends: vec![self.change_point, self.n_samples],
            segment_costs: vec![self.left_cost, self.right_cost],
            penalty: 0.0,
            objective: self.objective,
        }
    }
}

/// The exact best single change point: `argmin_t c(0, t) + c(t, n)` over
/// admissible `t` (ties go to the smallest `t`).
///
/// With [`crate::L2Cost`] each candidate costs O(d), so the search is O(n · d)
/// — the thesis' "simplified Opt".
///
/// ```
/// use cpd::{single_change_point, L2Cost, SearchOptions};
/// let series = [1.0, 1.1, 0.9, 1.0, 5.0, 5.1, 4.9, 5.0];
/// let split = single_change_point(&L2Cost::from_series(&series)?, SearchOptions::default())?;
/// assert_eq!(split.change_point, 4);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn single_change_point<C: SegmentCost + ?Sized>(
    cost: &C,
    options: SearchOptions,
) -> Result<SingleChangePoint> {
    let min_size = options.effective_min_size(cost)?;
    let n = cost.n_samples();
    check_length(n, min_size)?;
    let splits = admissible_splits(0, n, min_size, options.jump);
    if splits.is_empty() {
        return Err(crate::error::CpdError::TooManyChangePoints {
            requested: 1,
            max: 0,
        });
    }
    let mut left = vec![0.0; splits.len()];
    let mut right = vec![0.0; splits.len()];
    cost.split_costs(0, n, &splits, &mut left, &mut right);
    let mut best = 0;
    let mut best_value = f64::INFINITY;
    for (i, (l, r)) in left.iter().zip(&right).enumerate() {
        let value = l + r;
        if value < best_value {
            best_value = value;
            best = i;
        }
    }
    Ok(SingleChangePoint {
        change_point: splits[best],
        left_cost: left[best],
        right_cost: right[best],
        objective: best_value,
        unsplit_cost: cost.segment_cost(0, n),
        n_samples: n,
    })
}
