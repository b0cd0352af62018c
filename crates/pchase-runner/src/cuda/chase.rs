//! The chase and two-phase launches. The chain argument is a device pointer, a texture
//! object bound over the chain buffer, or nothing (the constant bank, filled from the
//! buffer), as the load path says.

use std::os::raw::c_int;

use pchase_kernels::{catalogue, ChainArgument};

use super::{
    chains::{verify_block, ChainPlan, BLOCK_ALIGN_ELEMS},
    driver::{self, Arg, LaunchShape, LinearTexture},
    ffi,
    handles::DeviceBuffer,
    to_host, CudaBackend,
};
use crate::{
    backend::{
        check_two_phase, check_written, BlockSamples, Carveout, ChainSpec, ChaseMode, ChaseRequest,
        ChaseRun, LoadPath, Phase, TwoPhaseRequest,
    },
    error::RunnerError,
};

impl CudaBackend {
    /// [`Backend::chase`](crate::backend::Backend::chase) on this GPU.
    pub(super) fn launch_chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        check_written(request)?;
        let plan = ChainPlan::new(request, &self.info)?;
        let kernel = request.kernel();
        let chain = self.build_chains(&plan)?;
        let blocks = plan.nodes.len();
        let steps = request.steps;

        // The chain argument depends on the path: a pointer, a texture object, or nothing
        // (the constant bank, filled from the chain buffer).
        let texture;
        let chain_arg = match request.path.chain_argument() {
            ChainArgument::DevicePointer => chain,
            ChainArgument::TextureObject => {
                let elems = plan.total_elements();
                let limit = driver::device_attribute(
                    self.info.ordinal as c_int,
                    ffi::attr::MAXIMUM_TEXTURE1D_LINEAR_WIDTH,
                )?;
                if elems > limit as u64 {
                    return Err(RunnerError::InvalidRequest(format!(
                        "texture chains span {elems} elements; 1D linear textures hold {limit}"
                    )));
                }
                texture = LinearTexture::new(chain, (4 * elems) as usize)?;
                texture.handle()
            }
            ChainArgument::Unused => {
                let module = self.module_of(kernel)?;
                let (constant, bytes) = module.global(catalogue::constant_chain().name())?;
                let used = (4 * plan.total_elements()) as usize;
                if used > bytes {
                    return Err(RunnerError::InvalidRequest(format!(
                        "constant chains need {used} B, the module's array has {bytes} B"
                    )));
                }
                driver::copy_device_to_device(constant, chain, used)?;
                0
            }
        };

        if request.flush_l2 {
            self.flush_l2()?;
            if request.written_bytes > 0 {
                self.init_chains_at(
                    chain,
                    plan.block_stride,
                    &plan.nodes,
                    plan.stride_elems,
                    request.written_bytes / 4,
                )?;
            }
        }
        let function = self.function(kernel)?;
        let dynamic = kernel
            .dynamic_shared_bytes(steps, plan.shared_elems)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?
            .checked_add(request.reserve_shared_bytes)
            .ok_or_else(|| {
                RunnerError::InvalidRequest("shared-memory reservation overflows".into())
            })?;
        self.configure_shared(&function, dynamic, request.carveout)?;

        let per_block = blocks * steps as usize;
        // Outputs: per block (SM, final index), then latencies and indices (fine) or one
        // u64 cycle count (coarse).
        let lens = match request.mode {
            ChaseMode::Fine => vec![2 * blocks, per_block, per_block],
            ChaseMode::Coarse => vec![2 * blocks, 2 * blocks],
        };
        let out = self.outputs.outputs(&lens, &self.stream)?;
        let mut args = vec![
            ("chain", Arg::U64(chain_arg)),
            ("block_stride", Arg::U64(plan.block_stride)),
            ("shared_nodes_elems", Arg::U32(plan.shared_elems)),
            ("warmup_steps", Arg::U32(request.warmup_steps)),
            ("steps", Arg::U32(steps)),
            ("out_block", Arg::U64(out.ptr(0))),
        ];
        match request.mode {
            ChaseMode::Fine => {
                args.push(("out_latency", Arg::U64(out.ptr(1))));
                args.push(("out_index", Arg::U64(out.ptr(2))));
            }
            ChaseMode::Coarse => args.push(("out_cycles", Arg::U64(out.ptr(1)))),
        }
        let shape = LaunchShape {
            grid: (blocks as u32, 1),
            threads: 32,
            shared_bytes: dynamic,
        };
        let gpu_time = self.timed_launch(&function, shape, &args)?;
        let host = out.read()?;
        let mut results: Vec<BlockSamples> = vec![BlockSamples::default(); blocks];
        match request.mode {
            ChaseMode::Fine => {
                let (latency, index) = (host.u32s(1), host.u32s(2));
                for (b, result) in results.iter_mut().enumerate() {
                    let range = b * steps as usize..(b + 1) * steps as usize;
                    result.latencies = latency[range.clone()].to_vec();
                    result.indices = index[range].to_vec();
                }
            }
            ChaseMode::Coarse => {
                for (result, c) in results.iter_mut().zip(host.u64s(1)) {
                    result.total_cycles = Some(c);
                }
            }
        }
        let host_block = host.u32s(0);
        for (b, result) in results.iter_mut().enumerate() {
            result.smid = host_block[2 * b];
            result.final_index = host_block[2 * b + 1];
            let expected = plan.index_after(b, u64::from(request.warmup_steps) + u64::from(steps));
            if result.final_index != expected {
                return Err(RunnerError::WrongResult(format!(
                    "block {b} ({}): the chase ended on index {}, the chain says {expected}",
                    request.path, result.final_index
                )));
            }
            verify_block(&plan, b, request.warmup_steps, result)?;
        }
        Ok(ChaseRun {
            blocks: results,
            gpu_time,
        })
    }

    /// [`Backend::two_phase`](crate::backend::Backend::two_phase) on this GPU.
    pub(super) fn launch_two_phase(
        &mut self,
        request: &TwoPhaseRequest,
    ) -> Result<ChaseRun, RunnerError> {
        let (fill, evict) = (request.fill, request.evict);
        check_two_phase(request, self.info.max_threads_per_block)?;
        let kernel = request.kernel()?;
        let blocks = request.blocks as usize;
        // Region A then region B of one buffer; each block's copy on its own 128 KiB
        // boundary (the constant bank instead packs them at 128-byte lines).
        let constant = |p: &Phase| p.path == LoadPath::Constant;
        let align = |elems: u64, p: &Phase| {
            if constant(p) {
                elems.div_ceil(32) * 32
            } else {
                elems.div_ceil(BLOCK_ALIGN_ELEMS) * BLOCK_ALIGN_ELEMS
            }
        };
        let stride_a = align(fill.chain.elements(), &fill);
        let stride_b = align(evict.chain.elements(), &evict);
        let region_a = stride_a * blocks as u64;
        let region_b = stride_b * blocks as u64;
        let buffer = self.chain_storage(region_a + region_b)?;
        let chain_a = buffer;
        let chain_b = buffer + 4 * region_a;
        let nodes = |p: &Phase| {
            u32::try_from(p.chain.nodes())
                .map_err(|_| RunnerError::InvalidRequest("a chain has more than 2^32 nodes".into()))
        };
        self.init_chains_at(
            chain_a,
            stride_a,
            &vec![nodes(&fill)?; blocks],
            fill.chain.stride / 4,
            1,
        )?;
        self.init_chains_at(
            chain_b,
            stride_b,
            &vec![nodes(&evict)?; blocks],
            evict.chain.stride / 4,
            1,
        )?;

        // The kernel argument of each chain: a pointer, a texture object over the chain's
        // region, or its element offset inside the constant bank.
        let mut textures = Vec::new();
        let mut bank_used = 0u64;
        let mut argument = |this: &Self,
                            p: &Phase,
                            ptr: u64,
                            region: u64|
         -> Result<u64, RunnerError> {
            match p.path.chain_argument() {
                ChainArgument::DevicePointer => Ok(ptr),
                ChainArgument::TextureObject => {
                    let texture = LinearTexture::new(ptr, (4 * region) as usize)?;
                    let handle = texture.handle();
                    textures.push(texture);
                    Ok(handle)
                }
                ChainArgument::Unused => {
                    let module = this.module_of(kernel)?;
                    let (bank, bytes) = module.global(catalogue::constant_chain().name())?;
                    let offset = bank_used;
                    bank_used += region;
                    if (4 * bank_used) as usize > bytes {
                        return Err(RunnerError::InvalidRequest(format!(
                            "constant chains need {} B, the constant bank holds {bytes} B",
                            4 * bank_used
                        )));
                    }
                    driver::copy_device_to_device(bank + 4 * offset, ptr, (4 * region) as usize)?;
                    Ok(offset)
                }
            }
        };
        let arg_a = argument(self, &fill, chain_a, region_a)?;
        let arg_b = argument(self, &evict, chain_b, region_b)?;
        if request.flush_l2 {
            self.flush_l2()?;
        }

        let function = self.function(kernel)?;
        let steps = request.timed_steps;
        let dynamic = kernel
            .dynamic_shared_bytes(steps, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, request.carveout)?;
        let per_block = blocks * steps as usize;
        let out = self
            .outputs
            .outputs(&[per_block, per_block, 2 * blocks], &self.stream)?;
        let shape = LaunchShape {
            grid: (request.blocks, 1),
            threads: request.threads,
            shared_bytes: dynamic,
        };
        let outputs = [
            ("out_latency", Arg::U64(out.ptr(0))),
            ("out_index", Arg::U64(out.ptr(1))),
            ("out_block", Arg::U64(out.ptr(2))),
        ];
        let mut args = if request.block_fill {
            // One block (`check_two_phase`): the chains by address, node count and spacing.
            vec![
                ("chain_a", Arg::U64(arg_a)),
                ("nodes_a", Arg::U32(nodes(&fill)?)),
                ("stride_a", Arg::U32(fill.chain.stride)),
                ("chain_b", Arg::U64(arg_b)),
                ("nodes_b", Arg::U32(nodes(&evict)?)),
                ("stride_b", Arg::U32(evict.chain.stride)),
                ("steps", Arg::U32(steps)),
            ]
        } else {
            vec![
                ("chain_a", Arg::U64(arg_a)),
                ("block_stride_a", Arg::U64(stride_a)),
                ("chain_b", Arg::U64(arg_b)),
                ("block_stride_b", Arg::U64(stride_b)),
                ("thread_a", Arg::U32(fill.thread)),
                ("thread_b", Arg::U32(evict.thread)),
                ("warmup_a", Arg::U32(fill.steps)),
                ("warmup_b", Arg::U32(evict.steps)),
                ("steps", Arg::U32(steps)),
            ]
        };
        args.extend(outputs);
        let gpu_time = self.timed_launch(&function, shape, &args)?;
        drop(textures);
        let host = out.read()?;
        let (host_latency, host_index, host_block) = (host.u32s(0), host.u32s(1), host.u32s(2));
        // Chain A's plan, to check the re-timed loads against it.
        let plan = ChainPlan {
            nodes: vec![nodes(&fill)?; blocks],
            block_stride: stride_a,
            stride_elems: fill.chain.stride / 4,
            shared_elems: 0,
        };
        let mut results = Vec::with_capacity(blocks);
        for b in 0..blocks {
            let range = b * steps as usize..(b + 1) * steps as usize;
            let samples = BlockSamples {
                smid: host_block[2 * b],
                latencies: host_latency[range.clone()].to_vec(),
                indices: host_index[range].to_vec(),
                final_index: host_block[2 * b + 1],
                total_cycles: None,
            };
            verify_block(&plan, b, fill.steps, &samples)?;
            let expected = plan.index_after(b, u64::from(fill.steps) + u64::from(steps));
            if samples.final_index != expected {
                return Err(RunnerError::WrongResult(format!(
                    "two-phase block {b}: chain A ended on index {}, the chain says {expected}",
                    samples.final_index
                )));
            }
            results.push(samples);
        }
        Ok(ChaseRun {
            blocks: results,
            gpu_time,
        })
    }

    /// One warp's fine `.cg` chase of `steps` timed loads over `chain`, already built at
    /// the device address `at` (in this context's memory, a peer's or mapped host memory),
    /// after `warmup_steps` untimed ones; the latencies, each load's index checked against
    /// the chain (`what` names the chase in the error).
    pub(super) fn warp_chase_at(
        &mut self,
        chain: ChainSpec,
        at: u64,
        warmup_steps: u32,
        steps: u32,
        what: &str,
    ) -> Result<Vec<u32>, RunnerError> {
        let nodes = u32::try_from(chain.nodes())
            .map_err(|_| RunnerError::InvalidRequest("a chain of over 2^32 nodes".into()))?;
        let stride_elems = chain.stride / 4;
        let kernel = ChaseRequest::fine(LoadPath::GlobalCg, chain, steps).kernel();
        let function = self.function(kernel)?;
        let dynamic = kernel
            .dynamic_shared_bytes(steps, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, Carveout::DriverDefault)?;
        let out_block = DeviceBuffer::<u32>::zeroed(2)?;
        let latency = DeviceBuffer::<u32>::zeroed(steps as usize)?;
        let index = DeviceBuffer::<u32>::zeroed(steps as usize)?;
        self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: dynamic,
            },
            &[
                ("chain", Arg::U64(at)),
                ("block_stride", Arg::U64(0)),
                ("shared_nodes_elems", Arg::U32(0)),
                ("warmup_steps", Arg::U32(warmup_steps)),
                ("steps", Arg::U32(steps)),
                ("out_block", Arg::U64(out_block.device_ptr())),
                ("out_latency", Arg::U64(latency.device_ptr())),
                ("out_index", Arg::U64(index.device_ptr())),
            ],
        )?;
        let latencies = to_host(&latency)?;
        for (k, &got) in to_host(&index)?.iter().enumerate() {
            let loads = u64::from(warmup_steps) + k as u64 + 1;
            let expected = ((loads % u64::from(nodes)) * u64::from(stride_elems)) as u32;
            if got != expected {
                return Err(RunnerError::WrongResult(format!(
                    "{what}: timed load {k} returned index {got}, the chain says {expected}"
                )));
            }
        }
        Ok(latencies)
    }
}
