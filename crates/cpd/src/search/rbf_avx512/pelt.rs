//! PELT over the single pass, pruning as it goes.

use std::arch::x86_64::{__m512d, _mm512_set1_pd};
use std::collections::VecDeque;

use super::super::PRUNE_EVERY;
use super::sinks::Single;
use super::{ChunkSink, Minimum, Pass, LANES, PAD};
use crate::cost::{RbfCost, SegmentCost};

/// [`crate::search::rbf_fast::pelt_rbf`] for a series (one column) on a CPU with
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
