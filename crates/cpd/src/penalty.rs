//! Penalties per change point for [`crate::pelt`] and [`crate::binseg`].

use crate::error::{CpdError, Result};

/// A rule for the penalty charged per change point.
///
/// The information criteria are stated for a cost equal to `−2 ×` the
/// log-likelihood ([`crate::NormalCost`] is one). A residual-sum-of-squares cost
/// such as [`crate::L2Cost`] equals `σ² ×` that, so its penalty must be
/// multiplied by the noise variance `σ²` — pass it as `noise_variance`
/// ([`estimate_noise_variance`] estimates it robustly) or 1 for likelihood costs.
///
/// With `p` the number of parameters that change at a change point (the
/// dimension `d` for a mean shift), a change point adds `p + 1` parameters (its
/// location too) and the penalties are, as in the R package `changepoint`:
///
/// | rule | penalty per change |
/// |---|---|
/// | AIC | `2 (p + 1)` |
/// | BIC (SIC) | `(p + 1) ln n` |
/// | MBIC (Zhang and Siegmund, 2007) | `(p + 2) ln n` |
/// | Hannan–Quinn | `2 (p + 1) ln ln n` |
///
/// ```
/// use cpd::Penalty;
/// let bic = Penalty::Bic.per_change_point(1000, 1, 1.0)?;
/// assert!((bic - 2.0 * 1000f64.ln()).abs() < 1e-12);
/// # Ok::<(), cpd::CpdError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Penalty {
    /// Akaike's information criterion.
    Aic,
    /// The Bayesian (Schwarz) information criterion.
    Bic,
    /// The modified BIC of Zhang and Siegmund.
    Mbic,
    /// The Hannan–Quinn criterion.
    HannanQuinn,
    /// A given value, used as is (`noise_variance` is ignored).
    Manual(f64),
}

impl Penalty {
    /// The penalty per change point for `n_samples` samples, `params_per_change`
    /// changing parameters and a cost scaled by `noise_variance`.
    pub fn per_change_point(
        &self,
        n_samples: usize,
        params_per_change: usize,
        noise_variance: f64,
    ) -> Result<f64> {
        if !(noise_variance.is_finite() && noise_variance > 0.0) {
            return Err(CpdError::InvalidParameter {
                name: "noise_variance",
                reason: format!("{noise_variance} must be positive and finite"),
            });
        }
        // ln ln n must be positive for Hannan–Quinn, so n ≥ 3 everywhere.
        if n_samples < 3 {
            return Err(CpdError::TooShort {
                len: n_samples,
                needed: 3,
            });
        }
        let n = n_samples as f64;
        let k = params_per_change as f64 + 1.0;
        let value = match *self {
            Penalty::Aic => 2.0 * k * noise_variance,
            Penalty::Bic => k * n.ln() * noise_variance,
            Penalty::Mbic => (k + 1.0) * n.ln() * noise_variance,
            Penalty::HannanQuinn => 2.0 * k * n.ln().ln() * noise_variance,
            Penalty::Manual(v) => v,
        };
        crate::search::check_penalty(value)?;
        Ok(value)
    }
}

/// A robust estimate of the noise variance of a piecewise-constant series:
/// `(MAD of the first differences × 1.4826)² / 2`. Differencing removes the
/// level, the median ignores the few differences that straddle a change.
///
/// ```
/// let v = cpd::estimate_noise_variance(&[0.0, 1.0, 0.0, 1.0, 0.0, 1.0])?;
/// assert!((v - 0.0).abs() < 1e-12); // all |differences| equal: zero spread
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn estimate_noise_variance(series: &[f64]) -> Result<f64> {
    crate::signal::validate_series(series, "series")?;
    if series.len() < 3 {
        return Err(CpdError::TooShort {
            len: series.len(),
            needed: 3,
        });
    }
    let mad = crate::reduce::median_absolute_deviation(
        &series.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>(),
    );
    let sigma = mad * 1.4826 / std::f64::consts::SQRT_2;
    Ok(sigma * sigma)
}
