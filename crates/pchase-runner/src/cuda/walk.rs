//! TLB walks on the GPU ([`crate::walk`]): the region (plain, chunked or aliased, `vmm`), the
//! line-indexed chain written by `init_chain_lines`, and one block's fine-grained chase.

use pchase_kernels::catalogue;

use super::{
    driver::{Arg, LaunchShape},
    handles::{self, DeviceBuffer},
    to_host,
    vmm::{ChunkedRegion, PlainRegion},
    CudaBackend,
};
use crate::{
    backend::Carveout,
    error::RunnerError,
    walk::{WalkAllocation, WalkBackend, WalkRegion, WalkRequest, WalkRun},
};

/// The memory behind the current walk region.
#[derive(Debug)]
pub(super) enum WalkMemory {
    /// One `cuMemAlloc`.
    Plain(PlainRegion),
    /// Separately mapped chunks.
    Chunked(ChunkedRegion),
}

impl WalkMemory {
    fn base(&self) -> u64 {
        match self {
            WalkMemory::Plain(r) => r.base(),
            WalkMemory::Chunked(r) => r.base(),
        }
    }
}

impl WalkBackend for CudaBackend {
    fn walk_region(
        &mut self,
        allocation: WalkAllocation,
        max_bytes: u64,
    ) -> Result<WalkRegion, RunnerError> {
        self.release_walk_region()?;
        // The other benchmarks' buffers give their memory back first.
        self.chain_buffer = None;
        let (memory, region) = match allocation {
            WalkAllocation::Plain => {
                let plain = PlainRegion::new(max_bytes)?;
                let region = WalkRegion {
                    allocation,
                    bytes: plain.bytes(),
                    chunk_bytes: None,
                    backing_bytes: None,
                };
                (WalkMemory::Plain(plain), region)
            }
            WalkAllocation::Chunked | WalkAllocation::Aliased => {
                let device = handles::device(self.info.ordinal)?;
                let chunked = if allocation == WalkAllocation::Aliased {
                    ChunkedRegion::aliased(
                        device,
                        max_bytes,
                        crate::walk::ALIASED_CHUNK_BYTES,
                        crate::walk::aliased_pool_chunks(self.info.total_memory_bytes),
                    )?
                } else {
                    ChunkedRegion::new(device, max_bytes)?
                };
                let pooled = chunked.backing_bytes() < chunked.bytes();
                let region = WalkRegion {
                    allocation,
                    bytes: chunked.bytes(),
                    chunk_bytes: Some(chunked.chunk_bytes()),
                    backing_bytes: pooled.then(|| chunked.backing_bytes()),
                };
                (WalkMemory::Chunked(chunked), region)
            }
        };
        self.walk = Some((region, memory));
        Ok(region)
    }

    fn walk(&mut self, request: &WalkRequest) -> Result<WalkRun, RunnerError> {
        let Some((region, memory)) = &self.walk else {
            return Err(RunnerError::InvalidRequest(
                "a walk needs a walk region first".into(),
            ));
        };
        request.check(region.bytes)?;
        let base = memory.base();
        let kernel = request.kernel()?;
        let stride_lines = u32::try_from(request.stride_lines()).map_err(|_| {
            RunnerError::InvalidRequest(format!("a walk step of {} B", request.step_bytes))
        })?;
        let init = self.function(catalogue::init_chain_lines())?;
        let mut gpu_time = self.timed_launch(
            &init,
            LaunchShape {
                grid: (request.nodes.div_ceil(256).clamp(1, 4096), 1),
                threads: 256,
                shared_bytes: 0,
            },
            &[
                ("chain", Arg::U64(base)),
                ("nodes", Arg::U32(request.nodes)),
                ("stride_lines", Arg::U32(stride_lines)),
                ("group", Arg::U32(request.group)),
            ],
        )?;
        let function = self.function(kernel)?;
        let dynamic = kernel
            .dynamic_shared_bytes(request.steps, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, Carveout::Percent(0))?;
        let steps = request.steps as usize;
        let latency = DeviceBuffer::<u32>::zeroed(steps)?;
        let index = DeviceBuffer::<u32>::zeroed(steps)?;
        let out_block = DeviceBuffer::<u32>::zeroed(2)?;
        gpu_time += self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: dynamic,
            },
            &[
                ("chain", Arg::U64(base)),
                ("block_stride", Arg::U64(0)),
                ("warmup_steps", Arg::U32(request.warmup_steps)),
                ("steps", Arg::U32(request.steps)),
                ("out_latency", Arg::U64(latency.device_ptr())),
                ("out_index", Arg::U64(index.device_ptr())),
                ("out_block", Arg::U64(out_block.device_ptr())),
            ],
        )?;
        let latencies = to_host(&latency)?;
        let indices = to_host(&index)?;
        let block = to_host(&out_block)?;
        let warmup = u64::from(request.warmup_steps);
        for (k, &line) in indices.iter().enumerate() {
            let expected = request.line_after(warmup + k as u64 + 1);
            if u64::from(line) != expected {
                return Err(RunnerError::WrongResult(format!(
                    "walk ({} nodes, step {} B): timed load {k} returned line {line}, the chain says {expected}",
                    request.nodes, request.step_bytes
                )));
            }
        }
        let end = request.line_after(warmup + u64::from(request.steps));
        if u64::from(block[1]) != end {
            return Err(RunnerError::WrongResult(format!(
                "walk: the chase ended on line {}, the chain says {end}",
                block[1]
            )));
        }
        Ok(WalkRun {
            smid: block[0],
            latencies,
            gpu_time,
        })
    }

    fn release_walk_region(&mut self) -> Result<(), RunnerError> {
        match self.walk.take() {
            Some((walked, WalkMemory::Chunked(region))) => {
                let started = std::time::Instant::now();
                let calls = region.release()?;
                log::debug!(
                    "{} region released in {:.1} ms; its driver calls in all: {calls}",
                    walked.allocation,
                    started.elapsed().as_secs_f64() * 1e3
                );
                Ok(())
            }
            // A plain region is freed on drop.
            _ => Ok(()),
        }
    }
}
