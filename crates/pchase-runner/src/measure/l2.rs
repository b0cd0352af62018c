//! The L2 as one SM sees it: near and far partitions, their latencies and capacities, and
//! the device-memory latency behind them.
//!
//! 1. **Latencies.** A fine-grained `.cg` chase over an L2-resident array, one node per
//!    128-byte line, gives a latency distribution. With partitions, lines homed in the SM's
//!    own partition come back faster than the others: the sorted samples then have two
//!    levels. cpd's exact single change point (L2 cost) on the sorted samples splits them,
//!    and Ashman's D (gap against spread) decides whether the split is real.
//! 2. **Capacities.** Whole-pass mean latencies (a coarse chase pinned to SM 0, alone, so
//!    that no other SM shares the L2 meanwhile and every size runs on the same SM) over
//!    array sizes from 1/32 of the L2 to twice it, log-spaced,
//!    segmented by PELT (L2 cost, BIC penalty on the estimated noise). A rise well inside the
//!    L2 is where the near partition stops holding copies of far lines; the last rise is the
//!    L2 itself. Without a rise inside, the near partition's capacity is derived as half
//!    the L2 size the API reports.

use std::time::Duration;

use cpd::{estimate_noise_variance, pelt, single_change_point, L2Cost, Penalty, SearchOptions};
use topology::LatencySummary;

use crate::{
    backend::{
        Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, ChaseRun, LoadPath, Phase,
        PinnedRequest, TwoPhaseRequest,
    },
    error::RunnerError,
};

use super::{
    probe::SizeSamples,
    search::RawCurve,
    stats::{median, quantile, slow_runs},
};

/// What the L2 benchmark found.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Findings {
    /// Hits in the SM's near partition (or all hits, with one partition), cycles.
    pub near: LatencySummary,
    /// Hits in a far partition, if two levels were found.
    pub far: Option<LatencySummary>,
    /// Share of lines that came back at the near latency.
    pub near_share: f64,
    /// Ashman's D of the near/far split: the distance of the two levels' medians in units
    /// of their robust spreads, `√2·|m₁ − m₂| / √(s₁² + s₂²)`; two levels need D > 3.
    pub separation: f64,
    /// Capacity of the near partition, bytes, and whether it was measured (`true`: a rise
    /// in the size sweep) or derived (`false`: half the API size).
    pub near_capacity: Option<(u64, bool)>,
    /// Capacity of the far side, bytes, and whether it was measured (`true`: the capacity an
    /// SM of the other partition gets alone, found by the pair test) or derived (`false`: the
    /// API's L2 size minus the near capacity).
    pub far_capacity: Option<(u64, bool)>,
    /// Where the sweep's last rise is (the L2 as one SM sees it), bytes.
    pub total_seen: Option<u64>,
    /// Whether the near partition keeps copies of far lines. Where two SMs at once found a
    /// partner that does not share their budget ([`L2Findings::pairs`]), by capacity:
    /// `Some(true)` when two SMs of different halves hold less than 85 % of the near
    /// capacity each (each SM's lines take room in both halves). Otherwise by latency:
    /// `Some(true)` when every line of a quarter-L2 array came back at one (near) latency
    /// and, past the near capacity, the far-homed lines came back slower; `Some(false)` when
    /// far lines were slower already at a quarter of the L2. `None` with one partition, or
    /// when the separate pair's capacity stayed a bound (its launches stopped starting on
    /// both SMs together).
    pub keeps_copies: Option<bool>,
    /// The size sweep.
    pub curve: RawCurve,
    /// The L2's fetch granularity (what one read miss brings from memory; not the sector,
    /// see `sector`), from the spacing of misses of a 4-byte-stride chase over a chain
    /// evicted from the L2.
    pub fetch_granularity: Option<u64>,
    /// The L2's allocation line (the bytes one tag covers), from the runs of misses after
    /// a sparse eviction; `Err` says why there is none.
    pub line: Result<L2Line, String>,
    /// The L2's sector: the smallest write that makes a read of the bytes it covers hit,
    /// with each width tried and the median latency of the reads after it (raw cycles);
    /// `Err` says why there is none.
    pub sector: Result<L2Sector, String>,
    /// Two SMs at once: which pairs share one budget and how much a pair that does not can
    /// hold; `Err` says why there is no answer.
    pub pairs: Result<L2Pairs, String>,
}

/// What two SMs chasing their own arrays at the same time showed.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Pairs {
    /// The first SM of every pair: the SM of the size sweep.
    pub sm: u32,
    /// An SM whose array, with the first SM's, missed at 60 % of the near capacity each
    /// (the two share one budget: the same half of the L2).
    pub sharing_sm: Option<u32>,
    /// An SM whose array did not (the other half).
    pub separate_sm: Option<u32>,
    /// With the separate SM: the largest tried array per SM (a multiple of 5 % of the near
    /// capacity, from 60 %) at which both still hit, bytes.
    pub separate_capacity: Option<u64>,
    /// Whether `separate_capacity` is the answer (the pair missed at the next size, or
    /// held the whole near capacity), not a bound (a launch at the next size never started
    /// on both SMs together).
    pub separate_capacity_exact: bool,
    /// The capacity the separate SM gets alone, bytes: the partition that is far from
    /// [`L2Pairs::sm`], as its own SMs get it. `None` where it could not be measured.
    pub far_capacity: Option<u64>,
    /// Every pair launch that started on both SMs together.
    pub launches: Vec<PairLaunch>,
    /// The separate SM alone: each array size tried (bytes) and its mean cycles per load.
    pub alone: Vec<(u64, f64)>,
}

/// One launch of two SMs at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairLaunch {
    /// The two SMs.
    pub sms: (u32, u32),
    /// Bytes each chased.
    pub bytes: u64,
    /// Their mean cycles per load (with the clock overhead).
    pub means: (f64, f64),
}

impl PairLaunch {
    fn new(sms: &[u32; 2], bytes: u64, means: &[f64]) -> PairLaunch {
        let mean = |i: usize| means.get(i).copied().unwrap_or(f64::NAN);
        PairLaunch {
            sms: (sms[0], sms[1]),
            bytes,
            means: (mean(0), mean(1)),
        }
    }
}

/// How the L2's sector was found.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Sector {
    /// The sector, bytes.
    pub bytes: u64,
    /// Each written width (bytes) and the median latency of the reads after it, cycles.
    pub medians: Vec<(u32, f64)>,
    /// For each width, the share of nodes whose read hit.
    pub hit_share: Vec<f64>,
}

/// How the L2's allocation line was found.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Line {
    /// The line, bytes.
    pub bytes: u64,
    /// Share of miss runs that start and end on a multiple of the line (at least 0.9).
    pub agreement: f64,
    /// Miss runs seen.
    pub runs: usize,
    /// Share of the re-timed loads that missed.
    pub miss_share: f64,
    /// Chain A (warmed, then re-timed), bytes.
    pub array_bytes: u64,
    /// Nodes of the evicting chain B.
    pub evicting_nodes: u32,
    /// The latency between hits and misses used to tell them apart, cycles (raw, with the
    /// clock overhead).
    pub threshold: f64,
    /// The fetch unit the nodes were spaced by, bytes.
    pub granularity: u64,
    /// The timed loads' latencies, raw cycles; load `k` read byte `k × granularity` of the
    /// array.
    pub latencies: Vec<u32>,
}

fn wrong(what: &str) -> impl Fn(cpd::CpdError) -> RunnerError + '_ {
    move |e| RunnerError::WrongResult(format!("{what}: {e}"))
}

/// Splits sorted latency samples into a near and a far level, if there are two.
///
/// The exact single change point (L2 cost) of the sorted samples is the best split into
/// two levels. Any split of sorted values separates them perfectly, so a two-sample test
/// between the halves would always reject; what decides is how far apart the halves are
/// against their own spread: Ashman's D > 3 on the halves' medians and robust spreads (a
/// unimodal normal distribution split at its best point gives less) and a gap of at least
/// 8 cycles.
fn split_levels(
    samples: &[u32],
    overhead: f64,
) -> Result<(LatencySummary, Option<LatencySummary>, f64, f64), RunnerError> {
    super::analysis::analysing(|| split_levels_now(samples, overhead))
}

fn split_levels_now(
    samples: &[u32],
    overhead: f64,
) -> Result<(LatencySummary, Option<LatencySummary>, f64, f64), RunnerError> {
    let mut sorted: Vec<f64> = samples
        .iter()
        .map(|&v| (f64::from(v) - overhead).max(0.0))
        .collect();
    sorted.sort_by(f64::total_cmp);
    let summary = |v: &[f64]| {
        LatencySummary::from_samples(v)
            .ok_or_else(|| RunnerError::WrongResult("no L2 samples".into()))
    };
    let n = sorted.len();
    let split = single_change_point(
        &L2Cost::from_series(&sorted).map_err(wrong("L2 levels"))?,
        SearchOptions::new((n / 20).max(2), 1),
    )
    .map_err(wrong("L2 levels"))?;
    let (near, far) = sorted.split_at(split.change_point);
    let (near_summary, far_summary) = (summary(near)?, summary(far)?);
    // Medians and robust spreads (1.4826 × the median absolute deviation), so that a few
    // outlier loads (refreshes, interrupts) in the far half do not hide two clean levels.
    let robust = |v: &[f64]| {
        let m = median(v);
        let deviations: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
        (m, 1.4826 * median(&deviations))
    };
    let ((near_center, near_sd), (far_center, far_sd)) = (robust(near), robust(far));
    let gap = far_center - near_center;
    let spread = (near_sd.powi(2) + far_sd.powi(2)).sqrt();
    let separation = if spread > 0.0 {
        std::f64::consts::SQRT_2 * gap / spread
    } else {
        f64::INFINITY
    };
    if separation > 3.0 && gap >= 8.0 {
        Ok((
            near_summary,
            Some(far_summary),
            near.len() as f64 / n as f64,
            separation,
        ))
    } else {
        Ok((summary(&sorted)?, None, 1.0, separation))
    }
}

/// Fine-grained `.cg` latencies of `samples` loads over `chain`, after one warm pass.
fn fine_cg<B: Backend>(
    backend: &mut B,
    chain: ChainSpec,
    samples: u32,
    gpu_time: &mut Duration,
) -> Result<Vec<u32>, RunnerError> {
    let run = backend.chase(&ChaseRequest {
        path: LoadPath::GlobalCg,
        mode: ChaseMode::Fine,
        chains: vec![chain],
        warmup_steps: u32::try_from(chain.nodes()).unwrap_or(u32::MAX),
        steps: samples,
        carveout: Carveout::Percent(0),
        flush_l2: false,
        reserve_shared_bytes: 0,
        written_bytes: 0,
    })?;
    *gpu_time += run.gpu_time;
    first_block(run)
}

/// The first block's latencies of a launch.
fn first_block(run: ChaseRun) -> Result<Vec<u32>, RunnerError> {
    run.blocks
        .into_iter()
        .next()
        .map(|b| b.latencies)
        .ok_or_else(|| RunnerError::WrongResult("an L2 launch returned no block".into()))
}

/// The SM the size sweep runs on and the pair test pairs with others: every near-capacity
/// number is this SM's, so that the sweep, the pairs and the far side (another SM's) refer
/// to named SMs rather than to wherever the hardware put block 0 (on the H200 one of two
/// SMs, from launch to launch).
const SWEEP_SM: u32 = 0;

/// Mean cycles per `.cg` load of SM [`SWEEP_SM`] over an array of `bytes`, one node per
/// 128-byte line, pinned, alone on the GPU: a full warm-up pass, then at most 64 Ki timed
/// loads (after a full pass the L2's content is steady, and the mean needs no more).
fn coarse_mean<B: Backend>(
    backend: &mut B,
    bytes: u64,
    gpu_time: &mut Duration,
) -> Result<f64, RunnerError> {
    pinned_means(backend, &[SWEEP_SM], bytes, 1, gpu_time)?
        .and_then(|means| means.first().copied())
        .ok_or_else(|| {
            RunnerError::WrongResult(format!(
                "no block of {PINNED_TRIES} launches ran on SM {SWEEP_SM}"
            ))
        })
}

/// Re-timed loads of the line probe: 8192 one-fetch-unit nodes (512 KiB at 64 B, inside
/// one 2 MiB page, so the TLB does not add slow loads), 64 KiB of timing buffer.
const LINE_PROBE_STEPS: u32 = 8192;

/// The largest power of two `units` (up to 256) such that at least 90 % of `runs` start and
/// end on a multiple of it, and that share.
fn aligned_unit(runs: &[(usize, usize)]) -> (usize, f64) {
    let agreement = |unit: usize| {
        runs.iter()
            .filter(|(start, len)| start % unit == 0 && len % unit == 0)
            .count() as f64
            / runs.len() as f64
    };
    let mut best = (1, agreement(1));
    for shift in 1..=8 {
        let share = agreement(1 << shift);
        if share >= 0.9 {
            best = (1 << shift, share);
        }
    }
    best
}

/// Nodes of the evicting chain are 33 lines of 128 B apart (an odd number of lines, so that
/// they fall into sets and partitions all over the L2 whatever its hash).
const EVICTING_SPACING: u32 = 33 * 128;

/// The L2's allocation line: the bytes one tag covers, read from which lines an eviction
/// takes away.
///
/// One thread warms chain A, one node per fetch unit, over 85 % of the capacity one SM's
/// accesses get (the L2 flushed first, so that A's lines are used in address order), then
/// loads a sparse chain B whose nodes are 33 lines apart, then re-times A's first nodes.
/// Each node of B lands in some set; where that set is full it evicts the set's least
/// recently used line of A, and lines of one set are far apart in A: the evicted lines are
/// isolated, and each shows as a run of misses, one per fetch unit it held. The line is the
/// largest power-of-two multiple of the fetch unit on which at least 90 % of the runs start
/// and end (two evicted lines side by side make a run of twice the line, still aligned to
/// it). A cyclic chase over an array that only partly fits is no substitute: on the H200
/// it evicts whole 256-byte partition chunks at once, or misses everything
/// (docs/results/h200.md).
///
/// A load counts as a miss above `threshold` cycles. B starts with one node per 1024 lines
/// of A (at least 8) and grows fourfold, up to one per line, until the re-timed pass shows
/// at least 128 runs (so that a few stray slow loads cannot outvote them) or more than half
/// of A missed; the launch with the most runs (at least 16) decides.
fn l2_line<B: Backend>(
    backend: &mut B,
    capacity: u64,
    granularity: u64,
    threshold: f64,
    gpu_time: &mut Duration,
) -> Result<Result<L2Line, String>, RunnerError> {
    let unit = match u32::try_from(granularity) {
        Ok(g) if g >= 4 && g % 4 == 0 => g,
        _ => return Ok(Err(format!("fetch granularity {granularity} B"))),
    };
    let bytes = (capacity / 100 * 85) / u64::from(unit) * u64::from(unit);
    if bytes < 64 * u64::from(unit) {
        return Ok(Err(format!("an L2 of {capacity} B is too small to probe")));
    }
    let a = ChainSpec::new(bytes, unit)?;
    let a_nodes = u32::try_from(a.nodes()).unwrap_or(u32::MAX);
    let room = backend.device().shared_per_block_optin_bytes / 8;
    let steps = u64::from(LINE_PROBE_STEPS).min(a.nodes()).min(room) as u32;
    let lines = (bytes / 128).max(1);
    let mut seen = Vec::new();
    let mut best: Option<L2Line> = None;
    for share in [1024u64, 256, 64, 16, 4, 1] {
        let evicting = u32::try_from((lines / share).max(8)).unwrap_or(u32::MAX);
        let b = ChainSpec::new(
            u64::from(evicting) * u64::from(EVICTING_SPACING),
            EVICTING_SPACING,
        )?;
        let run = backend.two_phase(&TwoPhaseRequest {
            fill: Phase {
                path: LoadPath::GlobalCg,
                chain: a,
                thread: 0,
                steps: a_nodes,
            },
            evict: Phase {
                path: LoadPath::GlobalCg,
                chain: b,
                thread: 0,
                steps: evicting,
            },
            timed_steps: steps,
            blocks: 1,
            threads: 32,
            carveout: Carveout::Percent(0),
            flush_l2: true,
        })?;
        *gpu_time += run.gpu_time;
        let latencies = first_block(run)?;
        let slow = latencies
            .iter()
            .filter(|&&v| f64::from(v) > threshold)
            .count();
        let miss_share = slow as f64 / latencies.len().max(1) as f64;
        let runs = slow_runs(&latencies, threshold);
        log::debug!(
            "L2 line probe, A {bytes} B, B {evicting} nodes: {slow} of {} loads above {threshold:.0} cycles, {} runs",
            latencies.len(),
            runs.len()
        );
        seen.push(format!(
            "{evicting} nodes: {} runs, {:.0} % missed",
            runs.len(),
            100.0 * miss_share
        ));
        if runs.len() >= 16 && best.as_ref().is_none_or(|b| runs.len() > b.runs) {
            let (units, agreement) = aligned_unit(&runs);
            best = Some(L2Line {
                bytes: units as u64 * granularity,
                agreement,
                runs: runs.len(),
                miss_share,
                array_bytes: bytes,
                evicting_nodes: evicting,
                threshold,
                granularity,
                latencies,
            });
        }
        // Enough runs to outvote stray slow loads, or so many misses that more eviction
        // would only merge runs.
        if runs.len() >= 128 || miss_share > 0.5 {
            break;
        }
    }
    if let Some(line) = best {
        return Ok(Ok(line));
    }
    Ok(Err(format!(
        "too few evicted lines in the re-timed {steps} loads over {bytes} B ({})",
        seen.join(", ")
    )))
}

/// The hit/miss threshold from a cold 4-byte-stride chase whose misses are its loads
/// `0, per, 2·per, …`, and the far partition's level if one was measured (raw cycles):
/// 1.25 × the slowest hits + 4 cycles, or halfway to the fastest misses where that is
/// lower; `None` when hits and misses overlap. The slowest hits are the cold chase's 99th
/// percentile of hits or the far level, whichever is slower, unless the far level is
/// within 15 % of the fastest misses (then it was memory); the fastest misses are their
/// 1st percentile. Close to the hits rather than halfway: a miss that finds its DRAM row
/// open comes back much faster than the cold chase's misses (on the H200 from 400 cycles,
/// against 700 and more), while hits stay below 1.25 × the slowest hit level.
fn hit_miss_threshold(cold: &[u32], per: usize, far: Option<f64>) -> Option<f64> {
    if per < 2 {
        return None;
    }
    let (mut hits, mut misses): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for (k, &v) in cold.iter().enumerate() {
        if k % per == 0 {
            misses.push(f64::from(v));
        } else {
            hits.push(f64::from(v));
        }
    }
    if hits.is_empty() || misses.is_empty() {
        return None;
    }
    hits.sort_by(f64::total_cmp);
    misses.sort_by(f64::total_cmp);
    let fast_miss = quantile(&misses, 0.01);
    let slow_hit = far
        .filter(|&f| f < 0.85 * fast_miss)
        .map_or(quantile(&hits, 0.99), |f| f.max(quantile(&hits, 0.99)));
    (fast_miss > slow_hit).then_some((1.25 * slow_hit + 4.0).min((slow_hit + fast_miss) / 2.0))
}

/// Launches of a pinned chase tried before a measurement counts as lost (each launch that
/// did not reach every wanted SM, or whose slots did not start together, is repeated).
const PINNED_TRIES: usize = 4;

/// Mean cycles per `.cg` load of each SM of `sms`, all chasing their own array of `bytes`
/// (one node per 128-byte line) at the same time: `warm_passes` untimed passes, then at most
/// 64 Ki timed loads. `None` when no launch in [`PINNED_TRIES`] reached every SM together.
fn pinned_means<B: Backend>(
    backend: &mut B,
    sms: &[u32],
    bytes: u64,
    warm_passes: u32,
    gpu_time: &mut Duration,
) -> Result<Option<Vec<f64>>, RunnerError> {
    let chain = ChainSpec::new(bytes / 128 * 128, 128)?;
    let nodes = u32::try_from(chain.nodes()).unwrap_or(u32::MAX);
    let steps = nodes.min(1 << 16);
    let request = PinnedRequest {
        sms: sms.to_vec(),
        chains: vec![chain; sms.len()],
        warmup_steps: nodes.saturating_mul(warm_passes),
        steps,
        warps: 1,
        sample_steps: 0,
    };
    for _ in 0..PINNED_TRIES {
        let run = backend.pinned_chase(&request)?;
        *gpu_time += run.gpu_time;
        if !run.complete() {
            log::debug!("L2 pinned launch on SMs {sms:?} did not start together; again");
            continue;
        }
        let means: Vec<f64> = run
            .slots
            .iter()
            .flatten()
            .map(|slot| slot.total_cycles as f64 / f64::from(steps))
            .collect();
        log::debug!(
            "L2 pinned: SMs {sms:?}, {} B each: {means:.1?} cycles per load",
            chain.bytes
        );
        return Ok(Some(means));
    }
    Ok(None)
}

/// Two SMs at once, pinned to chosen SMs (every launch runs the same two): SM 0 and SM `j`
/// (`j` spread over the device, up to 15 of them, halfway first) each chase an array of 60 % of the near
/// capacity. A pair in which either misses (mean above 1.1 × the sweep's plateau) shares
/// one budget; a pair in which both hit does not. With a partner that does not share,
/// arrays of 65 %, 70 %, … 100 % of the near capacity each give the most the pair holds per
/// SM. If the two halves of the L2 were independent, that would be the near capacity; if
/// each SM's lines also occupy the other half (a copy near, the line at its home), it is
/// less (2/3 of a half). Then the separate SM alone: where its own array stops fitting is
/// the capacity of the partition that is far from SM 0, as its own SMs get it.
fn l2_pairs<B: Backend>(
    backend: &mut B,
    near: u64,
    plateau: f64,
    gpu_time: &mut Duration,
) -> Result<Result<L2Pairs, String>, RunnerError> {
    let sm_count = backend.device().sm_count;
    if sm_count < 2 {
        return Ok(Err("one SM: no pairs".into()));
    }
    let fits = |means: &[f64]| means.iter().all(|&m| m <= 1.1 * plateau);
    let mut pairs = L2Pairs {
        sm: SWEEP_SM,
        sharing_sm: None,
        separate_sm: None,
        separate_capacity: None,
        separate_capacity_exact: false,
        far_capacity: None,
        launches: Vec::new(),
        alone: Vec::new(),
    };
    let trial = near / 20 * 12;
    // Partners k/16 of the way through the SMs, halves first, then quarters, eighths,
    // sixteenths: SMs far apart in number come first, where another partition is likeliest.
    let mut partners: Vec<u32> = Vec::new();
    for k in [8, 4, 12, 2, 6, 10, 14, 1, 3, 5, 7, 9, 11, 13, 15] {
        let sm = (k * sm_count / 16).max(1);
        if !partners.contains(&sm) {
            partners.push(sm);
        }
    }
    let mut lost = 0;
    for partner in partners {
        let sms = [pairs.sm, partner];
        let Some(means) = pinned_means(backend, &sms, trial, 2, gpu_time)? else {
            lost += 1;
            continue;
        };
        pairs.launches.push(PairLaunch::new(&sms, trial, &means));
        if fits(&means) {
            pairs.separate_sm.get_or_insert(partner);
        } else {
            pairs.sharing_sm.get_or_insert(partner);
        }
        if pairs.separate_sm.is_some() && pairs.sharing_sm.is_some() {
            break;
        }
    }
    let Some(separate) = pairs.separate_sm else {
        return Ok(if lost > 0 {
            Err(format!("{lost} pair launch(es) never started together, and no other pair held 60 % of the near capacity each"))
        } else {
            Ok(pairs)
        });
    };
    // The separate pair's capacity, by 5 % of the near capacity.
    let sms = [pairs.sm, separate];
    let mut held = trial;
    let mut exact = true;
    for twentieths in 13..=20u64 {
        let bytes = near / 20 * twentieths;
        match pinned_means(backend, &sms, bytes, 2, gpu_time)? {
            Some(means) => {
                pairs.launches.push(PairLaunch::new(&sms, bytes, &means));
                if !fits(&means) {
                    break;
                }
                held = bytes;
            }
            None => {
                exact = false;
                break;
            }
        }
    }
    pairs.separate_capacity = Some(held);
    pairs.separate_capacity_exact = exact;
    pairs.far_capacity =
        far_capacity(backend, separate, near, plateau, &mut pairs.alone, gpu_time)?;
    Ok(Ok(pairs))
}

/// The largest of `lo` and the sizes `(hi − lo) / parts` apart above it (multiples of
/// 128 B, below `hi`) that `fits`, trying them upward until the first that does not.
/// `None` when `fits` has no answer for a size (its launch never ran).
fn last_fitting(
    lo: u64,
    hi: u64,
    parts: u64,
    mut fits: impl FnMut(u64) -> Result<Option<bool>, RunnerError>,
) -> Result<Option<u64>, RunnerError> {
    let step = ((hi - lo) / parts).max(128) / 128 * 128;
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

/// The capacity one SM gets alone, by pinned one-SM chases from 70 % of `near` in steps of
/// 10 % (up to 150 %), then four sizes between the last that fitted and the first that did
/// not: the largest array whose mean stays within 5 % of the first size's. `None` when a
/// launch never reached the SM, or the first size already missed (its mean above 1.1 ×
/// `plateau`, the sweep's).
fn far_capacity<B: Backend>(
    backend: &mut B,
    sm: u32,
    near: u64,
    plateau: f64,
    alone: &mut Vec<(u64, f64)>,
    gpu_time: &mut Duration,
) -> Result<Option<u64>, RunnerError> {
    let mut mean_at = |bytes: u64| -> Result<Option<f64>, RunnerError> {
        let mean =
            pinned_means(backend, &[sm], bytes, 1, gpu_time)?.and_then(|m| m.first().copied());
        if let Some(mean) = mean {
            alone.push((bytes, mean));
        }
        Ok(mean)
    };
    let first = near / 10 * 7;
    let Some(base) = mean_at(first)?.filter(|&mean| mean <= 1.1 * plateau) else {
        return Ok(None);
    };
    let (mut lo, mut hi) = (first, None);
    for tenths in 8..=15u64 {
        let bytes = near / 10 * tenths;
        let Some(mean) = mean_at(bytes)? else {
            return Ok(None);
        };
        if mean > 1.05 * base {
            hi = Some(bytes);
            break;
        }
        lo = bytes;
    }
    let Some(hi) = hi else {
        // Never rose up to 1.5 × the near capacity: a bound, not a capacity.
        return Ok(None);
    };
    last_fitting(lo, hi, 5, |bytes| {
        Ok(mean_at(bytes)?.map(|mean| mean <= 1.05 * base))
    })
}

/// Nodes of the sector probe: 64 nodes 33 lines of 128 B apart (one line each, in 64 sets
/// even of a small L2 indexed by address bits; 264 KiB, inside one 2 MiB page).
const SECTOR_PROBE_NODES: u32 = 64;

/// The L2's sector: the smallest part of a line it keeps valid on its own.
///
/// A read cannot show it where a miss fetches more than a sector (the H200 fetches 64
/// bytes). A write can: after an L2 flush, the first `w` bytes of each of 64 nodes 33
/// lines apart are written, and a cold `.cg` chase reads each node's first word. Where the
/// L2 keeps per-sector valid bits and fetches a partly written sector only when it is
/// read, the read hits once `w` covers the whole sector holding it. `w` runs over 4, 8,
/// …, up to the line (or 256 B). Each node is judged against itself: its read after the
/// widest write (a hit) and after the 4-byte write (a miss, unless the sector is 4 B) must
/// be clearly apart, and after a width `w` it hits when its latency is nearer the first.
/// The sector is the first width after which at least 90 % of the nodes hit, and every
/// wider one must do so too. If the two references are not apart, a 4-byte write already
/// made reads hit (or none did), and the result says so.
fn l2_sector<B: Backend>(
    backend: &mut B,
    largest: u32,
    gpu_time: &mut Duration,
) -> Result<Result<L2Sector, String>, RunnerError> {
    let chain = ChainSpec::new(
        u64::from(SECTOR_PROBE_NODES) * u64::from(EVICTING_SPACING),
        EVICTING_SPACING,
    )?;
    let mut widths = Vec::new();
    let mut width = 4u32;
    while width <= largest {
        widths.push(width);
        width *= 2;
    }
    let mut reads: Vec<Vec<f64>> = Vec::with_capacity(widths.len());
    for &width in &widths {
        let run = backend.chase(&ChaseRequest {
            path: LoadPath::GlobalCg,
            mode: ChaseMode::Fine,
            chains: vec![chain],
            warmup_steps: 0,
            steps: SECTOR_PROBE_NODES,
            carveout: Carveout::Percent(0),
            flush_l2: true,
            reserve_shared_bytes: 0,
            written_bytes: width,
        })?;
        *gpu_time += run.gpu_time;
        let latencies: Vec<f64> = first_block(run)?.into_iter().map(f64::from).collect();
        if latencies.len() != SECTOR_PROBE_NODES as usize {
            return Err(RunnerError::WrongResult(format!(
                "the L2 sector probe returned {} samples for {SECTOR_PROBE_NODES} nodes",
                latencies.len()
            )));
        }
        reads.push(latencies);
    }
    let medians: Vec<(u32, f64)> = widths
        .iter()
        .zip(&reads)
        .map(|(&w, r)| (w, median(r)))
        .collect();
    let (Some(miss), Some(hit)) = (reads.first(), reads.last()) else {
        return Ok(Err("no write width to try".into()));
    };
    let apart = hit.iter().zip(miss).filter(|&(h, m)| *h < 0.8 * m).count();
    if widths.len() < 2 || apart < SECTOR_PROBE_NODES as usize * 9 / 10 {
        return Ok(Err(format!(
            "reads after a 4-byte and after a {largest}-byte write are not apart (medians {medians:.0?} cycles): the sector is 4 B or the L2 does not keep written bytes apart"
        )));
    }
    let hit_share: Vec<f64> = reads
        .iter()
        .map(|r| {
            r.iter()
                .zip(hit.iter().zip(miss))
                .filter(|&(v, (h, m))| (v - h).abs() < (v - m).abs())
                .count() as f64
                / r.len() as f64
        })
        .collect();
    let hits: Vec<bool> = hit_share.iter().map(|&share| share >= 0.9).collect();
    let Some(first) = hits.iter().position(|&h| h) else {
        return Ok(Err(format!(
            "no write width made reads hit (medians {medians:.0?} cycles)"
        )));
    };
    if !hits[first..].iter().all(|&h| h) {
        return Ok(Err(format!(
            "reads hit after some widths and missed after wider ones (medians {medians:.0?} cycles, hit shares {hit_share:.2?})"
        )));
    }
    Ok(Ok(L2Sector {
        bytes: u64::from(widths[first]),
        medians,
        hit_share,
    }))
}

/// Runs the L2 benchmark.
pub fn measure_l2<B: Backend>(
    backend: &mut B,
    overhead: f64,
    samples: u32,
    gpu_time: &mut Duration,
) -> Result<L2Findings, RunnerError> {
    let l2 = backend.device().l2_bytes.max(1 << 20);
    let line = 128u32;

    // 1. Levels, over a quarter of the L2 (at most 8 MiB): resident, many lines.
    let bytes = (l2 / 4).min(8 << 20) / u64::from(line) * u64::from(line);
    let latencies = fine_cg(backend, ChainSpec::new(bytes, line)?, samples, gpu_time)?;
    let (near, far, near_share, separation) = split_levels(&latencies, overhead)?;

    // Fetch granularity: a cold 4-byte-stride chase after an L2 flush; each load that
    // opens a new sector goes to memory, the others hit what it brought.
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
    let mut sorted: Vec<f64> = cold_latencies.iter().map(|&v| f64::from(v)).collect();
    sorted.sort_by(f64::total_cmp);
    // Memory can be less than 1.5 × the L2's latency (Kepler: 339 against 223 cycles), so
    // the SM caches' rule does not fit: a load is a miss above the midpoint between the
    // median (hits) and the 99th percentile (memory: 1 load in 8 or 16 misses), where
    // those are clearly apart.
    let (cold_p50, cold_p99) = if sorted.is_empty() {
        (0.0, 0.0)
    } else {
        (quantile(&sorted, 0.5), quantile(&sorted, 0.99))
    };
    let fetch_granularity = (cold_p99 > 1.2 * cold_p50 + 8.0)
        .then(|| super::line_from_misses_above(&cold_latencies, (cold_p50 + cold_p99) / 2.0))
        .and_then(Result::ok)
        .map(|line| line.bytes);
    // 2. Capacities: whole-pass means of SM 0 alone, log-spaced sizes.
    let mut sizes = Vec::new();
    let mut size = (l2 / 32).max(u64::from(line) * 64);
    while size <= 2 * l2 {
        sizes.push(size / u64::from(line) * u64::from(line));
        size = (size as f64 * 2f64.powf(1.0 / 3.0)) as u64;
    }
    let mut points = Vec::with_capacity(sizes.len());
    for &bytes in &sizes {
        points.push(SizeSamples {
            bytes,
            values: vec![coarse_mean(backend, bytes, gpu_time)?],
            smids: vec![SWEEP_SM],
        });
    }
    let means: Vec<f64> = points.iter().map(|p| p.values[0]).collect();
    let segmentation = super::analysis::analysing(|| {
        let noise = estimate_noise_variance(&means)?.max(1e-6);
        let penalty = Penalty::Bic.per_change_point(means.len(), 1, noise)?;
        pelt(
            &L2Cost::from_series(&means)?,
            penalty,
            SearchOptions::new(2, 1),
        )
    })
    .map_err(wrong("L2 sweep"))?;
    // Rises: change points where the next segment's mean is at least 5 % higher than the
    // one before. PELT's segments are at least two sizes long, so a one-size step between
    // two plateaus can shift a change point by one: each rise is placed at the first size
    // that is 5 % above the plateau before it.
    let ends = &segmentation.segment_ends;
    let mean = |a: usize, b: usize| means[a..b].iter().sum::<f64>() / (b - a) as f64;
    let mut rises = Vec::new();
    let mut start = 0;
    for window in ends.windows(2) {
        let (end, next_end) = (window[0], window[1]);
        let plateau = mean(start, end);
        if mean(end, next_end) > 1.05 * plateau {
            let first = (start + 1..next_end)
                .find(|&i| means[i] > 1.05 * plateau)
                .unwrap_or(end);
            rises.push(first);
        }
        start = end;
    }
    let total_seen = rises.last().map(|&i| sizes[i - 1]);
    // A rise clearly inside the L2 (below 3/4 of it) is the near partition's capacity;
    // refine it with eight sizes between the last size on the plateau and the first above.
    let near_rise = match rises
        .first()
        .copied()
        .filter(|&i| sizes[i] < l2 * 3 / 4 && rises.len() > 1)
    {
        Some(i) => {
            let plateau = mean(0, i);
            last_fitting(sizes[i - 1], sizes[i], 9, |bytes| {
                Ok(Some(
                    coarse_mean(backend, bytes, gpu_time)? <= 1.05 * plateau,
                ))
            })?
        }
        None => None,
    };
    // One level at a quarter of the L2, but a rise inside it: the near partition held
    // copies of far lines until it filled. Past that rise the far-homed lines come back at
    // the far latency: split the levels again there.
    let mut far = far;
    let mut near_share = near_share;
    let mut keeps_copies = None;
    if let (None, Some(near_bytes)) = (far, near_rise) {
        let bytes = ((near_bytes + l2) / 2) / u64::from(line) * u64::from(line);
        let latencies = fine_cg(backend, ChainSpec::new(bytes, line)?, samples, gpu_time)?;
        let (_, far_there, share_there, _) = split_levels(&latencies, overhead)?;
        keeps_copies = Some(far_there.is_some());
        if far_there.is_some() {
            far = far_there;
            near_share = share_there;
        }
    } else if far.is_some() {
        keeps_copies = Some(false);
    }
    // The hit/miss threshold of the line and sector probes. Once the fetch granularity is
    // known, the cold chase's misses are exactly its loads at the start of a fetch unit
    // and its hits the others: see `hit_miss_threshold`. The far level joins the hits
    // (with copies in the near partition the cold chase's hits are all near) unless it is
    // nearly as slow as the misses (then it was memory, mistaken for a level). Without a
    // fetch granularity, 1.25 × the median + 4 cycles, or halfway to the 99th percentile
    // where that is lower.
    let fallback = (1.25 * cold_p50 + 4.0).min((cold_p50 + cold_p99) / 2.0);
    let far_raw = far.map(|f| f.p50.0 + overhead);
    let threshold = fetch_granularity
        .and_then(|g| hit_miss_threshold(&cold_latencies, (g / 4) as usize, far_raw))
        .unwrap_or(fallback);

    // 3. The line, by a sparse eviction from an array of 85 % of the capacity one SM's
    // accesses get: the refined near capacity where the sweep rose inside the L2, else the
    // last size before the first rise; a re-timed load is a miss above `threshold`.
    let capacity = near_rise.or_else(|| rises.first().map(|&i| sizes[i - 1]));
    let line = match (fetch_granularity, capacity) {
        (Some(granularity), Some(capacity)) => {
            l2_line(backend, capacity, granularity, threshold, gpu_time)?
        }
        (None, _) => Err("no fetch granularity to space the nodes by".into()),
        (_, None) => Err("no rise in the size sweep to size the array by".into()),
    };
    // 4. Two SMs at once, where one SM's capacity is well inside the L2: does another SM's
    // array share its budget, and how much can two that do not hold? With a sharing and a
    // separate partner, the pair capacity decides whether the near partition keeps copies
    // (it overrides the latency test: the two latency levels need not be the halves).
    let pairs = match near_rise {
        Some(near_bytes) => l2_pairs(backend, near_bytes, mean(0, 1), gpu_time)?,
        None => Err("no rise inside the L2: one SM already gets all of it".into()),
    };
    // A separate pair decides by capacity (it overrides the latency test: on the H200 that
    // says "no copies" while the pair holds well under the near capacity). A pair whose
    // capacity stayed a bound (its launches stopped starting together) leaves it open.
    if let (Ok(found), Some(near_bytes)) = (&pairs, near_rise) {
        if let Some(held) = found.separate_capacity {
            keeps_copies = found
                .separate_capacity_exact
                .then_some(held < near_bytes / 100 * 85);
        }
    }

    // 5. The sector, by partial writes, each node judged against its own hit and miss.
    let largest = match &line {
        Ok(line) => u32::try_from(line.bytes).unwrap_or(256).min(4096),
        Err(_) => 256,
    };
    let sector = l2_sector(backend, largest, gpu_time)?;
    let near_capacity = match (near_rise, far.is_some()) {
        (Some(bytes), _) => Some((bytes, true)),
        // Two levels but no rise inside the L2: two equal partitions, the only split the
        // two levels determine (the share of near lines varies from run to run).
        (None, true) => Some((l2 / 2, false)),
        (None, false) => None,
    };
    // The far side: measured from an SM of the other partition where the pair test found
    // one, else the rest of the L2 the API reports.
    let far_capacity = match (&pairs, near_capacity, far.is_some()) {
        (
            Ok(L2Pairs {
                far_capacity: Some(bytes),
                ..
            }),
            _,
            _,
        ) => Some((*bytes, true)),
        (_, Some((near_bytes, _)), true) => Some((l2.saturating_sub(near_bytes), false)),
        _ => None,
    };
    Ok(L2Findings {
        near,
        far,
        near_share,
        separation,
        near_capacity,
        far_capacity,
        total_seen,
        keeps_copies,
        fetch_granularity,
        line,
        sector,
        pairs,
        curve: RawCurve {
            name: "l2-size".into(),
            change_index: rises.first().copied(),
            points,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_levels_are_split_and_one_level_is_not() {
        let mut two: Vec<u32> = (0..300).map(|i| 220 + (i % 5)).collect();
        two.extend((0..300).map(|i| 300 + (i % 7)));
        let (near, far, share, separation) = split_levels(&two, 4.0).unwrap();
        let far = far.expect("two levels");
        assert!((near.p50.0 - 218.0).abs() < 3.0, "{near:?}");
        assert!((far.p50.0 - 299.0).abs() < 4.0, "{far:?}");
        assert!((share - 0.5).abs() < 0.01);
        assert!(separation > 3.0);
        // A unimodal normal spread about as wide as the two levels' gap.
        use rand::{rngs::Xoshiro256PlusPlus, SeedableRng};
        use rand_distr::{Distribution, Normal};
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let normal = Normal::new(280.0f64, 12.0).unwrap();
        let one: Vec<u32> = (0..600)
            .map(|_| normal.sample(&mut rng).round() as u32)
            .collect();
        let (all, far, share, _) = split_levels(&one, 4.0).unwrap();
        assert!(far.is_none());
        assert_eq!(share, 1.0);
        assert_eq!(all.samples, 600);
    }

    #[test]
    fn the_line_is_the_largest_unit_runs_align_to() {
        // Absent 128-byte lines at 64-byte nodes: runs of 2 and 4 at even starts.
        let runs = [(0, 2), (4, 4), (10, 2), (14, 2), (20, 6)];
        assert_eq!(aligned_unit(&runs), (2, 1.0));
        // Four-node lines: every run starts and ends on a multiple of 4.
        let runs = [(0, 4), (8, 8), (20, 4), (28, 4)];
        assert_eq!(aligned_unit(&runs).0, 4);
        // One stray slow load in ten runs is tolerated; two in five are not.
        let mut runs: Vec<(usize, usize)> = (0..9).map(|i| (4 * i, 2)).collect();
        runs.push((41, 1));
        assert_eq!(aligned_unit(&runs), (2, 0.9));
        let runs = [(0, 2), (4, 2), (8, 2), (13, 1), (15, 1)];
        assert_eq!(aligned_unit(&runs).0, 1);
    }

    #[test]
    fn the_threshold_lies_between_the_slowest_hit_and_the_fastest_miss() {
        // One miss (600) per 16 loads; hits at a near (260) and a far (300) level.
        let cold: Vec<u32> = (0..256)
            .map(|k| match k % 16 {
                0 => 600 + (k % 7),
                k if k % 2 == 0 => 260,
                _ => 300,
            })
            .collect();
        assert_eq!(hit_miss_threshold(&cold, 16, None), Some(379.0));
        // Memory only a little slower than the far level: halfway between them.
        let close: Vec<u32> = cold
            .iter()
            .map(|&v| if v >= 600 { 340 } else { v })
            .collect();
        assert_eq!(hit_miss_threshold(&close, 16, None), Some(320.0));
        // A far level the cold chase did not see (near copies) counts as a hit level; one
        // as slow as memory does not.
        assert_eq!(hit_miss_threshold(&cold, 16, Some(400.0)), Some(500.0));
        assert_eq!(hit_miss_threshold(&cold, 16, Some(590.0)), Some(379.0));
        // Spaced wrongly, the "misses" include hits: no threshold.
        assert_eq!(hit_miss_threshold(&cold, 8, None), None);
    }
}
