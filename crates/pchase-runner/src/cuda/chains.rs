//! Chains in device memory: how a request's chains are laid out ([`ChainPlan`]), the
//! parallel init kernel that writes them, the L2 flush, and the check that a chase
//! followed its chain.

use pchase_kernels::catalogue;

use super::{
    driver::{Arg, LaunchShape},
    handles::DeviceBuffer,
    CudaBackend,
};
use crate::{
    backend::{BlockSamples, ChaseMode, ChaseRequest, LoadPath},
    device::DeviceInfo,
    error::RunnerError,
};

/// Chains of different blocks start this many elements apart at least (128 KiB), so that
/// no two blocks share a cache line or a DRAM page's neighbourhood by accident.
pub(super) const BLOCK_ALIGN_ELEMS: u64 = 32 * 1024;

impl CudaBackend {
    /// Device pointer of a chain buffer with room for `elements`, reused across calls.
    pub(super) fn chain_storage(&mut self, elements: u64) -> Result<u64, RunnerError> {
        let needed = usize::try_from(elements)
            .map_err(|_| RunnerError::InvalidRequest("chain buffer too large".into()))?;
        let large_enough = self
            .chain_buffer
            .as_ref()
            .is_some_and(|b| b.len() >= needed);
        if !large_enough {
            // Free the old buffer first so the peak is one buffer, not two (the stream has
            // finished with it: every launch is waited for).
            self.chain_buffer = None;
            // Grown to the next power of two, so that a sweep of growing arrays (the L2's
            // 27 sizes) reallocates a handful of times, not at every size; the exact size
            // where that much is not to be had.
            // SAFETY: the buffer is written by init_chain before any kernel reads it.
            let buffer = match DeviceBuffer::<u32>::uninitialized(needed.next_power_of_two()) {
                Ok(buffer) => buffer,
                Err(_) => DeviceBuffer::<u32>::uninitialized(needed)?,
            };
            self.chain_buffer = Some(buffer);
        }
        Ok(self
            .chain_buffer
            .as_ref()
            .map(DeviceBuffer::device_ptr)
            .expect("allocated above"))
    }

    /// Evicts everything from the L2 by reading (`ld.global.cg`) a buffer at least twice
    /// its size that nothing writes, so that the L2 is left full of clean lines.
    ///
    /// A flush that writes (one word into every line of such a buffer) leaves dirty lines
    /// that the L2 keeps over the clean ones loaded after it: a chain of 64-byte nodes
    /// filled by one thread then lost its oldest lines from 22 MiB on an H200 and from
    /// 18 MiB on an H100, against 26–28 and about 22 MiB when a read followed the write
    /// (`scripts/gpu/l2_flush_probe.cu`, `docs/evidence/2026-11-26-h100-h200-l2-flush/`).
    pub(super) fn flush_l2(&mut self) -> Result<(), RunnerError> {
        let region = (2 * self.info.l2_bytes.max(1 << 20)).next_power_of_two();
        self.read_through_l2(region)
    }

    /// Writes the chains of `plan` into device memory with the parallel init kernel.
    pub(super) fn build_chains(&mut self, plan: &ChainPlan) -> Result<u64, RunnerError> {
        let chain = self.chain_storage(plan.total_elements())?;
        self.init_chains_at(chain, plan.block_stride, &plan.nodes, plan.stride_elems, 1)?;
        Ok(chain)
    }

    /// Runs the parallel init kernel: array `y` of `nodes` starts at element
    /// `y * block_stride` of `chain` and gets `nodes[y]` nodes `stride_elems` apart, each
    /// written over `node_words` words (the next index, then zeros).
    pub(super) fn init_chains_at(
        &mut self,
        chain: u64,
        block_stride: u64,
        nodes: &[u32],
        stride_elems: u32,
        node_words: u32,
    ) -> Result<(), RunnerError> {
        let counts = self.inputs.upload(nodes, &self.stream)?;
        let init = self.function(catalogue::init_chain())?;
        let max_nodes = nodes.iter().copied().max().unwrap_or(1);
        let (blocks_x, threads) = if self.single_thread_fill {
            (1, 1)
        } else {
            (max_nodes.div_ceil(256).clamp(1, 4096), 256)
        };
        self.timed_launch(
            &init,
            LaunchShape {
                grid: (blocks_x, nodes.len() as u32),
                threads,
                shared_bytes: 0,
            },
            &[
                ("chain", Arg::U64(chain)),
                ("block_stride", Arg::U64(block_stride)),
                ("nodes", Arg::U64(counts)),
                ("stride", Arg::U32(stride_elems)),
                ("node_words", Arg::U32(node_words)),
            ],
        )?;
        Ok(())
    }
}

/// How a request's chains are laid out in one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChainPlan {
    /// Nodes of each chain.
    pub(super) nodes: Vec<u32>,
    /// Elements between consecutive chains.
    pub(super) block_stride: u64,
    /// Elements between consecutive nodes.
    pub(super) stride_elems: u32,
    /// Elements each block copies into shared memory (shared path), else 0.
    pub(super) shared_elems: u32,
}

impl ChainPlan {
    pub(super) fn new(request: &ChaseRequest, info: &DeviceInfo) -> Result<ChainPlan, RunnerError> {
        let first = request.chains.first().ok_or_else(|| {
            RunnerError::InvalidRequest("a chase needs at least one chain".into())
        })?;
        if request.chains.iter().any(|c| c.stride != first.stride) {
            return Err(RunnerError::InvalidRequest(
                "all chains of one launch must share one stride".into(),
            ));
        }
        if request.steps == 0 {
            return Err(RunnerError::InvalidRequest(
                "a chase needs at least one timed step".into(),
            ));
        }
        if request.chains.len() > 65_535 {
            return Err(RunnerError::InvalidRequest(format!(
                "{} chains in one launch; at most 65535",
                request.chains.len()
            )));
        }
        let max_elems = request
            .chains
            .iter()
            .map(|c| c.elements())
            .max()
            .unwrap_or(0);
        let nodes = request
            .chains
            .iter()
            .map(|c| u32::try_from(c.nodes()))
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|_| RunnerError::InvalidRequest("a chain has more than 2^32 nodes".into()))?;
        let (block_stride, shared_elems) = match request.path {
            LoadPath::Constant => {
                // The whole constant bank is one 64 KiB array: pack the chains densely,
                // each starting on a 128-byte line.
                let stride = max_elems.div_ceil(32) * 32;
                let capacity = catalogue::constant_chain().len() as u64;
                if stride * request.chains.len() as u64 > capacity {
                    return Err(RunnerError::InvalidRequest(format!(
                        "constant-path chains need {} B; the constant array holds {} B",
                        4 * stride * request.chains.len() as u64,
                        4 * capacity
                    )));
                }
                (stride, 0)
            }
            LoadPath::Shared => {
                let elems = u32::try_from(max_elems).map_err(|_| {
                    RunnerError::InvalidRequest("shared-memory chain too large".into())
                })?;
                let bytes =
                    8 * u64::from(request.steps) * u64::from(request.mode == ChaseMode::Fine)
                        + 4 * u64::from(elems);
                if bytes > info.shared_per_block_optin_bytes {
                    return Err(RunnerError::InvalidRequest(format!(
                        "shared-memory chain and timings need {bytes} B; a block may have {} B",
                        info.shared_per_block_optin_bytes
                    )));
                }
                (
                    max_elems.div_ceil(BLOCK_ALIGN_ELEMS) * BLOCK_ALIGN_ELEMS,
                    elems,
                )
            }
            _ => (max_elems.div_ceil(BLOCK_ALIGN_ELEMS) * BLOCK_ALIGN_ELEMS, 0),
        };
        Ok(ChainPlan {
            nodes,
            block_stride,
            stride_elems: first.stride / 4,
            shared_elems,
        })
    }

    pub(super) fn total_elements(&self) -> u64 {
        self.block_stride * self.nodes.len() as u64
    }

    /// The index a chase returns after `loads` loads from node 0.
    pub(super) fn index_after(&self, block: usize, loads: u64) -> u32 {
        let nodes = u64::from(self.nodes[block]);
        ((loads % nodes) * u64::from(self.stride_elems)) as u32
    }
}

/// Checks a block's results against its chain: the chase must have followed it.
pub(super) fn verify_block(
    plan: &ChainPlan,
    block: usize,
    warmup: u32,
    samples: &BlockSamples,
) -> Result<(), RunnerError> {
    for (k, &index) in samples.indices.iter().enumerate() {
        let expected = plan.index_after(block, u64::from(warmup) + k as u64 + 1);
        if index != expected {
            return Err(RunnerError::WrongResult(format!(
                "block {block}: timed load {k} returned index {index}, the chain says {expected}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Carveout, ChainSpec};
    use crate::device::ComputeCapability;

    fn info() -> DeviceInfo {
        DeviceInfo {
            name: "test".into(),
            ordinal: 0,
            compute_capability: ComputeCapability { major: 9, minor: 0 },
            sm_count: 132,
            sm_clock_khz: None,
            memory_clock_khz: None,
            memory_bus_width_bits: None,
            total_memory_bytes: 1 << 30,
            l2_bytes: 1 << 20,
            persisting_l2_max_bytes: None,
            shared_per_sm_bytes: 228 * 1024,
            shared_per_block_bytes: 48 * 1024,
            shared_per_block_optin_bytes: 227 * 1024,
            reserved_shared_per_block_bytes: None,
            registers_per_sm: None,
            registers_per_block: None,
            max_threads_per_block: 1024,
            max_threads_per_sm: None,
            warp_size: 32,
            global_l1_cache_supported: None,
            driver_version: None,
        }
    }

    fn request(path: LoadPath, sizes: &[u64]) -> ChaseRequest {
        ChaseRequest {
            path,
            mode: ChaseMode::Fine,
            chains: sizes
                .iter()
                .map(|&b| ChainSpec::new(b, 64).unwrap())
                .collect(),
            warmup_steps: 10,
            steps: 100,
            carveout: Carveout::DriverDefault,
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        }
    }

    #[test]
    fn plan_separates_blocks_and_predicts_indices() {
        let plan = ChainPlan::new(&request(LoadPath::GlobalCa, &[4096, 8192]), &info()).unwrap();
        assert_eq!(plan.nodes, vec![64, 128]);
        assert_eq!(plan.block_stride, BLOCK_ALIGN_ELEMS);
        assert_eq!(plan.stride_elems, 16);
        // 64 nodes: after 65 loads the chase is back at node 1.
        assert_eq!(plan.index_after(0, 65), 16);
        assert_eq!(plan.index_after(1, 65), 65 * 16);
    }

    #[test]
    fn constant_chains_must_fit_the_constant_bank() {
        let ok = ChainPlan::new(
            &request(LoadPath::Constant, &[32 * 1024, 32 * 1024]),
            &info(),
        );
        assert_eq!(ok.unwrap().block_stride, 8 * 1024);
        let too_big = ChainPlan::new(&request(LoadPath::Constant, &[64 * 1024, 64]), &info());
        assert!(matches!(too_big, Err(RunnerError::InvalidRequest(_))));
    }

    #[test]
    fn shared_chains_must_fit_a_block() {
        let plan = ChainPlan::new(&request(LoadPath::Shared, &[64 * 1024]), &info()).unwrap();
        assert_eq!(plan.shared_elems, 16 * 1024);
        let too_big = ChainPlan::new(&request(LoadPath::Shared, &[227 * 1024]), &info());
        assert!(matches!(too_big, Err(RunnerError::InvalidRequest(_))));
    }

    #[test]
    fn mixed_strides_are_rejected() {
        let mut r = request(LoadPath::GlobalCg, &[4096]);
        r.chains.push(ChainSpec::new(4096, 128).unwrap());
        assert!(matches!(
            ChainPlan::new(&r, &info()),
            Err(RunnerError::InvalidRequest(_))
        ));
    }

    #[test]
    fn verification_catches_a_broken_chain() {
        let plan = ChainPlan::new(&request(LoadPath::GlobalCa, &[4096]), &info()).unwrap();
        let good = BlockSamples {
            indices: (1..=5).map(|k| plan.index_after(0, 10 + k)).collect(),
            ..BlockSamples::default()
        };
        assert!(verify_block(&plan, 0, 10, &good).is_ok());
        let mut bad = good.clone();
        bad.indices[3] += 4;
        assert!(matches!(
            verify_block(&plan, 0, 10, &bad),
            Err(RunnerError::WrongResult(_))
        ));
    }
}
