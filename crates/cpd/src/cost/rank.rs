//! The rank cost of Lung-Yut-Fong, Lévy-Leduc and Cappé (2015): a mean-shift
//! cost on the ranks, robust to outliers and to monotone transformations.

use nalgebra::{DMatrix, SymmetricEigen};
use ndarray::ArrayView2;

use super::SegmentCost;
use crate::error::Result;
use crate::signal::validate_signal;

/// `c(a, b) = −(b − a) · r̄ᵀ Σ⁺ r̄`, where `r̄` is the segment mean of the
/// centred ranks (ties get their average rank), and `Σ⁺` the pseudo-inverse of
/// the ranks' covariance over the whole signal (ruptures' `rank`).
///
/// Fitting ranks each column and stores prefix sums, so a segment costs O(d²).
///
/// ```
/// use cpd::{RankCost, SegmentCost};
/// let cost = RankCost::from_series(&[10.0, 11.0, 50.0, 51.0])?;
/// // Splitting where the ranks jump lowers the cost.
/// assert!(cost.segment_cost(0, 2) + cost.segment_cost(2, 4) < cost.segment_cost(0, 4));
/// # Ok::<(), cpd::CpdError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RankCost {
    n_samples: usize,
    n_dims: usize,
    /// `(n + 1) × d` prefix sums of the centred ranks.
    prefix_rank: Vec<f64>,
    /// `d × d` row-major pseudo-inverse of the rank covariance.
    inverse_covariance: Vec<f64>,
}

impl RankCost {
    /// Fits the cost to a multivariate signal (rows are time).
    pub fn new(signal: ArrayView2<'_, f64>) -> Result<Self> {
        validate_signal(signal)?;
        let (n, d) = signal.dim();
        let centre = (n as f64 + 1.0) / 2.0;
        let mut ranks = vec![0.0; n * d];
        for j in 0..d {
            let column: Vec<f64> = signal.column(j).to_vec();
            for (t, r) in average_ranks(&column).into_iter().enumerate() {
                ranks[t * d + j] = r - centre;
            }
        }
        // Centred ranks have mean exactly zero, so the covariance is E[r rᵀ].
        let cov = DMatrix::from_fn(d, d, |i, j| {
            (0..n)
                .map(|t| ranks[t * d + i] * ranks[t * d + j])
                .sum::<f64>()
                / n as f64
        });
        let inverse = pseudo_inverse_symmetric(cov);
        let mut prefix_rank = vec![0.0; (n + 1) * d];
        for t in 0..n {
            for j in 0..d {
                prefix_rank[(t + 1) * d + j] = prefix_rank[t * d + j] + ranks[t * d + j];
            }
        }
        Ok(Self {
            n_samples: n,
            n_dims: d,
            prefix_rank,
            inverse_covariance: inverse.transpose().as_slice().to_vec(),
        })
    }

    /// Fits the cost to a univariate series.
    pub fn from_series(series: &[f64]) -> Result<Self> {
        Self::new(crate::signal::series_to_signal(series)?.view())
    }
}

impl SegmentCost for RankCost {
    fn n_samples(&self) -> usize {
        self.n_samples
    }

    fn min_segment_len(&self) -> usize {
        2
    }

    fn segment_cost(&self, start: usize, end: usize) -> f64 {
        let d = self.n_dims;
        let len = (end - start) as f64;
        let sum = |j: usize| self.prefix_rank[end * d + j] - self.prefix_rank[start * d + j];
        let mut quadratic = 0.0;
        for i in 0..d {
            let si = sum(i);
            for j in 0..d {
                quadratic += si * self.inverse_covariance[i * d + j] * sum(j);
            }
        }
        -quadratic / len
    }

    fn is_split_superadditive(&self) -> bool {
        true
    }
}

/// Ranks from 1 to n, ties sharing their average rank (scipy's `rankdata`).
pub(crate) fn average_ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        // Positions i..=j hold equal values: ranks i+1 ..= j+1, average (i+j)/2 + 1.
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// Moore–Penrose pseudo-inverse of a symmetric matrix, dropping singular values
/// below `1e-15` times the largest (numpy's `pinv` default).
fn pseudo_inverse_symmetric(matrix: DMatrix<f64>) -> DMatrix<f64> {
    let d = matrix.nrows();
    let eigen = SymmetricEigen::new(matrix);
    let largest = eigen
        .eigenvalues
        .iter()
        .fold(0.0_f64, |m, v| m.max(v.abs()));
    let cutoff = 1e-15 * largest;
    let mut inverse = DMatrix::zeros(d, d);
    for (k, &value) in eigen.eigenvalues.iter().enumerate() {
        if value.abs() > cutoff {
            let v = eigen.eigenvectors.column(k);
            inverse += (v * v.transpose()) / value;
        }
    }
    inverse
}
