//! Greedy binary segmentation.

use super::{admissible_splits, check_length, check_penalty, SearchOptions, Segmentation};
use crate::cost::SegmentCost;
use crate::error::{CpdError, Result};

/// When binary segmentation stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinsegStop {
    /// After this many change points.
    ChangePoints(usize),
    /// When the best remaining split lowers the cost by no more than this
    /// (positive) penalty.
    Penalty(f64),
}

/// A segment's best change point and the cost it removes.
type BestSplit = (usize, f64);

/// Binary segmentation: repeatedly applies the best single split to whichever
/// current segment gains most from it. Fast (O(n · depth) cost evaluations for
/// L2) but greedy, so not always optimal; use [`crate::dynp`] or
/// [`crate::pelt`] for the optimum.
///
/// Ties follow ruptures 1.1.10: within a segment the largest change point wins,
/// across segments the leftmost. Unlike ruptures, change points are multiples of
/// `jump` counted from 0, as in the other searches.
///
/// ```
/// use cpd::{binseg, BinsegStop, L2Cost, SearchOptions};
/// let series = [0.0, 0.0, 0.0, 4.0, 4.0, 4.0, 9.0, 9.0, 9.0];
/// let seg = binseg(&L2Cost::from_series(&series)?, BinsegStop::ChangePoints(2), SearchOptions::default())?;
/// assert_eq!(seg.segment_ends, vec![3, 6, 9]);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn binseg<C: SegmentCost + ?Sized>(
    cost: &C,
    stop: BinsegStop,
    options: SearchOptions,
) -> Result<Segmentation> {
    let min_size = options.effective_min_size(cost)?;
    let n = cost.n_samples();
    check_length(n, min_size)?;
    let penalty = match stop {
        BinsegStop::ChangePoints(k) => {
            let max = options.max_change_points(n, min_size);
            if k > max {
                return Err(CpdError::TooManyChangePoints { requested: k, max });
            }
            0.0
        }
        BinsegStop::Penalty(p) => {
            check_penalty(p)?;
            p
        }
    };
    // Each segment with its best split (change point and gain), if it has one.
    let best_split = |start: usize, end: usize| -> Option<BestSplit> {
        let splits = admissible_splits(start, end, min_size, options.jump);
        if splits.is_empty() {
            return None;
        }
        let whole = cost.segment_cost(start, end);
        let mut left = vec![0.0; splits.len()];
        let mut right = vec![0.0; splits.len()];
        cost.split_costs(start, end, &splits, &mut left, &mut right);
        let mut best: Option<(usize, f64)> = None;
        for ((&t, l), r) in splits.iter().zip(&left).zip(&right) {
            let gain = whole - l - r;
            if best.is_none_or(|(_, g)| gain >= g) {
                best = Some((t, gain));
            }
        }
        best
    };
    let mut segments: Vec<(usize, usize, Option<BestSplit>)> = vec![(0, n, best_split(0, n))];
    loop {
        let n_changes = segments.len() - 1;
        if let BinsegStop::ChangePoints(k) = stop {
            if n_changes == k {
                break;
            }
        }
        let mut chosen: Option<(usize, usize, f64)> = None;
        for (i, &(_, _, split)) in segments.iter().enumerate() {
            if let Some((t, gain)) = split {
                if chosen.is_none_or(|(_, _, g)| gain > g) {
                    chosen = Some((i, t, gain));
                }
            }
        }
        let Some((i, t, gain)) = chosen else {
            if let BinsegStop::ChangePoints(k) = stop {
                return Err(CpdError::TooManyChangePoints {
                    requested: k,
                    max: n_changes,
                });
            }
            break;
        };
        if let BinsegStop::Penalty(p) = stop {
            if gain <= p {
                break;
            }
        }
        let (start, end, _) = segments[i];
        segments[i] = (start, t, best_split(start, t));
        segments.insert(i + 1, (t, end, best_split(t, end)));
    }
    let ends = segments.iter().map(|&(_, end, _)| end).collect();
    Ok(Segmentation::from_ends(cost, ends, penalty))
}
