//! Memory-level parallelism from latency against the number of independent chains.
//!
//! `W` warps per SM on `S` SMs each chase their own chain, so `W × S` loads are in flight
//! at every moment (a closed system). The latency `R(W)` is each warp's mean cycles per
//! load; the throughput is `X(W) = W·S / R(W)` loads per cycle. Once the memory system's
//! slots are full, more chains only queue: `X` stays at its maximum and `R` grows. By
//! Little's law the loads the system itself keeps in flight at saturation are
//! `X_max × R(1)` (the throughput times the unloaded latency), and the chain count where
//! throughput saturates is the first `W` with `X(W) ≥ 95 % X_max`.

/// One point: `chains` warps per SM and their mean cycles per load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MlpPoint {
    /// Warps (independent chains) per SM.
    pub chains: u32,
    /// Mean cycles per load of each warp.
    pub latency: f64,
}

/// What the points of one level and scope say.
#[derive(Debug, Clone, PartialEq)]
pub struct MlpFinding {
    /// SMs that chased at once (1: one SM; all: the GPU).
    pub sms: u32,
    /// The points, by chain count.
    pub points: Vec<MlpPoint>,
    /// The latency with one chain (cycles).
    pub unloaded_latency: f64,
    /// The largest throughput, loads per cycle (of the SM or of the GPU).
    pub max_throughput: f64,
    /// The first chain count whose throughput is at least 95 % of the largest.
    pub saturating_chains: u32,
    /// `max_throughput × unloaded_latency`: the loads in flight at saturation.
    pub in_flight: f64,
    /// Whether the throughput was still rising at the last point (then `in_flight` and
    /// `saturating_chains` are lower bounds).
    pub still_rising: bool,
}

/// The throughput of `point` on `sms` SMs, loads per cycle.
pub fn throughput(point: &MlpPoint, sms: u32) -> f64 {
    f64::from(point.chains) * f64::from(sms) / point.latency
}

/// Analyses `points` (ascending chain counts, the first with one chain).
///
/// ```
/// use pchase_runner::measure::mlp::{analyse, MlpPoint};
/// // 12 loads in flight at most, 300 cycles unloaded.
/// let points: Vec<MlpPoint> = (1..=32)
///     .map(|w| MlpPoint { chains: w, latency: 300.0 * (f64::from(w) / 12.0).max(1.0) })
///     .collect();
/// let f = analyse(&points, 1).unwrap();
/// assert_eq!(f.saturating_chains, 12);
/// assert!((f.in_flight - 12.0).abs() < 1e-9);
/// ```
pub fn analyse(points: &[MlpPoint], sms: u32) -> Option<MlpFinding> {
    let first = points.first()?;
    if first.chains != 1
        || points
            .iter()
            .any(|p| p.latency.is_nan() || p.latency <= 0.0)
    {
        return None;
    }
    let max = points
        .iter()
        .map(|p| throughput(p, sms))
        .fold(0.0f64, f64::max);
    let saturating = points
        .iter()
        .find(|p| throughput(p, sms) >= 0.95 * max)?
        .chains;
    let last = points.last()?;
    let before_last = points.len().checked_sub(2).map(|i| &points[i]);
    let still_rising =
        before_last.is_some_and(|b| throughput(last, sms) > 1.05 * throughput(b, sms));
    Some(MlpFinding {
        sms,
        points: points.to_vec(),
        unloaded_latency: first.latency,
        max_throughput: max,
        saturating_chains: saturating,
        in_flight: max * first.latency,
        still_rising,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_limit_below_the_sms_is_found_and_a_rising_curve_is_a_bound() {
        // 100 SMs, 24 per SM, 900 per GPU: the GPU limit binds from 9 chains per SM.
        let points: Vec<MlpPoint> = (1..=32)
            .map(|w| {
                let f = (f64::from(w) / 24.0)
                    .max(f64::from(w) * 100.0 / 900.0)
                    .max(1.0);
                MlpPoint {
                    chains: w,
                    latency: 500.0 * f,
                }
            })
            .collect();
        let f = analyse(&points, 100).unwrap();
        assert_eq!(f.saturating_chains, 9);
        assert!((f.in_flight - 900.0).abs() < 1e-6);
        assert!(!f.still_rising);
        let unbounded: Vec<MlpPoint> = (1..=4)
            .map(|w| MlpPoint {
                chains: w,
                latency: 500.0,
            })
            .collect();
        let f = analyse(&unbounded, 1).unwrap();
        assert!(f.still_rising);
        assert!(analyse(&[], 1).is_none());
        assert!(analyse(
            &[MlpPoint {
                chains: 2,
                latency: 1.0
            }],
            1
        )
        .is_none());
    }
}
