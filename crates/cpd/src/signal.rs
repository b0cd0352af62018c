//! Input validation and the conversion of univariate slices into the
//! two-dimensional layout (rows are time, columns are dimensions) the costs use.

use ndarray::{Array2, ArrayView2};

use crate::error::{CpdError, Result};

/// Checks that a multivariate signal is non-empty, has at least one column and
/// holds only finite values.
pub fn validate_signal(signal: ArrayView2<'_, f64>) -> Result<()> {
    if signal.nrows() == 0 {
        return Err(CpdError::Empty { what: "signal" });
    }
    if signal.ncols() == 0 {
        return Err(CpdError::Empty {
            what: "signal's column set",
        });
    }
    // A vectorised scan first; the position only when something is wrong.
    let all_finite = match signal.as_slice_memory_order() {
        Some(values) => values.iter().fold(true, |ok, v| ok & v.is_finite()),
        None => signal.iter().all(|v| v.is_finite()),
    };
    if !all_finite {
        if let Some(((row, column), &value)) =
            signal.indexed_iter().find(|(_, value)| !value.is_finite())
        {
            return Err(CpdError::NonFinite { row, column, value });
        }
    }
    Ok(())
}

/// Checks that a univariate series is non-empty and finite.
pub fn validate_series(series: &[f64], what: &'static str) -> Result<()> {
    if series.is_empty() {
        return Err(CpdError::Empty { what });
    }
    if let Some((row, &value)) = series.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(CpdError::NonFinite {
            row,
            column: 0,
            value,
        });
    }
    Ok(())
}

/// Copies a univariate series into an `n × 1` array after validating it.
pub fn series_to_signal(series: &[f64]) -> Result<Array2<f64>> {
    validate_series(series, "series")?;
    Ok(Array2::from_shape_vec((series.len(), 1), series.to_vec())
        .expect("an n-element vector always fits an n × 1 shape"))
}
