//! The Gaussian-kernel (RBF) cost of kernel change-point detection.

use ndarray::ArrayView2;

use super::kernel_row::{gaussian_kernel_row, sum, triangle_sums};
use super::{CostSweep, SegmentCost};
use crate::error::{CpdError, Result};
use crate::signal::validate_signal;

/// How the kernel bandwidth `γ` of [`RbfCost`] is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gamma {
    /// A given positive `γ`.
    Fixed(f64),
    /// `γ = 1 / median of the pairwise squared distances` (1 if that median is
    /// zero), ruptures' default. Exact for series; for several columns it is
    /// exact up to [`RbfCost::EXACT_MEDIAN_MAX_ROWS`] rows and otherwise taken
    /// over that many evenly spaced rows, which [`RbfCost::gamma_is_exact_median`]
    /// reports.
    MedianHeuristic,
}

/// `c(a, b) = Σ_{t∈[a,b)} k(x_t, x_t) − (1/(b−a)) Σ_{s,t∈[a,b)} k(x_s, x_t)` with
/// the Gaussian kernel `k(x, y) = exp(−γ‖x − y‖²)`: the squared distance of the
/// samples to their mean in the kernel's feature space.
///
/// An O(1) random-access cost would need the n × n prefix table of the Gram
/// matrix (80 GB at n = 10⁵), so nothing quadratic is stored. Instead
/// [`SegmentCost::sweep`] keeps one running sum per live segment start and
/// updates all of them when the end advances, O(n) memory; searches built on
/// sweeps (PELT, dynamic programming) cost O(live starts) kernel evaluations per
/// end. Random access through [`SegmentCost::segment_cost`] evaluates the
/// segment's kernel sums directly, O(len² · d).
///
/// ruptures clips `γ‖x − y‖²` into `[0.01, 100]` (and `KernelCPD` also on the
/// diagonal, in single precision); this cost uses the exact kernel, which is
/// positive definite, so pruning stays exact.
///
/// ```
/// use cpd::{Gamma, RbfCost, SegmentCost};
/// let cost = RbfCost::from_series(&[0.0, 0.0, 5.0, 5.0], Gamma::Fixed(1.0))?;
/// assert!(cost.segment_cost(0, 2).abs() < 1e-12);
/// assert!(cost.segment_cost(1, 3) > 0.9);
/// # Ok::<(), cpd::CpdError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RbfCost {
    n_samples: usize,
    n_dims: usize,
    /// Row-major copy of the signal.
    values: Vec<f64>,
    gamma: f64,
    gamma_is_exact_median: bool,
}

impl RbfCost {
    /// Above this many rows the median heuristic of a multivariate signal is
    /// taken over this many evenly spaced rows instead of all pairs.
    pub const EXACT_MEDIAN_MAX_ROWS: usize = 4000;

    /// Fits the cost to a multivariate signal (rows are time).
    pub fn new(signal: ArrayView2<'_, f64>, gamma: Gamma) -> Result<Self> {
        validate_signal(signal)?;
        let (n, d) = signal.dim();
        let values: Vec<f64> = signal.iter().copied().collect();
        let (gamma, exact) = match gamma {
            Gamma::Fixed(g) => {
                if !(g.is_finite() && g > 0.0) {
                    return Err(CpdError::InvalidParameter {
                        name: "gamma",
                        reason: format!("{g} must be positive and finite"),
                    });
                }
                (g, true)
            }
            Gamma::MedianHeuristic => {
                let (median, exact) = if d == 1 {
                    (median_pairwise_sq_distance_1d(&values), true)
                } else {
                    median_pairwise_sq_distance(&values, n, d)
                };
                (if median > 0.0 { 1.0 / median } else { 1.0 }, exact)
            }
        };
        Ok(Self {
            n_samples: n,
            n_dims: d,
            values,
            gamma,
            gamma_is_exact_median: exact,
        })
    }

    /// Fits the cost to a univariate series.
    pub fn from_series(series: &[f64], gamma: Gamma) -> Result<Self> {
        Self::new(crate::signal::series_to_signal(series)?.view(), gamma)
    }

    /// The bandwidth `γ` in use.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// `false` only when `γ` came from the median heuristic on a subsample.
    pub fn gamma_is_exact_median(&self) -> bool {
        self.gamma_is_exact_median
    }

    /// Number of dimensions (columns) of the fitted signal.
    pub(crate) fn n_dims(&self) -> usize {
        self.n_dims
    }

    /// Row-major copy of the signal.
    pub(crate) fn values(&self) -> &[f64] {
        &self.values
    }

    /// `out[i] = k(x_{first+i}, x_point)` for `i < out.len()`.
    #[inline]
    pub(crate) fn kernel_row(&self, first: usize, point: usize, out: &mut [f64]) {
        gaussian_kernel_row(&self.values, self.n_dims, self.gamma, first, point, out);
    }
}

impl SegmentCost for RbfCost {
    fn n_samples(&self) -> usize {
        self.n_samples
    }

    fn segment_cost(&self, start: usize, end: usize) -> f64 {
        let len = (end - start) as f64;
        let mut off_diagonal = 0.0;
        let mut row = vec![0.0; end - start];
        for i in start + 1..end {
            let row = &mut row[..i - start];
            self.kernel_row(start, i, row);
            off_diagonal += sum(row);
        }
        // The diagonal of the Gaussian kernel is exactly one.
        (len - (len + 2.0 * off_diagonal) / len).max(0.0)
    }

    fn is_split_superadditive(&self) -> bool {
        true
    }

    fn as_rbf(&self) -> Option<&RbfCost> {
        Some(self)
    }

    fn split_costs(
        &self,
        start: usize,
        end: usize,
        splits: &[usize],
        left: &mut [f64],
        right: &mut [f64],
    ) {
        // Running block sums from the left (prefix) and from the right (suffix):
        // adding one point to a block adds its kernel row once, twice off the
        // diagonal. Each kernel is evaluated once: row t (the kernels of x_t
        // with the earlier points) is the new part of the prefix block at t + 1,
        // and its entries are the later-point parts of the suffix rows of the
        // earlier points.
        let len = end - start;
        let mut lower = vec![0.0; len];
        let mut upper = vec![0.0; len];
        let series = &self.values[start..end];
        if self.n_dims != 1 || !triangle_sums(series, self.gamma, &mut lower, &mut upper) {
            let mut row = vec![0.0; len];
            for t in start + 1..end {
                let row = &mut row[..t - start];
                self.kernel_row(start, t, row);
                lower[t - start] = sum(row);
                for (u, k) in upper.iter_mut().zip(row.iter()) {
                    *u += k;
                }
            }
        }
        let mut prefix = vec![0.0; len + 1];
        for i in 0..len {
            prefix[i + 1] = prefix[i] + 2.0 * lower[i] + 1.0;
        }
        let mut suffix = vec![0.0; len + 1];
        for i in (0..len).rev() {
            suffix[i] = suffix[i + 1] + 2.0 * upper[i] + 1.0;
        }
        for ((&t, l), r) in splits.iter().zip(left.iter_mut()).zip(right.iter_mut()) {
            let (nl, nr) = ((t - start) as f64, (end - t) as f64);
            *l = (nl - prefix[t - start] / nl).max(0.0);
            *r = (nr - suffix[t - start] / nr).max(0.0);
        }
    }

    fn sweep(&self) -> Box<dyn CostSweep + '_> {
        Box::new(RbfSweep {
            cost: self,
            end: 0,
            base: 0,
            block_sums: Vec::new(),
            row: Vec::new(),
        })
    }
}

/// Running kernel sums `S(s, end) = Σ_{i,j∈[s,end)} k(x_i, x_j)` for every live
/// start `s ≥ base`.
struct RbfSweep<'a> {
    cost: &'a RbfCost,
    end: usize,
    base: usize,
    /// `block_sums[s - base] = S(s, end)`.
    block_sums: Vec<f64>,
    /// Scratch: the kernels of the newest point with every live start.
    row: Vec<f64>,
}

impl RbfSweep<'_> {
    /// Moves the end from `self.end` to `self.end + 1`.
    fn advance(&mut self) {
        let new_point = self.end;
        self.block_sums.push(0.0);
        // S(s, e+1) = S(s, e) + 2 Σ_{i=s}^{e} k(i, e) − k(e, e) (the recurrence of
        // ruptures' C code, O(e − base)): one vectorised kernel row, then its
        // suffix sums.
        self.row.resize(new_point + 1 - self.base, 0.0);
        self.cost.kernel_row(self.base, new_point, &mut self.row);
        add_doubled_suffix_sums(&self.row, &mut self.block_sums);
        self.end += 1;
    }

    fn forget_before(&mut self, lowest_start: usize) {
        if lowest_start > self.base {
            let drop = (lowest_start - self.base).min(self.block_sums.len());
            self.block_sums.drain(..drop);
            self.base += drop;
        }
    }
}

impl CostSweep for RbfSweep<'_> {
    fn costs_ending_at(&mut self, end: usize, starts: &[usize], costs: &mut [f64]) {
        if let Some(&lowest) = starts.first() {
            self.forget_before(lowest.min(self.end));
        }
        while self.end < end {
            self.advance();
        }
        for (cost, &start) in costs.iter_mut().zip(starts) {
            let len = (end - start) as f64;
            (*cost) = (len - self.block_sums[start - self.base] / len).max(0.0);
        }
    }
}

/// `sums[i] += 2 Σ_{j ≥ i} row[j] − 1` for every `i`.
///
/// A running suffix sum is one chain of dependent additions (about four cycles
/// per element, slower than the vectorised kernel row). The row is cut into
/// eight blocks summed as eight independent chains, then each block gets the
/// total of the blocks above it.
fn add_doubled_suffix_sums(row: &[f64], sums: &mut [f64]) {
    const CHAINS: usize = 8;
    let len = row.len();
    let block = len / CHAINS;
    let body = block * CHAINS;
    let mut above = 0.0;
    for i in (body..len).rev() {
        above += row[i];
        sums[i] += 2.0 * above - 1.0;
    }
    if block == 0 {
        return;
    }
    let mut chains = [0.0; CHAINS];
    for i in (0..block).rev() {
        for (c, chain) in chains.iter_mut().enumerate() {
            *chain += row[c * block + i];
            sums[c * block + i] += 2.0 * *chain - 1.0;
        }
    }
    for c in (0..CHAINS).rev() {
        let offset = 2.0 * above;
        if offset != 0.0 {
            for s in &mut sums[c * block..(c + 1) * block] {
                *s += offset;
            }
        }
        above += chains[c];
    }
}

/// Median of the pairwise squared distances of a series, exactly, in
/// O(n log n + 64 n): binary search over the bit patterns of non-negative
/// doubles (ordered like the doubles), counting pairs below a bound with two
/// pointers on the sorted series.
fn median_pairwise_sq_distance_1d(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pairs = (n as u64) * (n as u64 - 1) / 2;
    let count_at_most = |bound: f64| -> u64 {
        let mut count = 0u64;
        let mut i = 0;
        for j in 0..n {
            while {
                let diff = sorted[j] - sorted[i];
                diff * diff > bound
            } {
                i += 1;
            }
            count += (j - i) as u64;
        }
        count
    };
    let kth = |k: u64| -> f64 {
        // Smallest bit pattern whose value has more than k pairs at or below it.
        let (mut lo, mut hi) = (0u64, f64::INFINITY.to_bits());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if count_at_most(f64::from_bits(mid)) > k {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        f64::from_bits(lo)
    };
    if pairs % 2 == 1 {
        kth(pairs / 2)
    } else {
        0.5 * (kth(pairs / 2 - 1) + kth(pairs / 2))
    }
}

/// Median of pairwise squared distances of a multivariate signal, and whether
/// it used every row.
fn median_pairwise_sq_distance(values: &[f64], n: usize, d: usize) -> (f64, bool) {
    let rows: Vec<usize> = if n <= RbfCost::EXACT_MEDIAN_MAX_ROWS {
        (0..n).collect()
    } else {
        let m = RbfCost::EXACT_MEDIAN_MAX_ROWS;
        (0..m).map(|k| k * (n - 1) / (m - 1)).collect()
    };
    let exact = rows.len() == n;
    let mut distances = Vec::with_capacity(rows.len() * rows.len().saturating_sub(1) / 2);
    for (a, &i) in rows.iter().enumerate() {
        for &j in &rows[..a] {
            let sq: f64 = (0..d)
                .map(|k| {
                    let diff = values[i * d + k] - values[j * d + k];
                    diff * diff
                })
                .sum();
            distances.push(sq);
        }
    }
    if distances.is_empty() {
        return (0.0, exact);
    }
    (crate::cost::median_in_place(&mut distances), exact)
}
