//! Reductions of multivariate samples (rows are time points, columns are
//! repeated samples or dimensions) to series: the geometric mapping of Grundy,
//! Killick and Mihaylov (2020) and the plain row mean.

use ndarray::ArrayView2;

use crate::cost::L2Cost;
use crate::error::{CpdError, Result};
use crate::search::{pelt, single_change_point_l2, SearchOptions, Segmentation, SingleChangePoint};
use crate::signal::validate_signal;

/// The geometric mapping of Grundy, Killick and Mihaylov (2020, "High-dimensional
/// changepoint detection via a geometrically inspired mapping").
///
/// Each column is optionally divided by its noise scale (the MAD of its first
/// differences × 1.4826 / √2), then translated so that its minimum equals the
/// reference vector's entry (default all ones). Each row `x_t` is then mapped to
/// its Euclidean distance to the reference vector `r`, `‖x_t − r‖`, and to its
/// angle to it, `arccos(x_t·r / (‖x_t‖ ‖r‖))`. A change in the mean of many
/// columns shows as a change in the distance; a change in only some columns
/// also moves the angle.
///
/// ```
/// use cpd::GeometricMapping;
/// use ndarray::array;
/// // Rows are array sizes, columns are repeated latency samples.
/// let samples = array![[10.0, 11.0], [10.0, 11.0], [30.0, 31.0], [30.0, 31.0]];
/// let mapped = GeometricMapping::default().map(samples.view())?;
/// assert_eq!(mapped.distance[0], 0.0);
/// assert!((mapped.distance[2] - 20.0 * 2f64.sqrt()).abs() < 1e-12);
/// # Ok::<(), cpd::CpdError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeometricMapping {
    /// The reference vector (one positive entry per column); `None` means all ones.
    pub reference: Option<Vec<f64>>,
    /// Whether to divide each column by its robust noise scale first.
    pub mad_scaling: bool,
}

/// The two series of the geometric mapping, one value per row.
#[derive(Debug, Clone, PartialEq)]
pub struct GeometricSeries {
    /// Distance of each translated row to the reference vector.
    pub distance: Vec<f64>,
    /// Angle (radians, in `[0, π/2]` for the default reference) between each
    /// translated row and the reference vector.
    pub angle: Vec<f64>,
}

/// Single change points found on both mapped series.
#[derive(Debug, Clone, PartialEq)]
pub struct GeometricSingleChange {
    /// The best split of the distance series.
    pub distance: SingleChangePoint,
    /// The best split of the angle series.
    pub angle: SingleChangePoint,
}

impl GeometricSingleChange {
    /// The split of whichever series it explains better, by the fraction of that
    /// series' cost removed by the split (a scale-free comparison); the distance
    /// wins ties.
    pub fn combined(&self) -> &SingleChangePoint {
        let relative = |s: &SingleChangePoint| {
            if s.unsplit_cost > 0.0 {
                s.gain() / s.unsplit_cost
            } else {
                0.0
            }
        };
        if relative(&self.angle) > relative(&self.distance) {
            &self.angle
        } else {
            &self.distance
        }
    }
}

/// Penalised segmentations of both mapped series, and their union.
#[derive(Debug, Clone, PartialEq)]
pub struct GeometricSegmentation {
    /// PELT on the distance series.
    pub distance: Segmentation,
    /// PELT on the angle series.
    pub angle: Segmentation,
    /// Change points of either series, sorted; an angle change point within
    /// `min_size` of a distance change point is taken as the same change.
    pub combined: Vec<usize>,
}

impl GeometricMapping {
    /// The mapping with the reference vector of all ones and no scaling.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps every row of `samples` (rows are time, columns dimensions).
    /// Samples so large that the squared norms overflow a double are refused
    /// with [`CpdError::Overflow`].
    pub fn map(&self, samples: ArrayView2<'_, f64>) -> Result<GeometricSeries> {
        validate_signal(samples)?;
        let (n, p) = samples.dim();
        let reference = match &self.reference {
            None => vec![1.0; p],
            Some(r) => {
                if r.len() != p {
                    return Err(CpdError::DimensionMismatch {
                        what: "reference entries (one per column)",
                        expected: p,
                        found: r.len(),
                    });
                }
                if let Some(bad) = r.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                    return Err(CpdError::InvalidParameter {
                        name: "reference",
                        reason: format!("entry {bad} must be positive and finite"),
                    });
                }
                r.clone()
            }
        };
        let mut columns: Vec<Vec<f64>> = (0..p).map(|j| samples.column(j).to_vec()).collect();
        if self.mad_scaling {
            if n < 3 {
                return Err(CpdError::TooShort { len: n, needed: 3 });
            }
            for (j, column) in columns.iter_mut().enumerate() {
                let diffs: Vec<f64> = column.windows(2).map(|w| w[1] - w[0]).collect();
                let scale = median_absolute_deviation(&diffs) * 1.4826 / std::f64::consts::SQRT_2;
                if scale <= 0.0 {
                    return Err(CpdError::ZeroSpread { column: j });
                }
                column.iter_mut().for_each(|v| *v /= scale);
            }
        }
        for (column, &r) in columns.iter_mut().zip(&reference) {
            let min = column.iter().copied().fold(f64::INFINITY, f64::min);
            column.iter_mut().for_each(|v| *v = *v - min + r);
        }
        let reference_norm = reference.iter().map(|v| v * v).sum::<f64>().sqrt();
        let mut distance = Vec::with_capacity(n);
        let mut angle = Vec::with_capacity(n);
        for t in 0..n {
            let (mut dist_sq, mut dot, mut norm_sq) = (0.0, 0.0, 0.0);
            for (column, &r) in columns.iter().zip(&reference) {
                let x = column[t];
                dist_sq += (x - r) * (x - r);
                dot += x * r;
                norm_sq += x * x;
            }
            distance.push(dist_sq.sqrt());
            // Every translated entry is at least its positive reference entry, so
            // the norm is positive; the clamp absorbs rounding past ±1.
            let cosine = (dot / (norm_sq.sqrt() * reference_norm)).clamp(-1.0, 1.0);
            angle.push(cosine.acos());
        }
        // Finite samples beyond about 1e154 overflow the squared norms.
        if distance.iter().chain(&angle).any(|v| !v.is_finite()) {
            return Err(CpdError::Overflow {
                what: "squared distance to the reference vector",
            });
        }
        Ok(GeometricSeries { distance, angle })
    }

    /// Maps `samples` and finds the exact single change point (L2 cost) of both
    /// series — the thesis' reduction followed by its "Opt" search.
    pub fn single_change_point(
        &self,
        samples: ArrayView2<'_, f64>,
        options: SearchOptions,
    ) -> Result<GeometricSingleChange> {
        let mapped = self.map(samples)?;
        Ok(GeometricSingleChange {
            distance: single_change_point_l2(&mapped.distance, options)?,
            angle: single_change_point_l2(&mapped.angle, options)?,
        })
    }

    /// Maps `samples` and runs PELT (L2 cost) with the given penalties on both
    /// series (the two have different scales, so each has its own penalty).
    pub fn pelt(
        &self,
        samples: ArrayView2<'_, f64>,
        distance_penalty: f64,
        angle_penalty: f64,
        options: SearchOptions,
    ) -> Result<GeometricSegmentation> {
        let mapped = self.map(samples)?;
        let distance = pelt(
            &L2Cost::from_series(&mapped.distance)?,
            distance_penalty,
            options,
        )?;
        let angle = pelt(&L2Cost::from_series(&mapped.angle)?, angle_penalty, options)?;
        let mut combined: Vec<usize> = distance.change_points().to_vec();
        for &t in angle.change_points() {
            if combined
                .iter()
                .all(|&c| c.abs_diff(t) >= options.min_size.max(1))
            {
                combined.push(t);
            }
        }
        combined.sort_unstable();
        Ok(GeometricSegmentation {
            distance,
            angle,
            combined,
        })
    }
}

/// The mean of each row: the simplest reduction of per-size samples to a series.
///
/// ```
/// use ndarray::array;
/// assert_eq!(cpd::mean_reduction(array![[1.0, 3.0], [5.0, 7.0]].view())?, vec![2.0, 6.0]);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn mean_reduction(samples: ArrayView2<'_, f64>) -> Result<Vec<f64>> {
    validate_signal(samples)?;
    Ok(samples
        .rows()
        .into_iter()
        .map(|row| row.sum() / row.len() as f64)
        .collect())
}

/// Median absolute deviation from the median (without the normal-consistency
/// factor); 0 for an empty slice.
pub(crate) fn median_absolute_deviation(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut scratch = values.to_vec();
    let median = crate::cost::median_in_place(&mut scratch);
    scratch.iter_mut().for_each(|v| *v = (*v - median).abs());
    crate::cost::median_in_place(&mut scratch)
}
