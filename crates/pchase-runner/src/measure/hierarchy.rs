//! Which logical caches share one physical cache (thesis 4.5) and how many copies of a
//! cache each SM has (thesis 4.6), both by the two-phase probe: one thread warms chain A,
//! another warms chain B, the first re-times A. Misses on A mean B evicted it.
//!
//! Every decision is statistical and repeated: a probe runs on several SMs at once (each
//! block a replica), against a baseline whose evicting chain is a single line, and three
//! launches must agree before an answer is given (two, where both are twice as clear as
//! the verdict asks); otherwise the answer is "undecided".

use std::time::Duration;

use cpd::ks_2samp;

use crate::{
    backend::{Backend, Carveout, ChainSpec, LoadPath, Phase, TwoPhaseRequest},
    error::RunnerError,
};

use super::{
    stats::{median, quantile, slow_runs},
    LineFinding,
};

/// How a two-phase probe came out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EvictionTest {
    /// Whether chain B evicted chain A (in every repetition).
    pub evicted: bool,
    /// Median share of A's re-timed loads that were slow, over blocks and repetitions.
    pub slow_share: f64,
    /// The baseline's share of slow loads.
    pub baseline_share: f64,
    /// Two-sample KS statistic between the probe's and the baseline's pooled latencies
    /// (last repetition).
    pub statistic: f64,
    /// Its p-value.
    pub p_value: f64,
}

/// At most three repetitions, which must agree.
const REPETITIONS: usize = 3;

/// The excess of slow loads over the baseline beyond which, and below which, two
/// repetitions that agree decide without the third: twice as clear as the verdicts ask
/// (evicted from 25 %, not evicted under 5 %). Caches that share a store evict most of each
/// other's chain (three quarters of the cache each), caches that do not evict nothing, so
/// the third launch of a pair (a sixth of the sharing and copies steps' GPU time) repeated
/// what the first two had said.
const CLEAR: (f64, f64) = (0.5, 0.025);

/// A chain of about `bytes` with one node per `stride` bytes (a cache's fetch unit, so
/// that evicting a line makes every node in it miss), at least one node.
pub fn chain(bytes: u64, stride: u32) -> Result<ChainSpec, RunnerError> {
    let step = u64::from(stride);
    ChainSpec::new((bytes / step).max(1) * step, stride)
}

fn nodes(spec: ChainSpec) -> u32 {
    u32::try_from(spec.nodes()).unwrap_or(u32::MAX)
}

/// The probe's settings that are the same for every launch.
#[derive(Debug, Clone, Copy)]
struct ProbeShape {
    blocks: u32,
    timed_steps: u32,
}

/// Runs one two-phase launch and returns each block's re-timed latencies.
fn run_probe<B: Backend + ?Sized>(
    backend: &mut B,
    shape: ProbeShape,
    fill: Phase,
    evict: Phase,
    gpu_time: &mut Duration,
) -> Result<Vec<Vec<u32>>, RunnerError> {
    let threads = (fill.thread.max(evict.thread) + 1).div_ceil(32) * 32;
    let request = TwoPhaseRequest {
        fill,
        evict,
        timed_steps: shape.timed_steps,
        blocks: shape.blocks,
        threads,
        carveout: Carveout::Percent(0),
        flush_l2: false,
        block_fill: false,
    };
    let run = backend.two_phase(&request)?;
    *gpu_time += run.gpu_time;
    Ok(run.blocks.into_iter().map(|b| b.latencies).collect())
}

/// Share of `samples` above `threshold`.
fn slow_share(samples: &[u32], threshold: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples
        .iter()
        .filter(|&&v| f64::from(v) > threshold)
        .count() as f64
        / samples.len() as f64
}

/// The latency above which a re-timed load of A counts as slow, from the baseline's
/// sorted latencies: its 99th percentile plus max(4 cycles, 10 % of its median), but never
/// above a miss to the next level (1.5 × the median + 4 cycles, the rule of
/// [`super::line_from_misses`]).
///
/// The cap is for caches of low associativity: there the baseline's single
/// evicting node throws out A's line in its set, and in a direct-mapped or two-way set the
/// line A then reloads throws out the next, so 2–4 % of the baseline's loads are misses.
/// The 99th percentile is then a miss, nothing is slower than it plus 10 %, and every probe
/// read "not evicted": one physical copy was counted as "at least 8".
fn slow_threshold(baseline_sorted: &[f64]) -> f64 {
    let p50 = quantile(baseline_sorted, 0.5);
    let p99 = quantile(baseline_sorted, 0.99);
    (p99 + (0.1 * p50).max(4.0)).min(1.5 * p50 + 4.0)
}

/// Whether warming `evict` (a chain through a path, by a thread) evicts the chain `fill`
/// warmed through its path by thread 0.
///
/// The baseline is the same launch with a one-node evicting chain. A load is slow when it
/// exceeds the baseline's 99th percentile by max(4 cycles, 10 %), or 1.5 × its median + 4
/// cycles where that is lower (a miss); B evicted A when, in each
/// of three launches, the median block has at least 25 % more slow loads than the
/// baseline; B did not when every launch shows less than 5 % more. Anything in between, or
/// launches that disagree, is [`RunnerError::WrongResult`] ("undecided").
pub fn evicts<B: Backend + ?Sized>(
    backend: &mut B,
    fill: (LoadPath, ChainSpec),
    evict: (LoadPath, ChainSpec, u32),
    gpu_time: &mut Duration,
) -> Result<EvictionTest, RunnerError> {
    let a = fill.1;
    // Time only the first pass over A after B: later passes would find A back in the cache
    // (A refills it), diluting the misses of a small chain.
    let shape = ProbeShape {
        blocks: backend.device().sm_count.clamp(1, 8),
        timed_steps: nodes(a).min(512),
    };
    let b = evict.1;
    let fill_phase = Phase {
        path: fill.0,
        chain: a,
        thread: 0,
        steps: nodes(a),
    };
    let evict_phase = Phase {
        path: evict.0,
        chain: b,
        thread: evict.2,
        steps: nodes(b),
    };
    let tiny = Phase {
        chain: chain(u64::from(b.stride), b.stride)?,
        steps: 1,
        ..evict_phase
    };
    let mut verdicts = Vec::with_capacity(REPETITIONS);
    let mut shares = Vec::new();
    let mut baseline_shares = Vec::new();
    let mut last_test = None;
    let mut clear = 0;
    for _ in 0..REPETITIONS {
        if clear == 2 && verdicts.iter().all(|v| *v == verdicts[0]) {
            break;
        }
        let baseline = run_probe(backend, shape, fill_phase, tiny, gpu_time)?;
        let probe = run_probe(backend, shape, fill_phase, evict_phase, gpu_time)?;
        let mut pooled: Vec<f64> = baseline.iter().flatten().map(|&v| f64::from(v)).collect();
        pooled.sort_by(f64::total_cmp);
        let threshold = slow_threshold(&pooled);
        let base_share = median(
            &baseline
                .iter()
                .map(|s| slow_share(s, threshold))
                .collect::<Vec<_>>(),
        );
        let probe_share = median(
            &probe
                .iter()
                .map(|s| slow_share(s, threshold))
                .collect::<Vec<_>>(),
        );
        let probe_pooled: Vec<f64> = probe.iter().flatten().map(|&v| f64::from(v)).collect();
        last_test = Some(
            super::analysis::analysing(|| ks_2samp(&pooled, &probe_pooled))
                .map_err(|e| RunnerError::WrongResult(format!("KS test: {e}")))?,
        );
        shares.push(probe_share);
        baseline_shares.push(base_share);
        let excess = probe_share - base_share;
        clear += usize::from(excess >= CLEAR.0 || excess < CLEAR.1);
        verdicts.push(if excess >= 0.25 {
            Some(true)
        } else if excess < 0.05 {
            Some(false)
        } else {
            None
        });
    }
    let test = last_test.expect("at least one repetition");
    let first = verdicts[0];
    match first {
        Some(evicted) if verdicts.iter().all(|v| *v == first) => Ok(EvictionTest {
            evicted,
            slow_share: median(&shares),
            baseline_share: median(&baseline_shares),
            statistic: test.statistic,
            p_value: test.p_value,
        }),
        _ => Err(RunnerError::WrongResult(format!(
            "undecided: slow-load shares {shares:.2?} against baselines {baseline_shares:.2?} in {} launches",
            verdicts.len()
        ))),
    }
}

/// The number of copies of a path's cache per SM: thread 0 warms a chain of 3/4 of the
/// cache, a thread of warp k (k = 1, 2, …, `max_warps` − 1) warms another; the first k
/// whose chain evicts thread 0's is the number of copies (warps map to copies in turn).
/// `Ok(None)` when no warp up to `max_warps` − 1 shares thread 0's copy.
pub fn copies_per_sm<B: Backend + ?Sized>(
    backend: &mut B,
    path: LoadPath,
    cache_bytes: u64,
    granularity: u32,
    max_warps: u32,
    gpu_time: &mut Duration,
) -> Result<Option<u32>, RunnerError> {
    let spec = chain(cache_bytes * 3 / 4, granularity)?;
    for warp in 1..max_warps {
        let test = evicts(backend, (path, spec), (path, spec, 32 * warp), gpu_time)?;
        if test.evicted {
            return Ok(Some(warp));
        }
    }
    Ok(None)
}

/// The allocation line of a cache: the bytes one tag covers.
///
/// Thread 0 warms chain A, one node per fetch unit (`granularity`) over the measured
/// capacity (the largest array that still hits), so that A fills every way of the sets and
/// every sector of its lines. A second chain then evicts lines of A: the least recently
/// used in each set it touches, which are among A's first lines. Re-timing A from its
/// start, each evicted tag shows as a run of consecutive misses, one per fetch unit it held:
/// the most common run length times the fetch granularity is the line. This reads tags,
/// not capacity, so it works whether sets are indexed by address bits or by a hash (a
/// capacity-at-a-stride method cannot tell a line from a sector in a cache indexed by
/// address bits).
///
/// The evicting chain has up to 32 nodes 33 × 1 KiB apart, which fall into sets far apart
/// and so evict lines of A that are far apart too: several separate runs, some within the
/// loads the timing buffer holds. A small cache gets fewer evicting nodes (one per 32 of
/// A's nodes), so that most of A survives to show the runs against.
pub fn allocation_line<B: Backend + ?Sized>(
    backend: &mut B,
    path: LoadPath,
    cache_bytes: u64,
    granularity: u64,
    gpu_time: &mut Duration,
) -> Result<LineFinding, RunnerError> {
    let unit = u32::try_from(granularity)
        .ok()
        .filter(|g| *g >= 4 && g % 4 == 0)
        .ok_or_else(|| RunnerError::InvalidRequest(format!("granularity {granularity} B")))?;
    let a = ChainSpec::new(
        (cache_bytes / u64::from(unit)).max(2) * u64::from(unit),
        unit,
    )?;
    // On the constant path both chains share the 64 KiB bank: one block, and nodes
    // 37 × 256 B apart (lines up to 256 B), as many as fit beside A. 37 lines, not 33:
    // in a cache of 16 or 32 sets (the kepler L1.5) 33 lines is one set further, so the
    // evicted lines were neighbours in A and their runs of misses merged (768 B for a
    // 256-byte line); 37 is 5 sets further in any cache of 8 or more sets.
    let (blocks, spacing, room) = if path == LoadPath::Constant {
        let spacing = 37 * 256u64;
        let room = super::probe::CONSTANT_BANK_BYTES.saturating_sub(a.bytes + 256) / spacing;
        (1, spacing, room.clamp(1, 32))
    } else {
        (backend.device().sm_count.clamp(1, 8), 33 * 1024, 32)
    };
    let shape = ProbeShape {
        blocks,
        timed_steps: nodes(a).min(512),
    };
    let fill = Phase {
        path,
        chain: a,
        thread: 0,
        steps: nodes(a),
    };
    let evicting = room.min((a.nodes() / 32).max(1));
    let b = ChainSpec::new(
        evicting * spacing,
        u32::try_from(spacing).unwrap_or(u32::MAX),
    )?;
    let evict = Phase {
        path,
        chain: b,
        thread: 0,
        steps: nodes(b),
    };
    let blocks = run_probe(backend, shape, fill, evict, gpu_time)?;
    if let Some(line) = runs_of_misses(&blocks, granularity) {
        return Ok(line);
    }
    Err(RunnerError::WrongResult(
        "no evicted line seen in the re-timed pass".into(),
    ))
}

/// The most common length of runs of consecutive misses (loads slower than 1.5 × the
/// median + 4 cycles; a run cut off by the end of the window left out), times
/// `granularity`; `None` without runs.
fn runs_of_misses(blocks: &[Vec<u32>], granularity: u64) -> Option<LineFinding> {
    let mut counts = std::collections::BTreeMap::new();
    let mut misses = 0;
    for latencies in blocks {
        let mut sorted: Vec<f64> = latencies.iter().map(|&v| f64::from(v)).collect();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            continue;
        }
        let threshold = 1.5 * quantile(&sorted, 0.5) + 4.0;
        for (_, run) in slow_runs(latencies, threshold) {
            misses += run;
            *counts.entry(run).or_insert(0usize) += 1;
        }
    }
    let total: usize = counts.values().sum();
    let (&run, &count) = counts
        .iter()
        .max_by_key(|(run, count)| (**count, std::cmp::Reverse(**run)))?;
    Some(LineFinding {
        bytes: granularity * run as u64,
        agreement: count as f64 / total as f64,
        misses,
    })
}
