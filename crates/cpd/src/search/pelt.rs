//! PELT: the exact penalised segmentation with pruning (Killick, Fearnhead and
//! Eckley, 2012), with `min_size` and `jump` handled without losing exactness.

use super::{check_length, check_penalty, SearchOptions, Segmentation};
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
    let prune = cost.is_split_superadditive();
    let final_slot = if n % jump == 0 {
        n / jump
    } else {
        n / jump + 1
    };
    let mut best = vec![f64::INFINITY; final_slot + 1];
    let mut back = vec![usize::MAX; final_slot + 1];
    best[0] = -penalty;

    // Live starts, sorted, and the end at which each was found dominated.
    let mut starts: Vec<usize> = vec![0];
    let mut pruned_at: Vec<usize> = vec![usize::MAX];
    let mut costs: Vec<f64> = Vec::new();
    let mut sweep = cost.sweep();
    let mut next_start = min_size.div_ceil(jump) * jump;

    let mut ends: Vec<usize> = (min_size.div_ceil(jump) * jump..=n.saturating_sub(min_size))
        .step_by(jump)
        .collect();
    if ends.last() != Some(&n) {
        ends.push(n);
    }

    for &end in &ends {
        while next_start + min_size <= end && next_start + min_size <= n {
            starts.push(next_start);
            pruned_at.push(usize::MAX);
            next_start += jump;
        }
        if prune {
            let mut w = 0;
            for r in 0..starts.len() {
                if pruned_at[r] == usize::MAX || pruned_at[r] + min_size > end {
                    starts[w] = starts[r];
                    pruned_at[w] = pruned_at[r];
                    w += 1;
                }
            }
            starts.truncate(w);
            pruned_at.truncate(w);
        }
        costs.resize(starts.len(), 0.0);
        sweep.costs_ending_at(end, &starts, &mut costs);
        let mut value = f64::INFINITY;
        let mut arg = usize::MAX;
        for (&s, &c) in starts.iter().zip(&costs) {
            let v = best[s / jump] + c;
            if v < value {
                value = v;
                arg = s;
            }
        }
        let is_final = end == n;
        let slot = if is_final { final_slot } else { end / jump };
        best[slot] = value + penalty;
        back[slot] = arg;
        if prune && !is_final {
            for ((&s, &c), p) in starts.iter().zip(&costs).zip(pruned_at.iter_mut()) {
                // F(s) + c(s, t) ≥ F(t), with F(t) = value + penalty.
                if *p == usize::MAX && best[s / jump] + c >= value + penalty {
                    *p = end;
                }
            }
        }
    }

    let mut ends_out = vec![n];
    let mut start = back[final_slot];
    while start > 0 {
        ends_out.push(start);
        start = back[start / jump];
    }
    ends_out.reverse();
    Ok(Segmentation::from_ends(cost, ends_out, penalty))
}
