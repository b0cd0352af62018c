//! The RBF searches of [`super::rbf_fast`] for a series on AVX-512 machines:
//! one pass over the live starts per segment end that does everything.
//!
//! The portable version makes three passes per end — the kernel row into a
//! buffer, the suffix sums and costs into arrays, then one arg-min pass per
//! layer — and memory traffic and the serial arg-min dominate once the
//! exponential is vectorised. Here one pass, eight starts at a time from the
//! newest down, computes a block of kernels (the AVX-512 exponential of
//! [`crate::cost::kernel_row`]) into a buffer in L1, then per chunk their
//! suffix sums inside the register (three lane shifts), the block sums, the
//! costs in registers, and feeds them straight into up to four layers' running
//! minima (short dependency chains: `min`, and the start kept beside it). Costs
//! are stored only where a later step reads them (the dynamic programme's
//! look-up of a minimum's start, layers beyond the fourth).
//!
//! Every array is padded with [`PAD`] entries in front, so a chunk of eight
//! that reaches below the lowest live start stays in bounds: its extra lanes
//! hold finite values and starts with `F = +∞`, which never win.
//!
//! This file holds the pass itself ([`Pass`], what it feeds: [`ChunkSink`]) and the
//! arg-min of a vector; `sinks` has the consumers of a pass's costs (the fused DP layers and
//! PELT's single layer with its pruning test), `dynp` and `pelt` the two searches built on
//! them.

mod dynp;
mod pelt;
mod sinks;

pub(crate) use dynp::dynp_rbf;
pub(crate) use pelt::pelt_rbf;

use std::arch::x86_64::{
    __m512d, __m512i, _mm512_add_epi64, _mm512_add_pd, _mm512_alignr_epi64, _mm512_castpd_si512,
    _mm512_castsi512_pd, _mm512_cmp_pd_mask, _mm512_fnmadd_pd, _mm512_loadu_pd,
    _mm512_mask_reduce_min_epi64, _mm512_max_pd, _mm512_mul_pd, _mm512_permutexvar_pd,
    _mm512_reduce_min_pd, _mm512_set1_pd, _mm512_setr_epi64, _mm512_setr_pd, _mm512_setzero_pd,
    _mm512_setzero_si512, _mm512_storeu_pd, _mm512_sub_pd, _CMP_EQ_OQ,
};

use crate::cost::kernel_row::avx512::{exp_in_range, exp_non_positive};
use crate::cost::{RbfCost, SegmentCost};

/// Entries in front of every padded array: a chunk's lowest lane is at most
/// seven below the lowest live start, which is at least 0.
pub(super) const PAD: usize = 8;
pub(super) const LANES: usize = 8;
/// Layers whose minima one pass keeps in registers.
const MAX_FUSED: usize = 4;
/// Chunks whose kernels are computed before their sums are updated.
const BLOCK: usize = 32;
/// Chunks per group of the dynamic programme's lazy minima (the start of a
/// minimum is looked up again within its group).
const GROUP: usize = 8;

/// The running state of the block sums `S(s, end)` of a series and the
/// tables the pass reads, all padded with [`PAD`] entries in front.
struct Pass {
    n: usize,
    /// `−γ`.
    neg_gamma: f64,
    /// `xs[PAD + i] = x_i` (0 in the padding).
    xs: Vec<f64>,
    /// `half_sums[PAD + s] = H(s, end)` for the live starts, where the block
    /// sum is `S(s, e) = 2 H(s, e) − (e − s)`: `H` grows by the suffix sum of
    /// the kernel row alone (`S` by twice that, minus one).
    half_sums: Vec<f64>,
    /// `twice_inverse[PAD + j] = 2 / (n − j)`: at the end `e`, the start `s`
    /// reads `twice_inverse[PAD + n − e + s] = 2 / (e − s)`, forwards in `s`.
    twice_inverse: Vec<f64>,
    /// Whether some `γ (x_i − x_j)²` may exceed 708, where the exponential
    /// needs its clamp.
    clamp: bool,
    /// `costs[PAD + s] = c(s, end)`, written by the passes that need them.
    costs: Vec<f64>,
    /// Scratch: the kernels of one block of chunks.
    kernels: Vec<__m512d>,
    end: usize,
}

/// One layer's minimum over a pass: `F(s) + c(s, end)` and `s`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Minimum {
    pub(super) value: f64,
    /// `usize::MAX` when every candidate was `+∞`.
    pub(super) start: usize,
}

pub(super) const NO_MINIMUM: Minimum = Minimum {
    value: f64::INFINITY,
    start: usize::MAX,
};

/// What a pass does with the costs of each chunk of eight starts, from the
/// newest chunk down. The methods are only called from AVX-512 code.
trait ChunkSink {
    /// `lo`: padded position of the chunk's lowest start; `cost`: `c(s, end)`
    /// of the starts `lo − PAD .. lo − PAD + 8`.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `lo + 8 ≤ PAD + end`.
    unsafe fn chunk(&mut self, lo: usize, cost: __m512d);
    /// After each group of up to [`GROUP`] consecutive chunks.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F.
    unsafe fn group_end(&mut self) {}
}

impl Pass {
    fn new(cost: &RbfCost) -> Self {
        let n = cost.n_samples();
        let mut xs = vec![0.0; PAD + n];
        xs[PAD..].copy_from_slice(cost.values());
        let mut twice_inverse = vec![0.0; PAD + n];
        for (j, inv) in twice_inverse[PAD..].iter_mut().enumerate() {
            *inv = 2.0 / (n - j) as f64;
        }
        let (lowest, highest) = cost
            .values()
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        let widest = cost.gamma() * (highest - lowest) * (highest - lowest);
        // SAFETY: an all-zero __m512d is eight zeros.
        let zero: __m512d = unsafe { std::mem::zeroed() };
        Self {
            n,
            neg_gamma: -cost.gamma(),
            xs,
            half_sums: vec![0.0; PAD + n + 1],
            twice_inverse,
            // The exponential's clamp is at −708; 700 leaves room for rounding.
            // (NaN: γ = 0 from the median heuristic of overflowing distances.)
            clamp: widest.is_nan() || widest > 700.0,
            costs: vec![0.0; PAD + n + 1],
            kernels: vec![zero; BLOCK],
            end: 0,
        }
    }

    /// `c(s, end) = len − S/len = len + 1 − 2H/len`, bit for bit as the pass
    /// computes it.
    #[inline]
    fn cost(&self, start: usize) -> f64 {
        let len_plus_one = (self.end - start + 1) as f64;
        let twice_inv = self.twice_inverse[PAD + self.n - self.end + start];
        (-self.half_sums[PAD + start])
            .mul_add(twice_inv, len_plus_one)
            .max(0.0)
    }

    /// [`Pass::sweep_with`] with the exponential's clamp where the data need it.
    ///
    /// # Safety
    ///
    /// As [`Pass::sweep_with`].
    #[inline(always)]
    unsafe fn sweep<S: ChunkSink, const STORE: bool>(&mut self, base: usize, sink: &mut S) {
        // SAFETY: forwarded from the caller.
        unsafe {
            if self.clamp {
                self.sweep_with::<S, STORE, true>(base, sink)
            } else {
                self.sweep_with::<S, STORE, false>(base, sink)
            }
        }
    }

    /// Moves the end forward by one point, refreshes `S(s, end)` for the
    /// starts `base..end` (`S(s, e+1) = S(s, e) + 2 Σ_{i=s}^{e} k(x_i, x_e) − 1`)
    /// and hands their costs to `sink`, eight at a time from the top (the
    /// lowest chunk may reach up to seven starts below `base`). With `STORE`
    /// the costs are also written to `self.costs`.
    ///
    /// Per block of chunks, first every kernel into a buffer in L1 (independent
    /// work the core overlaps freely), then the dependent part — suffix sums
    /// inside the register (three lane shifts), block sums, costs — chunk by
    /// chunk.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F and `base < end ≤ n` after the move.
    #[inline(always)]
    unsafe fn sweep_with<S: ChunkSink, const STORE: bool, const CLAMP: bool>(
        &mut self,
        base: usize,
        sink: &mut S,
    ) {
        let point = self.end;
        let end = point + 1;
        debug_assert!(base <= point && end <= self.n);
        self.half_sums[PAD + point] = 0.0;
        let xs = self.xs.as_ptr();
        let half_sums = self.half_sums.as_mut_ptr();
        let costs = self.costs.as_mut_ptr();
        let twice_inverse = self.twice_inverse.as_ptr().wrapping_add(self.n - end);
        // SAFETY (whole body): AVX-512F is present (the caller's promise); every
        // chunk lo..lo+8 has PAD + top − 8 ≥ 1 ≤ lo and lo + 8 ≤ PAD + end, inside
        // xs, half_sums, costs, and twice_inverse + (n − end) (length PAD + end
        // there); without CLAMP every kernel argument is at least −700.
        unsafe {
            let x_point = _mm512_set1_pd(self.xs[PAD + point]);
            let neg_gamma = _mm512_set1_pd(self.neg_gamma);
            let zero = _mm512_setzero_pd();
            let eight = _mm512_set1_pd(LANES as f64);
            let lane_zero = _mm512_setzero_si512();
            // end − s + 1 for the chunk's starts s.
            let mut lengths_plus_one = _mm512_setr_pd(9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0);
            // Σ of the kernels above the chunk, in every lane.
            let mut above = zero;
            let mut top = end;
            while top > base {
                let chunks = (top - base).div_ceil(LANES).min(BLOCK);
                let kernels = &mut self.kernels[..chunks];
                for (c, kernel) in kernels.iter_mut().enumerate() {
                    let lo = PAD + top - LANES * (c + 1);
                    let diff = _mm512_sub_pd(_mm512_loadu_pd(xs.add(lo)), x_point);
                    let argument = _mm512_mul_pd(_mm512_mul_pd(neg_gamma, diff), diff);
                    *kernel = if CLAMP {
                        exp_non_positive(argument)
                    } else {
                        exp_in_range(argument)
                    };
                }
                for (c, &kernel) in kernels.iter().enumerate() {
                    let lo = PAD + top - LANES * (c + 1);
                    let local = suffix_sums(kernel);
                    let suffix = _mm512_add_pd(local, above);
                    above = _mm512_add_pd(above, _mm512_permutexvar_pd(lane_zero, local));
                    let half_sum = _mm512_add_pd(_mm512_loadu_pd(half_sums.add(lo)), suffix);
                    _mm512_storeu_pd(half_sums.add(lo), half_sum);
                    let twice_inv = _mm512_loadu_pd(twice_inverse.add(lo));
                    // Rounding can leave a tiny negative cost on a constant segment.
                    let cost = _mm512_max_pd(
                        _mm512_fnmadd_pd(half_sum, twice_inv, lengths_plus_one),
                        zero,
                    );
                    if STORE {
                        _mm512_storeu_pd(costs.add(lo), cost);
                    }
                    sink.chunk(lo, cost);
                    lengths_plus_one = _mm512_add_pd(lengths_plus_one, eight);
                    if (c + 1) % GROUP == 0 || c + 1 == chunks {
                        sink.group_end();
                    }
                }
                top -= (LANES * chunks).min(top);
            }
        }
        self.end = end;
    }
}

/// Suffix sums within a chunk (lane j: Σ of lanes j..8): the vector plus
/// itself shifted down by 1, 2 and 4 lanes (zeros shifted in).
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
unsafe fn suffix_sums(kernel: __m512d) -> __m512d {
    // SAFETY: AVX-512F (the caller's promise).
    unsafe {
        let lane_zero = _mm512_setzero_si512();
        let k = _mm512_castpd_si512(kernel);
        let a = _mm512_add_pd(
            kernel,
            _mm512_castsi512_pd(_mm512_alignr_epi64(lane_zero, k, 1)),
        );
        let ai = _mm512_castpd_si512(a);
        let b = _mm512_add_pd(
            a,
            _mm512_castsi512_pd(_mm512_alignr_epi64(lane_zero, ai, 2)),
        );
        let bi = _mm512_castpd_si512(b);
        _mm512_add_pd(
            b,
            _mm512_castsi512_pd(_mm512_alignr_epi64(lane_zero, bi, 4)),
        )
    }
}

/// The least lane value and, among the lanes holding it, the lowest start
/// (`chunk` is the padded position of the lane's chunk), without a branch per
/// lane; [`NO_MINIMUM`] if the least is `+∞`.
///
/// # Safety
///
/// The CPU has AVX-512F.
#[inline(always)]
pub(super) unsafe fn first_minimiser(values: __m512d, chunk: __m512i) -> Minimum {
    // SAFETY: AVX-512F (the caller's promise).
    unsafe {
        let least = _mm512_reduce_min_pd(values);
        if least == f64::INFINITY {
            return NO_MINIMUM;
        }
        let holding = _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(values, _mm512_set1_pd(least));
        let starts = _mm512_add_epi64(chunk, _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
        let first = _mm512_mask_reduce_min_epi64(holding, starts);
        Minimum {
            value: least,
            start: first as usize - PAD,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::rbf_fast::{dynp_rbf_portable, pelt_rbf_portable};
    use super::*;
    use crate::Gamma;

    /// Piecewise-constant levels with uniform noise, from a seed; `spread`
    /// scales the levels (wide spreads make the exponential need its clamp).
    fn series(n: usize, segments: usize, spread: f64, seed: u64) -> Vec<f64> {
        let mut state = seed | 1;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let levels: Vec<f64> = (0..segments).map(|_| spread * (uniform() - 0.5)).collect();
        (0..n)
            .map(|i| levels[i * segments / n] + uniform() - 0.5)
            .collect()
    }

    fn objective(costs: &[f64], penalty: f64) -> f64 {
        costs.iter().sum::<f64>() + penalty * (costs.len() - 1) as f64
    }

    fn assert_close(a: f64, b: f64, what: &str) {
        assert!(
            (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
            "{what}: {a} vs {b}"
        );
    }

    /// The single-pass searches against the portable ones: same change
    /// points, objectives within 1e-9, over lengths that end in every
    /// remainder mod 8, several blocks of chunks (n up to 1200), more layers
    /// than are fused (K up to 7), both exponentials (clamped or not) and a
    /// series with constant stretches (exact ties).
    #[test]
    fn single_pass_searches_equal_the_portable_ones() {
        if crate::cost::kernel_row::simd() != crate::cost::kernel_row::Simd::Avx512 {
            eprintln!("no AVX-512 on this machine: the single-pass searches are not used");
            return;
        }
        let mut cases = Vec::new();
        for (seed, n) in [(1u64, 41usize), (2, 260), (3, 517), (4, 1203)] {
            for spread in [8.0, 400.0] {
                cases.push((series(n, 2 + n / 120, spread, seed), 0.5));
            }
        }
        // Exact ties (zero-cost segments): only the objectives must agree.
        let mut steps = vec![0.0; 90];
        steps[30..60].fill(1.0);
        cases.push((steps, 1.0));
        let tied = cases.len() - 1;
        let mut clamped = [false, false];
        for (i, (xs, gamma)) in cases.iter().enumerate() {
            let cost = RbfCost::from_series(xs, Gamma::Fixed(*gamma)).unwrap();
            clamped[usize::from(Pass::new(&cost).clamp)] = true;
            for min_size in [1, 3, 7] {
                for k in [2, 5, 7] {
                    if (k + 1) * min_size > xs.len() {
                        continue;
                    }
                    let (ends, costs) = dynp_rbf(&cost, k, min_size).unwrap();
                    let (want_ends, want_costs) = dynp_rbf_portable(&cost, k, min_size);
                    let what = format!("case {i} dynp k={k} min_size={min_size}");
                    if i != tied {
                        assert_eq!(ends, want_ends, "{what}");
                    }
                    assert_close(objective(&costs, 0.0), objective(&want_costs, 0.0), &what);
                    for ((&start, &end), &c) in [0].iter().chain(&ends).zip(&ends).zip(&costs) {
                        assert_close(c, cost.segment_cost(start, end), &what);
                    }
                }
                for penalty in [0.3, 2.0, 9.0] {
                    let (ends, costs) = pelt_rbf(&cost, penalty, min_size).unwrap();
                    let (want_ends, want_costs) = pelt_rbf_portable(&cost, penalty, min_size);
                    let what = format!("case {i} pelt penalty={penalty} min_size={min_size}");
                    if i != tied {
                        assert_eq!(ends, want_ends, "{what}");
                    }
                    assert_close(
                        objective(&costs, penalty),
                        objective(&want_costs, penalty),
                        &what,
                    );
                }
            }
        }
        assert_eq!(clamped, [true, true], "both exponentials were exercised");
    }

    #[test]
    fn several_columns_take_the_portable_path() {
        let signal = ndarray::Array2::from_shape_fn((30, 2), |(i, j)| (i * (j + 1)) as f64 * 0.1);
        let cost = RbfCost::new(signal.view(), Gamma::Fixed(1.0)).unwrap();
        assert!(dynp_rbf(&cost, 2, 2).is_none());
        assert!(pelt_rbf(&cost, 1.0, 2).is_none());
    }
}
