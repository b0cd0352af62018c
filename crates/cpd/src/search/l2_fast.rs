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
            inverse: (0..=n)
                .map(|l| if l == 0 { 0.0 } else { 1.0 / l as f64 })
                .collect(),
        }
    }

    /// `c(start, end)`, as [`L2Cost`] computes it (up to rounding: it
    /// multiplies by `1 / len`).
    #[inline]
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
        }
    }

    fn admit(&mut self, prefix: &Prefix<'_>, start: usize, value: f64) {
        self.next_bounds.clear();
        self.next_bounds.push(0);
        self.next_intervals.clear();
        self.holes.clear();
        let mut kept = 0;
        for r in 0..self.starts.len() {
            let s = self.starts[r];
            let inv = prefix.inverse[start - s];
            // s beats `start` exactly on the open interval mean ± radius (or nowhere).
            let total = prefix.sum[start] - prefix.sum[s];
            let cost = (prefix.sq[start] - prefix.sq[s] - total * total * inv).max(0.0);
            let slack = value - self.values[r] - cost;
            if slack <= 0.0 {
                continue;
            }
            let radius = (slack * inv).sqrt();
            let mean = total * inv;
            let (lo, hi) = (mean - radius, mean + radius);
            self.holes.push((lo, hi));
            let before = self.next_intervals.len();
            for &(a, b) in &self.intervals[self.bounds[r]..self.bounds[r + 1]] {
                let (a, b) = (a.max(lo), b.min(hi));
                if a < b {
                    self.next_intervals.push((a, b));
                }
            }
            if self.next_intervals.len() > before {
                self.starts[kept] = s;
                self.values[kept] = self.values[r];
                self.next_bounds.push(self.next_intervals.len());
                kept += 1;
            }
        }
        self.starts.truncate(kept);
        self.values.truncate(kept);
        // The new start wins outside the union of the holes.
        self.holes.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let mut from = f64::NEG_INFINITY;
        for &(lo, hi) in &self.holes {
            if lo > from {
                self.next_intervals.push((from, lo));
            }
            from = from.max(hi);
        }
        self.next_intervals.push((from, f64::INFINITY));
        self.starts.push(start);
        self.values.push(value);
        self.next_bounds.push(self.next_intervals.len());
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
    let prefix = Prefix::new(cost);
    let n = cost.n_samples();
    if prefix.n_dims == 1 {
        pelt_with::<LiveStarts1d>(&prefix, n, penalty, min_size, jump)
    } else {
        pelt_with::<LiveStarts>(&prefix, n, penalty, min_size, jump)
    }
}

fn pelt_with<L: Live>(
    prefix: &Prefix<'_>,
    n: usize,
    penalty: f64,
    min_size: usize,
    jump: usize,
) -> Vec<usize> {
    let final_slot = n.div_ceil(jump);
    let mut best = vec![f64::INFINITY; final_slot + 1];
    let mut back = vec![usize::MAX; final_slot + 1];
    best[0] = -penalty;
    let mut live = L::new(prefix.n_dims);
    let mut next_start = 0;
    for end in segment_ends(n, min_size, jump) {
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
    let mut live: Vec<L> = (1..layers).map(|_| L::new(prefix.n_dims)).collect();
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
            let (value, arg) = match live.last() {
                Some(layer) => layer.best_ending_at(prefix, end),
                None => (prefix.cost(0, end), 0),
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
