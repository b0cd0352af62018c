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

use std::arch::x86_64::{
    __m512d, __m512i, _mm512_add_epi64, _mm512_add_pd, _mm512_alignr_epi64, _mm512_castpd_si512,
    _mm512_castsi512_pd, _mm512_cmp_pd_mask, _mm512_fnmadd_pd, _mm512_loadu_pd,
    _mm512_mask_blend_epi64, _mm512_mask_blend_pd, _mm512_mask_cmp_pd_mask,
    _mm512_mask_reduce_min_epi64, _mm512_max_pd, _mm512_min_pd, _mm512_mul_pd,
    _mm512_permutexvar_pd, _mm512_reduce_min_pd, _mm512_set1_epi64, _mm512_set1_pd,
    _mm512_setr_epi64, _mm512_setr_pd, _mm512_setzero_pd, _mm512_setzero_si512, _mm512_storeu_pd,
    _mm512_storeu_si512, _mm512_sub_pd, _CMP_EQ_OQ, _CMP_GE_OQ, _CMP_LE_OQ, _CMP_LT_OQ,
};
use std::collections::VecDeque;

use super::rbf_fast::{argmin_of_sums, PRUNE_EVERY};
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

/// Up to [`MAX_FUSED`] layers of dynamic programming: per lane, the least
/// `F_{k−1}(s) + c(s, end)` within the current group of chunks (one `min` per
/// chunk), and across groups the least with the group where it occurred; the
/// start itself is found afterwards in that group's stored costs.
struct Layers<const L: usize> {
    live: [*const f64; L],
    block_min: [__m512d; L],
    best: [__m512d; L],
    /// Padded position of the lowest chunk of the group holding `best`.
    best_block: [__m512i; L],
    /// Padded position of the last (lowest) chunk seen.
    lowest: usize,
}

impl<const L: usize> ChunkSink for Layers<L> {
    #[inline(always)]
    unsafe fn chunk(&mut self, lo: usize, cost: __m512d) {
        // SAFETY: AVX-512F and lo + 8 ≤ PAD + end ≤ the live arrays' length
        // (the caller's promise).
        unsafe {
            for l in 0..L {
                let value = _mm512_add_pd(_mm512_loadu_pd(self.live[l].add(lo)), cost);
                self.block_min[l] = _mm512_min_pd(value, self.block_min[l]);
            }
        }
        self.lowest = lo;
    }

    #[inline(always)]
    unsafe fn group_end(&mut self) {
        // SAFETY: AVX-512F (the caller's promise).
        unsafe {
            let block = _mm512_set1_epi64(self.lowest as i64);
            for l in 0..L {
                // Going down, `≤` keeps the lowest group among equals.
                let take = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(self.block_min[l], self.best[l]);
                self.best[l] = _mm512_mask_blend_pd(take, self.best[l], self.block_min[l]);
                self.best_block[l] = _mm512_mask_blend_epi64(take, self.best_block[l], block);
                self.block_min[l] = _mm512_set1_pd(f64::INFINITY);
            }
        }
    }
}

impl<const L: usize> Layers<L> {
    /// # Safety
    ///
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn new(live: [&[f64]; L]) -> Self {
        let mut ptrs = [std::ptr::null::<f64>(); L];
        for l in 0..L {
            ptrs[l] = live[l].as_ptr();
        }
        // SAFETY: AVX-512F (the caller's promise).
        let (inf, none) = unsafe { (_mm512_set1_pd(f64::INFINITY), _mm512_set1_epi64(-1)) };
        Self {
            live: ptrs,
            block_min: [inf; L],
            best: [inf; L],
            best_block: [none; L],
            lowest: 0,
        }
    }

    /// The first minimiser of each layer, from the stored costs.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `costs` holds the pass's costs.
    #[inline(always)]
    unsafe fn minima(&self, costs: &[f64], live: [&[f64]; L]) -> [Minimum; L] {
        let mut minima = [NO_MINIMUM; L];
        for l in 0..L {
            let mut values = [0.0; LANES];
            let mut blocks = [0i64; LANES];
            // SAFETY: AVX-512F; both arrays hold eight 64-bit values.
            unsafe {
                _mm512_storeu_pd(values.as_mut_ptr(), self.best[l]);
                _mm512_storeu_si512(blocks.as_mut_ptr().cast(), self.best_block[l]);
            }
            let least = values.iter().copied().fold(f64::INFINITY, f64::min);
            if least == f64::INFINITY {
                continue;
            }
            for (lane, (&value, &block)) in values.iter().zip(&blocks).enumerate() {
                if value != least {
                    continue;
                }
                // The lane's least value is in its group: the first chunk up
                // from the group's lowest that has it.
                let mut at = block as usize + lane;
                while live[l][at] + costs[at] != least {
                    at += LANES;
                }
                let start = at - PAD;
                if start < minima[l].start {
                    minima[l] = Minimum {
                        value: least,
                        start,
                    };
                }
            }
        }
        minima
    }
}

/// PELT's one layer: per lane the least `F(s) + c(s, end)` and its chunk;
/// with `PRUNE`, also PELT's pruning test against that running least (an
/// upper bound of the final one, so every start it flags is prunable).
struct Single<'a, const PRUNE: bool> {
    live: *const f64,
    best: __m512d,
    best_lo: __m512i,
    penalty: __m512d,
    /// Chunks with starts the test flagged: padded position and lane mask,
    /// `flagged_len` of them (room for one per chunk, so no call to grow
    /// sits in the loop).
    flagged: &'a mut [(usize, u8)],
    flagged_len: usize,
}

impl<const PRUNE: bool> ChunkSink for Single<'_, PRUNE> {
    #[inline(always)]
    unsafe fn chunk(&mut self, lo: usize, cost: __m512d) {
        // SAFETY: AVX-512F and lo + 8 ≤ PAD + end ≤ the live array's length
        // (the caller's promise).
        unsafe {
            let value = _mm512_add_pd(_mm512_loadu_pd(self.live.add(lo)), cost);
            // Going down, `≤` keeps the lowest start among equals. The
            // running least is a `min` (a short dependency chain from chunk to
            // chunk); the comparison only steers where its start is kept.
            let take = _mm512_cmp_pd_mask::<_CMP_LE_OQ>(value, self.best);
            self.best = _mm512_min_pd(value, self.best);
            self.best_lo =
                _mm512_mask_blend_epi64(take, self.best_lo, _mm512_set1_epi64(lo as i64));
            if PRUNE {
                // F(s) + c(s, t) ≥ least + penalty ≥ F(t), for live starts.
                let finite = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(value, _mm512_set1_pd(f64::INFINITY));
                let bound = _mm512_add_pd(self.best, self.penalty);
                let flagged = _mm512_mask_cmp_pd_mask::<_CMP_GE_OQ>(finite, value, bound);
                if flagged != 0 {
                    self.flagged[self.flagged_len] = (lo, flagged);
                    self.flagged_len += 1;
                }
            }
        }
    }
}

impl<'a, const PRUNE: bool> Single<'a, PRUNE> {
    /// A fresh sink over `live` (padded) with room for one flagged entry per
    /// chunk in `flagged`.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn new(live: &[f64], flagged: &'a mut [(usize, u8)], penalty: __m512d) -> Self {
        // SAFETY: AVX-512F (the caller's promise).
        let (best, best_lo) = unsafe { (_mm512_set1_pd(f64::INFINITY), _mm512_set1_epi64(-1)) };
        Self {
            live: live.as_ptr(),
            best,
            best_lo,
            penalty,
            flagged,
            flagged_len: 0,
        }
    }

    /// The first minimiser.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn minimum(&self) -> Minimum {
        // SAFETY: AVX-512F (the caller's promise).
        unsafe { first_minimiser(self.best, self.best_lo) }
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

/// [`super::rbf_fast::dynp_rbf`] for a series (one column) on a CPU with
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

/// [`super::rbf_fast::pelt_rbf`] for a series (one column) on a CPU with
/// AVX-512F; `None` otherwise.
pub(crate) fn pelt_rbf(
    cost: &RbfCost,
    penalty: f64,
    min_size: usize,
) -> Option<(Vec<usize>, Vec<f64>)> {
    if cost.n_dims() != 1
        || crate::cost::kernel_row::simd() != crate::cost::kernel_row::Simd::Avx512
    {
        return None;
    }
    // SAFETY: the CPU has AVX-512F (checked above).
    Some(unsafe { pelt_body(cost, penalty, min_size) })
}

#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn pelt_body(cost: &RbfCost, penalty: f64, min_size: usize) -> (Vec<usize>, Vec<f64>) {
    let n = cost.n_samples();
    let mut run = PeltRun {
        best: vec![f64::INFINITY; n + 1],
        back: vec![usize::MAX; n + 1],
        back_cost: vec![f64::NAN; n + 1],
        live: vec![f64::INFINITY; PAD + n + 1],
        pruned: vec![false; n + 1],
        expiring: VecDeque::new(),
        base: 0,
        revealed: 0,
        min_size,
        penalty,
    };
    run.best[0] = -penalty;
    let mut pass = Pass::new(cost);
    let mut flagged = vec![(0, 0); n / LANES + 2];
    let penalty_lanes = _mm512_set1_pd(penalty);
    // F(s) + c(s, t) ≥ F(t) prunes s. Pruning is optional (only speed
    // depends on it), so the test runs at every fourth end only.
    let prunes_at = |end: usize| end < n && end.is_multiple_of(PRUNE_EVERY);
    for end in 1..=n {
        if end < min_size {
            // SAFETY: AVX-512F is present (the caller checked); 0 < end ≤ n.
            unsafe { pass.sweep::<_, false>(0, &mut NoSink) };
            continue;
        }
        run.admit_until(end);
        // SAFETY: AVX-512F is present (the caller checked); base < end ≤ n;
        // `live` has PAD + n + 1 entries, +∞ below PAD + base and above
        // PAD + end − min_size.
        let (min, hits) = unsafe {
            if prunes_at(end) {
                let mut sink = Single::<true>::new(&run.live, &mut flagged, penalty_lanes);
                pass.sweep::<_, false>(run.base, &mut sink);
                (sink.minimum(), sink.flagged_len)
            } else {
                let mut sink = Single::<false>::new(&run.live, &mut flagged, penalty_lanes);
                pass.sweep::<_, false>(run.base, &mut sink);
                (sink.minimum(), sink.flagged_len)
            }
        };
        if min.start != usize::MAX {
            run.decide(end, min, pass.cost(min.start));
        }
        run.prune(end, &flagged[..hits]);
    }
    let PeltRun {
        back, back_cost, ..
    } = run;
    let mut ends = vec![n];
    let mut segment_costs = vec![back_cost[n]];
    let mut start = back[n];
    while start > 0 {
        ends.push(start);
        segment_costs.push(back_cost[start]);
        start = back[start];
    }
    ends.reverse();
    segment_costs.reverse();
    (ends, segment_costs)
}

/// A sink that ignores the costs (ends before the first admissible one).
struct NoSink;

impl ChunkSink for NoSink {
    #[inline(always)]
    unsafe fn chunk(&mut self, _lo: usize, _cost: __m512d) {}
}

/// The state of exact PELT over the ends.
struct PeltRun {
    best: Vec<f64>,
    back: Vec<usize>,
    back_cost: Vec<f64>,
    /// `live[PAD + s] = F(s)` for the live starts, +∞ for starts not yet
    /// usable or dropped (and in the padding).
    live: Vec<f64>,
    pruned: Vec<bool>,
    /// Pruned starts with the end from which they are dropped (increasing).
    expiring: VecDeque<(usize, usize)>,
    /// Every live start is at least `base`.
    base: usize,
    /// Starts below this are in `live` (or dropped).
    revealed: usize,
    min_size: usize,
    penalty: f64,
}

impl PeltRun {
    /// Makes the starts usable at `end` live, drops the expired ones and
    /// raises `base` past dropped starts.
    fn admit_until(&mut self, end: usize) {
        let newest = end - self.min_size;
        while self.revealed <= newest {
            self.live[PAD + self.revealed] = self.best[self.revealed];
            self.revealed += 1;
        }
        // A start pruned at t is dominated by the start t, usable from t + min_size.
        while let Some(&(drop_at, s)) = self.expiring.front() {
            if drop_at > end {
                break;
            }
            self.live[PAD + s] = f64::INFINITY;
            self.expiring.pop_front();
        }
        while self.base < newest && self.live[PAD + self.base] == f64::INFINITY {
            self.base += 1;
        }
    }

    /// Records the best last segment for `end`, `min.start..end` of cost `cost`.
    fn decide(&mut self, end: usize, min: Minimum, cost: f64) {
        self.best[end] = min.value + self.penalty;
        self.back[end] = min.start;
        self.back_cost[end] = cost;
    }

    /// Prunes the starts flagged at `end` (chunk position and lane mask).
    fn prune(&mut self, end: usize, flagged: &[(usize, u8)]) {
        for &(lo, lanes) in flagged {
            for lane in 0..LANES {
                if lanes & (1 << lane) != 0 {
                    let s = lo + lane - PAD;
                    if !self.pruned[s] {
                        self.pruned[s] = true;
                        self.expiring.push_back((end + self.min_size, s));
                    }
                }
            }
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
