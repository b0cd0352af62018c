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
    let (change_point, left_cost, right_cost) = best_split(cost, min_size, options.jump)?;
    Ok(SingleChangePoint {
        change_point,
        left_cost,
        right_cost,
        objective: left_cost + right_cost,
        unsplit_cost: cost.segment_cost(0, n),
        n_samples: n,
    })
}

/// The best admissible split of `0..n` (ties to the smallest) and the costs of
/// its two segments. Callers have validated the options and the length.
pub(crate) fn best_split<C: SegmentCost + ?Sized>(
    cost: &C,
    min_size: usize,
    jump: usize,
) -> Result<(usize, f64, f64)> {
    let n = cost.n_samples();
    let splits = admissible_splits(0, n, min_size, jump);
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
    Ok((splits[best], left[best], right[best]))
}

/// The exact best single change point of a series under the L2 cost, in two
/// streaming passes and O(1) extra memory — the fast path of
/// [`single_change_point`] with [`crate::L2Cost`] (same result, ties to the
/// smallest split), for long series.
///
/// Minimising `c(0, t) + c(t, n)` is maximising `S_t²/t + (S_n − S_t)²/(n − t)`
/// with `S_t` the running sum of the series centred on its mean.
///
/// ```
/// use cpd::{single_change_point_l2, SearchOptions};
/// let split = single_change_point_l2(&[1.0, 1.2, 0.8, 5.0, 5.1], SearchOptions::default())?;
/// assert_eq!(split.change_point, 3);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn single_change_point_l2(series: &[f64], options: SearchOptions) -> Result<SingleChangePoint> {
    crate::signal::validate_series(series, "series")?;
    let cost = LengthOnly(series.len());
    let min_size = options.effective_min_size(&cost)?;
    let n = series.len();
    check_length(n, min_size)?;
    let jump = options.jump;
    let first = min_size.div_ceil(jump) * jump;
    if first + min_size > n {
        return Err(crate::error::CpdError::TooManyChangePoints {
            requested: 1,
            max: 0,
        });
    }
    let mean = series.iter().sum::<f64>() / n as f64;
    let (mut total, mut total_sq) = (0.0, 0.0);
    for &x in series {
        total += x - mean;
        total_sq += (x - mean) * (x - mean);
    }
    let mut running = 0.0;
    let (mut best_t, mut best_explained, mut best_left) = (first, f64::NEG_INFINITY, 0.0);
    for (i, &x) in series[..n - min_size].iter().enumerate() {
        running += x - mean;
        let t = i + 1;
        if t >= first && t % jump == 0 {
            let right = total - running;
            let explained = running * running / t as f64 + right * right / (n - t) as f64;
            if explained > best_explained {
                (best_t, best_explained, best_left) = (t, explained, running);
            }
        }
    }
    let left_sq: f64 = series[..best_t]
        .iter()
        .map(|x| (x - mean) * (x - mean))
        .sum();
    let (lt, rt) = (best_t as f64, (n - best_t) as f64);
    let left_cost = (left_sq - best_left * best_left / lt).max(0.0);
    let right_sum = total - best_left;
    let right_cost = (total_sq - left_sq - right_sum * right_sum / rt).max(0.0);
    Ok(SingleChangePoint {
        change_point: best_t,
        left_cost,
        right_cost,
        objective: left_cost + right_cost,
        unsplit_cost: (total_sq - total * total / n as f64).max(0.0),
        n_samples: n,
    })
}

/// A stand-in cost that only knows the length, for option validation.
struct LengthOnly(usize);

impl SegmentCost for LengthOnly {
    fn n_samples(&self) -> usize {
        self.0
    }
    fn segment_cost(&self, _start: usize, _end: usize) -> f64 {
        0.0
    }
}
