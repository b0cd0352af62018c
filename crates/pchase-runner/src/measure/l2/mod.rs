//! The L2 as one SM sees it: every latency level of its path (near hits, far hits, memory
//! through each partition) with its distribution and share, the capacities behind them,
//! which SMs share which partition, and the line, sector and fetch granularity.
//!
//! 1. **Partition map** ([`map`]): one launch; which SMs share a partition, whether a
//!    partition keeps copies of far lines, and the far level by a method of its own.
//! 2. **Fetch granularity** (`fetch::fetch_granularity`).
//! 3. **Sweep** ([`sweep`]): SM 0 alone, 32 warps, arrays from a thirty-second of the L2 to
//!    2.5 times it; each size's mean and 512 loads timed one by one. The sizes between 1.25
//!    times the L2 and the largest only where hits reach that far.
//! 4. **Levels** ([`identify`]): the modes of every size grouped into levels and named by
//!    where they appear; a size whose mean no mixture of the levels gives is reported.
//! 5. **Capacities**: the near capacity where near hits fall to half their share (load by
//!    load, refined by six sampled sizes), the far edge where far hits stop (the rise into
//!    memory, refined likewise), and the far capacity (the far edge times the far level's
//!    share: the bytes of far-homed lines the far partition still held).
//! 6. **Second method**: the far level of the sweep against the map's: the far penalty
//!    (far median minus near median) of each must agree within 15 % + 10 cycles.
//! 7. **Line** (`line`) and **sector** ([`probes`]).

pub mod confirm;
mod fetch;
pub mod home;
pub mod identify;
mod line;
pub mod map;
pub mod probes;
pub mod sweep;

use std::time::Duration;

use topology::LatencySummary;

use crate::{backend::Backend, error::RunnerError};

use super::{probe::SizeSamples, search::RawCurve};
pub use identify::{main_level, Identified, L2Level, LevelKind, Unexplained};
pub use line::L2Line;
pub use map::PartitionMap;
pub use probes::L2Sector;
pub use sweep::{SweepPoint, SWEEP_SAMPLES, SWEEP_SM, SWEEP_WARPS};

/// What the L2 benchmark found.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Findings {
    /// Every level of the L2 path SM 0 meets, fastest first.
    pub levels: Vec<L2Level>,
    /// The near hits' latency with one warp alone at the smallest size (the L2 element's
    /// latency); the near level's where that launch did not run.
    pub near: LatencySummary,
    /// The bytes of one SM's array that stay in its own partition, and whether measured
    /// (`true`: where near hits stopped in the sweep) or derived (`false`: the API's size).
    pub near_capacity: Option<(u64, bool)>,
    /// The array size at which near hits fell to half their share (SM 0's array, before
    /// the division by the partitions where there are no copies), bytes.
    pub near_edge: Option<u64>,
    /// The near overflow's extent in SM 0's array: the last sweep size where near hits kept
    /// their full share and the first where they fell below a tenth of it, bytes.
    pub near_transition: Option<(u64, u64)>,
    /// The array size up to which far hits persisted (SM 0's array), bytes.
    pub far_edge: Option<u64>,
    /// The bytes of far-homed lines the far partition(s) held at the far edge (the edge
    /// times 1 − 1/P, the far-homed share of an array with P partitions), and whether
    /// measured.
    pub far_capacity: Option<(u64, bool)>,
    /// The far capacity's range: the far edge up to the next size the refinement did not
    /// try, times the far-homed share of an array (1 − 1/P), bytes.
    pub far_capacity_range: Option<(u64, u64)>,
    /// Where the sweep's last rise is (the L2 as one SM sees it), bytes.
    pub total_seen: Option<u64>,
    /// Whether a partition keeps copies of lines homed in another: by the map's second pass
    /// where it ran, else `Some(true)` when the sweep shows far hits only beyond the near
    /// capacity; `None` with one partition.
    pub keeps_copies: Option<bool>,
    /// Sizes at a capacity edge whose 32-warp mean differs from their samples' (the
    /// mixture's shares change from pass to pass there).
    pub edge_mismatches: Vec<Unexplained>,
    /// Which SMs share which partition; `Err` says why there is no map.
    pub map: Result<PartitionMap, String>,
    /// With two partitions: the home partition as a function of the address, and (after
    /// the deep benchmark) its prediction of lines it never saw; `Err` says why there is
    /// none.
    pub address: Option<Result<map::AddressFinding, String>>,
    /// The far level by the sweep and by the map; `None` without a far level.
    pub far_check: Option<FarCheck>,
    /// Sweep sizes (and levels) the levels do not explain.
    pub unexplained: Vec<Unexplained>,
    /// The size sweep: mean cycles per load (overhead subtracted) per size.
    pub curve: RawCurve,
    /// Every sweep size with its sampled loads.
    pub points: Vec<SweepPoint>,
    /// The L2's fetch granularity (what one read miss brings from memory).
    pub fetch_granularity: Option<u64>,
    /// The L2's allocation line; `Err` says why there is none.
    pub line: Result<L2Line, String>,
    /// The L2's sector; `Err` says why there is none.
    pub sector: Result<L2Sector, String>,
}

impl L2Findings {
    /// The level of `kind` with the largest share ([`main_level`]).
    pub fn level(&self, kind: LevelKind) -> Option<&L2Level> {
        main_level(&self.levels, kind)
    }

    /// The partitions the map counted; one without a map.
    pub fn partition_count(&self) -> u64 {
        self.map.as_ref().map_or(1, |m| u64::from(m.count.max(1)))
    }
}

/// The far level seen by the sweep and by the map.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FarCheck {
    /// Sweep: far median minus near median, cycles.
    pub sweep_penalty: f64,
    /// Map: far median minus near median of the cold loads, cycles (a first touch by an SM
    /// costs both levels alike, so the difference is comparable).
    pub map_penalty: Option<f64>,
    /// Whether the two agree (within 15 % + 10 cycles); `false` also when the map has no
    /// far level.
    pub agrees: bool,
}

/// Runs the L2 benchmark; `overhead` is the clock overhead to subtract from every sample,
/// `samples` the loads of the cold chase behind the fetch granularity.
///
/// # Errors
/// A launch failure, a result that contradicts its chain, or a sweep without near hits.
pub fn measure_l2<B: Backend + ?Sized>(
    backend: &mut B,
    overhead: f64,
    samples: u32,
    gpu_time: &mut Duration,
) -> Result<L2Findings, RunnerError> {
    let l2 = backend.device().l2_bytes.max(64 << 10);

    // 1. The partition map (where the device can run it).
    let map = match map::partition_map(backend, 0, overhead, gpu_time) {
        Ok(found) => found,
        Err(RunnerError::Unsupported { needed, .. }) => Err(format!(
            "the partition map needs compute capability {needed}"
        )),
        Err(e) => return Err(e),
    };
    // With two groups: which partition is home to an address (the deep `l2-address`
    // benchmark tests it on the lines of a second map).
    let address = match &map {
        Ok(first) if first.count == 2 => Some(map::fit_address_map(first)),
        _ => None,
    };

    // 2. Fetch granularity, from a cold chase.
    let (fetch_granularity, cold) = fetch::fetch_granularity(backend, samples, gpu_time)?;

    log_phase("map and fetch granularity", gpu_time);

    // 3. The sweep, and 4. its levels: the sizes up to 1.25 times the L2 and the largest
    // first; the ones between where hits are still a level of the last size below.
    let sizes = sweep::sweep_sizes(l2);
    let (first, deferred) = sweep::split_sizes(&sizes, l2);
    let mut points = sweep::sweep(backend, &first, overhead, gpu_time)?;
    let mut identified = super::analysis::analysing(|| identify::identify(&points));
    let last_detail = first.len().saturating_sub(2);
    if !deferred.is_empty() && sweep::hits_at(&identified.levels, last_detail) {
        log::debug!(
            "L2: hits at {} B; measuring the sizes up to the largest",
            points[last_detail].bytes
        );
        points.extend(sweep::sweep(backend, &deferred, overhead, gpu_time)?);
        points.sort_by_key(|p| p.bytes);
        identified = super::analysis::analysing(|| identify::identify(&points));
    }
    log_phase("the sweep", gpu_time);
    let near_level = identified
        .level(LevelKind::NearHit)
        .ok_or_else(|| RunnerError::WrongResult("the L2 sweep shows no near hits".into()))?;
    // The element's latency: a near hit with one warp alone at the smallest size (the
    // levels' distributions are taken with 32 warps of SM 0 at once, which queue).
    let alone = sweep::measure_alone(backend, points[0].bytes, SWEEP_SAMPLES, overhead, gpu_time)?
        .and_then(|p| {
            super::levels::modes(&p.samples, identify::MIN_SHARE)
                .into_iter()
                .find(|m| !m.tail)
                .map(|m| m.distribution)
        });
    let near = summary(alone.as_ref().unwrap_or(&near_level.distribution))?;

    // 5. Capacities. Near: where the near hits fall to half the share they have at the
    // smallest size (the middle of the overflow, decided load by load: each sampled load
    // goes to the nearest level), refined between the last sweep size at or above half and
    // the next by six sampled sizes. With a hashed set index the overflow starts where the
    // first sets fill, which depends on the pages a run gets (on the H200 at 30 MiB near
    // hits were 76 % of the loads in one run and 88 % in another): its middle does not move
    // with them. The onset is the last size where near hits keep their full share (to 5 %
    // or four binomial standard deviations of a share of the sampled loads where that is
    // wider).
    let first_share = near_level.share_at(0);
    let wobble = 4.0 * (first_share * (1.0 - first_share) / f64::from(sweep::SWEEP_SAMPLES)).sqrt();
    let near_share_full = first_share - (0.05 * first_share).max(wobble);
    let near_last = (0..points.len())
        .take_while(|&i| near_level.share_at(i) >= near_share_full)
        .last();
    let levels = &identified.levels;
    let near_share = |samples: &[f64]| confirm::share_of(levels, LevelKind::NearHit, samples);
    let (half_last, half) = near_half(&points, levels);
    let mut near_capacity = None;
    if let Some(i) = half_last.filter(|&i| i + 1 < points.len()) {
        let refined = sweep::last_fitting(points[i].bytes, points[i + 1].bytes, 6, |bytes| {
            Ok(
                sweep::measure_point(backend, bytes, SWEEP_SAMPLES, overhead, gpu_time)?
                    .map(|p| near_share(&p.samples) >= half),
            )
        })?;
        near_capacity = refined.map(|bytes| (bytes, true));
    }
    // The overflow's extent: from the onset to the first size where near hits are below a
    // tenth of their first share.
    let near_transition = near_last.zip(near_capacity).map(|(onset, (middle, _))| {
        let end = (onset..points.len())
            .find(|&j| near_share(&points[j].samples) < 0.2 * half)
            .map_or(middle, |j| points[j].bytes);
        (points[onset].bytes.min(middle), end.max(middle))
    });
    log_phase("near capacity", gpu_time);
    // Far: the last size where far hits keep at least half their largest share.
    let far_level = identified.level(LevelKind::FarHit);
    let far_edge_index = far_level.and_then(|far| {
        let peak = far.peak_share();
        (0..points.len())
            .rev()
            .find(|&i| far.share_at(i) >= 0.5 * peak)
    });
    let mut far_edge = None;
    let mut far_step = 0;
    if let Some(i) = far_edge_index.filter(|&i| i + 1 < points.len()) {
        let before = points[i].mean;
        far_step = (points[i + 1].bytes - points[i].bytes) / 4;
        far_edge = sweep::last_fitting(points[i].bytes, points[i + 1].bytes, 4, |bytes| {
            Ok(sweep::measure_point(backend, bytes, 0, overhead, gpu_time)?
                .map(|p| p.mean <= 1.05 * before))
        })?;
    }
    log_phase("far edge", gpu_time);
    // The far partition(s) hold the array's far-homed lines, 1 − 1/P of it with P
    // partitions (P from the map; two where there is no map but a far level): far hits end
    // where that share of the array no longer fits. The range runs to the next size the
    // refinement did not try.
    let partitions = match &map {
        Ok(found) => f64::from(found.count.max(1)),
        Err(_) => 2.0,
    };
    let far_homed = 1.0 - 1.0 / partitions;
    let far_capacity_range = far_edge.filter(|_| far_level.is_some()).map(|edge| {
        (
            (edge as f64 * far_homed) as u64,
            ((edge + far_step) as f64 * far_homed) as u64,
        )
    });
    let far_capacity = far_capacity_range.map(|(low, _)| (low, true));
    let total_seen = identified
        .levels
        .iter()
        .filter(|l| matches!(l.kind, LevelKind::NearHit | LevelKind::FarHit))
        .filter_map(|l| {
            (0..points.len())
                .rev()
                .find(|&i| l.share_at(i) >= 0.5 * l.peak_share())
                .map(|i| points[i].bytes)
        })
        .max();

    // Copies: by the map where it ran; else far hits only past the near capacity.
    let keeps_copies = match &map {
        Ok(found) => found.keeps_copies,
        Err(_) => far_level.map(|far| far.share_at(0) == 0.0),
    };
    // Without copies the near partition holds only the array's near-homed lines, 1/P of
    // it: near hits stop when that share no longer fits, so the partition holds the edge
    // over P (otherwise a three-partition L2 without copies reads as 2.5 of its 3 MiB in
    // one partition, more than the L2 holds with the other two).
    let near_edge = near_capacity.map(|(bytes, _)| bytes);
    if keeps_copies == Some(false) {
        near_capacity =
            near_capacity.map(|(bytes, measured)| ((bytes as f64 / partitions) as u64, measured));
    }
    // 6. The far level by both methods.
    let far_check = far_level.map(|far| {
        let sweep_penalty = far.distribution.p50 - near_level.distribution.p50;
        let map_penalty = map
            .as_ref()
            .ok()
            .and_then(|m| m.far.map(|f| f.p50 - m.near.p50));
        let agrees = map_penalty
            .is_some_and(|p| (p - sweep_penalty).abs() <= 0.15 * sweep_penalty.abs() + 10.0);
        FarCheck {
            sweep_penalty,
            map_penalty,
            agrees,
        }
    });

    // 7. Line (`line::l2_line` sizes its chain A from the onset of the near overflow and
    // shrinks it where it overflows by itself; without copies its lines fill every
    // partition alike) and sector.
    let threshold = fetch::line_threshold(&cold, fetch_granularity);
    let capacity = near_last.map(|i| points[i].bytes).or(near_edge);
    let line = match (fetch_granularity, capacity) {
        (Some(granularity), Some(capacity)) => {
            line::l2_line(backend, capacity, granularity, threshold, gpu_time)?
        }
        (None, _) => Err("no fetch granularity to space the nodes by".into()),
        (_, None) => Err("no near capacity to size the array by".into()),
    };
    let largest = match &line {
        Ok(line) => u32::try_from(line.bytes).unwrap_or(256).min(4096),
        Err(_) => 256,
    };
    log_phase("line probe", gpu_time);
    let sector = probes::l2_sector(backend, largest, gpu_time)?;
    log_phase("sector", gpu_time);

    let curve = RawCurve {
        name: "l2-size".into(),
        change_index: near_last.map(|i| i + 1),
        points: points
            .iter()
            .map(|p| SizeSamples {
                bytes: p.bytes,
                values: vec![p.mean],
                smids: vec![SWEEP_SM],
            })
            .collect(),
    };
    // A size next to a capacity edge whose 32-warp mean its samples do not match is a
    // mixture whose shares change from pass to pass (measured on the H200: more warm-up
    // passes lower the timed pass's mean there, the samples right after stay), not a level
    // the analysis missed: it is reported apart. The edge and the next two sizes of the
    // sweep's grid, whether or not all of them were measured.
    let edges: Vec<u64> = [near_last, far_edge_index]
        .into_iter()
        .flatten()
        .filter_map(|i| sizes.iter().position(|&b| b == points[i].bytes))
        .flat_map(|k| sizes.iter().skip(k).take(3).copied())
        .collect();
    let (edge_mismatches, unexplained): (Vec<_>, Vec<_>) = identified
        .unexplained
        .clone()
        .into_iter()
        .partition(|u| u.bytes > 0 && edges.contains(&u.bytes));
    Ok(L2Findings {
        levels: identified.levels.clone(),
        near,
        near_capacity,
        near_edge,
        near_transition,
        far_edge,
        far_capacity,
        far_capacity_range,
        total_seen,
        keeps_copies,
        map,
        address,
        far_check,
        unexplained,
        edge_mismatches,
        curve,
        points,
        fetch_granularity,
        line,
        sector,
    })
}

/// Logs how much GPU time the L2 benchmark had taken when `phase` ended (`-vv`).
fn log_phase(phase: &str, gpu_time: &Duration) {
    log::debug!(
        "L2: {phase} done at {:.1} ms of GPU time",
        gpu_time.as_secs_f64() * 1e3
    );
}

/// The last sweep size (index) where near hits keep at least half the share they have at
/// the smallest size, and that half share; each sampled load counts for the level nearest
/// to it. `None` as the index when the first size has no near hits.
pub fn near_half(points: &[SweepPoint], levels: &[L2Level]) -> (Option<usize>, f64) {
    let near_share = |samples: &[f64]| confirm::share_of(levels, LevelKind::NearHit, samples);
    let half = 0.5 * points.first().map_or(0.0, |p| near_share(&p.samples));
    let last = (0..points.len())
        .take_while(|&i| half > 0.0 && near_share(&points[i].samples) >= half)
        .last();
    (last, half)
}

/// A level's distribution as the topology's latency summary.
pub fn summary(d: &super::levels::Distribution) -> Result<LatencySummary, RunnerError> {
    if d.samples == 0 {
        return Err(RunnerError::WrongResult("a level without samples".into()));
    }
    Ok(LatencySummary {
        mean: topology::Cycles(d.mean),
        p25: Some(topology::Cycles(d.p25)),
        p50: topology::Cycles(d.p50),
        p75: Some(topology::Cycles(d.p75)),
        p95: topology::Cycles(d.p95),
        stdev: topology::Cycles(d.stdev),
        samples: u32::try_from(d.samples).unwrap_or(u32::MAX),
    })
}
