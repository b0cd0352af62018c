//! Change-point decisions on swept latency curves, through the `cpd` crate.

use cpd::{
    ks_2samp, ks_critical_value, single_change_point, GeometricMapping, L2Cost, SearchOptions,
};
use ndarray::Array2;

thread_local! {
    /// Host time spent in change-point analysis on this thread since the last
    /// [`take_analysis_time`].
    static ANALYSIS_TIME: std::cell::Cell<std::time::Duration> =
        const { std::cell::Cell::new(std::time::Duration::ZERO) };
}

/// Runs `f` (a change-point analysis) and adds its host time to this thread's account, so
/// that `--timings` reports what the analysis costs separately from the launches.
pub(crate) fn analysing<T>(f: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let result = f();
    ANALYSIS_TIME.with(|t| t.set(t.get() + start.elapsed()));
    result
}

/// The analysis time accumulated on this thread, and a reset of the account.
pub(crate) fn take_analysis_time() -> std::time::Duration {
    ANALYSIS_TIME.with(|t| t.replace(std::time::Duration::ZERO))
}

use super::probe::SizeSamples;
use crate::error::RunnerError;

/// The outcome of change-point detection on a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepDecision {
    /// Index of the first swept size after the change.
    pub change_index: usize,
    /// Whether the two-sample Kolmogorov–Smirnov test confirmed the change.
    pub accepted: bool,
    /// The KS statistic D between the mapped series left and right of the change.
    pub statistic: f64,
    /// The KS test's p-value.
    pub p_value: f64,
    /// The thesis' critical value d_α for the two sides' sizes.
    pub critical: f64,
}

fn cpd_error(e: cpd::CpdError) -> RunnerError {
    RunnerError::WrongResult(format!("change-point detection: {e}"))
}

/// The sweep as a matrix: one row per size, the row's replica means sorted ascending.
///
/// Sorting turns each row into its empirical quantile function, so that rows are
/// compared quantile by quantile rather than SM by SM (which SMs ran a size differs
/// between launches).
pub fn sweep_matrix(points: &[SizeSamples]) -> Result<Array2<f64>, RunnerError> {
    let columns = points.iter().map(|p| p.values.len()).min().unwrap_or(0);
    if points.len() < 4 || columns == 0 {
        return Err(RunnerError::WrongResult(format!(
            "a sweep of {} sizes with {columns} samples each is too short to analyse",
            points.len()
        )));
    }
    let mut matrix = Array2::zeros((points.len(), columns));
    for (mut row, point) in matrix.rows_mut().into_iter().zip(points) {
        let mut sorted: Vec<f64> = point.values[..columns].to_vec();
        sorted.sort_by(f64::total_cmp);
        for (dst, src) in row.iter_mut().zip(sorted) {
            *dst = src;
        }
    }
    Ok(matrix)
}

/// Reduces the sweep by the geometric mapping, finds the single change point of the
/// distance series (L2 cost, exact) and tests it with the two-sample KS test at `alpha`.
pub fn decide_sweep(points: &[SizeSamples], alpha: f64) -> Result<SweepDecision, RunnerError> {
    analysing(|| decide_sweep_now(points, alpha))
}

fn decide_sweep_now(points: &[SizeSamples], alpha: f64) -> Result<SweepDecision, RunnerError> {
    let matrix = sweep_matrix(points)?;
    let mapped = GeometricMapping::new()
        .map(matrix.view())
        .map_err(cpd_error)?;
    let series = &mapped.distance;
    let split = single_change_point(
        &L2Cost::from_series(series).map_err(cpd_error)?,
        SearchOptions::default(),
    )
    .map_err(cpd_error)?;
    let t = split.change_point;
    let (left, right) = series.split_at(t);
    let test = ks_2samp(left, right).map_err(cpd_error)?;
    let critical = ks_critical_value(alpha, left.len(), right.len()).map_err(cpd_error)?;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // Only a rise in latency is a cache filling up; a drop is noise or a warm-up effect.
    let rises = mean(right) > mean(left);
    Ok(SweepDecision {
        change_index: t,
        accepted: rises && test.statistic > critical && test.p_value < alpha,
        statistic: test.statistic,
        p_value: test.p_value,
        critical,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight replicas of a mean latency with a little spread between SMs.
    fn point(bytes: u64, hit: f64, miss: f64, miss_share: f64) -> SizeSamples {
        let values = (0..8)
            .map(|i| hit + (miss - hit) * miss_share + 0.01 * f64::from(i % 3))
            .collect();
        SizeSamples {
            bytes,
            values,
            smids: (0..8).collect(),
        }
    }

    #[test]
    fn a_step_is_found_and_accepted() {
        let points: Vec<SizeSamples> = (0..24)
            .map(|k| {
                if k < 13 {
                    point(1024 + 32 * k, 30.0, 250.0, 0.0)
                } else {
                    point(1024 + 32 * k, 30.0, 250.0, 1.0)
                }
            })
            .collect();
        let d = decide_sweep(&points, 0.01).unwrap();
        assert_eq!(d.change_index, 13);
        assert!(d.accepted);
        assert!(d.statistic > d.critical);
    }

    #[test]
    fn a_flat_curve_is_rejected() {
        let points: Vec<SizeSamples> = (0..24)
            .map(|k| point(1024 + 32 * k, 30.0, 250.0, 0.0))
            .collect();
        let d = decide_sweep(&points, 0.01).unwrap();
        assert!(!d.accepted, "{d:?}");
    }

    #[test]
    fn too_short_sweeps_are_errors() {
        let points: Vec<SizeSamples> = (0..2)
            .map(|k| point(1024 + 32 * k, 30.0, 250.0, 0.0))
            .collect();
        assert!(matches!(
            decide_sweep(&points, 0.01),
            Err(RunnerError::WrongResult(_))
        ));
    }
}
