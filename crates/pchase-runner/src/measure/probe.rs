//! Running many array sizes at once: one chain per block, one block per SM.

use std::time::Duration;

use crate::{
    backend::{Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath},
    error::RunnerError,
};

/// The fine-grained samples of one array size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeSamples {
    /// Array size in bytes.
    pub bytes: u64,
    /// Per-load latencies in cycles, in load order.
    pub latencies: Vec<u32>,
    /// The SM the block ran on.
    pub smid: u32,
}

/// Runs fine-grained chases over several array sizes of one load path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeProbe {
    /// The load path.
    pub path: LoadPath,
    /// Node distance in bytes.
    pub stride: u32,
    /// Timed loads per size.
    pub steps: u32,
    /// Shared-memory carveout for every launch.
    pub carveout: Carveout,
    /// Whole passes over each chain before timing.
    pub warmup_passes: u32,
}

/// Bytes the constant path can hold in all (the module's 64 KiB `.const` array).
pub const CONSTANT_BANK_BYTES: u64 = 64 * 1024;

impl SizeProbe {
    /// Runs every size of `sizes`, packing as many into one launch as the device has SMs
    /// (and, on the constant path, as fit the constant bank). Blocks that shared an SM
    /// with another block of the same launch are run again alone, so that no private
    /// cache is measured while another chase uses it.
    pub fn run<B: Backend>(
        &self,
        backend: &mut B,
        sizes: &[u64],
        gpu_time: &mut Duration,
    ) -> Result<Vec<SizeSamples>, RunnerError> {
        let sm_count = backend.device().sm_count.max(1) as usize;
        let mut out: Vec<Option<SizeSamples>> = vec![None; sizes.len()];
        let mut pending: Vec<usize> = (0..sizes.len()).collect();
        let mut alone = false;
        while !pending.is_empty() {
            let batch = self.next_batch(sizes, &pending, if alone { 1 } else { sm_count });
            pending.retain(|i| !batch.contains(i));
            let chains = batch
                .iter()
                .map(|&i| ChainSpec::new(sizes[i], self.stride))
                .collect::<Result<Vec<_>, _>>()?;
            let max_nodes = chains.iter().map(ChainSpec::nodes).max().unwrap_or(1);
            let warmup = (max_nodes * u64::from(self.warmup_passes)).min(u64::from(u32::MAX));
            let request = ChaseRequest {
                path: self.path,
                mode: ChaseMode::Fine,
                chains,
                warmup_steps: warmup as u32,
                steps: self.steps,
                carveout: self.carveout,
            };
            let run = backend.chase(&request)?;
            *gpu_time += run.gpu_time;
            let mut seen = std::collections::HashMap::new();
            for block in &run.blocks {
                *seen.entry(block.smid).or_insert(0u32) += 1;
            }
            for (&i, block) in batch.iter().zip(run.blocks) {
                if seen[&block.smid] > 1 && batch.len() > 1 {
                    log::debug!(
                        "{}: size {} B shared SM {} with another block; running it again alone",
                        self.path,
                        sizes[i],
                        block.smid
                    );
                    pending.push(i);
                    alone = true;
                    continue;
                }
                out[i] = Some(SizeSamples {
                    bytes: sizes[i],
                    latencies: block.latencies,
                    smid: block.smid,
                });
            }
        }
        Ok(out.into_iter().map(|s| s.expect("every size ran")).collect())
    }

    fn next_batch(&self, sizes: &[u64], pending: &[usize], max_blocks: usize) -> Vec<usize> {
        if self.path != LoadPath::Constant {
            return pending.iter().copied().take(max_blocks).collect();
        }
        // The constant bank is shared by all chains of a launch: pack greedily with the
        // launch's largest chain deciding each chain's slot (see the CUDA backend's plan).
        let mut batch: Vec<usize> = Vec::new();
        for &i in pending {
            let slot = batch
                .iter()
                .map(|&j| sizes[j])
                .chain([sizes[i]])
                .max()
                .unwrap_or(0)
                .div_ceil(128)
                * 128;
            if batch.len() < max_blocks && slot * (batch.len() as u64 + 1) <= CONSTANT_BANK_BYTES {
                batch.push(i);
            } else if batch.is_empty() {
                batch.push(i);
                break;
            } else {
                break;
            }
        }
        batch
    }
}
