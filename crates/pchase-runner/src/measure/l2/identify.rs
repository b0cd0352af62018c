//! Which level is which: the modes of every sweep size ([`super::super::levels::modes`])
//! are grouped across sizes into levels, and each level is named by where it appears.
//!
//! - The levels of the smallest size (well inside every partition) are L2 hits: the
//!   fastest is the near hit; any slower one there is a far hit (a partition that keeps no
//!   copies of far lines shows its far hits at every size).
//! - The levels of the largest size (2.5 × the L2) are memory: one level is memory; several
//!   are memory through the near partition (the fastest) and through farther ones.
//! - A level seen only between them is a far hit: lines homed in another partition that
//!   are no longer in the SM's own but still in their home; unless it is no faster than
//!   the fastest memory level: then it, like a third level of the largest size, is
//!   memory's slow tail (a few percent of the loads: DRAM row or page misses).
//!
//! A level's distribution pools every sample of every size that fell into it. A size is
//! explained when each of its modes is one of the levels and its mean (the 32-warp pass)
//! lies within 5 % + 10 cycles of the samples' mean: a mean that no mixture of the
//! levels gives is reported, not fitted.

use crate::measure::levels::{modes, Distribution, Mode, SubLevel};

use super::sweep::SweepPoint;

/// Modes with less than this share of a size's loads are not levels.
pub const MIN_SHARE: f64 = 0.05;

/// What kind of access a level is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LevelKind {
    /// A hit in the SM's own (near) partition, or in the only one.
    NearHit,
    /// A hit in another partition.
    FarHit,
    /// Device memory, where the L2 has one partition or memory shows one level.
    Memory,
    /// Device memory through the SM's own partition.
    MemoryViaNear,
    /// Device memory through another partition.
    MemoryViaFar,
    /// Device memory slower than through any partition: a few percent of the loads of
    /// large arrays (DRAM row or page misses), reported but not a level of the L2 path.
    MemorySlow,
}

impl LevelKind {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            LevelKind::NearHit => "near hit",
            LevelKind::FarHit => "far hit",
            LevelKind::Memory => "memory",
            LevelKind::MemoryViaNear => "memory via near partition",
            LevelKind::MemoryViaFar => "memory via far partition",
            LevelKind::MemorySlow => "memory, slow tail",
        }
    }
}

/// One latency level of the L2 path as SM 0 meets it.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Level {
    /// What it is.
    pub kind: LevelKind,
    /// Every sampled load of every size that fell into it, cycles (overhead subtracted).
    pub distribution: Distribution,
    /// Peaks inside the level (e.g. nearer and farther slices of one partition), from the
    /// size where it had the largest share.
    pub sub_levels: Vec<SubLevel>,
    /// For every sweep size: (bytes, share of its loads at this level).
    pub shares: Vec<(u64, f64)>,
}

impl L2Level {
    /// The largest share this level has at any size.
    pub fn peak_share(&self) -> f64 {
        self.shares.iter().map(|&(_, s)| s).fold(0.0, f64::max)
    }

    /// This level's share at sweep size `index`.
    pub fn share_at(&self, index: usize) -> f64 {
        self.shares.get(index).map_or(0.0, |&(_, s)| s)
    }
}

/// A sweep size that no mixture of the levels explains.
#[derive(Debug, Clone, PartialEq)]
pub struct Unexplained {
    /// Array bytes.
    pub bytes: u64,
    /// Why.
    pub reason: String,
}

/// The levels of a sweep and the sizes they do not explain.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Identified {
    /// Levels, fastest first.
    pub levels: Vec<L2Level>,
    /// Sizes whose curve point the levels do not explain.
    pub unexplained: Vec<Unexplained>,
}

impl Identified {
    /// The level of `kind` with the largest share ([`main_level`]).
    pub fn level(&self, kind: LevelKind) -> Option<&L2Level> {
        main_level(&self.levels, kind)
    }
}

/// The level of `kind` that takes the largest share of some size's loads: where a small
/// cluster between two levels was named like a larger one (transitional loads at a
/// capacity edge), the larger is the level; the smaller stays in the list, and the
/// self-check reports it where it overlaps a neighbour.
pub fn main_level(levels: &[L2Level], kind: LevelKind) -> Option<&L2Level> {
    levels
        .iter()
        .filter(|l| l.kind == kind)
        .max_by(|a, b| a.peak_share().total_cmp(&b.peak_share()))
}

/// A level being assembled: its samples, and per size its share.
struct Cluster {
    samples: Vec<f64>,
    shares: Vec<f64>,
    median: f64,
    best: (f64, Vec<SubLevel>),
}

/// Groups the modes of every size into levels and names them.
pub fn identify(points: &[SweepPoint]) -> Identified {
    let per_point: Vec<Vec<Mode>> = points
        .iter()
        .map(|p| {
            modes(&p.samples, MIN_SHARE)
                .into_iter()
                .filter(|m| !m.tail)
                .collect()
        })
        .collect();
    let mut clusters: Vec<Cluster> = Vec::new();
    for (i, (point, found)) in points.iter().zip(&per_point).enumerate() {
        for mode in found {
            let inside: Vec<f64> = point
                .samples
                .iter()
                .copied()
                .filter(|&v| v >= mode.lower && v < mode.upper)
                .collect();
            let target = clusters
                .iter()
                .position(|c| mode.distribution.same_level(&summary(c), 0.07));
            let c = match target {
                Some(k) => &mut clusters[k],
                None => {
                    clusters.push(Cluster {
                        samples: Vec::new(),
                        shares: vec![0.0; points.len()],
                        median: mode.distribution.p50,
                        best: (0.0, Vec::new()),
                    });
                    clusters.last_mut().expect("just pushed")
                }
            };
            c.samples.extend(inside);
            c.shares[i] += mode.share;
            if mode.share > c.best.0 {
                c.best = (mode.share, mode.sub_levels.clone());
            }
            c.median = Distribution::of(&c.samples).map_or(c.median, |d| d.p50);
        }
    }
    clusters.sort_by(|a, b| a.median.total_cmp(&b.median));
    // Merging neighbours keeps the order: a merged median lies between the two.
    let clusters = merge_alike(clusters);
    let first = |c: &Cluster| c.shares.first().copied().unwrap_or(0.0) > 0.0;
    let last = |c: &Cluster| c.shares.last().copied().unwrap_or(0.0) > 0.0;
    let memory_count = clusters.iter().filter(|c| last(c) && !first(c)).count();
    // The fastest memory level: a level that is not there at the smallest size and is no
    // faster than it is memory too (a slow tail: DRAM row or page misses), not a far hit.
    let fastest_memory = clusters
        .iter()
        .find(|c| last(c) && !first(c))
        .map(|c| c.median);
    let mut memory_seen = 0;
    let mut near_seen = false;
    let levels: Vec<L2Level> = clusters
        .into_iter()
        .filter_map(|c| {
            let kind = if first(&c) {
                let kind = if near_seen {
                    LevelKind::FarHit
                } else {
                    LevelKind::NearHit
                };
                near_seen = true;
                kind
            } else if last(&c) {
                memory_seen += 1;
                match (memory_count, memory_seen) {
                    (1, _) => LevelKind::Memory,
                    (_, 1) => LevelKind::MemoryViaNear,
                    (_, 2) => LevelKind::MemoryViaFar,
                    _ => LevelKind::MemorySlow,
                }
            } else if fastest_memory.is_some_and(|m| c.median >= m) {
                LevelKind::MemorySlow
            } else {
                LevelKind::FarHit
            };
            Some(L2Level {
                kind,
                distribution: Distribution::of(&c.samples)?,
                sub_levels: c.best.1,
                shares: points.iter().map(|p| p.bytes).zip(c.shares).collect(),
            })
        })
        .collect();
    let unexplained = points
        .iter()
        .filter_map(|point| {
            let sampled = point.samples.iter().sum::<f64>() / point.samples.len().max(1) as f64;
            let gap = (point.mean - sampled).abs();
            (point.samples.is_empty() || gap > 0.05 * sampled + 10.0).then(|| Unexplained {
                bytes: point.bytes,
                reason: format!(
                    "mean {:.1} cycles per load with 32 warps, but its sampled loads average {sampled:.1}: the levels do not explain it",
                    point.mean
                ),
            })
        })
        .chain(levels.iter().enumerate().flat_map(|(k, level)| {
            // A level must be a level of its own: its samples' spread must not reach into
            // the next one's median (a mixture of two neighbours mistaken for a level).
            levels.get(k + 1).and_then(|next| {
                let tail = [level.kind, next.kind].contains(&LevelKind::MemorySlow);
                (!tail && level.distribution.p95 >= next.distribution.p50).then(|| Unexplained {
                    bytes: 0,
                    reason: format!(
                        "the {} level (p50 {:.0}, p95 {:.0}) reaches the {} level's median {:.0}",
                        level.kind.name(),
                        level.distribution.p50,
                        level.distribution.p95,
                        next.kind.name(),
                        next.distribution.p50
                    ),
                })
            })
        }))
        .collect();
    Identified {
        levels,
        unexplained,
    }
}

fn summary(c: &Cluster) -> Distribution {
    Distribution::of(&c.samples).unwrap_or_default()
}

/// Neighbouring clusters (by median) that ended up as one level: the same presence at the
/// smallest and the largest size (so they would get the same kind) and the same level by
/// their pooled loads. Each mode joins the first cluster it matches as the clusters grow,
/// so one level can end up in two: on an H200 (an `--only l2` run) the far hits fell into
/// clusters of p50 447 and 453, the far level was
/// the smaller of the two, and its share stopped 10 MiB before the L2's end, a far edge the
/// confirmation then refuted (a "disturbed" run on a quiet GPU).
fn merge_alike(clusters: Vec<Cluster>) -> Vec<Cluster> {
    let presence = |c: &Cluster| {
        let at = |v: Option<&f64>| v.copied().unwrap_or(0.0) > 0.0;
        (at(c.shares.first()), at(c.shares.last()))
    };
    let mut out: Vec<Cluster> = Vec::with_capacity(clusters.len());
    for c in clusters {
        match out.last_mut() {
            Some(prev)
                if presence(prev) == presence(&c)
                    && summary(prev).same_level(&summary(&c), 0.07) =>
            {
                prev.samples.extend(c.samples);
                for (a, b) in prev.shares.iter_mut().zip(&c.shares) {
                    *a += b;
                }
                if c.best.0 > prev.best.0 {
                    prev.best = c.best;
                }
                prev.median = Distribution::of(&prev.samples).map_or(prev.median, |d| d.p50);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::Xoshiro256PlusPlus, SeedableRng};
    use rand_distr::{Distribution as _, Normal};

    /// A sweep point whose samples are `parts` of (median, share) with a 3 % spread.
    fn point(bytes: u64, parts: &[(f64, f64)], rng: &mut Xoshiro256PlusPlus) -> SweepPoint {
        let mut samples = Vec::new();
        for &(median, share) in parts {
            let d = Normal::new(median, 0.03 * median).unwrap();
            samples.extend((0..(512.0 * share) as usize).map(|_| d.sample(rng)));
        }
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        SweepPoint {
            bytes,
            mean,
            samples,
        }
    }

    #[test]
    fn hopper_like_sweep_gives_near_far_and_two_memory_levels() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mib = 1 << 20;
        let points = vec![
            point(4 * mib, &[(277.0, 1.0)], &mut rng),
            point(16 * mib, &[(277.0, 1.0)], &mut rng),
            point(38 * mib, &[(456.0, 0.5), (561.0, 0.5)], &mut rng),
            point(45 * mib, &[(456.0, 0.5), (561.0, 0.5)], &mut rng),
            point(90 * mib, &[(561.0, 0.5), (746.0, 0.5)], &mut rng),
            point(120 * mib, &[(561.0, 0.5), (746.0, 0.5)], &mut rng),
        ];
        let found = identify(&points);
        let kinds: Vec<LevelKind> = found.levels.iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            vec![
                LevelKind::NearHit,
                LevelKind::FarHit,
                LevelKind::MemoryViaNear,
                LevelKind::MemoryViaFar
            ]
        );
        let far = found.level(LevelKind::FarHit).unwrap();
        assert!((far.distribution.p50 - 456.0).abs() < 8.0);
        assert!((far.share_at(2) - 0.5).abs() < 0.05 && far.share_at(4) == 0.0);
        // Memory through the near partition appears both between and beyond.
        let via_near = found.level(LevelKind::MemoryViaNear).unwrap();
        assert!(via_near.share_at(2) > 0.4 && via_near.share_at(5) > 0.4);
        assert!(found.unexplained.is_empty(), "{:?}", found.unexplained);
    }

    #[test]
    fn far_hits_at_every_size_without_copies_and_one_memory_level() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
        let points = vec![
            point(1 << 20, &[(200.0, 0.34), (320.0, 0.66)], &mut rng),
            point(2 << 20, &[(200.0, 0.34), (320.0, 0.66)], &mut rng),
            point(8 << 20, &[(600.0, 1.0)], &mut rng),
        ];
        let kinds: Vec<LevelKind> = identify(&points).levels.iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            vec![LevelKind::NearHit, LevelKind::FarHit, LevelKind::Memory]
        );
    }

    #[test]
    fn a_mean_no_mixture_of_the_samples_gives_is_unexplained() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut points = vec![
            point(1 << 20, &[(277.0, 1.0)], &mut rng),
            point(8 << 20, &[(600.0, 1.0)], &mut rng),
        ];
        points[1].mean = 450.0;
        let found = identify(&points);
        assert_eq!(found.unexplained.len(), 1);
        assert_eq!(found.unexplained[0].bytes, 8 << 20);
    }

    #[test]
    fn one_level_split_into_two_clusters_is_merged() {
        // Far hits of p50 ~447 and ~453 at sizes between the smallest and the largest,
        // as two clusters: one far level with both shares and every sample.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let cluster = |median: f64, shares: Vec<f64>, rng: &mut Xoshiro256PlusPlus| {
            let noise = Normal::new(median, 8.0).unwrap();
            let samples: Vec<f64> = (0..200).map(|_| noise.sample(rng)).collect();
            Cluster {
                samples,
                shares,
                median,
                best: (0.3, Vec::new()),
            }
        };
        let near = cluster(279.0, vec![1.0, 0.5, 0.5, 0.0], &mut rng);
        let far_a = cluster(447.0, vec![0.0, 0.3, 0.0, 0.0], &mut rng);
        let far_b = cluster(453.0, vec![0.0, 0.0, 0.4, 0.0], &mut rng);
        let memory = cluster(548.0, vec![0.0, 0.0, 0.1, 1.0], &mut rng);
        let merged = merge_alike(vec![near, far_a, far_b, memory]);
        assert_eq!(merged.len(), 3);
        assert_eq!(merged[1].samples.len(), 400);
        assert_eq!(merged[1].shares, vec![0.0, 0.3, 0.4, 0.0]);
        // A level present at the largest size is not merged with a far hit, however close.
        let far = cluster(530.0, vec![0.0, 0.3, 0.0, 0.0], &mut rng);
        let memory = cluster(548.0, vec![0.0, 0.0, 0.1, 1.0], &mut rng);
        assert_eq!(merge_alike(vec![far, memory]).len(), 2);
    }

    #[test]
    fn the_main_level_of_a_kind_is_the_one_with_the_largest_share() {
        let level = |p50: f64, share: f64| L2Level {
            kind: LevelKind::FarHit,
            distribution: Distribution {
                p50,
                ..Distribution::default()
            },
            sub_levels: Vec::new(),
            shares: vec![(1 << 20, share)],
        };
        let levels = [level(417.0, 0.08), level(455.0, 0.5)];
        let main = main_level(&levels, LevelKind::FarHit).expect("a far level");
        assert_eq!(main.distribution.p50, 455.0);
        assert!(main_level(&levels, LevelKind::NearHit).is_none());
    }
}
