//! The fine-grained building blocks the benchmarks share: per-load samples of one chain,
//! their latency distribution, whether a path is cached, and the spacing of misses.

use std::time::Duration;

use super::probe::CONSTANT_BANK_BYTES;
use super::{stats, LatencySummary, LineFinding, Session};
use crate::{
    backend::{Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath},
    error::RunnerError,
};

impl Session<'_> {
    /// Fine-grained samples of one chain, warmed up by one pass.
    pub(crate) fn fine_samples(
        &mut self,
        path: LoadPath,
        chain: ChainSpec,
        steps: u32,
        carveout: Carveout,
        gpu: &mut Duration,
    ) -> Result<Vec<u32>, RunnerError> {
        let warmup = u32::try_from(chain.nodes()).unwrap_or(u32::MAX);
        self.fine_samples_with(path, chain, steps, carveout, warmup, false, gpu)
    }

    /// Fine-grained samples of one chain with an explicit warm-up and L2 flush.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fine_samples_with(
        &mut self,
        path: LoadPath,
        chain: ChainSpec,
        steps: u32,
        carveout: Carveout,
        warmup_steps: u32,
        flush_l2: bool,
        gpu: &mut Duration,
    ) -> Result<Vec<u32>, RunnerError> {
        let request = ChaseRequest {
            path,
            mode: ChaseMode::Fine,
            chains: vec![chain],
            warmup_steps,
            steps,
            carveout,
            flush_l2,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        let run = self.backend.chase(&request)?;
        *gpu += run.gpu_time;
        let block = run
            .blocks
            .into_iter()
            .next()
            .ok_or_else(|| RunnerError::WrongResult("a chase returned no block".into()))?;
        log::trace!(
            "{path:?} chase of {} B ran on SM {}",
            chain.bytes,
            block.smid
        );
        self.results.chase_sms.insert(block.smid);
        Ok(block.latencies)
    }

    pub(crate) fn hit_latency(
        &mut self,
        path: LoadPath,
        bytes: u64,
        stride: u32,
        gpu: &mut Duration,
    ) -> Result<LatencySummary, RunnerError> {
        let chain = ChainSpec::new(bytes, stride)?;
        let samples =
            self.fine_samples(path, chain, self.options.samples, Carveout::Percent(0), gpu)?;
        self.latency_summary(&samples)
    }

    /// The latency distribution of fine-grained samples, the clock overhead subtracted.
    pub(crate) fn latency_summary(&self, samples: &[u32]) -> Result<LatencySummary, RunnerError> {
        let overhead = f64::from(self.results.clock_overhead.unwrap_or(0));
        let cycles: Vec<f64> = samples
            .iter()
            .map(|&v| (f64::from(v) - overhead).max(0.0))
            .collect();
        LatencySummary::from_samples(&cycles)
            .ok_or_else(|| RunnerError::WrongResult("no latency samples".into()))
    }
    /// Whether loads through `path` are clearly faster than L2 hits (`.cg`) on a small
    /// array: the same decision as the global-caching test, for any path.
    pub(crate) fn path_is_cached(
        &mut self,
        path: LoadPath,
        bytes: u64,
        stride: u32,
        gpu: &mut Duration,
    ) -> Result<bool, RunnerError> {
        let chain = ChainSpec::new(bytes, stride)?;
        let quantile = |mut v: Vec<u32>, q: f64| {
            v.sort_unstable();
            f64::from(v[((v.len() - 1) as f64 * q) as usize])
        };
        let path_median = quantile(
            self.fine_samples(path, chain, 256, Carveout::Percent(0), gpu)?,
            0.5,
        );
        // The fastest L2 hits: with near and far L2 partitions, loads that miss every SM
        // cache take the near latency or more, so they are never clearly below this.
        // 256 lines of 64 KiB: both partitions are among them whatever the address hash,
        // and no L2 is that small.
        let l2_chain = ChainSpec::new(64 * 1024, 256)?;
        let l2_fast = quantile(
            self.fine_samples(LoadPath::GlobalCg, l2_chain, 512, Carveout::Percent(0), gpu)?,
            0.05,
        );
        Ok(l2_fast - path_median > (0.05 * l2_fast).max(4.0))
    }

    pub(crate) fn global_caching(
        &mut self,
        gpu: &mut Duration,
    ) -> Result<(bool, f64, f64), RunnerError> {
        let chain = ChainSpec::new(2048, 32)?;
        let median = |mut v: Vec<u32>| {
            v.sort_unstable();
            f64::from(v[v.len() / 2])
        };
        let ca =
            median(self.fine_samples(LoadPath::GlobalCa, chain, 256, Carveout::Percent(0), gpu)?);
        let cg =
            median(self.fine_samples(LoadPath::GlobalCg, chain, 256, Carveout::Percent(0), gpu)?);
        // Without global caching in L1, `.ca` and `.cg` both go to the L2 and their
        // medians agree to within jitter; any L1 in the `.ca` path makes it clearly
        // faster (several times, on every NVIDIA GPU the thesis measured).
        Ok((cg - ca > (0.05 * cg).max(4.0), ca, cg))
    }

    /// The spacing of misses in a 4-byte-stride chase over twice the cache, timed from its
    /// first load: every line it reads is one the launch has not read before, so the first
    /// load of each fetch unit misses, as after a warm-up pass over twice the cache (which
    /// evicts each line before it comes round again), without that pass: on an H200 the
    /// steps with it took 4.6, 8.0 and 4.6 ms of GPU time (L1, texture, read-only), nearly
    /// all of it the pass.
    pub(crate) fn line_size(
        &mut self,
        path: LoadPath,
        cache_bytes: u64,
        gpu: &mut Duration,
    ) -> Result<LineFinding, RunnerError> {
        let mut bytes = (2 * cache_bytes).div_ceil(4) * 4;
        if path == LoadPath::Constant {
            bytes = bytes.min(CONSTANT_BANK_BYTES);
        }
        let chain = ChainSpec::new(bytes, 4)?;
        let steps = self.options.samples.max(512);
        let samples =
            self.fine_samples_with(path, chain, steps, Carveout::Percent(0), 0, false, gpu)?;
        line_from_misses(&samples)
    }
}

/// The most common distance, in bytes, between slow loads of a 4-byte-stride chase.
pub fn line_from_misses(samples: &[u32]) -> Result<LineFinding, RunnerError> {
    let mut sorted: Vec<f64> = samples.iter().map(|&v| f64::from(v)).collect();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return Err(RunnerError::WrongResult(
            "no samples for the line size".into(),
        ));
    }
    let p50 = stats::quantile(&sorted, 0.5);
    // A miss to the next level costs at least half again a hit on every GPU; counting
    // every such load (next-level hits and deeper misses alike) makes the spacing that of
    // this cache's fetches, not of a deeper level's lines.
    let threshold = 1.5 * p50 + 4.0;
    let p99 = stats::quantile(&sorted, 0.99);
    if p99 <= threshold {
        return Err(RunnerError::WrongResult(format!(
            "no misses visible (median {p50} cycles, p99 {p99} cycles)"
        )));
    }
    line_from_misses_above(samples, threshold)
}

/// The most common distance, in bytes, between loads of a 4-byte-stride chase slower than
/// `threshold` cycles.
pub fn line_from_misses_above(samples: &[u32], threshold: f64) -> Result<LineFinding, RunnerError> {
    let misses: Vec<usize> = samples
        .iter()
        .enumerate()
        .filter(|(_, &v)| f64::from(v) > threshold)
        .map(|(i, _)| i)
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for pair in misses.windows(2) {
        *counts.entry(pair[1] - pair[0]).or_insert(0usize) += 1;
    }
    let total: usize = counts.values().sum();
    let (&spacing, &count) = counts
        .iter()
        .max_by_key(|(spacing, count)| (**count, std::cmp::Reverse(**spacing)))
        .ok_or_else(|| RunnerError::WrongResult("fewer than two misses".into()))?;
    Ok(LineFinding {
        bytes: 4 * spacing as u64,
        agreement: count as f64 / total as f64,
        misses: misses.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_from_regular_misses() {
        // A miss every 8 loads of 4 bytes: 32-byte sectors.
        let samples: Vec<u32> = (0..512)
            .map(|i| if i % 8 == 0 { 300 } else { 35 })
            .collect();
        let line = line_from_misses(&samples).unwrap();
        assert_eq!(line.bytes, 32);
        assert_eq!(line.agreement, 1.0);
        assert_eq!(line.misses, 64);
    }

    #[test]
    fn no_misses_is_an_error() {
        let samples = vec![35u32; 512];
        assert!(line_from_misses(&samples).is_err());
    }
}
