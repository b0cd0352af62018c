//! The instruction-cache search: cycles per instruction of one warp
//! against the size of the straight-line code its loop runs, and the levels in that curve.
//!
//! 1. **Coarse sweep.** Code sizes from [`MIN_SEGMENTS`] segments (1 KiB) to the module's
//!    size, [`PER_OCTAVE`] per octave; each point the median of a few launches.
//! 2. **Levels by change points.** PELT (`cpd`, L2 cost, MBIC penalty) on the logarithm of
//!    the medians, so that a step is judged by its ratio; the noise variance is estimated
//!    from the series with a floor of [`NOISE_FLOOR`] (1 %), and neighbouring segments whose
//!    costs differ by less than [`MIN_STEP`] are one level. A segment between two others of
//!    fewer than [`MIN_LEVEL_POINTS`] points whose cost lies between theirs is the ramp from
//!    one level to the next, not a level (on the H100 the 32 KiB and 128 KiB steps each
//!    took two coarse points to climb: 1.34 → 1.79 → 2.14 → 2.27 and 2.23 → 2.59 → 2.63 →
//!    5.15 → 5.72 cycles, and PELT gave each ramp a segment of its own); a mean over a ramp
//!    is a mixture of two levels. Every other segment is a level: the median cost of its
//!    points is its cycles per instruction.
//! 3. **Edges.** Between the last coarse point of a level and the first of the next (across
//!    the ramp, if there is one),
//!    bisection by single segments (512 bytes): the first code size whose cost is above
//!    the level's by a fifth of the step to the next is the level's size. The loop's own
//!    few instructions ride on top of the counted code, so a cache of exactly `C` bytes
//!    first fails at `C` bytes of counted code (where `C` is a multiple of a segment).
//!
//! The last level holds whatever code no cache found holds (the L2, or a cache larger than
//! the module): its size is unknown, and the module's size is the bound.

use cpd::{estimate_noise_variance, pelt, L2Cost, Penalty, SearchOptions};
use pchase_kernels::icache;

use super::analysis::analysing;
use crate::error::RunnerError;

/// The smallest code of the sweep, in segments.
pub const MIN_SEGMENTS: u32 = 2;
/// Points of the coarse sweep per doubling of the code size.
pub const PER_OCTAVE: u32 = 8;
/// The floor of the noise variance of log(cycles per instruction).
pub const NOISE_FLOOR: f64 = 1e-4;
/// The smallest step between levels, as a ratio of their costs.
pub const MIN_STEP: f64 = 1.10;
/// Where between two levels' costs a code size counts as risen.
pub const RISE_FRACTION: f64 = 0.2;
/// Coarse points a segment between two others needs to be a level rather than a ramp.
pub const MIN_LEVEL_POINTS: usize = 3;

/// One code size and its cost.
#[derive(Debug, Clone, PartialEq)]
pub struct IcachePoint {
    /// Segments the loop ran.
    pub segments: u32,
    /// Bytes of counted code (the multiply-adds).
    pub code_bytes: u64,
    /// Median cycles per instruction over the launches.
    pub cycles_per_instruction: f64,
}

/// One level found.
#[derive(Debug, Clone, PartialEq)]
pub struct IcacheLevelFinding {
    /// Median cycles per instruction of the coarse points of its plateau.
    pub cycles_per_instruction: f64,
    /// The first code size that no longer ran at its cost (bytes of counted code); `None`
    /// for the last level.
    pub size_bytes: Option<u64>,
    /// The smallest and the largest coarse code size of its plateau.
    pub code_range: (u64, u64),
    /// The next level's cost over this one's (`None` for the last).
    pub step_ratio: Option<f64>,
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IcacheFinding {
    /// The levels, nearest first.
    pub levels: Vec<IcacheLevelFinding>,
    /// Every point measured (coarse and bisection), by code size.
    pub points: Vec<IcachePoint>,
    /// The largest code tried: the bound of the last level.
    pub max_code_bytes: u64,
    /// Code sizes measured.
    pub probes: u32,
}

/// The coarse sweep's segment counts up to `max_segments`, ascending.
///
/// ```
/// use pchase_runner::measure::icache::coarse_segments;
/// let s = coarse_segments(2048);
/// assert_eq!((s[0], *s.last().unwrap()), (2, 2048));
/// assert!(s.windows(2).all(|w| w[0] < w[1]));
/// ```
pub fn coarse_segments(max_segments: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut k = 0u32;
    loop {
        let s = (f64::from(MIN_SEGMENTS) * 2f64.powf(f64::from(k) / f64::from(PER_OCTAVE))).round()
            as u32;
        if s >= max_segments {
            break;
        }
        if out.last() != Some(&s) {
            out.push(s);
        }
        k += 1;
    }
    out.push(max_segments);
    out
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The search over `probe(segments)`, which runs that many segments and returns the cycles
/// per instruction of each launch.
///
/// # Errors
/// The probe's errors; [`RunnerError::InvalidRequest`] when the module is too small to
/// sweep; [`RunnerError::WrongResult`] for a probe without a finite, positive cost.
pub fn search(
    max_segments: u32,
    mut probe: impl FnMut(u32) -> Result<Vec<f64>, RunnerError>,
) -> Result<IcacheFinding, RunnerError> {
    if max_segments < 4 * MIN_SEGMENTS {
        return Err(RunnerError::InvalidRequest(format!(
            "an instruction-cache sweep needs at least {} segments",
            4 * MIN_SEGMENTS
        )));
    }
    let mut finding = IcacheFinding {
        max_code_bytes: icache::code_bytes(max_segments),
        ..IcacheFinding::default()
    };
    let mut measure = |segments: u32, f: &mut IcacheFinding| -> Result<f64, RunnerError> {
        let mut samples = probe(segments)?;
        if samples.is_empty() || samples.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(RunnerError::WrongResult(format!(
                "{segments} segments: no finite positive cycles per instruction in {samples:?}"
            )));
        }
        let cpi = median(&mut samples);
        f.probes += 1;
        f.points.push(IcachePoint {
            segments,
            code_bytes: icache::code_bytes(segments),
            cycles_per_instruction: cpi,
        });
        Ok(cpi)
    };
    let coarse = coarse_segments(max_segments);
    let mut costs = Vec::with_capacity(coarse.len());
    for &s in &coarse {
        costs.push(measure(s, &mut finding)?);
    }
    let plateaus = analysing(|| plateaus(&costs))?;
    for (i, &(start, end)) in plateaus.iter().enumerate() {
        let mut own: Vec<f64> = costs[start..end].to_vec();
        let cost = median(&mut own);
        let next = plateaus.get(i + 1).map(|&(s, e)| {
            let mut theirs: Vec<f64> = costs[s..e].to_vec();
            (median(&mut theirs), s)
        });
        let size_bytes = match next {
            Some((next_cost, next_start)) => {
                let threshold = cost + RISE_FRACTION * (next_cost - cost);
                let (mut lo, mut hi) = (coarse[end - 1], coarse[next_start]);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if measure(mid, &mut finding)? > threshold {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                Some(icache::code_bytes(hi))
            }
            None => None,
        };
        finding.levels.push(IcacheLevelFinding {
            cycles_per_instruction: cost,
            size_bytes,
            code_range: (
                icache::code_bytes(coarse[start]),
                icache::code_bytes(coarse[end - 1]),
            ),
            step_ratio: next.map(|(n, _)| n / cost),
        });
    }
    finding.points.sort_by_key(|p| p.segments);
    Ok(finding)
}

/// The plateaus of a cost curve as `[start, end)` index ranges: PELT's segments of
/// log(cost), neighbours closer than [`MIN_STEP`] merged, every merged plateau above the
/// one before, and ramps (a short segment whose cost lies between its neighbours', see
/// [`MIN_LEVEL_POINTS`]) left out, so that consecutive plateaus may have a gap between them.
///
/// ```
/// use pchase_runner::measure::icache::plateaus;
/// let costs: Vec<f64> = (0..30).map(|i| if i < 12 { 1.0 } else if i < 22 { 2.5 } else { 7.0 }).collect();
/// assert_eq!(plateaus(&costs).unwrap(), vec![(0, 12), (12, 22), (22, 30)]);
/// ```
///
/// # Errors
/// [`RunnerError::WrongResult`] for a curve too short or not positive.
pub fn plateaus(costs: &[f64]) -> Result<Vec<(usize, usize)>, RunnerError> {
    let wrong = |e: cpd::CpdError| RunnerError::WrongResult(format!("change-point detection: {e}"));
    if costs.len() < 4 || costs.iter().any(|c| !(c.is_finite() && *c > 0.0)) {
        return Err(RunnerError::WrongResult(format!(
            "an instruction-cache curve of {} points with costs {costs:?}",
            costs.len()
        )));
    }
    let logs: Vec<f64> = costs.iter().map(|c| c.ln()).collect();
    let variance = estimate_noise_variance(&logs)
        .unwrap_or(NOISE_FLOOR)
        .max(NOISE_FLOOR);
    let cost = L2Cost::from_series(&logs).map_err(wrong)?;
    let penalty = Penalty::Mbic
        .per_change_point(logs.len(), 1, variance)
        .map_err(wrong)?;
    let segmentation = pelt(&cost, penalty, SearchOptions::new(2, 1)).map_err(wrong)?;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for &end in segmentation.change_points() {
        ranges.push((start, end));
        start = end;
    }
    ranges.push((start, logs.len()));
    let level = |(s, e): (usize, usize)| {
        let mut v: Vec<f64> = costs[s..e].to_vec();
        median(&mut v)
    };
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for range in ranges {
        match merged.last_mut() {
            Some(last) if level(range) < MIN_STEP * level(*last) => last.1 = range.1,
            _ => merged.push(range),
        }
    }
    let ramp = |i: usize| {
        i > 0
            && i + 1 < merged.len()
            && merged[i].1 - merged[i].0 < MIN_LEVEL_POINTS
            && level(merged[i - 1]) < level(merged[i])
            && level(merged[i]) < level(merged[i + 1])
    };
    let ramps: Vec<bool> = (0..merged.len()).map(ramp).collect();
    Ok(merged
        .into_iter()
        .zip(ramps)
        .filter(|(_, r)| !r)
        .map(|(range, _)| range)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache model: levels (bytes, cost), a cost beyond, 192 bytes of loop on top.
    fn model(levels: &[(u64, f64)], beyond: f64) -> impl Fn(u32) -> f64 + '_ {
        move |segments| {
            let footprint = icache::code_bytes(segments) + 192;
            levels
                .iter()
                .find(|(bytes, _)| footprint <= *bytes)
                .map_or(beyond, |(_, c)| *c)
        }
    }

    #[test]
    fn two_levels_of_odd_sizes_are_found_to_the_segment() {
        let cost = model(&[(20 << 10, 1.1), (193 * 512, 2.9)], 8.0);
        let f = search(2048, |s| Ok(vec![cost(s); 3])).unwrap();
        let sizes: Vec<Option<u64>> = f.levels.iter().map(|l| l.size_bytes).collect();
        assert_eq!(sizes, vec![Some(20 << 10), Some(193 * 512), None]);
        assert!((f.levels[1].cycles_per_instruction - 2.9).abs() < 1e-12);
        assert_eq!(f.max_code_bytes, 1 << 20);
        assert!(f.points.windows(2).all(|w| w[0].segments <= w[1].segments));
    }

    /// An H100's coarse sweep (GPU-74b75669, a default run's log): two ramps of two points
    /// each, at 35–38 KiB and 117.5–128 KiB, are not levels; three plateaus remain.
    #[test]
    fn ramps_between_levels_are_not_levels() {
        let costs = [
            1.953, 1.698, 1.570, 1.494, 1.443, 1.406, 1.379, 1.358, 1.341, 1.342, 1.344, 1.332,
            1.335, 1.326, 1.318, 1.304, 1.293, 1.284, 1.276, 1.270, 1.264, 1.257, 1.251, 1.246,
            1.242, 1.237, 1.374, 1.350, 1.336, 1.399, 1.786, 2.142, 2.272, 2.269, 2.266, 2.262,
            2.257, 2.249, 2.246, 2.243, 2.242, 2.239, 2.236, 2.233, 2.588, 2.630, 5.150, 5.721,
            5.710, 5.703, 5.686, 5.674, 5.668, 5.661, 5.665, 5.669, 5.672, 5.677, 5.676, 5.672,
            5.667, 5.665, 5.663, 5.659, 5.659, 5.663, 5.662, 5.654, 5.653, 5.654,
        ];
        let p = plateaus(&costs).unwrap();
        assert_eq!(p.len(), 3, "{p:?}");
        // The ramps' points belong to no plateau.
        assert!(
            p[0].1 <= 30 && p[1].0 >= 32 && p[1].1 <= 44 && p[2].0 >= 46,
            "{p:?}"
        );
    }

    #[test]
    fn a_flat_curve_is_one_level_and_bad_probes_are_errors() {
        let f = search(256, |_| Ok(vec![1.0, 1.01, 0.99])).unwrap();
        assert_eq!(f.levels.len(), 1);
        assert_eq!(f.levels[0].size_bytes, None);
        assert!(search(4, |_| Ok(vec![1.0])).is_err());
        assert!(search(256, |_| Ok(vec![])).is_err());
        assert!(search(256, |_| Ok(vec![f64::NAN])).is_err());
        // A small step (5 %) is noise, not a level.
        let f = search(256, |s| Ok(vec![if s < 40 { 1.0 } else { 1.05 }])).unwrap();
        assert_eq!(f.levels.len(), 1);
    }
}
