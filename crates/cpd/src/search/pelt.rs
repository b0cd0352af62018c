//! PELT: the exact penalised segmentation with pruning (Killick, Fearnhead and
//! Eckley, 2012), with `min_size` and `jump` handled without losing exactness.

use super::{check_length, check_penalty, segment_ends, SearchOptions, Segmentation};
use crate::cost::SegmentCost;
use crate::error::Result;

/// The exact minimiser of `Σ segment costs + penalty × (number of change points)`.
///
/// The recursion is `F(t) = min_s F(s) + c(s, t) + penalty` with `F(0) =
/// −penalty`. When the cost is split-superadditive, a start `s` with
/// `F(s) + c(s, t) ≥ F(t)` can never beat the start `t` — but only once `t` is
/// itself usable, i.e. for ends at least `t + min_size`. ruptures 1.1.10 drops
/// such starts at once, which loses the optimum when `min_size > 1`: on
/// `[0, 1, 0, 0, 1]` (L2, `min_size` 2, penalty 0.1) it returns `[2, 5]`, while the
/// optimum is `[5]`. Here a pruned start stays until the dominating start is
/// usable, so the result is the true optimum:
///
/// ```
/// use cpd::{pelt, L2Cost, SearchOptions};
/// let cost = L2Cost::from_series(&[0.0, 1.0, 0.0, 0.0, 1.0])?;
/// let seg = pelt(&cost, 0.1, SearchOptions::new(2, 1))?;
/// assert_eq!(seg.segment_ends, vec![5]);
/// assert!((seg.objective - 1.2).abs() < 1e-12);
/// # Ok::<(), cpd::CpdError>(())
/// ```
///
/// [`crate::L2Cost`] uses functional pruning (FPOP; for a series with jump 1
/// on AVX-512 machines, dense vectorised PELT while few starts are live) and
/// [`crate::RbfCost`] with jump 1 a fused, vectorised kernel loop; all are
/// exact, like the generic path.
///
/// The penalty must be positive and finite ([`crate::Penalty`] computes the usual
/// choices). Ties go to the earliest last change.
pub fn pelt<C: SegmentCost + ?Sized>(
    cost: &C,
    penalty: f64,
    options: SearchOptions,
) -> Result<Segmentation> {
    check_penalty(penalty)?;
    let min_size = options.effective_min_size(cost)?;
    let n = cost.n_samples();
    check_length(n, min_size)?;
    let jump = options.jump;
    if let Some(l2) = cost.as_l2() {
        let ends = super::l2_fast::pelt_l2(l2, penalty, min_size, jump);
        return Ok(Segmentation::from_ends(cost, ends, penalty));
    }
    if let (Some(rbf), 1) = (cost.as_rbf(), jump) {
        let (ends, costs) = super::rbf_fast::pelt_rbf(rbf, penalty, min_size);
        return Ok(Segmentation::from_parts(ends, costs, penalty));
    }
    let prune = cost.is_split_superadditive();
    let final_slot = n.div_ceil(jump);
    let mut best = vec![f64::INFINITY; final_slot + 1];
    let mut back = vec![usize::MAX; final_slot + 1];
    // The cost of the last segment back[slot]..pos, as the sweep computed it.
    let mut back_cost = vec![f64::NAN; final_slot + 1];
    best[0] = -penalty;

    // Live starts, sorted, with F(start) and the end at which each was found
    // dominated (`usize::MAX` if not yet).
    let mut starts: Vec<usize> = vec![0];
    let mut values: Vec<f64> = vec![-penalty];
    let mut pruned_at: Vec<usize> = vec![usize::MAX];
    // The smallest `pruned_at + min_size`: before it, nothing expires.
    let mut next_expiry = usize::MAX;
    let mut costs: Vec<f64> = Vec::new();
    let mut sweep = cost.sweep();
    let mut next_start = min_size.div_ceil(jump) * jump;

    let ends = segment_ends(n, min_size, jump);

    for &end in &ends {
        while next_start + min_size <= end && next_start + min_size <= n {
            let value = best[next_start / jump];
            if value.is_finite() {
                starts.push(next_start);
                values.push(value);
                pruned_at.push(usize::MAX);
            }
            next_start += jump;
        }
        if end >= next_expiry {
            let mut kept = 0;
            next_expiry = usize::MAX;
            for r in 0..starts.len() {
                let p = pruned_at[r];
                if p == usize::MAX || p + min_size > end {
                    if p != usize::MAX {
                        next_expiry = next_expiry.min(p + min_size);
                    }
                    starts[kept] = starts[r];
                    values[kept] = values[r];
                    pruned_at[kept] = p;
                    kept += 1;
                }
            }
            starts.truncate(kept);
            values.truncate(kept);
            pruned_at.truncate(kept);
        }
        costs.resize(starts.len(), 0.0);
        sweep.costs_ending_at(end, &starts, &mut costs);
        let mut value = f64::INFINITY;
        let mut arg = usize::MAX;
        for (i, (&f, &c)) in values.iter().zip(&costs).enumerate() {
            let v = f + c;
            if v < value {
                value = v;
                arg = i;
            }
        }
        let is_final = end == n;
        let slot = if is_final { final_slot } else { end / jump };
        best[slot] = value + penalty;
        if arg != usize::MAX {
            back[slot] = starts[arg];
            back_cost[slot] = costs[arg];
        }
        if prune && !is_final {
            // F(s) + c(s, t) ≥ F(t), with F(t) = value + penalty.
            let bound = value + penalty;
            for ((&f, &c), p) in values.iter().zip(&costs).zip(pruned_at.iter_mut()) {
                if *p == usize::MAX && f + c >= bound {
                    *p = end;
                    next_expiry = next_expiry.min(end + min_size);
                }
            }
        }
    }

    let mut ends_out = vec![n];
    let mut segment_costs = vec![back_cost[final_slot]];
    let mut start = back[final_slot];
    while start > 0 {
        ends_out.push(start);
        segment_costs.push(back_cost[start / jump]);
        start = back[start / jump];
    }
    ends_out.reverse();
    segment_costs.reverse();
    Ok(Segmentation::from_parts(ends_out, segment_costs, penalty))
}
