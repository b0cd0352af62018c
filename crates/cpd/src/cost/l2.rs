//! The L2 (mean-shift) cost: the residual sum of squares around the segment mean.

use ndarray::ArrayView2;

use super::SegmentCost;
use crate::error::{CpdError, Result};
use crate::signal::{validate_series, validate_signal};

/// Residual sum of squares around the segment mean, summed over dimensions:
/// `c(a, b) = Σ_{t∈[a,b)} ‖x_t − x̄_{a:b}‖²` (ruptures' `l2`).
///
/// Fitting stores prefix sums of the values and of their squared norms, so a
/// segment costs O(d). The signal is centred on its column means first: prefix
/// sums of squares of uncentred data (latencies around 500 cycles, say) would
/// lose the small within-segment variances to cancellation.
///
/// ```
/// use cpd::{L2Cost, SegmentCost};
/// let cost = L2Cost::from_series(&[1.0, 1.0, 4.0, 4.0])?;
/// assert_eq!(cost.segment_cost(0, 2), 0.0);
/// assert!((cost.segment_cost(1, 3) - 4.5).abs() < 1e-12);
/// # Ok::<(), cpd::CpdError>(())
/// ```
#[derive(Debug, Clone)]
pub struct L2Cost {
    n_samples: usize,
    n_dims: usize,
    /// `(n + 1) × d` row-major prefix sums of the centred values.
    prefix_sum: Vec<f64>,
    /// `n + 1` prefix sums of the squared norms of the centred rows.
    prefix_sq: Vec<f64>,
}

/// Prefix sums of `x − mean` and of its square, each starting at 0.
fn centred_prefix_sums(series: &[f64], mean: f64) -> (Vec<f64>, Vec<f64>) {
    let n = series.len();
    let mut prefix_sum = vec![0.0; n + 1];
    let mut prefix_sq = vec![0.0; n + 1];
    let (mut s1, mut s2) = (0.0, 0.0);
    for ((&x, sum), sq) in series
        .iter()
        .zip(&mut prefix_sum[1..])
        .zip(&mut prefix_sq[1..])
    {
        let centred = x - mean;
        s1 += centred;
        s2 += centred * centred;
        *sum = s1;
        *sq = s2;
    }
    (prefix_sum, prefix_sq)
}

impl L2Cost {
    /// Fits the cost to a multivariate signal (rows are time). Values whose
    /// squared deviations overflow a double (beyond about 1e154) are refused
    /// with [`CpdError::Overflow`].
    pub fn new(signal: ArrayView2<'_, f64>) -> Result<Self> {
        validate_signal(signal)?;
        let (n, d) = signal.dim();
        let means: Vec<f64> = (0..d).map(|j| signal.column(j).sum() / n as f64).collect();
        if let (1, Some(series)) = (d, signal.column(0).to_slice()) {
            // A contiguous column: the same sums, without ndarray's per-row views.
            let (prefix_sum, prefix_sq) = centred_prefix_sums(series, means[0]);
            return Self::checked(n, 1, prefix_sum, prefix_sq);
        }
        let mut prefix_sum = vec![0.0; (n + 1) * d];
        let mut prefix_sq = vec![0.0; n + 1];
        for (t, row) in signal.rows().into_iter().enumerate() {
            let mut sq = 0.0;
            for (j, (&x, &mean)) in row.iter().zip(&means).enumerate() {
                let centred = x - mean;
                prefix_sum[(t + 1) * d + j] = prefix_sum[t * d + j] + centred;
                sq += centred * centred;
            }
            prefix_sq[t + 1] = prefix_sq[t] + sq;
        }
        Self::checked(n, d, prefix_sum, prefix_sq)
    }

    /// The fitted cost, or [`CpdError::Overflow`] when the squares of finite
    /// values overflow (the sums only grow, so the last one tells).
    fn checked(n: usize, d: usize, prefix_sum: Vec<f64>, prefix_sq: Vec<f64>) -> Result<Self> {
        if !prefix_sq[n].is_finite() {
            return Err(CpdError::Overflow {
                what: "sum of squared deviations",
            });
        }
        Ok(Self {
            n_samples: n,
            n_dims: d,
            prefix_sum,
            prefix_sq,
        })
    }

    /// Fits the cost to a univariate series (refusing overflowing values as
    /// [`L2Cost::new`] does).
    pub fn from_series(series: &[f64]) -> Result<Self> {
        validate_series(series, "series")?;
        let n = series.len();
        let mean = series.iter().sum::<f64>() / n as f64;
        let (prefix_sum, prefix_sq) = centred_prefix_sums(series, mean);
        Self::checked(n, 1, prefix_sum, prefix_sq)
    }

    /// Number of dimensions (columns) of the fitted signal.
    pub fn n_dims(&self) -> usize {
        self.n_dims
    }

    /// `(n + 1) × d` row-major prefix sums of the centred values.
    pub(crate) fn prefix_sum(&self) -> &[f64] {
        &self.prefix_sum
    }

    /// `n + 1` prefix sums of the squared norms of the centred rows.
    pub(crate) fn prefix_sq(&self) -> &[f64] {
        &self.prefix_sq
    }
}

impl SegmentCost for L2Cost {
    fn n_samples(&self) -> usize {
        self.n_samples
    }

    #[inline]
    fn segment_cost(&self, start: usize, end: usize) -> f64 {
        let d = self.n_dims;
        let len = (end - start) as f64;
        let mut explained = 0.0;
        for j in 0..d {
            let s = self.prefix_sum[end * d + j] - self.prefix_sum[start * d + j];
            explained += s * s;
        }
        // Rounding can leave a tiny negative residual on a constant segment.
        (self.prefix_sq[end] - self.prefix_sq[start] - explained / len).max(0.0)
    }

    fn is_split_superadditive(&self) -> bool {
        true
    }

    fn as_l2(&self) -> Option<&L2Cost> {
        Some(self)
    }
}
