//! The consumers of a pass's costs: up to [`MAX_FUSED`](super::MAX_FUSED) fused layers of the
//! dynamic programme ([`Layers`]) and PELT's one layer with its pruning test ([`Single`]).

use std::arch::x86_64::{
    __m512d, __m512i, _mm512_add_pd, _mm512_cmp_pd_mask, _mm512_loadu_pd, _mm512_mask_blend_epi64,
    _mm512_mask_blend_pd, _mm512_mask_cmp_pd_mask, _mm512_min_pd, _mm512_set1_epi64,
    _mm512_set1_pd, _mm512_storeu_pd, _mm512_storeu_si512, _CMP_GE_OQ, _CMP_LE_OQ, _CMP_LT_OQ,
};

use super::{first_minimiser, ChunkSink, Minimum, LANES, NO_MINIMUM, PAD};

/// Up to [`MAX_FUSED`](super::MAX_FUSED) layers of dynamic programming: per lane, the least
/// `F_{k−1}(s) + c(s, end)` within the current group of chunks (one `min` per
/// chunk), and across groups the least with the group where it occurred; the
/// start itself is found afterwards in that group's stored costs.
pub(super) struct Layers<const L: usize> {
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
    pub(super) unsafe fn new(live: [&[f64]; L]) -> Self {
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
    pub(super) unsafe fn minima(&self, costs: &[f64], live: [&[f64]; L]) -> [Minimum; L] {
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
pub(super) struct Single<'a, const PRUNE: bool> {
    live: *const f64,
    best: __m512d,
    best_lo: __m512i,
    penalty: __m512d,
    /// Chunks with starts the test flagged: padded position and lane mask,
    /// `flagged_len` of them (room for one per chunk, so no call to grow
    /// sits in the loop).
    flagged: &'a mut [(usize, u8)],
    pub(super) flagged_len: usize,
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
    pub(super) unsafe fn new(
        live: &[f64],
        flagged: &'a mut [(usize, u8)],
        penalty: __m512d,
    ) -> Self {
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
    pub(super) unsafe fn minimum(&self) -> Minimum {
        // SAFETY: AVX-512F (the caller's promise).
        unsafe { first_minimiser(self.best, self.best_lo) }
    }
}
