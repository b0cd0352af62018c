//! Optimal segmentation with a fixed number of change points, by dynamic
//! programming with inequality pruning.

use super::{check_length, segment_ends, SearchOptions, Segmentation};
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
/// the O(K n²) of the plain recursion. Ties go to the earliest last change
/// (up to rounding in the specialised paths below).
///
/// Three cases have specialised, equally exact algorithms:
/// * one change point is the best single split
///   ([`SegmentCost::split_costs`], no per-start work);
/// * [`crate::L2Cost`] ([`SegmentCost::as_l2`]) uses functional pruning over
///   the last segment's mean (the pruned DP of Rigaill / FPOP), which keeps
///   only a handful of starts per layer: near-linear time on real signals;
/// * [`crate::RbfCost`] with jump 1 ([`SegmentCost::as_rbf`]) runs one fused,
///   vectorised pass over the kernel row of each new point (still O(n²)
///   kernels, as any exact kernel search).
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
    if n_change_points == 1 {
        // One change point is the best single split (ties to the earliest, as
        // below); `split_costs` lets a kernel cost evaluate each kernel once,
        // with no per-start work.
        let (change, left, right) = super::single::best_split(cost, min_size, options.jump)?;
        return Ok(Segmentation::from_parts(
            vec![change, n],
            vec![left, right],
            0.0,
        ));
    }
    if let Some(l2) = cost.as_l2() {
        let ends = super::l2_fast::dynp_l2(l2, n_change_points, min_size, options.jump);
        return Ok(Segmentation::from_ends(cost, ends, 0.0));
    }
    if let (Some(rbf), 1) = (cost.as_rbf(), options.jump) {
        let (ends, costs) = super::rbf_fast::dynp_rbf(rbf, n_change_points, min_size);
        return Ok(Segmentation::from_parts(ends, costs, 0.0));
    }
    let (ends, costs) = segment_neighbourhood(cost, n_change_points, min_size, options.jump);
    Ok(Segmentation::from_parts(ends, costs, 0.0))
}

/// The live starts of one layer `k ≥ 1`, as parallel arrays in increasing order.
#[derive(Debug, Default)]
struct Layer {
    /// `start / jump`.
    slots: Vec<usize>,
    /// `F_{k−1}(start)`, fixed once the start joins.
    values: Vec<f64>,
    /// The end at which the pruning rule fired (`usize::MAX` if it has not).
    pruned_at: Vec<usize>,
    /// The smallest `pruned_at + min_size`: before it, nothing expires.
    next_expiry: usize,
}

/// The best segmentations with `n_change_points` changes: segment ends and
/// segment costs (as the sweep computed them, so a kernel cost is not
/// evaluated again).
fn segment_neighbourhood<C: SegmentCost + ?Sized>(
    cost: &C,
    n_change_points: usize,
    min_size: usize,
    jump: usize,
) -> (Vec<usize>, Vec<f64>) {
    let n = cost.n_samples();
    let layers = n_change_points + 1;
    let prune = cost.is_split_superadditive();
    // Positions are multiples of `jump`; a position's slot is `pos / jump`, and
    // an end n off the grid gets the slot after the last grid position.
    let final_slot = n.div_ceil(jump);
    let slots = final_slot + 1;
    // best[k][slot]: least cost of cutting 0..pos into k + 1 segments, reached
    // with the last segment back[k][slot]..pos of cost back_cost[k][slot].
    let mut best = vec![vec![f64::INFINITY; slots]; layers];
    let mut back = vec![vec![usize::MAX; slots]; layers];
    let mut back_cost = vec![vec![f64::NAN; slots]; layers];
    // Layer 0 has the single start 0; layer k ≥ 1 starts where layer k − 1 ended.
    let mut candidates: Vec<Layer> = (1..layers)
        .map(|_| Layer {
            next_expiry: usize::MAX,
            ..Layer::default()
        })
        .collect();
    // Starts alive in some layer, sorted, with the number of layers holding each.
    let mut live: Vec<usize> = vec![0];
    let mut holders = vec![0u32; slots];
    holders[0] = 1;
    let mut cost_at = vec![0.0; slots];
    let mut live_costs: Vec<f64> = Vec::new();
    let mut sweep = cost.sweep();
    let mut next_start = min_size.div_ceil(jump) * jump;

    let ends = segment_ends(n, min_size, jump);

    for &end in &ends {
        // Positions that can now end an earlier segment become starts.
        while next_start + min_size <= end && next_start + min_size <= n {
            let slot = next_start / jump;
            for (k, layer) in candidates.iter_mut().enumerate() {
                let value = best[k][slot];
                if value.is_finite() {
                    layer.slots.push(slot);
                    layer.values.push(value);
                    layer.pruned_at.push(usize::MAX);
                    holders[slot] += 1;
                }
            }
            if holders[slot] > 0 {
                live.push(next_start);
            }
            next_start += jump;
        }
        // A start pruned at t is dominated by the start t, usable from t + min_size.
        let mut dropped = false;
        for layer in candidates.iter_mut() {
            if end < layer.next_expiry {
                continue;
            }
            let mut kept = 0;
            let mut next_expiry = usize::MAX;
            for r in 0..layer.slots.len() {
                let pruned_at = layer.pruned_at[r];
                if pruned_at == usize::MAX || pruned_at + min_size > end {
                    if pruned_at != usize::MAX {
                        next_expiry = next_expiry.min(pruned_at + min_size);
                    }
                    layer.slots[kept] = layer.slots[r];
                    layer.values[kept] = layer.values[r];
                    layer.pruned_at[kept] = pruned_at;
                    kept += 1;
                } else {
                    holders[layer.slots[r]] -= 1;
                    dropped = true;
                }
            }
            layer.slots.truncate(kept);
            layer.values.truncate(kept);
            layer.pruned_at.truncate(kept);
            layer.next_expiry = next_expiry;
        }
        if dropped {
            live.retain(|&s| holders[s / jump] > 0);
        }
        live_costs.resize(live.len(), 0.0);
        sweep.costs_ending_at(end, &live, &mut live_costs);
        if jump == 1 {
            for (&s, &c) in live.iter().zip(&live_costs) {
                cost_at[s] = c;
            }
        } else {
            for (&s, &c) in live.iter().zip(&live_costs) {
                cost_at[s / jump] = c;
            }
        }
        let is_final = end == n;
        let slot = if is_final { final_slot } else { end / jump };
        if !is_final {
            best[0][slot] = cost_at[0];
            back[0][slot] = 0;
            back_cost[0][slot] = cost_at[0];
        }
        for (k, layer) in candidates.iter_mut().enumerate().map(|(k, l)| (k + 1, l)) {
            if is_final && k + 1 != layers {
                continue;
            }
            let mut value = f64::INFINITY;
            let mut arg = usize::MAX;
            for (&s, &prev) in layer.slots.iter().zip(&layer.values) {
                let v = prev + cost_at[s];
                if v < value {
                    value = v;
                    arg = s;
                }
            }
            best[k][slot] = value;
            if arg != usize::MAX {
                back[k][slot] = arg * jump;
                back_cost[k][slot] = cost_at[arg];
            }
            // SNIP: F_{k−1}(s) + c(s, t) ≥ F_{k−1}(t) prunes s in layer k.
            let bound = best[k - 1][slot];
            if prune && !is_final && bound.is_finite() {
                for ((&s, &prev), pruned_at) in layer
                    .slots
                    .iter()
                    .zip(&layer.values)
                    .zip(layer.pruned_at.iter_mut())
                {
                    if *pruned_at == usize::MAX && prev + cost_at[s] >= bound {
                        *pruned_at = end;
                        layer.next_expiry = layer.next_expiry.min(end + min_size);
                    }
                }
            }
        }
    }

    // Walk the back pointers from the full series.
    let mut result = vec![n];
    let mut costs = vec![back_cost[layers - 1][final_slot]];
    let mut start = back[layers - 1][final_slot];
    for k in (0..layers - 1).rev() {
        result.push(start);
        costs.push(back_cost[k][start / jump]);
        start = back[k][start / jump];
    }
    result.reverse();
    costs.reverse();
    (result, costs)
}
