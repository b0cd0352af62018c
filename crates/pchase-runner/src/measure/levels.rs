//! Latency levels from per-load samples: a chase whose loads are served by several levels
//! (near and far L2 hits, memory through one partition or another) gives a mixture, and
//! its mean is none of them. [`modes`] splits a sample into its modes, each a level with
//! its own distribution and share of the loads.
//!
//! The split reads the histogram: bins of 1 % of the median (at least 2 cycles), smoothed
//! over five bins; every local maximum is a candidate peak; two neighbouring peaks are one
//! mode when the density between them never falls below half of the lower peak. Modes
//! whose medians lie less than [`MIN_RATIO`] apart are sub-levels of one level (the near
//! L2 hits of an H100 come back at about 256 and 285 cycles, from nearer and farther slices
//! of one partition); levels are divided at the density minimum between them. A mode with
//! fewer than `min_share` of the loads joins its nearer neighbour, except above the slowest
//! level: there it stays, marked [`Mode::tail`] (on an H100, 3 % of the loads of an array
//! between the near capacity and the L2 take about 960 cycles, beside levels at 456 and
//! 562), so that it neither counts as a level nor stretches one.

/// Modes closer than this ratio of their medians are sub-levels of one level. The closest
/// distinct levels seen on Hopper are the H200's far hits and its memory through the near
/// partition, 1.17 apart; the near L2 sub-levels are 1.11 apart.
pub const MIN_RATIO: f64 = 1.14;

/// The distribution of one level's loads, cycles.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Distribution {
    /// Mean.
    pub mean: f64,
    /// 5th percentile.
    pub p5: f64,
    /// 25th percentile.
    pub p25: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Sample standard deviation.
    pub stdev: f64,
    /// Loads summarised.
    pub samples: usize,
}

impl Distribution {
    /// Summarises `values` (any order); `None` when empty or not all finite.
    pub fn of(values: &[f64]) -> Option<Distribution> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let variance = if sorted.len() > 1 {
            sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        // Nearest rank, as topology::LatencySummary.
        let rank = |q: f64| sorted[((q * n).ceil() as usize).clamp(1, sorted.len()) - 1];
        Some(Distribution {
            mean,
            p5: rank(0.05),
            p25: rank(0.25),
            p50: rank(0.50),
            p75: rank(0.75),
            p95: rank(0.95),
            stdev: variance.sqrt(),
            samples: sorted.len(),
        })
    }

    /// Whether `value` lies inside this level's spread, widened by `slack` (a fraction of
    /// the median) on both sides.
    pub fn contains(&self, value: f64, slack: f64) -> bool {
        let margin = slack * self.p50;
        value >= self.p5 - margin && value <= self.p95 + margin
    }

    /// Whether two levels are the same: each one's median inside the other's spread, or
    /// the medians within `slack` of each other.
    pub fn same_level(&self, other: &Distribution, slack: f64) -> bool {
        let close = (self.p50 - other.p50).abs() <= slack * self.p50.max(other.p50);
        close || (self.contains(other.p50, 0.0) && other.contains(self.p50, 0.0))
    }
}

/// A sub-level of a [`Mode`]: a peak of its own inside one level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubLevel {
    /// The sub-level's median, cycles.
    pub p50: f64,
    /// Share of all loads.
    pub share: f64,
}

/// One mode of a sample: its loads' distribution and their share.
#[derive(Debug, Clone, PartialEq)]
pub struct Mode {
    /// The mode's loads.
    pub distribution: Distribution,
    /// Share of all loads.
    pub share: f64,
    /// The peaks inside the level, fastest first, where it has more than one (each
    /// separated from the next by a deep density minimum, but less than [`MIN_RATIO`]
    /// apart); empty for a level of one peak.
    pub sub_levels: Vec<SubLevel>,
    /// A thin cluster of slow loads above the slowest level (less than `min_share` of the
    /// loads): not a level.
    pub tail: bool,
    /// The lower bound of the mode's range (the division from the mode below), cycles.
    pub lower: f64,
    /// The upper bound (the division from the mode above), cycles; infinite for the last.
    pub upper: f64,
}

/// The modes of `samples` (cycles), fastest first; empty when there are fewer than 16
/// finite samples. Modes with less than `min_share` of the loads join a neighbour.
pub fn modes(samples: &[f64], min_share: f64) -> Vec<Mode> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.len() < 16 {
        return Vec::new();
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = sorted[n / 2];
    let width = (0.01 * median.abs()).max(2.0);
    // The histogram spans the bulk; the last 0.5 % (stray slow loads far out) are left out
    // of the peak search and joined to the last mode.
    let low = sorted[0];
    let high = sorted[((n as f64 * 0.995) as usize).min(n - 1)];
    let bins = (((high - low) / width).floor() as usize + 1).min(1 << 16);
    let mut counts = vec![0.0f64; bins];
    for &v in sorted.iter().take_while(|&&v| v <= high) {
        let b = (((v - low) / width) as usize).min(bins - 1);
        counts[b] += 1.0;
    }
    let smooth: Vec<f64> = (0..bins)
        .map(|i| {
            const KERNEL: [f64; 5] = [1.0, 2.0, 3.0, 2.0, 1.0];
            KERNEL
                .iter()
                .enumerate()
                .filter_map(|(k, w)| {
                    let j = (i + k).checked_sub(2)?;
                    counts.get(j).map(|c| c * w)
                })
                .sum::<f64>()
                / 9.0
        })
        .collect();
    let mut peaks: Vec<usize> = (0..bins)
        .filter(|&i| {
            let left = if i == 0 { f64::MIN } else { smooth[i - 1] };
            let right = smooth.get(i + 1).copied().unwrap_or(f64::MIN);
            smooth[i] > 0.0 && smooth[i] > left && smooth[i] >= right
        })
        .collect();
    // Drop the peaks that a shallow valley joins to a higher neighbour (noise on one mode's
    // slope).
    loop {
        let merge = peaks.windows(2).position(|pair| {
            let (a, b) = (pair[0], pair[1]);
            let valley = smooth[a..=b].iter().copied().fold(f64::INFINITY, f64::min);
            valley > 0.5 * smooth[a].min(smooth[b])
        });
        match merge {
            Some(i) => {
                let drop = if smooth[peaks[i]] >= smooth[peaks[i + 1]] {
                    i + 1
                } else {
                    i
                };
                peaks.remove(drop);
            }
            None => break,
        }
    }
    // Divisions at the density minimum between neighbouring peaks; tiny modes join their
    // nearer neighbour until every mode holds `min_share`.
    let mut bounds: Vec<f64> = peaks
        .windows(2)
        .map(|pair| {
            let (a, b) = (pair[0], pair[1]);
            let lowest = (a..=b)
                .min_by(|&x, &y| smooth[x].total_cmp(&smooth[y]))
                .unwrap_or(a);
            low + (lowest as f64 + 1.0) * width
        })
        .collect();
    let median_of = |g: &[f64]| g.get(g.len() / 2).copied().unwrap_or(f64::NAN);
    loop {
        let groups = split(&sorted, &bounds);
        let last = groups.len() - 1;
        let tiny = groups
            .iter()
            .enumerate()
            .filter(|&(i, g)| (g.len() as f64) < min_share * n as f64 && (i < last || i == 0))
            .min_by_key(|(_, g)| g.len())
            .map(|(i, _)| i)
            .or_else(|| {
                // A thin cluster at the top stays apart only if it lies clearly above the
                // level below it; otherwise it is that level's slope.
                let thin = (groups[last].len() as f64) < min_share * n as f64;
                let apart = last > 0
                    && median_of(&groups[last]) >= MIN_RATIO * median_of(&groups[last - 1]);
                (thin && !apart).then_some(last)
            });
        match (tiny, bounds.is_empty()) {
            (Some(i), false) => {
                // Remove the bound on the side of the nearer neighbour (by median).
                let here = median_of(&groups[i]);
                let below = (i > 0).then(|| here - median_of(&groups[i - 1]));
                let above = (i + 1 < groups.len()).then(|| median_of(&groups[i + 1]) - here);
                let bound = match (below, above) {
                    (Some(d), Some(u)) if d <= u => i - 1,
                    (Some(_), None) => i - 1,
                    _ => i,
                };
                bounds.remove(bound);
            }
            _ => break,
        }
    }
    // Peaks less than MIN_RATIO apart (by their groups' medians, single linkage) are
    // sub-levels of one level: only the bounds between levels stay.
    let groups = split(&sorted, &bounds);
    let medians: Vec<f64> = groups.iter().map(|g| median_of(g)).collect();
    let level_bounds: Vec<f64> = bounds
        .iter()
        .enumerate()
        .filter(|&(i, _)| medians[i + 1] >= MIN_RATIO * medians[i])
        .map(|(_, &b)| b)
        .collect();
    let levels = split(&sorted, &level_bounds);
    levels
        .iter()
        .enumerate()
        .filter_map(|(i, level)| {
            let lower = if i == 0 {
                f64::NEG_INFINITY
            } else {
                level_bounds[i - 1]
            };
            let upper = level_bounds.get(i).copied().unwrap_or(f64::INFINITY);
            let inside: Vec<SubLevel> = groups
                .iter()
                .zip(&medians)
                .filter(|(_, &m)| m >= lower && m < upper)
                .map(|(g, &m)| SubLevel {
                    p50: m,
                    share: g.len() as f64 / n as f64,
                })
                .collect();
            let share = level.len() as f64 / n as f64;
            Some(Mode {
                distribution: Distribution::of(level)?,
                share,
                tail: i > 0 && i + 1 == levels.len() && share < min_share,
                sub_levels: if inside.len() > 1 { inside } else { Vec::new() },
                lower,
                upper,
            })
        })
        .collect()
}

/// `sorted` cut at each bound (a value equal to a bound goes above it).
fn split(sorted: &[f64], bounds: &[f64]) -> Vec<Vec<f64>> {
    let mut groups = vec![Vec::new(); bounds.len() + 1];
    for &v in sorted {
        let g = bounds.iter().take_while(|&&b| v >= b).count();
        groups[g].push(v);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::Xoshiro256PlusPlus, SeedableRng};
    use rand_distr::{Distribution as _, Normal};

    fn normal(rng: &mut Xoshiro256PlusPlus, mean: f64, sd: f64, n: usize) -> Vec<f64> {
        let d = Normal::new(mean, sd).unwrap();
        (0..n).map(|_| d.sample(rng).round()).collect()
    }

    #[test]
    fn a_mixture_of_two_levels_gives_two_modes_with_their_shares() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut v = normal(&mut rng, 456.0, 15.0, 1000);
        v.extend(normal(&mut rng, 561.0, 15.0, 1000));
        let m = modes(&v, 0.03);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!((m[0].distribution.p50 - 456.0).abs() < 4.0);
        assert!((m[1].distribution.p50 - 561.0).abs() < 4.0);
        assert!((m[0].share - 0.5).abs() < 0.02);
        // The mixture's mean (about 508) lies in neither mode.
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!(!m[0].distribution.contains(mean, 0.0));
        assert!(!m[1].distribution.contains(mean, 0.0));
    }

    #[test]
    fn sub_levels_a_few_percent_apart_are_one_mode() {
        // The near L2 hits of an H100: slices at about 250, 270 and 290 cycles.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let mut v = normal(&mut rng, 250.0, 4.0, 300);
        v.extend(normal(&mut rng, 270.0, 4.0, 300));
        v.extend(normal(&mut rng, 290.0, 4.0, 400));
        let m = modes(&v, 0.03);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].distribution.p5 < 255.0 && m[0].distribution.p95 > 285.0);
    }

    #[test]
    fn a_thin_tail_joins_its_mode_and_one_level_stays_one() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut v = normal(&mut rng, 300.0, 6.0, 990);
        v.extend(normal(&mut rng, 900.0, 30.0, 10));
        let m = modes(&v, 0.03);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[1].tail && !m[0].tail);
        assert_eq!(m[0].distribution.samples, 990);
        assert!(modes(&[1.0; 10], 0.03).is_empty());
    }

    #[test]
    fn three_levels_are_three_modes() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let mut v = normal(&mut rng, 266.0, 12.0, 300);
        v.extend(normal(&mut rng, 445.0, 15.0, 300));
        v.extend(normal(&mut rng, 520.0, 10.0, 400));
        let m = modes(&v, 0.03);
        assert_eq!(m.len(), 3, "{m:?}");
        let shares: Vec<f64> = m.iter().map(|m| (m.share * 10.0).round() / 10.0).collect();
        assert_eq!(shares, vec![0.3, 0.3, 0.4]);
    }
}
