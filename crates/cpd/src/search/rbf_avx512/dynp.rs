//! The dynamic programme over the single pass: up to [`MAX_FUSED`] layers per pass.

use super::super::argmin_of_sums;
use super::sinks::Layers;
use super::{Minimum, Pass, MAX_FUSED, PAD};
use crate::cost::{RbfCost, SegmentCost};

/// One DP pass with `L ≤ MAX_FUSED` fused layers (costs stored).
///
/// # Safety
///
/// The CPU has AVX-512F; `0 < end ≤ n` after the move; every `live` slice has
/// `PAD + n + 1` entries, `+∞` in the padding.
#[inline(always)]
unsafe fn dp_pass<const L: usize>(pass: &mut Pass, live: [&[f64]; L]) -> [Minimum; L] {
    // SAFETY: forwarded from the caller.
    unsafe {
        let mut layers = Layers::new(live);
        pass.sweep::<_, true>(0, &mut layers);
        layers.minima(&pass.costs, live)
    }
}

/// [`dp_pass`] with a run-time number of fused layers (0 to [`MAX_FUSED`]).
///
/// # Safety
///
/// As [`dp_pass`].
#[inline(always)]
unsafe fn dp_pass_layers(pass: &mut Pass, live: &[&[f64]], out: &mut [Minimum]) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match *live {
            [] => {
                dp_pass::<0>(pass, []);
            }
            [a] => out[..1].copy_from_slice(&dp_pass(pass, [a])),
            [a, b] => out[..2].copy_from_slice(&dp_pass(pass, [a, b])),
            [a, b, c] => out[..3].copy_from_slice(&dp_pass(pass, [a, b, c])),
            [a, b, c, d] => out[..4].copy_from_slice(&dp_pass(pass, [a, b, c, d])),
            _ => unreachable!("at most {MAX_FUSED} fused layers"),
        }
    }
}

/// [`crate::search::rbf_fast::dynp_rbf`] for a series (one column) on a CPU with
/// AVX-512F; `None` otherwise.
pub(crate) fn dynp_rbf(
    cost: &RbfCost,
    n_change_points: usize,
    min_size: usize,
) -> Option<(Vec<usize>, Vec<f64>)> {
    if cost.n_dims() != 1
        || crate::cost::kernel_row::simd() != crate::cost::kernel_row::Simd::Avx512
    {
        return None;
    }
    // SAFETY: the CPU has AVX-512F (checked above).
    Some(unsafe { dynp_body(cost, n_change_points, min_size) })
}

#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dynp_body(
    cost: &RbfCost,
    n_change_points: usize,
    min_size: usize,
) -> (Vec<usize>, Vec<f64>) {
    let n = cost.n_samples();
    let layers = n_change_points + 1;
    // best[k][pos]: least cost of cutting 0..pos into k + 1 segments, the last
    // one back[k][pos]..pos of cost back_cost[k][pos].
    let mut best = vec![vec![f64::INFINITY; n + 1]; layers];
    let mut back = vec![vec![usize::MAX; n + 1]; layers];
    let mut back_cost = vec![vec![f64::NAN; n + 1]; layers];
    // live[k − 1][PAD + s] = F_{k−1}(s) once s ≤ end − min_size (+∞ before):
    // layer k's candidates, revealed as they become admissible.
    let mut live = vec![vec![f64::INFINITY; PAD + n + 1]; layers - 1];
    let mut pass = Pass::new(cost);
    let mut minima = vec![
        Minimum {
            value: f64::INFINITY,
            start: usize::MAX
        };
        layers
    ];
    for end in 1..=n {
        let is_final = end == n;
        if end >= min_size {
            let newest = end - min_size;
            for k in 1..layers {
                live[k - 1][PAD + newest] = best[k - 1][newest];
            }
        }
        // Layers 1..layers−1 before the last end; the last layer only there.
        let wanted: &[Vec<f64>] = if end < min_size {
            &[]
        } else if is_final {
            &live[layers - 2..]
        } else {
            &live[..layers - 2]
        };
        let first_layer = if is_final { layers - 1 } else { 1 };
        let fused: Vec<&[f64]> = wanted.iter().take(MAX_FUSED).map(Vec::as_slice).collect();
        let rest = &wanted[fused.len()..];
        // SAFETY: AVX-512F is present (the caller checked); 0 < end ≤ n, and
        // the live arrays have PAD + n + 1 entries, +∞ in the padding.
        unsafe { dp_pass_layers(&mut pass, &fused, &mut minima) };
        for (i, layer) in rest.iter().enumerate() {
            let hi = PAD + end;
            let (value, at) = argmin_of_sums(&layer[PAD..hi], &pass.costs[PAD..hi]);
            minima[fused.len() + i] = Minimum { value, start: at };
        }
        if end >= min_size && !is_final {
            best[0][end] = pass.costs[PAD];
            back[0][end] = 0;
            back_cost[0][end] = best[0][end];
        }
        for (i, min) in minima[..wanted.len()].iter().enumerate() {
            if min.start != usize::MAX {
                let k = first_layer + i;
                best[k][end] = min.value;
                back[k][end] = min.start;
                back_cost[k][end] = pass.costs[PAD + min.start];
            }
        }
    }
    let mut ends = vec![n];
    let mut segment_costs = vec![back_cost[layers - 1][n]];
    let mut start = back[layers - 1][n];
    for k in (0..layers - 1).rev() {
        ends.push(start);
        segment_costs.push(back_cost[k][start]);
        start = back[k][start];
    }
    ends.reverse();
    segment_costs.reverse();
    (ends, segment_costs)
}
