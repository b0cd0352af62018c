//! The Normal cost: Gaussian log-likelihood with a segment-specific mean and
//! covariance.

use nalgebra::{DMatrix, SymmetricEigen};
use ndarray::ArrayView2;

use super::SegmentCost;
use crate::error::{CpdError, Result};
use crate::signal::validate_signal;

/// `c(a, b) = (b − a) · ln det(Σ̂_{a:b} + ε·I)`, where `Σ̂` is the maximum
/// likelihood (divide by the length) covariance of the segment.
///
/// This is `−2 ·` the Gaussian log-likelihood up to terms that do not depend on
/// the segmentation. A constant segment has `Σ̂ = 0`, whose log-determinant is
/// `−∞`; the floor `ε` (default `1e-6`, as in ruptures 1.1.10) keeps the cost
/// finite, and must be positive. Fitting stores prefix sums of the rows and of
/// their outer products, so a segment costs O(d³) (O(1) for a series).
///
/// ruptures' `normal` cost divides by the length for a series but by
/// `length − 1` (`np.cov`) for several columns; this cost always uses the
/// maximum-likelihood covariance, which keeps the cost a likelihood.
///
/// ```
/// use cpd::{NormalCost, SegmentCost};
/// let cost = NormalCost::from_series(&[1.0, 1.0, 1.0, 3.0])?;
/// // A constant segment costs len · ln(ε), finite.
/// assert!((cost.segment_cost(0, 3) - 3.0 * 1e-6f64.ln()).abs() < 1e-9);
/// # Ok::<(), cpd::CpdError>(())
/// ```
#[derive(Debug, Clone)]
pub struct NormalCost {
    n_samples: usize,
    n_dims: usize,
    variance_floor: f64,
    /// `(n + 1) × d` prefix sums of the centred rows.
    prefix_sum: Vec<f64>,
    /// `(n + 1) × d × d` prefix sums of the centred rows' outer products.
    prefix_outer: Vec<f64>,
}

/// ruptures 1.1.10 adds this much to the covariance diagonal.
pub const DEFAULT_VARIANCE_FLOOR: f64 = 1e-6;

impl NormalCost {
    /// Fits the cost with the default variance floor `1e-6`.
    pub fn new(signal: ArrayView2<'_, f64>) -> Result<Self> {
        Self::with_variance_floor(signal, DEFAULT_VARIANCE_FLOOR)
    }

    /// Fits the cost to a univariate series with the default floor.
    pub fn from_series(series: &[f64]) -> Result<Self> {
        Self::new(crate::signal::series_to_signal(series)?.view())
    }

    /// Fits the cost with a chosen positive variance floor `ε`.
    pub fn with_variance_floor(signal: ArrayView2<'_, f64>, variance_floor: f64) -> Result<Self> {
        validate_signal(signal)?;
        if !(variance_floor.is_finite() && variance_floor > 0.0) {
            return Err(CpdError::InvalidParameter {
                name: "variance_floor",
                reason: format!(
                    "{variance_floor} must be positive and finite, or constant segments cost -inf"
                ),
            });
        }
        let (n, d) = signal.dim();
        let means: Vec<f64> = (0..d).map(|j| signal.column(j).sum() / n as f64).collect();
        let mut prefix_sum = vec![0.0; (n + 1) * d];
        let mut prefix_outer = vec![0.0; (n + 1) * d * d];
        let mut centred = vec![0.0; d];
        for (t, row) in signal.rows().into_iter().enumerate() {
            for j in 0..d {
                centred[j] = row[j] - means[j];
                prefix_sum[(t + 1) * d + j] = prefix_sum[t * d + j] + centred[j];
            }
            for i in 0..d {
                for j in 0..d {
                    let k = i * d + j;
                    prefix_outer[(t + 1) * d * d + k] =
                        prefix_outer[t * d * d + k] + centred[i] * centred[j];
                }
            }
        }
        Ok(Self {
            n_samples: n,
            n_dims: d,
            variance_floor,
            prefix_sum,
            prefix_outer,
        })
    }
}

impl SegmentCost for NormalCost {
    fn n_samples(&self) -> usize {
        self.n_samples
    }

    fn min_segment_len(&self) -> usize {
        2
    }

    fn segment_cost(&self, start: usize, end: usize) -> f64 {
        let d = self.n_dims;
        let len = (end - start) as f64;
        let mean = |j: usize| (self.prefix_sum[end * d + j] - self.prefix_sum[start * d + j]) / len;
        let second = |k: usize| {
            (self.prefix_outer[end * d * d + k] - self.prefix_outer[start * d * d + k]) / len
        };
        if d == 1 {
            let m = mean(0);
            // Rounding may make a constant segment's variance slightly negative.
            let variance = (second(0) - m * m).max(0.0);
            return len * (variance + self.variance_floor).ln();
        }
        let cov = DMatrix::from_fn(d, d, |i, j| {
            let c = second(i * d + j) - mean(i) * mean(j);
            if i == j {
                c.max(0.0) + self.variance_floor
            } else {
                c
            }
        });
        let log_det = match cov.clone().cholesky() {
            Some(chol) => 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>(),
            // Cancellation can leave a nearly singular matrix slightly indefinite;
            // its eigenvalues are then floored at ε, as the exact matrix has them.
            None => SymmetricEigen::new(cov)
                .eigenvalues
                .iter()
                .map(|&v| v.max(self.variance_floor).ln())
                .sum(),
        };
        len * log_det
    }

    fn is_split_superadditive(&self) -> bool {
        true
    }
}
