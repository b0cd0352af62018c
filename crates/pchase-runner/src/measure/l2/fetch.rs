//! The L2's fetch granularity: what one read miss brings from memory, from a cold chase
//! decided load by load (`docs/measurement.md`, "The L2 partitions", step 2).

use std::time::Duration;

use crate::{
    backend::{Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath},
    error::RunnerError,
};

use super::super::stats::quantile;
use super::probes::{first_block, hit_miss_threshold};

/// The L2's fetch granularity: what one read miss brings from memory, from a cold
/// 4-byte-stride chase after an L2 flush (each load that opens a new fetch unit goes to
/// memory, the others hit what it brought). Returns it with the cold chase's latencies
/// (raw cycles), which also give the line probe its hit/miss threshold.
pub(super) fn fetch_granularity<B: Backend + ?Sized>(
    backend: &mut B,
    samples: u32,
    gpu_time: &mut Duration,
) -> Result<(Option<u64>, Vec<u32>), RunnerError> {
    let cold = ChainSpec::new(64 * 1024, 4)?;
    let run = backend.chase(&ChaseRequest {
        path: LoadPath::GlobalCg,
        mode: ChaseMode::Fine,
        chains: vec![cold],
        warmup_steps: 0,
        steps: samples,
        carveout: Carveout::Percent(0),
        flush_l2: true,
        reserve_shared_bytes: 0,
        written_bytes: 0,
    })?;
    *gpu_time += run.gpu_time;
    let cold_latencies = first_block(run)?;
    let granularity = miss_threshold(&cold_latencies)
        .map(|t| super::super::line_from_misses_above(&cold_latencies, t))
        .and_then(Result::ok)
        .map(|line| line.bytes);
    Ok((granularity, cold_latencies))
}

/// The latency that splits a cold chase's L2 hits from its misses: the middle of the first
/// step of at least 1.2 (by ratio) between neighbouring sorted loads above the median, the
/// gap above the hits (a wider one further up, to an interrupted load, is not the one);
/// `None` where there is none.
///
/// Memory can be less than 1.5 × the L2's latency (Kepler: 339 against 223 cycles), so the
/// SM caches' rule does not fit; and memory may have several levels (an H200: through the
/// near partition p50 548, through the far one 730, a slow tail near 960). The midpoint of
/// the median and the 99th percentile does not do either: it lies above the near
/// partition's memory level whenever the slow tail reaches the 99th percentile, so only
/// the far-homed misses count, every other fetch unit, and the H200 read 128 B with it in
/// 2 of 5 runs (64 B in the other three).
fn miss_threshold(latencies: &[u32]) -> Option<f64> {
    if latencies.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = latencies.iter().map(|&v| f64::from(v)).collect();
    sorted.sort_by(f64::total_cmp);
    let p50 = quantile(&sorted, 0.5);
    let above: Vec<f64> = sorted
        .into_iter()
        .filter(|&v| v >= p50 && v > 0.0)
        .collect();
    above
        .windows(2)
        .find(|w| w[1] >= 1.2 * w[0])
        .map(|w| (w[0] + w[1]) / 2.0)
}

/// The line probe's hit/miss threshold from the cold chase: see [`hit_miss_threshold`];
/// without a fetch granularity, 1.25 × the cold chase's median + 4 cycles, or halfway to
/// its 99th percentile where that is lower.
pub(super) fn line_threshold(cold: &[u32], granularity: Option<u64>) -> f64 {
    let mut sorted: Vec<f64> = cold.iter().map(|&v| f64::from(v)).collect();
    sorted.sort_by(f64::total_cmp);
    let (p50, p99) = if sorted.is_empty() {
        (0.0, 0.0)
    } else {
        (quantile(&sorted, 0.5), quantile(&sorted, 0.99))
    };
    let fallback = (1.25 * p50 + 4.0).min((p50 + p99) / 2.0);
    granularity
        .and_then(|g| hit_miss_threshold(cold, (g / 4) as usize, None))
        .unwrap_or(fallback)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cold 4-byte-stride chase: a miss every `unit / 4` loads, alternately `a` and `b`
    /// cycles, with a slow tail of `tail` cycles on every `every`-th miss; hits 270–300.
    fn cold(unit: usize, a: u32, b: u32, tail: u32, every: usize) -> Vec<u32> {
        (0..2048)
            .map(|i| {
                let k = i / (unit / 4);
                if i % (unit / 4) != 0 {
                    270 + (i as u32 * 7) % 31
                } else if k % every == every - 1 {
                    tail
                } else if k % 2 == 0 {
                    a
                } else {
                    b
                }
            })
            .collect()
    }

    #[test]
    fn every_memory_level_counts_as_a_miss() {
        // H200-like: memory through the near partition 548, the far one 730, a slow tail
        // of 960 on every 4th miss (1.6 % of the loads, so the 99th percentile): 64 B,
        // where the midpoint of the median and the 99th percentile (about 620) counted
        // only the odd fetch units and read 128 B.
        let loads = cold(64, 548, 730, 960, 4);
        let t = miss_threshold(&loads).unwrap();
        assert!(t > 300.0 && t < 548.0, "{t}");
        let line = crate::measure::line_from_misses_above(&loads, t).unwrap();
        assert_eq!(line.bytes, 64);
        // Kepler-like: memory only 1.5 times the L2 (339 against 223 + a few).
        let kepler: Vec<u32> = (0..2048)
            .map(|i| {
                if i % 32 == 0 {
                    339
                } else {
                    223 + (i as u32 % 5)
                }
            })
            .collect();
        let t = miss_threshold(&kepler).unwrap();
        assert_eq!(
            crate::measure::line_from_misses_above(&kepler, t)
                .unwrap()
                .bytes,
            128
        );
        // An interrupted load far above the misses does not move the split.
        let mut interrupted = cold(64, 548, 730, 960, 4);
        interrupted[5] = 40_000;
        let t = miss_threshold(&interrupted).unwrap();
        assert!(t > 300.0 && t < 548.0, "{t}");
        // No misses: hits alone are not split.
        let hits: Vec<u32> = (0..2048).map(|i| 270 + (i as u32 * 7) % 31).collect();
        assert_eq!(miss_threshold(&hits), None);
        assert_eq!(miss_threshold(&[]), None);
    }
}
