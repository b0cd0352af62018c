//! The L1 (median-shift) cost: absolute deviations around the segment median.

use ndarray::{Array2, ArrayView2};

use super::SegmentCost;
use crate::error::Result;
use crate::signal::validate_signal;

/// Sum of absolute deviations around the segment median, summed over
/// dimensions: `c(a, b) = Σ_j Σ_{t∈[a,b)} |x_{t,j} − med_j(a:b)|` (ruptures' `l1`).
///
/// A median has no prefix-sum form, so a segment costs O(len · d) (a
/// selection per dimension); prefer [`crate::L2Cost`] for long series.
///
/// ```
/// use cpd::{L1Cost, SegmentCost};
/// let cost = L1Cost::from_series(&[0.0, 1.0, 5.0])?;
/// assert_eq!(cost.segment_cost(0, 3), 5.0);
/// # Ok::<(), cpd::CpdError>(())
/// ```
#[derive(Debug, Clone)]
pub struct L1Cost {
    /// Column-major copy, so a segment of one dimension is contiguous.
    columns: Array2<f64>,
}

impl L1Cost {
    /// Fits the cost to a multivariate signal (rows are time).
    pub fn new(signal: ArrayView2<'_, f64>) -> Result<Self> {
        validate_signal(signal)?;
        Ok(Self {
            columns: signal.t().as_standard_layout().into_owned(),
        })
    }

    /// Fits the cost to a univariate series.
    pub fn from_series(series: &[f64]) -> Result<Self> {
        Self::new(crate::signal::series_to_signal(series)?.view())
    }
}

impl SegmentCost for L1Cost {
    fn n_samples(&self) -> usize {
        self.columns.ncols()
    }

    fn segment_cost(&self, start: usize, end: usize) -> f64 {
        let mut scratch = Vec::with_capacity(end - start);
        let mut total = 0.0;
        for column in self.columns.rows() {
            scratch.clear();
            scratch.extend(column.iter().skip(start).take(end - start));
            let median = median_in_place(&mut scratch);
            total += scratch.iter().map(|x| (x - median).abs()).sum::<f64>();
        }
        total
    }

    fn is_split_superadditive(&self) -> bool {
        true
    }
}

/// Median with numpy's convention (mean of the two middle values for an even
/// count). Reorders `values`.
pub(crate) fn median_in_place(values: &mut [f64]) -> f64 {
    let n = values.len();
    let mid = n / 2;
    let (lower, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        upper
    } else {
        let lower_max = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        0.5 * (lower_max + upper)
    }
}
