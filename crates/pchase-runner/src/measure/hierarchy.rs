//! Which logical caches share one physical cache (thesis 4.5) and how many copies of a
//! cache each SM has (thesis 4.6), both by the two-phase probe: one thread warms chain A,
//! another warms chain B, the first re-times A. Misses on A mean B evicted it.
//!
//! Every decision is statistical and repeated: a probe runs on several SMs at once (each
//! block a replica), against a baseline whose evicting chain is a single line, and three
//! launches must agree before an answer is given; otherwise the answer is "undecided".

use std::time::Duration;

use cpd::ks_2samp;

use crate::{
    backend::{Backend, Carveout, ChainSpec, LoadPath, Phase, TwoPhaseRequest},
    error::RunnerError,
};

use super::stats::{median, quantile};

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

/// Bytes per node of the probes' chains: one node per 32-byte sector.
const STRIDE: u32 = 32;

/// Three repetitions must agree.
const REPETITIONS: usize = 3;

/// A chain of about `bytes`, at least one node.
fn chain(bytes: u64) -> Result<ChainSpec, RunnerError> {
    let stride = u64::from(STRIDE);
    ChainSpec::new((bytes / stride).max(1) * stride, STRIDE)
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
fn run_probe<B: Backend>(
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

/// Whether warming `evict` (a chain of `evict_bytes` through `evict_path` by thread
/// `evict_thread`) evicts `fill_bytes` warmed through `fill_path` by thread 0.
///
/// The baseline is the same launch with a one-node evicting chain. A load is slow when it
/// exceeds the baseline's 99th percentile by max(4 cycles, 10 %); B evicted A when, in each
/// of three launches, the median block has at least 25 % more slow loads than the
/// baseline; B did not when every launch shows less than 5 % more. Anything in between, or
/// launches that disagree, is [`RunnerError::WrongResult`] ("undecided").
pub fn evicts<B: Backend>(
    backend: &mut B,
    fill: (LoadPath, u64),
    evict: (LoadPath, u64, u32),
    gpu_time: &mut Duration,
) -> Result<EvictionTest, RunnerError> {
    let a = chain(fill.1)?;
    // Time only the first pass over A after B: later passes would find A back in the cache
    // (A refills it), diluting the misses of a small chain.
    let shape = ProbeShape {
        blocks: backend.device().sm_count.clamp(1, 8),
        timed_steps: nodes(a).min(512),
    };
    let b = chain(evict.1)?;
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
        chain: chain(u64::from(STRIDE))?,
        steps: 1,
        ..evict_phase
    };
    let mut verdicts = Vec::with_capacity(REPETITIONS);
    let mut shares = Vec::new();
    let mut baseline_shares = Vec::new();
    let mut last_test = None;
    for _ in 0..REPETITIONS {
        let baseline = run_probe(backend, shape, fill_phase, tiny, gpu_time)?;
        let probe = run_probe(backend, shape, fill_phase, evict_phase, gpu_time)?;
        let mut pooled: Vec<f64> = baseline.iter().flatten().map(|&v| f64::from(v)).collect();
        pooled.sort_by(f64::total_cmp);
        let p99 = quantile(&pooled, 0.99);
        let threshold = p99 + (0.1 * quantile(&pooled, 0.5)).max(4.0);
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
            ks_2samp(&pooled, &probe_pooled)
                .map_err(|e| RunnerError::WrongResult(format!("KS test: {e}")))?,
        );
        shares.push(probe_share);
        baseline_shares.push(base_share);
        let excess = probe_share - base_share;
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
            "undecided: slow-load shares {shares:.2?} against baselines {baseline_shares:.2?} in {REPETITIONS} launches"
        ))),
    }
}

/// The number of copies of a path's cache per SM: thread 0 warms a chain of 3/4 of the
/// cache, a thread of warp k (k = 1, 2, …, `max_warps` − 1) warms another; the first k
/// whose chain evicts thread 0's is the number of copies (warps map to copies in turn).
/// `Ok(None)` when no warp up to `max_warps` − 1 shares thread 0's copy.
pub fn copies_per_sm<B: Backend>(
    backend: &mut B,
    path: LoadPath,
    cache_bytes: u64,
    max_warps: u32,
    gpu_time: &mut Duration,
) -> Result<Option<u32>, RunnerError> {
    let bytes = cache_bytes * 3 / 4;
    for warp in 1..max_warps {
        let test = evicts(backend, (path, bytes), (path, bytes, 32 * warp), gpu_time)?;
        if test.evicted {
            return Ok(Some(warp));
        }
    }
    Ok(None)
}
