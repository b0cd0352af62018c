//! Optimal segmentation with a fixed number of change points, by dynamic
//! programming with inequality pruning.

use super::{check_length, SearchOptions, Segmentation};
use crate::cost::SegmentCost;
use crate::error::{CpdError, Result};

/// The exact segmentation with `n_change_points` change points that minimises
/// the sum of segment costs.
///
/// The recursion is the segment-neighbourhood one,
/// `F_k(t) = min_s F_{k−1}(s) + c(s, t)`, evaluated for all layers `k` at once
/// while the segment end `t` sweeps forward, so a kernel cost needs only O(n)
/// memory. When the cost is split-superadditive
/// ([`SegmentCost::is_split_superadditive`]), a start `s` of layer `k` is
/// dropped for good once `F_{k−1}(s) + c(s, t) ≥ F_{k−1}(t)` — from then on the
/// split at `t` is at least as good (the SNIP rule of Maidstone et al., 2017);
/// the result stays exact and long series with real changes run far faster than
/// the O(K n²) of the plain recursion. Ties go to the earliest last change.
///
/// ```
/// use cpd::{dynp, L2Cost, SearchOptions};
/// let series = [0.0, 0.1, 0.0, 3.0, 3.1, 3.0, 0.0, 0.1, 0.0];
/// let seg = dynp(&L2Cost::from_series(&series)?, 2, SearchOptions::default())?;
/// assert_eq!(seg.segment_ends, vec![3, 6, 9]);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn dynp<C: SegmentCost + ?Sized>(
    cost: &C,
    n_change_points: usize,
    options: SearchOptions,
) -> Result<Segmentation> {
    let min_size = options.effective_min_size(cost)?;
    let n = cost.n_samples();
    if n_change_points == 0 {
        if n < min_size {
            return Err(CpdError::TooShort {
                len: n,
                needed: min_size,
            });
        }
        return Ok(Segmentation::from_ends(cost, vec![n], 0.0));
    }
    check_length(n, min_size)?;
    let max = options.max_change_points(n, min_size);
    if n_change_points > max {
        return Err(CpdError::TooManyChangePoints {
            requested: n_change_points,
            max,
        });
    }
    let ends = segment_neighbourhood(cost, n_change_points, min_size, options.jump);
    Ok(Segmentation::from_ends(cost, ends, 0.0))
}

/// A live start of one layer.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    start: usize,
    /// The end at which the pruning rule fired (`usize::MAX` if it has not).
    pruned_at: usize,
}

fn segment_neighbourhood<C: SegmentCost + ?Sized>(
    cost: &C,
    n_change_points: usize,
    min_size: usize,
    jump: usize,
) -> Vec<usize> {
    let n = cost.n_samples();
    let layers = n_change_points + 1;
    let prune = cost.is_split_superadditive();
    // Positions are multiples of `jump`; a position's slot is `pos / jump`, and
    // an end n off the grid gets the slot after the last grid position.
    let final_slot = if n % jump == 0 {
        n / jump
    } else {
        n / jump + 1
    };
    let slots = final_slot + 1;
    // best[k][slot]: least cost of cutting 0..pos into k + 1 segments.
    let mut best = vec![vec![f64::INFINITY; slots]; layers];
    let mut back = vec![vec![usize::MAX; slots]; layers];
    // Layer 0 has the single start 0; layer k ≥ 1 starts where layer k − 1 ended.
    let mut candidates: Vec<Vec<Candidate>> = vec![Vec::new(); layers];
    candidates[0].push(Candidate {
        start: 0,
        pruned_at: usize::MAX,
    });
    // Starts alive in some layer, sorted, with the number of layers holding each.
    let mut live: Vec<usize> = vec![0];
    let mut holders = vec![0u32; slots];
    holders[0] = 1;
    let mut cost_at = vec![0.0; slots];
    let mut live_costs: Vec<f64> = Vec::new();
    let mut sweep = cost.sweep();
    let mut next_start = min_size.div_ceil(jump) * jump;

    let mut ends: Vec<usize> = (min_size.div_ceil(jump) * jump..=n.saturating_sub(min_size))
        .step_by(jump)
        .collect();
    if ends.last() != Some(&n) {
        ends.push(n);
    }

    for &end in &ends {
        // Positions that can now end an earlier segment become starts.
        while next_start + min_size <= end && next_start + min_size <= n {
            let slot = next_start / jump;
            for k in 1..layers {
                if best[k - 1][slot].is_finite() {
                    candidates[k].push(Candidate {
                        start: next_start,
                        pruned_at: usize::MAX,
                    });
                    holders[slot] += 1;
                }
            }
            if holders[slot] > 0 {
                live.push(next_start);
            }
            next_start += jump;
        }
        // A start pruned at t is dominated by the start t, usable from t + min_size.
        if prune {
            for layer in candidates.iter_mut().skip(1) {
                layer.retain(|c| {
                    let keep = c.pruned_at == usize::MAX || c.pruned_at + min_size > end;
                    if !keep {
                        holders[c.start / jump] -= 1;
                    }
                    keep
                });
            }
            live.retain(|&s| holders[s / jump] > 0);
        }
        live_costs.resize(live.len(), 0.0);
        sweep.costs_ending_at(end, &live, &mut live_costs);
        for (&s, &c) in live.iter().zip(&live_costs) {
            cost_at[s / jump] = c;
        }
        let slot_end = end / jump;
        let is_final = end == n;
        for k in 0..layers {
            if is_final && k + 1 != layers {
                continue;
            }
            let mut value = f64::INFINITY;
            let mut arg = usize::MAX;
            for c in &candidates[k] {
                let prev = if k == 0 {
                    0.0
                } else {
                    best[k - 1][c.start / jump]
                };
                let v = prev + cost_at[c.start / jump];
                if v < value {
                    value = v;
                    arg = c.start;
                }
            }
            let slot = if is_final { final_slot } else { slot_end };
            best[k][slot] = value;
            back[k][slot] = arg;
        }
        if prune && !is_final {
            for k in 1..layers {
                let bound = best[k - 1][slot_end];
                if !bound.is_finite() {
                    continue;
                }
                for c in candidates[k].iter_mut() {
                    if c.pruned_at == usize::MAX {
                        let v = best[k - 1][c.start / jump] + cost_at[c.start / jump];
                        if v >= bound {
                            c.pruned_at = end;
                        }
                    }
                }
            }
        }
    }

    // Walk the back pointers from the full series.
    let mut result = vec![n];
    let mut start = back[layers - 1][final_slot];
    for k in (0..layers - 1).rev() {
        result.push(start);
        start = back[k][start / jump];
    }
    result.reverse();
    result
}
