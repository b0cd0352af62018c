//! The L2 size sweep: one SM (SM 0, pinned) chases arrays from a thirty-second of the L2
//! to two and a half times it, 32 warps at once so that a pass over an array several times
//! the L2 takes milliseconds, then samples loads one by one. Each size gives the mean
//! cycles per load (the curve) and per-load samples (its levels).
//!
//! The capacities lie below 1.25 times the L2 (on the H100 and H200 far hits end by 1.1
//! times it), and the largest size names memory's levels: those sizes are measured first
//! ([`split_sizes`]); the sizes between, arrays of memory loads only, add nothing to a
//! decision and are measured only where hits are still a level of the last size below
//! 1.25 times the L2 ([`hits_at`]). On an H200 they are 306 of the 887 MiB of arrays the
//! whole grid chases, every load of them at memory's latency.

use std::time::Duration;

use crate::{
    backend::{Backend, ChainSpec, PinnedRequest},
    error::RunnerError,
};

/// The SM the sweep runs on: every capacity is this SM's, so that results refer to a
/// named SM rather than to wherever the hardware put block 0.
pub const SWEEP_SM: u32 = 0;

/// Warps chasing at once (each a share of the array; see [`PinnedRequest`]).
pub const SWEEP_WARPS: u32 = 32;

/// Loads sampled one by one at each size, after the timed pass.
pub const SWEEP_SAMPLES: u32 = 512;

/// Untimed passes over the array before the timed one.
pub const SWEEP_WARMUP_PASSES: u32 = 1;

/// The sizes up to this multiple of the L2 are measured in every sweep (with the largest):
/// the near and far edges lie below it.
pub const DETAIL_UP_TO: f64 = 1.25;

/// Launches tried before a size counts as lost (a launch that did not reach SM 0 is
/// repeated).
const PINNED_TRIES: usize = 4;

/// One size of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// Array bytes (one node per 128-byte line).
    pub bytes: u64,
    /// Mean cycles per load of the timed pass, with the clock overhead subtracted.
    pub mean: f64,
    /// The sampled loads' latencies, clock overhead subtracted.
    pub samples: Vec<f64>,
}

/// The sweep's sizes: from `l2 / 32` to `2.5 × l2`, 2^(1/4) apart, multiples of 128 B with
/// at least one node per warp (the `.cg` chase bypasses the L1, so small sizes are L2 hits
/// too).
pub fn sweep_sizes(l2: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut size = (l2 / 32) as f64;
    let last = 2.5 * l2 as f64;
    while size <= last * 1.0001 {
        let bytes = (size as u64 / 128 * 128).max(128 * u64::from(SWEEP_WARPS));
        if sizes.last() != Some(&bytes) {
            sizes.push(bytes);
        }
        size *= 2f64.powf(0.25);
    }
    sizes
}

/// One size on SM [`SWEEP_SM`]: one warm-up pass and one timed pass over the array, shared
/// among the warps, then `samples` loads timed one by one. `None` when no launch of
/// `PINNED_TRIES` (4) reached the SM.
pub fn measure_point<B: Backend + ?Sized>(
    backend: &mut B,
    bytes: u64,
    samples: u32,
    overhead: f64,
    gpu_time: &mut Duration,
) -> Result<Option<SweepPoint>, RunnerError> {
    measure_point_with(backend, bytes, samples, SWEEP_WARPS, overhead, gpu_time)
}

/// [`measure_point`] with one warp alone: the loads' latencies without the other warps'
/// traffic (the L2's unloaded hit latency at a size that fits). Only the samples count,
/// but they follow a whole timed pass: after the warm-up pass and a single timed load they
/// read 277–278 cycles (p50) on an H200 against 287–288 after a whole pass, ten runs each.
///
/// # Errors
/// A launch failure.
pub fn measure_alone<B: Backend + ?Sized>(
    backend: &mut B,
    bytes: u64,
    samples: u32,
    overhead: f64,
    gpu_time: &mut Duration,
) -> Result<Option<SweepPoint>, RunnerError> {
    measure_point_with(backend, bytes, samples, 1, overhead, gpu_time)
}

fn measure_point_with<B: Backend + ?Sized>(
    backend: &mut B,
    bytes: u64,
    samples: u32,
    max_warps: u32,
    overhead: f64,
    gpu_time: &mut Duration,
) -> Result<Option<SweepPoint>, RunnerError> {
    let chain = ChainSpec::new(bytes, 128)?;
    // At least 64 timed loads per warp, so that the mean is not one clock overhead or one
    // stray slow load spread over a handful of loads.
    let warps = max_warps
        .min(u32::try_from(chain.nodes() / 64).unwrap_or(u32::MAX))
        .max(1);
    let per_warp = u32::try_from(chain.nodes() / u64::from(warps)).unwrap_or(u32::MAX);
    let passes: u32 = std::env::var("MEMTOPO_L2_WARMUP_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SWEEP_WARMUP_PASSES);
    let steps = per_warp;
    let request = PinnedRequest {
        sms: vec![SWEEP_SM],
        chains: vec![chain],
        warmup_steps: per_warp.saturating_mul(passes),
        steps,
        warps,
        sample_steps: samples,
        chains_per_warp: 1,
    };
    for _ in 0..PINNED_TRIES {
        let run = backend.pinned_chase(&request)?;
        *gpu_time += run.gpu_time;
        if let Some(slot) = run.slots.into_iter().next().flatten() {
            let mean = slot.cycles_per_load(&request) - overhead / f64::from(steps.max(1));
            return Ok(Some(SweepPoint {
                bytes,
                mean,
                samples: slot
                    .samples
                    .iter()
                    .map(|&v| (f64::from(v) - overhead).max(0.0))
                    .collect(),
            }));
        }
        log::debug!("L2 sweep: a launch at {bytes} B did not reach SM {SWEEP_SM}; repeating");
    }
    Ok(None)
}

/// The sweep over `sizes`, each with a whole timed pass. (A quarter
/// pass at the largest size read the same mean on an H200, but the loads sampled after it
/// 3.3–3.7 % slower than after a whole pass, in four of four tries: it is not used.)
///
/// # Errors
/// A launch failure, or a size whose launches never reached SM [`SWEEP_SM`].
pub fn sweep<B: Backend + ?Sized>(
    backend: &mut B,
    sizes: &[u64],
    overhead: f64,
    gpu_time: &mut Duration,
) -> Result<Vec<SweepPoint>, RunnerError> {
    sizes
        .iter()
        .map(|&bytes| {
            measure_point_with(
                backend,
                bytes,
                SWEEP_SAMPLES,
                SWEEP_WARPS,
                overhead,
                gpu_time,
            )?
            .ok_or_else(|| {
                RunnerError::WrongResult(format!(
                    "no block of {PINNED_TRIES} launches ran on SM {SWEEP_SM} (array of {bytes} B)"
                ))
            })
        })
        .collect()
}

/// The sweep's sizes in the order they are measured: those up to [`DETAIL_UP_TO`] times
/// the L2 and the largest first; then the ones between, which [`hits_at`] asks for.
pub fn split_sizes(sizes: &[u64], l2: u64) -> (Vec<u64>, Vec<u64>) {
    let limit = DETAIL_UP_TO * l2 as f64;
    let Some((&largest, rest)) = sizes.split_last() else {
        return (Vec::new(), Vec::new());
    };
    let (mut first, deferred): (Vec<u64>, Vec<u64>) =
        rest.iter().partition(|&&bytes| bytes as f64 <= limit);
    first.push(largest);
    (first, deferred)
}

/// Whether a hit level (near or far) is a level of sweep size `index`: then the sizes
/// above it may still hold an edge or the hit levels' loads, and are measured.
pub fn hits_at(levels: &[super::L2Level], index: usize) -> bool {
    levels
        .iter()
        .filter(|l| matches!(l.kind, super::LevelKind::NearHit | super::LevelKind::FarHit))
        .any(|l| l.share_at(index) > 0.0)
}

/// The largest of `lo` and the sizes `(hi − lo) / parts` apart above it (multiples of
/// 128 B, below `hi`) that `fits`, trying them upward until the first that does not.
/// `None` when `fits` has no answer for a size (its launch never ran).
pub fn last_fitting(
    lo: u64,
    hi: u64,
    parts: u64,
    mut fits: impl FnMut(u64) -> Result<Option<bool>, RunnerError>,
) -> Result<Option<u64>, RunnerError> {
    let step = ((hi.saturating_sub(lo)) / parts.max(1)).max(128) / 128 * 128;
    let mut last = lo;
    for k in 1..parts {
        let bytes = lo + k * step;
        if bytes >= hi {
            break;
        }
        match fits(bytes)? {
            Some(true) => last = bytes,
            Some(false) => break,
            None => return Ok(None),
        }
    }
    Ok(Some(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_span_a_thirty_second_to_two_and_a_half_times_the_l2() {
        let l2 = 50 << 20;
        let sizes = sweep_sizes(l2);
        assert_eq!(sizes.first(), Some(&(l2 / 32)));
        assert!(*sizes.last().unwrap() as f64 >= 2.3 * l2 as f64);
        assert!(*sizes.last().unwrap() <= 5 * l2 / 2);
        assert!(sizes.windows(2).all(|w| w[1] > w[0] && w[1] % 128 == 0));
        // Four sizes per doubling.
        assert!((sizes.len() as i64 - 27).abs() <= 1, "{}", sizes.len());
    }

    #[test]
    fn last_fitting_stops_at_the_first_size_that_misses() {
        let found = last_fitting(1000 * 128, 2000 * 128, 10, |b| Ok(Some(b < 1450 * 128)));
        assert_eq!(found.unwrap(), Some(1400 * 128));
        let lost = last_fitting(1000 * 128, 2000 * 128, 10, |_| Ok(None));
        assert_eq!(lost.unwrap(), None);
    }
}
