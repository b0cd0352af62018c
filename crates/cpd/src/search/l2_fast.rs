//! Exact PELT and dynamic programming specialised to the L2 cost, with
//! functional pruning over the segment mean.
//!
//! For the L2 cost, continuing a segmentation whose last change is at `s` with a
//! segment of mean `μ` up to the end `t` costs
//! `F(s) + Σ_{i∈[s,t)} ‖x_i − μ‖²`. Compared with a later change `u`, `s` is
//! better only for the means with `F(s) + Σ_{i∈[s,u)} ‖x_i − μ‖² < F(u)`,
//! whatever the end: the ball `‖μ − x̄_{s:u}‖² < (F(u) − F(s) − c(s, u)) / (u − s)`.
//! A start whose balls (one per later usable start) have an empty intersection
//! can never be the best last change again, because the best mean of its last
//! segment lies outside some ball, where a later start does at least as well
//! (the idea of FPOP and the pruned DP of Rigaill, Maidstone et al. 2017).
//! Each start keeps the bounding box of that intersection (the interval itself
//! for a series): an empty box proves an empty intersection, so pruning stays
//! exact, and in a long segment without change only a few starts survive, where
//! PELT's inequality pruning keeps almost all of them.
//!
//! A start `u` prunes others only once it is usable (`end ≥ u + min_size`), which
//! keeps the result exact with `min_size > 1`, as in [`super::pelt`].
//!
//! PELT on a series with jump 1 starts, on AVX-512 machines, with the dense
//! phase of `l2_avx512` (every live start evaluated, eight at a time, while
//! inequality pruning keeps their window short) and hands its live starts over
//! to functional pruning once the window grows long.

use super::segment_ends;
use crate::cost::{L2Cost, SegmentCost};

/// The prefix sums of a fitted L2 cost.
struct Prefix<'a> {
    n_dims: usize,
    sum: &'a [f64],
    sq: &'a [f64],
    /// `inverse[l] = 1 / l`: the loops multiply instead of dividing.
    inverse: Vec<f64>,
}

impl<'a> Prefix<'a> {
    fn new(cost: &'a L2Cost) -> Self {
        let n = cost.n_samples();
        Self {
            n_dims: cost.n_dims(),
            sum: cost.prefix_sum(),
            sq: cost.prefix_sq(),
            // inverse[0] = 0 is never read; the rest is one vectorised pass.
            inverse: std::iter::once(0.0)
                .chain((1..=n).map(|l| 1.0 / l as f64))
                .collect(),
        }
    }

    /// `c(start, end)`, as [`L2Cost`] computes it (up to rounding: it
    /// multiplies by `1 / len`).
    #[inline(always)]
    fn cost(&self, start: usize, end: usize) -> f64 {
        let d = self.n_dims;
        let inv = self.inverse[end - start];
        let explained = if d == 1 {
            let s = self.sum[end] - self.sum[start];
            s * s
        } else {
            (0..d)
                .map(|j| {
                    let s = self.sum[end * d + j] - self.sum[start * d + j];
                    s * s
                })
                .sum()
        };
        (self.sq[end] - self.sq[start] - explained * inv).max(0.0)
    }
}

/// The live starts of one recursion (PELT, or one layer of the dynamic
/// programme).
trait Live {
    fn new(n_dims: usize) -> Self;
    /// Makes `start` (with `F(start) = value`) usable, pruning with it.
    fn admit(&mut self, prefix: &Prefix<'_>, start: usize, value: f64);
    /// `min_s F(s) + c(s, end)` and its earliest minimiser (`usize::MAX` if no
    /// start is live).
    fn best_ending_at(&self, prefix: &Prefix<'_>, end: usize) -> (f64, usize);
}

/// `min_s F(s) + c(s, end)` over parallel arrays of starts and values.
#[inline]
fn best_of(prefix: &Prefix<'_>, starts: &[usize], values: &[f64], end: usize) -> (f64, usize) {
    let mut value = f64::INFINITY;
    let mut arg = usize::MAX;
    for (&s, &f) in starts.iter().zip(values) {
        let v = f + prefix.cost(s, end);
        if v < value {
            value = v;
            arg = s;
        }
    }
    (value, arg)
}

/// Live starts of a multivariate signal, ascending, as parallel arrays; each
/// keeps the bounding box of the means at which it beats every later start.
struct LiveStarts {
    n_dims: usize,
    starts: Vec<usize>,
    /// `F(start)`: the best objective of the series cut before `start`.
    values: Vec<f64>,
    /// Per start, `n_dims` lower and upper bounds of the means at which it can
    /// still be the best last change (open box).
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl Live for LiveStarts {
    fn new(n_dims: usize) -> Self {
        Self {
            n_dims,
            starts: Vec::new(),
            values: Vec::new(),
            lower: Vec::new(),
            upper: Vec::new(),
        }
    }

    /// Makes `start` (with `F(start) = value`) usable: first every live start is
    /// restricted to the means at which it beats `start` (and dropped if none is
    /// left), then `start` joins with no restriction.
    fn admit(&mut self, prefix: &Prefix<'_>, start: usize, value: f64) {
        let d = self.n_dims;
        let mut kept = 0;
        for r in 0..self.starts.len() {
            let s = self.starts[r];
            let inv = prefix.inverse[start - s];
            // F(s) + c(s, u) + len·‖μ − mean‖² < F(u)  ⇔  ‖μ − mean‖² < slack / len.
            let slack = value - self.values[r] - prefix.cost(s, start);
            let mut alive = slack > 0.0;
            if alive {
                let radius = (slack * inv).sqrt();
                for j in 0..d {
                    let mean = (prefix.sum[start * d + j] - prefix.sum[s * d + j]) * inv;
                    let lo = self.lower[r * d + j].max(mean - radius);
                    let hi = self.upper[r * d + j].min(mean + radius);
                    if lo >= hi {
                        alive = false;
                        break;
                    }
                    self.lower[r * d + j] = lo;
                    self.upper[r * d + j] = hi;
                }
            }
            if alive {
                if kept != r {
                    self.starts[kept] = s;
                    self.values[kept] = self.values[r];
                    self.lower.copy_within(r * d..r * d + d, kept * d);
                    self.upper.copy_within(r * d..r * d + d, kept * d);
                }
                kept += 1;
            }
        }
        self.starts.truncate(kept);
        self.values.truncate(kept);
        self.lower.truncate(kept * d);
        self.upper.truncate(kept * d);
        self.starts.push(start);
        self.values.push(value);
        self.lower.extend(std::iter::repeat_n(f64::NEG_INFINITY, d));
        self.upper.extend(std::iter::repeat_n(f64::INFINITY, d));
    }

    fn best_ending_at(&self, prefix: &Prefix<'_>, end: usize) -> (f64, usize) {
        best_of(prefix, &self.starts, &self.values, end)
    }
}

/// Live starts of a series, ascending; each keeps the exact set of means at
/// which it beats every other live start (earlier and later), as sorted
/// disjoint open intervals — the functional pruning of FPOP.
struct LiveStarts1d {
    starts: Vec<usize>,
    values: Vec<f64>,
    /// Candidate `r` owns `intervals[bounds[r]..bounds[r + 1]]`.
    bounds: Vec<usize>,
    intervals: Vec<(f64, f64)>,
    /// Scratch: the next `bounds` and `intervals`, and the means at which the
    /// admitted start loses.
    next_bounds: Vec<usize>,
    next_intervals: Vec<(f64, f64)>,
    holes: Vec<(f64, f64)>,
    /// Per live start, the open interval of means at which it beats the
    /// admitted start (empty if nowhere).
    cuts: Vec<(f64, f64)>,
}

/// Sorts intervals by their lower end (insertion sort: there are a handful,
/// with finite, NaN-free ends).
fn sort_by_lower_end(intervals: &mut [(f64, f64)]) {
    for i in 1..intervals.len() {
        let item = intervals[i];
        let mut j = i;
        while j > 0 && intervals[j - 1].0 > item.0 {
            intervals[j] = intervals[j - 1];
            j -= 1;
        }
        intervals[j] = item;
    }
}

impl Live for LiveStarts1d {
    fn new(_n_dims: usize) -> Self {
        Self {
            starts: Vec::new(),
            values: Vec::new(),
            bounds: vec![0],
            intervals: Vec::new(),
            next_bounds: vec![0],
            next_intervals: Vec::new(),
            holes: Vec::new(),
            cuts: Vec::new(),
        }
    }

    fn admit(&mut self, prefix: &Prefix<'_>, start: usize, value: f64) {
        // Branch-free where the outcome is data-dependent (which starts
        // survive, which pieces are empty): writes go to pre-sized scratch and
        // the lengths advance by the outcome.
        let live = self.starts.len();
        // Each old interval leaves at most one piece; the new start gets at
        // most one interval more than there are holes.
        self.next_intervals
            .resize(self.intervals.len() + live + 1, (0.0, 0.0));
        self.next_bounds.resize(live + 2, 0);
        self.holes.resize(live, (0.0, 0.0));
        // First the square roots, independent of each other (vectorised):
        // s beats `start` exactly on the open interval mean ± radius, if the
        // slack is positive (nowhere otherwise: an empty interval).
        self.cuts.resize(live, (0.0, 0.0));
        let (sum, sq) = (prefix.sum, prefix.sq);
        let (total_to, sq_to) = (sum[start], sq[start]);
        for ((&s, &f), cut) in self.starts.iter().zip(&self.values).zip(&mut self.cuts) {
            let inv = prefix.inverse[start - s];
            let total = total_to - sum[s];
            let cost = (sq_to - sq[s] - total * total * inv).max(0.0);
            let slack = value - f - cost;
            let radius = (slack.max(0.0) * inv).sqrt();
            let mean = total * inv;
            let beats = slack > 0.0;
            // Selects, not a branch: the square roots stay independent.
            *cut = (
                if beats { mean - radius } else { f64::INFINITY },
                if beats {
                    mean + radius
                } else {
                    f64::NEG_INFINITY
                },
            );
        }
        let (mut pieces, mut kept, mut holes) = (0, 0, 0);
        for r in 0..live {
            let (lo, hi) = self.cuts[r];
            let beats = lo < hi;
            self.holes[holes] = (lo, hi);
            holes += usize::from(beats);
            let before = pieces;
            for &(a, b) in &self.intervals[self.bounds[r]..self.bounds[r + 1]] {
                // Plain comparisons: nothing here is NaN.
                let a = if a > lo { a } else { lo };
                let b = if b < hi { b } else { hi };
                self.next_intervals[pieces] = (a, b);
                pieces += usize::from(a < b);
            }
            self.starts[kept] = self.starts[r];
            self.values[kept] = self.values[r];
            self.next_bounds[kept + 1] = pieces;
            kept += usize::from(pieces > before);
        }
        self.starts.truncate(kept);
        self.values.truncate(kept);
        // The new start wins outside the union of the holes (a handful:
        // insertion sort; the bounds are finite).
        let holes = &mut self.holes[..holes];
        sort_by_lower_end(holes);
        let mut from = f64::NEG_INFINITY;
        for &(lo, hi) in holes.iter() {
            self.next_intervals[pieces] = (from, lo);
            pieces += usize::from(lo > from);
            from = if hi > from { hi } else { from };
        }
        self.next_intervals[pieces] = (from, f64::INFINITY);
        pieces += 1;
        self.next_intervals.truncate(pieces);
        self.starts.push(start);
        self.values.push(value);
        self.next_bounds[kept + 1] = pieces;
        self.next_bounds.truncate(kept + 2);
        std::mem::swap(&mut self.bounds, &mut self.next_bounds);
        std::mem::swap(&mut self.intervals, &mut self.next_intervals);
    }

    fn best_ending_at(&self, prefix: &Prefix<'_>, end: usize) -> (f64, usize) {
        best_of(prefix, &self.starts, &self.values, end)
    }
}

/// The slot of position `pos` (a multiple of `jump`, or `n`) in per-position tables.
#[inline]
fn slot_of(pos: usize, jump: usize, n: usize, final_slot: usize) -> usize {
    if pos == n {
        final_slot
    } else {
        pos / jump
    }
}

/// Exact PELT with the L2 cost; returns the segment ends. Callers have checked
/// the penalty and the length.
pub(crate) fn pelt_l2(cost: &L2Cost, penalty: f64, min_size: usize, jump: usize) -> Vec<usize> {
    pelt_l2_with(cost, penalty, min_size, jump, true)
}

/// [`pelt_l2`]; `dense_start` allows the dense first phase of
/// [`super::l2_avx512`] (a series, jump 1, AVX-512) before functional pruning.
pub(super) fn pelt_l2_with(
    cost: &L2Cost,
    penalty: f64,
    min_size: usize,
    jump: usize,
    dense_start: bool,
) -> Vec<usize> {
    let prefix = Prefix::new(cost);
    let n = cost.n_samples();
    if prefix.n_dims == 1 {
        pelt_with::<LiveStarts1d>(&prefix, n, penalty, min_size, jump, dense_start)
    } else {
        pelt_with::<LiveStarts>(&prefix, n, penalty, min_size, jump, false)
    }
}

fn pelt_with<L: Live>(
    prefix: &Prefix<'_>,
    n: usize,
    penalty: f64,
    min_size: usize,
    jump: usize,
    dense_start: bool,
) -> Vec<usize> {
    let final_slot = n.div_ceil(jump);
    let mut best = vec![f64::INFINITY; final_slot + 1];
    let mut back = vec![usize::MAX; final_slot + 1];
    best[0] = -penalty;
    let mut live = L::new(prefix.n_dims);
    let mut next_start = 0;
    let ends = segment_ends(n, min_size, jump);
    // Ends up to `done` are handled by the dense phase, which hands over its
    // live starts (ascending) when their window grows long.
    let mut done = 0;
    if dense_start && jump == 1 && prefix.n_dims == 1 {
        let found = dense_pelt(prefix, penalty, min_size, &ends, &mut best, &mut back);
        if let Some((dense_done, dense_next_start, dense_live)) = found {
            for &(start, value) in &dense_live {
                live.admit(prefix, start, value);
            }
            next_start = dense_next_start;
            done = dense_done;
        }
    }
    for &end in ends.iter().filter(|&&end| end > done) {
        while next_start + min_size <= end && next_start + min_size <= n {
            let value = best[next_start / jump];
            if value.is_finite() {
                live.admit(prefix, next_start, value);
            }
            next_start += jump;
        }
        let (value, arg) = live.best_ending_at(prefix, end);
        let slot = slot_of(end, jump, n, final_slot);
        best[slot] = value + penalty;
        back[slot] = arg;
    }
    let mut ends = vec![n];
    let mut start = back[final_slot];
    while start > 0 {
        ends.push(start);
        start = back[start / jump];
    }
    ends.reverse();
    ends
}

/// Where the dense phase stopped: the last end handled, the next start to
/// admit and the live starts (ascending) with `F(s)`.
type Handover = (usize, usize, Vec<(usize, f64)>);

/// The dense first phase of PELT where it is built (x86-64, Rust ≥ 1.89 for
/// the intrinsics: `cfg(cpd_avx512)`); `None` elsewhere and without AVX-512.
fn dense_pelt(
    prefix: &Prefix<'_>,
    penalty: f64,
    min_size: usize,
    ends: &[usize],
    best: &mut [f64],
    back: &mut [usize],
) -> Option<Handover> {
    #[cfg(all(target_arch = "x86_64", cpd_avx512))]
    return super::l2_avx512::dense_pelt(
        prefix.sum, prefix.sq, penalty, min_size, ends, best, back,
    )
    .map(|state| (state.done, state.next_start, state.live));
    #[cfg(not(all(target_arch = "x86_64", cpd_avx512)))]
    return {
        let _ = (prefix, penalty, min_size, ends, best, back);
        None
    };
}

/// The exact best segmentation with `n_change_points` change points for the L2
/// cost; returns the segment ends. Callers have checked that it exists.
pub(crate) fn dynp_l2(
    cost: &L2Cost,
    n_change_points: usize,
    min_size: usize,
    jump: usize,
) -> Vec<usize> {
    let prefix = Prefix::new(cost);
    let n = cost.n_samples();
    if prefix.n_dims == 1 {
        dynp_with::<LiveStarts1d>(&prefix, n, n_change_points, min_size, jump)
    } else {
        dynp_with::<LiveStarts>(&prefix, n, n_change_points, min_size, jump)
    }
}

fn dynp_with<L: Live>(
    prefix: &Prefix<'_>,
    n: usize,
    n_change_points: usize,
    min_size: usize,
    jump: usize,
) -> Vec<usize> {
    let layers = n_change_points + 1;
    let final_slot = n.div_ceil(jump);
    // best[k][slot]: least cost of cutting 0..pos into k + 1 segments.
    let mut best = vec![vec![f64::INFINITY; final_slot + 1]; layers];
    let mut back = vec![vec![usize::MAX; final_slot + 1]; layers];
    // Layer k ≥ 1 continues layer k − 1; layer 0 is the single segment 0..end.
    // The last layer is needed at the end n only: one scan over every start
    // there, instead of functional pruning at every end.
    let mut live: Vec<L> = (1..layers - 1).map(|_| L::new(prefix.n_dims)).collect();
    let mut next_start = min_size.div_ceil(jump) * jump;
    for end in segment_ends(n, min_size, jump) {
        while next_start + min_size <= end && next_start + min_size <= n {
            let slot = next_start / jump;
            for (k, layer) in live.iter_mut().enumerate() {
                let value = best[k][slot];
                if value.is_finite() {
                    layer.admit(prefix, next_start, value);
                }
            }
            next_start += jump;
        }
        let slot = slot_of(end, jump, n, final_slot);
        if end == n {
            let (value, arg) = if layers == 1 {
                (prefix.cost(0, end), 0)
            } else {
                // Starts s (multiples of jump) with n − s ≥ min_size, earliest
                // minimiser on ties, as `best_of`.
                let last = &best[layers - 2];
                let mut found = (f64::INFINITY, usize::MAX);
                let mut s = 0;
                while s + min_size <= n {
                    let value = last[s / jump] + prefix.cost(s, n);
                    if value < found.0 {
                        found = (value, s);
                    }
                    s += jump;
                }
                found
            };
            best[layers - 1][slot] = value;
            back[layers - 1][slot] = arg;
        } else {
            best[0][slot] = prefix.cost(0, end);
            back[0][slot] = 0;
            for (k, layer) in live.iter().enumerate() {
                let (value, arg) = layer.best_ending_at(prefix, end);
                best[k + 1][slot] = value;
                back[k + 1][slot] = arg;
            }
        }
    }
    let mut ends = vec![n];
    let mut start = back[layers - 1][final_slot];
    for k in (0..layers - 1).rev() {
        ends.push(start);
        start = back[k][start / jump];
    }
    ends.reverse();
    ends
}
