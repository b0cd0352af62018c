//! Running many array sizes at once: one chain per block, one block per SM.
//!
//! A size search needs, for every array size, a measure of how many loads miss. The
//! fine-grained kernel records only as many loads as fit its shared-memory buffer, a small
//! window of a large chain: on the H200 a window of 768 loads out of 7,750 nodes saw the
//! few sets that overflow first in some sizes and not in others, so the curve flickered.
//! The search therefore times *whole passes* with the coarse kernel — every node of the
//! chain, no shared memory taken from the L1 — and repeats each size on several SMs at
//! once. Each size's samples are the per-SM mean latencies, which the geometric mapping
//! and the Kolmogorov–Smirnov test then compare.

use std::time::Duration;

use crate::{
    backend::{Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath},
    error::RunnerError,
};

/// The samples of one array size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeSamples {
    /// Array size in bytes.
    pub bytes: u64,
    /// Mean cycles per load of each replica (one per SM).
    pub values: Vec<f64>,
    /// The SM of each replica.
    pub smids: Vec<u32>,
}

/// Runs whole-pass chases over several array sizes of one load path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeProbe {
    /// The load path.
    pub path: LoadPath,
    /// Node distance in bytes.
    pub stride: u32,
    /// Shared-memory carveout for every launch.
    pub carveout: Carveout,
    /// Untimed passes over each chain before timing.
    pub warmup_passes: u32,
    /// Timed passes over each chain.
    pub timed_passes: u32,
    /// SMs each size runs on at once.
    pub replicas: u32,
    /// Dynamic shared memory reserved per block (to measure the L1 at a carveout).
    pub reserve_shared_bytes: u32,
}

/// Bytes the constant path can hold in all (the module's 64 KiB `.const` array).
pub const CONSTANT_BANK_BYTES: u64 = 64 * 1024;

impl SizeProbe {
    /// `bytes` rounded down to whole node strides, at least one: the sizes a search tries.
    pub(crate) fn whole_strides(&self, bytes: u64) -> u64 {
        let stride = u64::from(self.stride);
        (bytes / stride).max(1) * stride
    }

    /// Replicas a launch over sizes up to `largest` bytes can run: as many as asked, at
    /// most the SMs, and on the constant path at most what the 64 KiB bank holds.
    fn replicas_for(&self, sm_count: u32, largest: u64) -> u32 {
        let mut replicas = self.replicas.clamp(1, sm_count);
        if self.path == LoadPath::Constant {
            let slot = largest.div_ceil(128).max(1) * 128;
            replicas = replicas.min(u32::try_from(CONSTANT_BANK_BYTES / slot).unwrap_or(u32::MAX));
        }
        replicas.max(1)
    }

    /// Whether `count` sizes up to `largest` bytes fit one launch with `replicas` each.
    fn fits(&self, sm_count: u32, count: usize, largest: u64, replicas: u32) -> bool {
        let blocks = count as u64 * u64::from(replicas);
        let slot = largest.div_ceil(128).max(1) * 128;
        blocks <= u64::from(sm_count)
            && (self.path != LoadPath::Constant || blocks * slot <= CONSTANT_BANK_BYTES)
    }

    /// Runs every size of `sizes`. Replicas that shared an SM with another block of the
    /// same launch are dropped (their private cache was shared); a size left without any
    /// replica is run again alone.
    pub fn run<B: Backend + ?Sized>(
        &self,
        backend: &mut B,
        sizes: &[u64],
        gpu_time: &mut Duration,
    ) -> Result<Vec<SizeSamples>, RunnerError> {
        let sm_count = backend.device().sm_count.max(1);
        let mut out: Vec<SizeSamples> = sizes
            .iter()
            .map(|&bytes| SizeSamples {
                bytes,
                values: Vec::new(),
                smids: Vec::new(),
            })
            .collect();
        let mut start = 0;
        while start < sizes.len() {
            // Grow the batch while every size keeps its replicas.
            let mut end = start + 1;
            let mut largest = sizes[start];
            let replicas = self.replicas_for(sm_count, largest);
            while end < sizes.len() {
                let candidate = largest.max(sizes[end]);
                let r = self.replicas_for(sm_count, candidate);
                if r < replicas || !self.fits(sm_count, end - start + 1, candidate, replicas) {
                    break;
                }
                largest = candidate;
                end += 1;
            }
            let batch: Vec<usize> = (start..end).collect();
            self.launch(backend, sizes, &batch, replicas, &mut out, gpu_time)?;
            start = end;
        }
        for i in 0..sizes.len() {
            if out[i].values.is_empty() {
                log::debug!(
                    "{}: size {} B had no SM to itself; running it alone",
                    self.path,
                    sizes[i]
                );
                self.launch(backend, sizes, &[i], 1, &mut out, gpu_time)?;
            }
        }
        Ok(out)
    }

    fn launch<B: Backend + ?Sized>(
        &self,
        backend: &mut B,
        sizes: &[u64],
        batch: &[usize],
        replicas: u32,
        out: &mut [SizeSamples],
        gpu_time: &mut Duration,
    ) -> Result<(), RunnerError> {
        let mut owners = Vec::new();
        let mut chains = Vec::new();
        for &i in batch {
            for _ in 0..replicas {
                owners.push(i);
                chains.push(ChainSpec::new(sizes[i], self.stride)?);
            }
        }
        let max_nodes = chains.iter().map(ChainSpec::nodes).max().unwrap_or(1);
        // At least this many timed loads, so that a small chain's mean is not one
        // outlier's hostage.
        const MIN_TIMED_LOADS: u64 = 4096;
        let clamp = |passes: u32| {
            u32::try_from(max_nodes * u64::from(passes)).map_err(|_| {
                RunnerError::InvalidRequest(format!(
                    "{} passes over {max_nodes} nodes overflow the 32-bit step count",
                    passes
                ))
            })
        };
        // Every chain of the launch gets the same step counts; a shorter chain simply
        // wraps around more often, which keeps its cache just as full.
        let request = ChaseRequest {
            path: self.path,
            mode: ChaseMode::Coarse,
            chains,
            warmup_steps: clamp(self.warmup_passes)?,
            steps: clamp(self.timed_passes.max(1))?.max(MIN_TIMED_LOADS as u32),
            carveout: self.carveout,
            flush_l2: false,
            reserve_shared_bytes: self.reserve_shared_bytes,
            written_bytes: 0,
        };
        let run = backend.chase(&request)?;
        *gpu_time += run.gpu_time;
        let mut per_sm = std::collections::HashMap::new();
        for block in &run.blocks {
            *per_sm.entry(block.smid).or_insert(0u32) += 1;
        }
        for (&i, block) in owners.iter().zip(&run.blocks) {
            if per_sm[&block.smid] > 1 {
                continue;
            }
            let cycles = block.total_cycles.ok_or_else(|| {
                RunnerError::WrongResult("a coarse chase reported no cycles".into())
            })?;
            out[i].values.push(cycles as f64 / f64::from(request.steps));
            out[i].smids.push(block.smid);
        }
        Ok(())
    }
}
