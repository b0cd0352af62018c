//! The search over array sizes: doubling to bracket the change, a many-way split (one
//! size per SM in one launch) to narrow it, then a fine sweep at the stride's resolution
//! that change-point detection decides.

use std::time::Duration;

use crate::{backend::Backend, error::RunnerError};

use super::{
    analysis::{decide_sweep, SweepDecision},
    probe::{SizeProbe, SizeSamples},
    stats::{median, ShiftDetector},
};

/// Sizes on each side of the bracket in the final sweep.
const SWEEP_MARGIN: u64 = 12;

/// What the size search found.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeFinding {
    /// The change point was found and accepted by the test: the cache holds `bytes`
    /// (the largest array without misses), to within `resolution` bytes.
    Exact {
        /// Largest array size that still hits.
        bytes: u64,
        /// Distance between swept sizes.
        resolution: u64,
        /// The test's decision.
        decision: SweepDecision,
    },
    /// No change up to `bytes`: the cache is at least this large.
    AtLeast {
        /// Largest size tried.
        bytes: u64,
        /// Why no number: no change seen, or a change the test rejected.
        reason: String,
    },
}

/// A raw latency-versus-size curve kept for plots and `--keep-raw`.
#[derive(Debug, Clone, PartialEq)]
pub struct RawCurve {
    /// What was swept (e.g. "l1-size").
    pub name: String,
    /// The swept sizes and their samples.
    pub points: Vec<SizeSamples>,
    /// Index of the detected change in `points`, if any.
    pub change_index: Option<usize>,
}

/// Bounds of a size search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchRange {
    /// First size tried; must hit (the baseline).
    pub start: u64,
    /// Largest size worth trying.
    pub max: u64,
}

/// Runs the size search of `probe` within `range`.
///
/// Returns the finding and the final sweep's curve.
pub fn find_size<B: Backend + ?Sized>(
    backend: &mut B,
    probe: &SizeProbe,
    range: SearchRange,
    alpha: f64,
    gpu_time: &mut Duration,
) -> Result<(SizeFinding, RawCurve), RunnerError> {
    let stride = u64::from(probe.stride);
    let start = probe.whole_strides(range.start);
    if range.max <= start {
        return Err(RunnerError::InvalidRequest(format!(
            "size search from {start} B to {} B is empty",
            range.max
        )));
    }

    // 1. Doubling, in two launches: the sizes up to an eighth of the range's end, then the
    // others where those show no change.
    let mut doubling = vec![start];
    while let Some(&last) = doubling.last() {
        let next = probe.whole_strides(last * 2);
        if next > range.max {
            break;
        }
        doubling.push(next);
    }
    if *doubling.last().unwrap_or(&start) < range.max {
        doubling.push(probe.whole_strides(range.max));
    }
    let (near, far) = doubling.split_at(doubling_split(&doubling, range.max));
    let mut samples = probe.run(backend, near, gpu_time)?;
    let detector = ShiftDetector::new(&samples[0].values)
        .ok_or_else(|| RunnerError::WrongResult("baseline without samples".into()))?;
    if !far.is_empty() && !samples.iter().any(|s| detector.changed(&s.values)) {
        samples.extend(probe.run(backend, far, gpu_time)?);
    }
    let Some(first_changed) = samples.iter().position(|s| detector.changed(&s.values)) else {
        let bytes = *doubling.last().unwrap_or(&start);
        return Ok((
            SizeFinding::AtLeast {
                bytes,
                reason: format!("no latency change up to {bytes} B"),
            },
            RawCurve {
                name: String::new(),
                points: samples,
                change_index: None,
            },
        ));
    };
    if first_changed == 0 {
        return Err(RunnerError::WrongResult(format!(
            "{}: the smallest size ({start} B) already misses; the cache is smaller than the search start",
            probe.path
        )));
    }
    let mut lo = doubling[first_changed - 1];
    let mut hi = doubling[first_changed];
    let bracket_hi = hi;

    // A bracket can be wrong: one launch's noise can flag a size that the fine sweep then
    // shows flat. Then the change lies above the sweep: narrow again from its end.
    let mut attempts = 0;
    loop {
        attempts += 1;
        narrow(backend, probe, &detector, &mut lo, &mut hi, gpu_time)?;

        // 3. Fine sweep at the stride around the bracket, decided by change-point
        //    detection and confirmed by the size of the rise.
        let first = lo.saturating_sub(SWEEP_MARGIN * stride).max(start);
        let last = hi + SWEEP_MARGIN * stride;
        let sizes: Vec<u64> = (0..)
            .map(|k| first + k * stride)
            .take_while(|&s| s <= last)
            .collect();
        let points = probe.run(backend, &sizes, gpu_time)?;
        let (decision, rises) = decide_fine_sweep(&points, alpha)?;
        let flat = !rises && !points.iter().any(|p| detector.changed(&p.values));
        if flat && attempts < 3 && last < bracket_hi {
            log::debug!(
                "{}: the sweep {first}..{last} B is flat; searching above it",
                probe.path
            );
            lo = last;
            hi = bracket_hi;
            continue;
        }
        let curve = RawCurve {
            name: String::new(),
            change_index: decision.accepted.then_some(decision.change_index),
            points,
        };
        let finding = if decision.accepted {
            SizeFinding::Exact {
                bytes: sizes[decision.change_index - 1],
                resolution: stride,
                decision,
            }
        } else {
            SizeFinding::AtLeast {
                bytes: lo,
                reason: format!(
                    "the change point at {} B was rejected (KS D = {:.3}, critical {:.3}; rise {})",
                    sizes[decision.change_index],
                    decision.statistic,
                    decision.critical,
                    if rises { "clear" } else { "within noise" }
                ),
            }
        };
        return Ok((finding, curve));
    }
}

/// Where [`find_size`]'s doubling splits into its two launches: after the last size at most
/// an eighth of `max` (at least two sizes in the first launch, else one launch).
///
/// Every size of a launch runs at once on SMs of its own, so a launch lasts as long as its
/// largest array takes, and sizes past the first change decide nothing: on an H200 the L1's
/// search (241 KiB, sizes to 2 MiB) took 45 ms of GPU time, most of it in the one launch
/// that chased 2 MiB three times over, where the sizes to 256 KiB chase an eighth of that.
/// The capacity is the same: the first launch holds the first size that misses, or the
/// second launch runs and the search goes on as from one launch.
pub fn doubling_split(doubling: &[u64], max: u64) -> usize {
    let split = doubling.iter().take_while(|&&s| s <= max / 8).count();
    if split >= 2 {
        split
    } else {
        doubling.len()
    }
}

/// The decision of a fine sweep: change-point detection, accepted only where the rise is
/// real, with the change moved back to the first size of the rise; and whether it rises.
///
/// In a set-associative cache the share of misses rises over a few sizes, one set
/// overflowing after another, and the best mean-shift split lands inside that ramp. The
/// capacity is where the first set overflows: the accepted change walks back to the first
/// size of the rise.
fn decide_fine_sweep(
    points: &[SizeSamples],
    alpha: f64,
) -> Result<(SweepDecision, bool), RunnerError> {
    let mut decision = decide_sweep(points, alpha)?;
    let rises = rise_is_real(points, decision.change_index);
    decision.accepted &= rises;
    if decision.accepted {
        decision.change_index = first_change(points, decision.change_index);
    }
    Ok((decision, rises))
}

/// Strides on each side of a predicted size in [`find_size_near`]'s one sweep.
const PREDICTED_MARGIN: u64 = 12;

/// Finds the size where it is predicted: one launch with the search start (the hit
/// baseline) and a fine sweep of `2 × PREDICTED_MARGIN` strides around `predicted`,
/// decided like [`find_size`]'s final sweep. A prediction is only a shortcut, never an
/// answer: when the sweep does not show an accepted rise inside it (its first size
/// already misses, it stays flat, or the test rejects the change), the full search runs.
///
/// Used for the L1 at the further shared-memory configurations, whose sizes the largest
/// L1 and the configurations' steps predict; a configuration not in force puts the change
/// outside the window, so the full search finds it where it is.
pub fn find_size_near<B: Backend + ?Sized>(
    backend: &mut B,
    probe: &SizeProbe,
    range: SearchRange,
    predicted: u64,
    alpha: f64,
    gpu_time: &mut Duration,
) -> Result<(SizeFinding, RawCurve), RunnerError> {
    let stride = u64::from(probe.stride);
    let start = probe.whole_strides(range.start);
    let centre = probe.whole_strides(predicted);
    let first = centre.saturating_sub(PREDICTED_MARGIN * stride);
    let last = centre + PREDICTED_MARGIN * stride;
    if first <= start || last > range.max {
        return find_size(backend, probe, range, alpha, gpu_time);
    }
    let mut sizes = vec![start];
    sizes.extend((0..).map(|k| first + k * stride).take_while(|&s| s <= last));
    let mut samples = probe.run(backend, &sizes, gpu_time)?;
    let points = samples.split_off(1);
    let detector = ShiftDetector::new(&samples[0].values)
        .ok_or_else(|| RunnerError::WrongResult("baseline without samples".into()))?;
    let window_starts_hitting = !detector.changed(&points[0].values);
    let window_ends_missing = points.last().is_some_and(|p| detector.changed(&p.values));
    if window_starts_hitting && window_ends_missing {
        let (decision, _) = decide_fine_sweep(&points, alpha)?;
        if decision.accepted {
            let bytes = points[decision.change_index - 1].bytes;
            let curve = RawCurve {
                name: String::new(),
                change_index: Some(decision.change_index),
                points,
            };
            return Ok((
                SizeFinding::Exact {
                    bytes,
                    resolution: stride,
                    decision,
                },
                curve,
            ));
        }
    }
    log::info!(
        "{}: no accepted change within {first}..{last} B around the predicted {predicted} B; full search",
        probe.path
    );
    find_size(backend, probe, range, alpha, gpu_time)
}

/// Strides on each side of a candidate at which [`find_size_among`] expects a hit below
/// and misses above, when the candidate is the size in force.
const CANDIDATE_PROBE: u64 = 2;

/// Finds a size that is expected to be one of `candidates` (the L1 at the driver's default,
/// which is one of the configurations already measured): one launch with the search
/// start and, for each candidate, sizes two strides below and above it;
/// the first size that misses, right after the size below a candidate, names the
/// candidate in force, and [`find_size_near`] then sweeps around it. Where no candidate is
/// singled out (the first miss is elsewhere, or nothing misses), the full search runs, so
/// a wrong guess costs one launch, never the answer.
///
/// On the H200 the driver-default search took 45 ms of GPU time as a full search against
/// about 3 ms for one [`find_size_near`] launch.
pub fn find_size_among<B: Backend + ?Sized>(
    backend: &mut B,
    probe: &SizeProbe,
    range: SearchRange,
    candidates: &[u64],
    alpha: f64,
    gpu_time: &mut Duration,
) -> Result<(SizeFinding, RawCurve), RunnerError> {
    let stride = u64::from(probe.stride);
    let start = probe.whole_strides(range.start);
    let margin = CANDIDATE_PROBE * stride;
    let mut centres: Vec<u64> = candidates
        .iter()
        .map(|&c| probe.whole_strides(c))
        .filter(|&c| c >= start + 2 * margin && c + margin <= range.max)
        .collect();
    centres.sort_unstable();
    centres.dedup();
    // Candidates closer than two margins cannot be told apart this way.
    if centres.is_empty() || centres.windows(2).any(|w| w[1] - w[0] < 2 * margin) {
        return find_size(backend, probe, range, alpha, gpu_time);
    }
    let mut sizes = vec![start];
    sizes.extend(centres.iter().flat_map(|&c| [c - margin, c + margin]));
    let samples = probe.run(backend, &sizes, gpu_time)?;
    let detector = ShiftDetector::new(&samples[0].values)
        .ok_or_else(|| RunnerError::WrongResult("baseline without samples".into()))?;
    let first_miss = samples.iter().position(|s| detector.changed(&s.values));
    // Sizes alternate below, above, below, above… after the start: a first miss at an odd
    // position past the start (an "above") with its "below" still hitting.
    let singled_out = first_miss
        .filter(|&k| k >= 2 && k % 2 == 0)
        .map(|k| sizes[k] - margin);
    match singled_out {
        Some(predicted) => find_size_near(backend, probe, range, predicted, alpha, gpu_time),
        None => {
            log::info!(
                "{}: none of the candidate sizes {candidates:?} is the one in force; full search",
                probe.path
            );
            find_size(backend, probe, range, alpha, gpu_time)
        }
    }
}

/// Narrows `lo..hi` (no change at `lo`, a change at `hi`) with as many sizes per launch
/// as the SMs hold replicas of, until it spans at most `2 × SWEEP_MARGIN` strides.
fn narrow<B: Backend + ?Sized>(
    backend: &mut B,
    probe: &SizeProbe,
    detector: &ShiftDetector,
    lo: &mut u64,
    hi: &mut u64,
    gpu_time: &mut Duration,
) -> Result<(), RunnerError> {
    let stride = u64::from(probe.stride);
    let ways = u64::from((backend.device().sm_count / probe.replicas.max(1)).clamp(2, 128));
    while (*hi - *lo) / stride > 2 * SWEEP_MARGIN {
        let step = probe.whole_strides((*hi - *lo) / (ways + 1)).max(stride);
        let sizes: Vec<u64> = (1..=ways)
            .map(|k| *lo + k * step)
            .filter(|&s| s < *hi)
            .collect();
        if sizes.is_empty() {
            break;
        }
        let samples = probe.run(backend, &sizes, gpu_time)?;
        match samples.iter().position(|s| detector.changed(&s.values)) {
            Some(0) => *hi = sizes[0],
            Some(k) => {
                *lo = sizes[k - 1];
                *hi = sizes[k];
            }
            None => *lo = *sizes.last().expect("non-empty"),
        }
    }
    Ok(())
}

/// Whether the rows from `t` on sit clearly above the plateau at the start of the sweep
/// (its first rows, at most eight, before `t`; by the plateau's own noise, at least a
/// tenth of a cycle): a statistically "significant" split of a flat curve is no capacity.
fn rise_is_real(points: &[SizeSamples], t: usize) -> bool {
    let plateau: Vec<f64> = points[..t.min(8)]
        .iter()
        .map(|p| median(&p.values))
        .collect();
    let after: Vec<f64> = points[t..].iter().map(|p| median(&p.values)).collect();
    match ShiftDetector::with_relative_margin(&plateau, 0.0) {
        Some(reference) => !after.is_empty() && reference.changed(&after),
        None => false,
    }
}

/// Walks back from the split `t` to the first size of the rise: the first row whose
/// median exceeds the plateau left of the split by more than its noise.
///
/// The plateau is the rows before the split, at most the first eight; its noise is the
/// robust spread of their medians, so outlier-disturbed rows widen the margin and clean
/// rows narrow it down to a tenth of a cycle.
pub fn first_change(points: &[SizeSamples], t: usize) -> usize {
    let plateau: Vec<f64> = points[..t.min(8)]
        .iter()
        .map(|p| median(&p.values))
        .collect();
    let Some(reference) = ShiftDetector::with_relative_margin(&plateau, 0.0) else {
        return t;
    };
    let mut first = t;
    while first > 1 && reference.changed(&points[first - 1].values) {
        first -= 1;
    }
    first
}
