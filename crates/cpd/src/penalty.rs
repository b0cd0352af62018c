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
/// A staircase measured on a GPU has flats where every value is the same (a cache hit
/// costs the same cycles at every size), so more than half its differences are exactly
/// zero and their MAD is 0, which would make a penalty built on it reject nothing (a real
/// H200 L1 sweep: 58 % zero differences). Then the estimate is the mean square of the
/// differences without the largest tenth (the steps), halved.
///
/// ```
/// // 20 identical hits, then a rising, noisy tail: the MAD alone would say 0.
/// let mut s = vec![38.757; 20];
/// s.extend([39.6, 39.8, 39.7, 39.6, 40.6, 40.7, 40.2, 41.5, 41.8, 41.4]);
/// let v = cpd::estimate_noise_variance(&s)?;
/// assert!(v > 0.0 && v < 1.0);
/// # Ok::<(), cpd::CpdError>(())
/// ```
///
/// # Errors
/// [`CpdError::TooShort`] below 3 values, [`CpdError::NonFinite`] for NaN or infinite
/// values, [`CpdError::NoNoise`] when even that trimmed estimate is zero (the series is
/// constant apart from at most a tenth of its steps): there is no noise to scale by.
pub fn estimate_noise_variance(series: &[f64]) -> Result<f64> {
    crate::signal::validate_series(series, "series")?;
    if series.len() < 3 {
        return Err(CpdError::TooShort {
            len: series.len(),
            needed: 3,
        });
    }
    let differences: Vec<f64> = series.windows(2).map(|w| w[1] - w[0]).collect();
    let mad = crate::reduce::median_absolute_deviation(&differences);
    let sigma = mad * 1.4826 / std::f64::consts::SQRT_2;
    if sigma > 0.0 {
        return Ok(sigma * sigma);
    }
    let mut magnitudes: Vec<f64> = differences.iter().map(|d| d.abs()).collect();
    magnitudes.sort_by(f64::total_cmp);
    let kept = magnitudes.len() - (magnitudes.len() / 10).max(1);
    let core = &magnitudes[..kept];
    let mean_square = core.iter().map(|d| d * d).sum::<f64>() / core.len().max(1) as f64;
    if mean_square > 0.0 {
        Ok(mean_square / 2.0)
    } else {
        Err(CpdError::NoNoise { len: series.len() })
    }
}
