//! Exact dynamic programming and PELT specialised to the RBF cost (jump 1):
//! one fused, vectorised pass per segment end.
//!
//! The kernel cost has no functional pruning (its segment "mean" lives in the
//! kernel's feature space), so these searches do O(n²) work like ruptures'
//! C code; what they save is the constant. Per end `t`, one kernel row
//! `k(x_s, x_{t−1})` (vectorised exponential) updates the block sums
//! `S(s, t)` of every live start (eight-chain suffix sums), the costs
//! `c(s, t) = (t − s) − S(s, t) / (t − s)` are written densely, and each layer's
//! minimum `min_s F(s) + c(s, t)` is a vectorised reduction. Starts are indexed
//! absolutely, so nothing is shifted when the lowest live start rises.
//!
//! On x86-64 machines with AVX-512 a series (one column) takes the single-pass
//! versions of [`super::rbf_avx512`] instead; the code here serves the other
//! machines and several columns.

use std::collections::VecDeque;

use super::{argmin_of_sums, PRUNE_EVERY};
use crate::cost::kernel_row::{dispatch_simd, series_row};
use crate::cost::{RbfCost, SegmentCost};

/// Block sums `S(s, end) = Σ_{i,j∈[s,end)} k(x_i, x_j)` for the starts
/// `s ≥ base`, kept as the end advances, and the costs `c(s, end)`.
struct BlockSums<'a> {
    cost: &'a RbfCost,
    n: usize,
    end: usize,
    /// `sums[s] = S(s, end)` (entries below the current base are stale).
    sums: Vec<f64>,
    /// `costs[s] = c(s, end)` for `base ≤ s < end`.
    costs: Vec<f64>,
    /// Scratch for one kernel row.
    row: Vec<f64>,
    /// `lengths[j] = n − j` and `inverse[j] = 1 / (n − j)`: at the end `e`, the
    /// start `s` has length `lengths[n − e + s]`, so the tables are read
    /// forwards and the loop needs no conversion or division.
    lengths: Vec<f64>,
    inverse: Vec<f64>,
}

impl<'a> BlockSums<'a> {
    fn new(cost: &'a RbfCost) -> Self {
        let n = cost.n_samples();
        Self {
            cost,
            n,
            end: 0,
            sums: vec![0.0; n + 1],
            costs: vec![0.0; n + 1],
            row: vec![0.0; n + 1],
            lengths: (0..n).map(|j| (n - j) as f64).collect(),
            inverse: (0..n).map(|j| 1.0 / (n - j) as f64).collect(),
        }
    }

    /// Moves the end forward by one point and refreshes the sums and costs of
    /// the starts `base..=end`:
    /// `S(s, e+1) = S(s, e) + 2 Σ_{i=s}^{e} k(x_i, x_e) − 1` (`S(e, e) = 0`) and
    /// `c(s, e+1) = (e+1−s) − S(s, e+1) / (e+1−s)`.
    ///
    /// First the kernels of the new point with every live start (a vectorised
    /// row); then, eight starts at a time from the top, their suffix sums formed
    /// inside the vector by three shifted additions (the only serial
    /// dependency is one addition per eight starts), the block sums and the
    /// costs.
    #[inline(always)]
    fn advance<const FMA: bool>(&mut self, base: usize) {
        const LANES: usize = 8;
        let point = self.end;
        let end = point + 1;
        self.sums[point] = 0.0;
        let row = &mut self.row[base..=point];
        if self.cost.n_dims() == 1 {
            let xs = self.cost.values();
            series_row::<FMA>(&xs[base..=point], xs[point], self.cost.gamma(), row);
        } else {
            self.cost.kernel_row(base, point, row);
        }
        let table = self.n - end + base;
        let sums = &mut self.sums[base..=point];
        let costs = &mut self.costs[base..=point];
        let lengths = &self.lengths[table..table + row.len()];
        let inverse = &self.inverse[table..table + row.len()];
        let update = |sum: &mut f64, cost: &mut f64, suffix: f64, len: f64, inv: f64| {
            *sum += 2.0 * suffix - 1.0;
            let c = len - *sum * inv;
            // Rounding can leave a tiny negative cost on a constant segment.
            *cost = if c > 0.0 { c } else { 0.0 };
        };
        let mut carry = 0.0;
        let mut top = row.len();
        while top >= LANES {
            let lo = top - LANES;
            let k: [f64; LANES] = row[lo..top].try_into().expect("eight kernels");
            // Each step adds the vector shifted down by 1, 2, 4 lanes (zeros in).
            let shifted = [k[1], k[2], k[3], k[4], k[5], k[6], k[7], 0.0];
            let a: [f64; LANES] = std::array::from_fn(|j| k[j] + shifted[j]);
            let shifted = [a[2], a[3], a[4], a[5], a[6], a[7], 0.0, 0.0];
            let b: [f64; LANES] = std::array::from_fn(|j| a[j] + shifted[j]);
            let shifted = [b[4], b[5], b[6], b[7], 0.0, 0.0, 0.0, 0.0];
            let c: [f64; LANES] = std::array::from_fn(|j| b[j] + shifted[j] + carry);
            update_chunk(
                (&mut sums[lo..top]).try_into().expect("eight sums"),
                (&mut costs[lo..top]).try_into().expect("eight costs"),
                &c,
                lengths[lo..top].try_into().expect("eight lengths"),
                inverse[lo..top].try_into().expect("eight inverses"),
            );
            carry = c[0];
            top = lo;
        }
        for i in (0..top).rev() {
            carry += row[i];
            update(&mut sums[i], &mut costs[i], carry, lengths[i], inverse[i]);
        }
        self.end = end;
    }
}

/// `sum += 2 suffix − 1`, then `cost = max(len − sum / len, 0)` on eight
/// starts. A function of its own so that the arguments are known not to
/// overlap (the compiler vectorises it only then).
#[inline(always)]
fn update_chunk(
    sum: &mut [f64; 8],
    cost: &mut [f64; 8],
    suffix: &[f64; 8],
    len: &[f64; 8],
    inv: &[f64; 8],
) {
    for j in 0..8 {
        sum[j] += 2.0 * suffix[j] - 1.0;
        let value = len[j] - sum[j] * inv[j];
        // Rounding can leave a tiny negative cost on a constant segment.
        cost[j] = if value > 0.0 { value } else { 0.0 };
    }
}

/// Calls `visit(i)` for every finite `prev[i]` with `prev[i] + cost[i] ≥
/// bound`; the test runs eight at a time, vectorised, and few chunks hit.
#[inline(always)]
pub(super) fn for_each_at_least(
    prev: &[f64],
    cost: &[f64],
    bound: f64,
    mut visit: impl FnMut(usize),
) {
    const LANES: usize = 8;
    let len = prev.len().min(cost.len());
    let mut lo = 0;
    while lo < len {
        let top = (lo + LANES).min(len);
        let hit = prev[lo..top]
            .iter()
            .zip(&cost[lo..top])
            .fold(false, |hit, (&p, &c)| {
                hit | ((p + c >= bound) & (p < f64::INFINITY))
            });
        if hit {
            for i in lo..top {
                if prev[i] < f64::INFINITY && prev[i] + cost[i] >= bound {
                    visit(i);
                }
            }
        }
        lo = top;
    }
}

/// The exact best segmentation with `n_change_points` change points for the
/// RBF cost with jump 1: segment ends and segment costs.
pub(crate) fn dynp_rbf(
    cost: &RbfCost,
    n_change_points: usize,
    min_size: usize,
) -> (Vec<usize>, Vec<f64>) {
    if let Some(found) = single_pass::dynp_rbf(cost, n_change_points, min_size) {
        return found;
    }
    dynp_rbf_portable(cost, n_change_points, min_size)
}

/// The AVX-512 single-pass searches where they are built (x86-64, Rust ≥ 1.89
/// for the intrinsics: `cfg(cpd_avx512)`); `None` elsewhere, without AVX-512
/// or for several columns.
#[cfg(all(target_arch = "x86_64", cpd_avx512))]
mod single_pass {
    pub(super) use super::super::rbf_avx512::{dynp_rbf, pelt_rbf};
}

/// Where the AVX-512 searches are not built: never.
#[cfg(not(all(target_arch = "x86_64", cpd_avx512)))]
mod single_pass {
    use crate::cost::RbfCost;

    type Found = Option<(Vec<usize>, Vec<f64>)>;

    pub(super) fn dynp_rbf(_: &RbfCost, _: usize, _: usize) -> Found {
        None
    }

    pub(super) fn pelt_rbf(_: &RbfCost, _: f64, _: usize) -> Found {
        None
    }
}

dispatch_simd! {
    /// [`dynp_rbf`] without the AVX-512 single-pass version (also for several
    /// columns).
    pub(super) fn dynp_rbf_portable(cost: &RbfCost, n_change_points: usize, min_size: usize) -> (Vec<usize>, Vec<f64>) = dynp_rbf_body;
}

#[inline(always)]
fn dynp_rbf_body<const FMA: bool>(
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
    let mut blocks = BlockSums::new(cost);
    for end in 1..=n {
        blocks.advance::<FMA>(0);
        if end < min_size {
            continue;
        }
        // Starts s ≤ end − min_size.
        let hi = end - min_size + 1;
        let costs = &blocks.costs;
        let is_final = end == n;
        if !is_final {
            best[0][end] = costs[0];
            back[0][end] = 0;
            back_cost[0][end] = costs[0];
        }
        for k in 1..layers {
            // Layer k at `end` matters only if the remaining layers still fit.
            if (is_final && k + 1 != layers) || end + (layers - 1 - k) * min_size > n {
                continue;
            }
            // F_{k−1}(s) is finite only for s ≥ k · min_size.
            let lo = k * min_size;
            if lo >= hi {
                continue;
            }
            let (value, i) = argmin_of_sums(&best[k - 1][lo..hi], &costs[lo..hi]);
            if i != usize::MAX {
                best[k][end] = value;
                back[k][end] = lo + i;
                back_cost[k][end] = costs[lo + i];
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

/// Exact PELT for the RBF cost with jump 1: segment ends and segment costs.
/// Pruning is PELT's (with the `min_size` delay of [`super::pelt`]).
pub(crate) fn pelt_rbf(cost: &RbfCost, penalty: f64, min_size: usize) -> (Vec<usize>, Vec<f64>) {
    if let Some(found) = single_pass::pelt_rbf(cost, penalty, min_size) {
        return found;
    }
    pelt_rbf_portable(cost, penalty, min_size)
}

dispatch_simd! {
    /// [`pelt_rbf`] without the AVX-512 single-pass version (also for several
    /// columns).
    pub(super) fn pelt_rbf_portable(cost: &RbfCost, penalty: f64, min_size: usize) -> (Vec<usize>, Vec<f64>) = pelt_rbf_body;
}

#[inline(always)]
fn pelt_rbf_body<const FMA: bool>(
    cost: &RbfCost,
    penalty: f64,
    min_size: usize,
) -> (Vec<usize>, Vec<f64>) {
    let n = cost.n_samples();
    let mut best = vec![f64::INFINITY; n + 1];
    let mut back = vec![usize::MAX; n + 1];
    let mut back_cost = vec![f64::NAN; n + 1];
    best[0] = -penalty;
    // F(s) for the live starts, +∞ for starts not yet usable or dropped.
    let mut live = vec![f64::INFINITY; n + 1];
    let mut pruned = vec![false; n + 1];
    // Pruned starts with the end from which they are dropped (increasing).
    let mut expiring: VecDeque<(usize, usize)> = VecDeque::new();
    let mut base = 0;
    let mut blocks = BlockSums::new(cost);
    for end in 1..=n {
        blocks.advance::<FMA>(base);
        if end < min_size {
            continue;
        }
        let newest = end - min_size;
        live[newest] = best[newest];
        // A start pruned at t is dominated by the start t, usable from t + min_size.
        while let Some(&(drop_at, s)) = expiring.front() {
            if drop_at > end {
                break;
            }
            live[s] = f64::INFINITY;
            expiring.pop_front();
        }
        while base < newest && live[base] == f64::INFINITY {
            base += 1;
        }
        let hi = newest + 1;
        let costs = &blocks.costs;
        let (value, i) = argmin_of_sums(&live[base..hi], &costs[base..hi]);
        if i == usize::MAX {
            continue;
        }
        best[end] = value + penalty;
        back[end] = base + i;
        back_cost[end] = costs[base + i];
        // F(s) + c(s, t) ≥ F(t) prunes s. Pruning is optional (only speed
        // depends on it), so the test runs at every fourth end only: a start
        // that qualifies stays a few ends longer, and the pass costs a quarter.
        if end < n && end % PRUNE_EVERY == 0 {
            for_each_at_least(&live[base..hi], &costs[base..hi], value + penalty, |i| {
                let s = base + i;
                if !pruned[s] {
                    pruned[s] = true;
                    expiring.push_back((end + min_size, s));
                }
            });
        }
    }
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
