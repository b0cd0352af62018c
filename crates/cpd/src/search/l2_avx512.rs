//! The start of exact PELT with the L2 cost for a series on AVX-512 machines:
//! dense evaluation of every live start while there are few.
//!
//! Functional pruning ([`super::l2_fast`]) keeps a handful of starts, but
//! admitting each new start costs a few hundred cycles of branchy interval
//! bookkeeping. While PELT's inequality pruning alone leaves a short window
//! of live starts (short segments, small series), evaluating all of them in
//! one vectorised pass — prefix sums, cost, running minimum, pruning test,
//! eight starts at a time — is cheaper. Once the window grows past
//! [`DENSE_MAX`] starts, the caller admits the remaining live starts into
//! functional pruning and continues there.

use std::arch::x86_64::{
    __m512d, __m512i, _mm512_add_pd, _mm512_cmp_pd_mask, _mm512_fnmadd_pd, _mm512_loadu_pd,
    _mm512_mask_blend_epi64, _mm512_mask_cmp_pd_mask, _mm512_max_pd, _mm512_min_pd, _mm512_mul_pd,
    _mm512_set1_epi64, _mm512_set1_pd, _mm512_setzero_pd, _mm512_sub_pd, _CMP_GE_OQ, _CMP_LE_OQ,
    _CMP_LT_OQ,
};
use std::collections::VecDeque;

use super::rbf_avx512::{first_minimiser, Minimum, LANES, PAD};
use super::PRUNE_EVERY;

/// Live-window length (starts from the lowest live one to the newest) beyond
/// which functional pruning takes over: about where one dense pass costs as
/// much as one admission there (measured on an AVX-512 server core).
pub(super) const DENSE_MAX: usize = 256;

/// Where the dense phase stopped.
#[derive(Debug)]
pub(super) struct DenseState {
    /// Ends up to this one (in `ends`) are done: `best` and `back` are filled.
    pub(super) done: usize,
    /// The next start to admit (every earlier start is admitted or pruned).
    pub(super) next_start: usize,
    /// The starts still candidates, ascending, with `F(s)`.
    pub(super) live: Vec<(usize, f64)>,
}

/// Runs PELT (jump 1) over `ends` with dense evaluation until the live window
/// exceeds [`DENSE_MAX`]; `None` without AVX-512F. `sum` and `sq` are the
/// prefix sums of the centred series and its squares (`n + 1` each);
/// `inverse[l] = 1 / l`; `best[0] = −penalty` on entry.
pub(super) fn dense_pelt(
    sum: &[f64],
    sq: &[f64],
    penalty: f64,
    min_size: usize,
    ends: &[usize],
    best: &mut [f64],
    back: &mut [usize],
) -> Option<DenseState> {
    if crate::cost::kernel_row::simd() != crate::cost::kernel_row::Simd::Avx512 {
        return None;
    }
    // SAFETY: the CPU has AVX-512F (checked above).
    Some(unsafe { dense_body(sum, sq, penalty, min_size, ends, best, back) })
}

#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dense_body(
    sum: &[f64],
    sq: &[f64],
    penalty: f64,
    min_size: usize,
    ends: &[usize],
    best: &mut [f64],
    back: &mut [usize],
) -> DenseState {
    let n = sum.len() - 1;
    // Padded copies (PAD entries in front) so that a chunk reaching below the
    // lowest live start stays in bounds; `inverse[PAD + j] = 1 / (n − j)`, so
    // that at the end t the start s reads 1 / (t − s) forwards.
    let padded = |values: &[f64]| {
        let mut out = vec![0.0; PAD + values.len()];
        out[PAD..].copy_from_slice(values);
        out
    };
    let sum_p = padded(sum);
    let sq_p = padded(sq);
    let mut inverse = vec![0.0; PAD + n];
    for (j, inv) in inverse[PAD..].iter_mut().enumerate() {
        *inv = 1.0 / (n - j) as f64;
    }
    // live[PAD + s] = F(s) for candidate starts, +∞ otherwise.
    let mut live = vec![f64::INFINITY; PAD + n + 1];
    let mut pruned = vec![false; n + 1];
    let mut expiring: VecDeque<(usize, usize)> = VecDeque::new();
    let mut flagged = vec![(0usize, 0u8); n / LANES + 2];
    let (mut base, mut next_start) = (0, 0);
    let penalty_lanes = _mm512_set1_pd(penalty);
    for (done, &end) in ends.iter().enumerate() {
        while next_start + min_size <= end {
            live[PAD + next_start] = best[next_start];
            next_start += 1;
        }
        // A start pruned at t is dominated by the start t, usable from t + min_size.
        while let Some(&(drop_at, s)) = expiring.front() {
            if drop_at > end {
                break;
            }
            live[PAD + s] = f64::INFINITY;
            expiring.pop_front();
        }
        while base + 1 < next_start && live[PAD + base] == f64::INFINITY {
            base += 1;
        }
        let prune = end < n && end.is_multiple_of(PRUNE_EVERY);
        // SAFETY: AVX-512F (the caller's promise); base < next_start ≤ end ≤ n
        // and every array has at least PAD + n entries.
        let (min, flagged_len) = unsafe {
            let arrays = Arrays {
                sum: &sum_p,
                sq: &sq_p,
                inverse: &inverse,
                live: &live,
            };
            if prune {
                sweep::<true>(arrays, base, next_start, end, penalty_lanes, &mut flagged)
            } else {
                sweep::<false>(arrays, base, next_start, end, penalty_lanes, &mut flagged)
            }
        };
        if min.start != usize::MAX {
            best[end] = min.value + penalty;
            back[end] = min.start;
        }
        for &(lo, lanes) in &flagged[..flagged_len] {
            for lane in 0..LANES {
                if lanes & (1 << lane) != 0 {
                    let s = lo + lane - PAD;
                    if !pruned[s] {
                        pruned[s] = true;
                        expiring.push_back((end + min_size, s));
                    }
                }
            }
        }
        if next_start - base > DENSE_MAX && done + 1 < ends.len() {
            let survivors = (base..next_start)
                .filter(|&s| live[PAD + s] < f64::INFINITY)
                .map(|s| (s, live[PAD + s]))
                .collect();
            return DenseState {
                done: end,
                next_start,
                live: survivors,
            };
        }
    }
    DenseState {
        done: n,
        next_start,
        live: Vec::new(),
    }
}

/// The padded arrays one pass reads.
#[derive(Clone, Copy)]
struct Arrays<'a> {
    sum: &'a [f64],
    sq: &'a [f64],
    inverse: &'a [f64],
    live: &'a [f64],
}

/// The least `F(s) + c(s, end)` over the starts `base..top` (first minimiser)
/// and, with `PRUNE`, the chunks holding live starts with `F(s) + c(s, end) ≥`
/// their lane's running least `+ penalty` (an upper bound of `F(end)`, so
/// every flagged start is prunable): padded chunk position and lane mask,
/// written to `flagged`, their count returned.
///
/// # Safety
///
/// The CPU has AVX-512F; `base < top ≤ end ≤ n`; the arrays have at least
/// `PAD + n` entries; `flagged` has room for one entry per chunk.
#[inline(always)]
unsafe fn sweep<const PRUNE: bool>(
    arrays: Arrays<'_>,
    base: usize,
    top: usize,
    end: usize,
    penalty: __m512d,
    flagged: &mut [(usize, u8)],
) -> (Minimum, usize) {
    let n = arrays.sum.len() - PAD - 1;
    debug_assert!(base < top && top <= end && end <= n);
    let sum = arrays.sum.as_ptr();
    let sq = arrays.sq.as_ptr();
    let live = arrays.live.as_ptr();
    let inverse = arrays.inverse.as_ptr().wrapping_add(n - end);
    let mut flagged_len = 0;
    // SAFETY: AVX-512F (the caller's promise). Every chunk lo..lo+8 has
    // lo ≥ PAD + top − 8·⌈(top − base)/8⌉ ≥ PAD − 7 ≥ 1 and
    // lo + 8 ≤ PAD + top ≤ PAD + n, inside sum, sq, live and
    // inverse + (n − end) (PAD + end entries from there).
    unsafe {
        let sum_end = _mm512_set1_pd(arrays.sum[PAD + end]);
        let sq_end = _mm512_set1_pd(arrays.sq[PAD + end]);
        let zero = _mm512_setzero_pd();
        let infinity = _mm512_set1_pd(f64::INFINITY);
        let mut best: __m512d = infinity;
        let mut best_lo: __m512i = _mm512_set1_epi64(-1);
        let mut top = top;
        while top > base {
            let lo = PAD + top - LANES;
            let diff = _mm512_sub_pd(sum_end, _mm512_loadu_pd(sum.add(lo)));
            let within = _mm512_sub_pd(sq_end, _mm512_loadu_pd(sq.add(lo)));
            let explained = _mm512_mul_pd(diff, diff);
            // c(s, end) = Σ x² − (Σ x)² / len, at least 0 against rounding;
            // like `f64::max` in the scalar cost, a NaN (overflowing sums of
            // squares) becomes 0 (vmaxpd returns its second operand).
            let cost = _mm512_max_pd(
                _mm512_fnmadd_pd(explained, _mm512_loadu_pd(inverse.add(lo)), within),
                zero,
            );
            let value = _mm512_add_pd(_mm512_loadu_pd(live.add(lo)), cost);
            // Going down, `≤` keeps the lowest start among equals. The
            // running least is a `min` (a short dependency chain from chunk to
            // chunk); the comparison only steers where its start is kept.
            let take = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(value, best);
            best = _mm512_min_pd(value, best);
            best_lo = _mm512_mask_blend_epi64(take, best_lo, _mm512_set1_epi64(lo as i64));
            if PRUNE {
                let finite = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(value, infinity);
                let bound = _mm512_add_pd(best, penalty);
                let hit = _mm512_mask_cmp_pd_mask::<_CMP_GE_OQ>(finite, value, bound);
                if hit != 0 {
                    flagged[flagged_len] = (lo, hit);
                    flagged_len += 1;
                }
            }
            top -= LANES.min(top);
        }
        (first_minimiser(best, best_lo), flagged_len)
    }
}

#[cfg(test)]
mod tests {
    use super::super::l2_fast::pelt_l2_with;
    use crate::cost::{L2Cost, SegmentCost};

    /// Piecewise-constant levels (jumps of 1 to 4) with uniform noise.
    fn series(n: usize, segments: usize, seed: u64) -> Vec<f64> {
        let mut state = seed | 1;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut level = 0.0;
        let levels: Vec<f64> = (0..segments)
            .map(|_| {
                level += (1.0 + 3.0 * uniform()) * if uniform() < 0.5 { 1.0 } else { -1.0 };
                level
            })
            .collect();
        (0..n)
            .map(|i| levels[i * segments / n] + uniform() - 0.5)
            .collect()
    }

    fn objective(cost: &L2Cost, ends: &[usize], penalty: f64) -> f64 {
        crate::sum_of_costs(cost, ends) + penalty * (ends.len() - 1) as f64
    }

    /// The dense first phase (alone, or handing over to functional pruning
    /// when its window grows past `DENSE_MAX`) against functional pruning
    /// alone: same change points and objective.
    #[test]
    fn dense_start_equals_functional_pruning() {
        if crate::cost::kernel_row::simd() != crate::cost::kernel_row::Simd::Avx512 {
            eprintln!("no AVX-512 on this machine: the dense phase is not used");
            return;
        }
        let mut handed_over = [false, false];
        for (seed, n, segments) in [
            (1u64, 37usize, 3usize),
            (2, 300, 8),
            (3, 900, 2),
            (4, 1500, 9),
        ] {
            let xs = series(n, segments, seed);
            let cost = L2Cost::from_series(&xs).unwrap();
            for min_size in [1, 2, 5] {
                for penalty in [0.5, 4.0, 30.0] {
                    let dense = pelt_l2_with(&cost, penalty, min_size, 1, true);
                    let fpop = pelt_l2_with(&cost, penalty, min_size, 1, false);
                    let what = format!("seed {seed} n {n} min_size {min_size} penalty {penalty}");
                    assert_eq!(dense, fpop, "{what}");
                    let (a, b) = (
                        objective(&cost, &dense, penalty),
                        objective(&cost, &fpop, penalty),
                    );
                    assert!(
                        (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                        "{what}: {a} vs {b}"
                    );
                }
            }
            // Long segments let the window grow past DENSE_MAX: the dense
            // phase hands over before the last end.
            let ends = super::super::segment_ends(n, 2, 1);
            let (mut best, mut back) = (vec![f64::INFINITY; n + 1], vec![usize::MAX; n + 1]);
            best[0] = -4.0;
            let (sum, sq) = (cost.prefix_sum(), cost.prefix_sq());
            let state = super::dense_pelt(sum, sq, 4.0, 2, &ends, &mut best, &mut back).unwrap();
            handed_over[usize::from(state.done < n)] = true;
        }
        assert_eq!(handed_over, [true, true]);
        // Exact ties: a constant series, and steps without noise.
        let mut steps = vec![2.0; 400];
        steps[100..250].fill(-1.0);
        for xs in [vec![1.5; 300], steps] {
            let cost = L2Cost::from_series(&xs).unwrap();
            for penalty in [0.1, 3.0] {
                let dense = pelt_l2_with(&cost, penalty, 3, 1, true);
                let fpop = pelt_l2_with(&cost, penalty, 3, 1, false);
                let (a, b) = (
                    objective(&cost, &dense, penalty),
                    objective(&cost, &fpop, penalty),
                );
                assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "ties: {a} vs {b}");
                assert!(cost.segment_cost(0, xs.len()) >= 0.0);
            }
        }
    }
}
