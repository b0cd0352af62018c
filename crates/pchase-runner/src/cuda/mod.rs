//! The CUDA backend: a context on one GPU, the embedded PTX modules, and the launches of
//! the catalogue's kernels. Every driver call of the crate is in this module, through
//! integer-typed declarations (`ffi`), never through cust's enum-typed `CUresult`.

mod bandwidth;
mod driver;
mod errors;
mod ffi;
mod handles;

use std::{os::raw::c_int, time::Duration};

use pchase_kernels::{catalogue, ChainArgument, Kernel};

use crate::{
    backend::{
        check_partition_map, check_pinned, check_two_phase, check_written, Backend, BlockSamples,
        Carveout, ChainSpec, ChaseMode, ChaseRequest, ChaseRun, LoadPath, PartitionMapRequest,
        PartitionMapRun, Phase, PinnedRequest, PinnedRun, PinnedSlot, SmLineLatencies,
        TwoPhaseRequest,
    },
    bandwidth::{BandwidthRequest, BandwidthRun},
    device::{ComputeCapability, DeviceInfo},
    error::RunnerError,
};
use driver::{Arg, LaunchShape, LinearTexture, LoadedFunction, LoadedModule};
use handles::{Context, DeviceBuffer, Event, Stream};

pub use errors::{known_codes as known_error_codes, name as error_name};

/// Chains of different blocks start this many elements apart at least (128 KiB), so that
/// no two blocks share a cache line or a DRAM page's neighbourhood by accident.
const BLOCK_ALIGN_ELEMS: u64 = 32 * 1024;

/// Blocks per SM of a pinned launch: enough that every SM receives one.
const PINNED_BLOCKS_PER_SM: u32 = 4;

/// How long (SM cycles, about 70 ms at 2 GHz) a pinned slot waits for the others before it
/// chases alone (and reports that it did).
const PINNED_WAIT_CYCLES: u64 = 1 << 27;

/// How long (ns) an SM of the partition map waits for the others, the reference and its
/// turn, counted from its arrival; the whole map takes some 50 ms on an H200.
const MAP_WAIT_NS: u64 = 2_000_000_000;

/// `CU_SHAREDMEM_CARVEOUT_DEFAULT`.
const CARVEOUT_DEFAULT: i32 = -1;

/// Shared memory a block gets without opting in.
const STATIC_SHARED_LIMIT: u32 = 48 * 1024;

/// Copies a device buffer to a new host vector.
fn to_host<T: handles::DeviceWord>(buffer: &DeviceBuffer<T>) -> Result<Vec<T>, RunnerError> {
    buffer.to_host()
}

/// Who a CUDA device is, read without creating a context (so before any other memtopo
/// or a busy-GPU check could be disturbed by this one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// The ordinal asked for.
    pub ordinal: u32,
    /// The device's name.
    pub name: String,
    /// The UUID's 16 bytes as `GPU-…` (NVML's spelling), if the driver reports it.
    pub uuid: Option<String>,
    /// The PCI bus id, `0000:65:00.0`, if the driver reports it.
    pub pci_bus_id: Option<String>,
    /// The driver's CUDA version, e.g. 12080.
    pub cuda_driver_version: Option<u32>,
}

/// Device `ordinal` after checking that it exists (the driver initialised first).
fn checked_device(ordinal: u32) -> Result<c_int, RunnerError> {
    let count = CudaBackend::device_count()?;
    if ordinal >= count {
        return Err(RunnerError::BadDeviceIndex {
            index: ordinal,
            count,
        });
    }
    handles::device(ordinal)
}

/// Finds device `ordinal` and reads its identity; creates no context.
///
/// # Errors
/// No driver, no device, or a bad index.
pub fn identify(ordinal: u32) -> Result<DeviceIdentity, RunnerError> {
    let device = checked_device(ordinal)?;
    Ok(DeviceIdentity {
        ordinal,
        name: handles::device_name(device)?,
        uuid: handles::device_uuid(device)
            .map(|b| handles::format_uuid("GPU", &b))
            .map_err(|e| log::warn!("no GPU UUID: {e}"))
            .ok(),
        pci_bus_id: handles::device_pci_bus_id(device)
            .map_err(|e| log::warn!("no PCI bus id: {e}"))
            .ok(),
        cuda_driver_version: driver::driver_version().ok(),
    })
}

/// The message of a raw `CUresult`, by name, for any code (also ones newer than this
/// crate): what every driver error of this backend is reported with.
pub fn describe_result(code: u32) -> String {
    ffi::describe(code)
}

/// A GPU driven through CUDA.
///
/// Fields drop in declaration order: buffers and modules go before the context.
#[derive(Debug)]
pub struct CudaBackend {
    single_thread_fill: bool,
    bandwidth_buffers: bandwidth::BandwidthBuffers,
    chain_buffer: Option<DeviceBuffer<u32>>,
    flush_buffer: Option<DeviceBuffer<u32>>,
    modules: Vec<LoadedModule>,
    stream: Stream,
    info: DeviceInfo,
    _context: Context,
}

impl CudaBackend {
    /// How many CUDA devices the driver sees.
    ///
    /// # Errors
    /// [`RunnerError::NoDriver`] or [`RunnerError::NoDevice`].
    pub fn device_count() -> Result<u32, RunnerError> {
        handles::init()?;
        let count = handles::device_count()?;
        if count == 0 {
            return Err(RunnerError::NoDevice);
        }
        Ok(count)
    }

    /// Creates a context on device `ordinal` and loads every catalogue module the device
    /// supports.
    ///
    /// # Errors
    /// No driver, no device, a bad index, or a module that fails to JIT-compile (with the
    /// driver's JIT log).
    pub fn new(ordinal: u32) -> Result<CudaBackend, RunnerError> {
        let device = checked_device(ordinal)?;
        let context = Context::new(device)?;
        let info = query_device(ordinal, device)?;
        let stream = Stream::new()?;
        let cc = pchase_kernels::ComputeCapability::from(info.compute_capability);
        let mut modules = Vec::new();
        for module in catalogue::modules() {
            if module.loaded_on_demand() {
                log::debug!("PTX module {} loads on first use", module.name());
            } else if module.supports(cc) {
                log::debug!("loading PTX module {}", module.name());
                modules.push(LoadedModule::load(module.name(), module.ptx())?);
            } else {
                log::info!(
                    "skipping PTX module {}: needs compute capability {}, device has {}",
                    module.name(),
                    module.min_capability(),
                    info.compute_capability
                );
            }
        }
        Ok(CudaBackend {
            single_thread_fill: false,
            bandwidth_buffers: bandwidth::BandwidthBuffers::default(),
            chain_buffer: None,
            flush_buffer: None,
            modules,
            stream,
            info,
            _context: context,
        })
    }

    /// Builds chains with one thread instead of the parallel init kernel's grid. The
    /// chains are the same; this exists to show that the parallel fill does not change
    /// what the single timing thread then measures (`tests/it/gpu.rs`).
    pub fn set_single_thread_fill(&mut self, single: bool) {
        self.single_thread_fill = single;
    }

    /// Names of the modules loaded on this device.
    pub fn loaded_modules(&self) -> Vec<&'static str> {
        self.modules.iter().map(LoadedModule::name).collect()
    }

    fn module_of(&self, kernel: &'static Kernel) -> Result<&LoadedModule, RunnerError> {
        kernel
            .check_supported(self.info.compute_capability.into())
            .map_err(|_| RunnerError::Unsupported {
                kernel: kernel.entry(),
                needed: kernel.min_capability().to_string(),
                found: self.info.compute_capability.to_string(),
            })?;
        self.modules
            .iter()
            .find(|m| m.name() == kernel.module().name())
            .ok_or_else(|| RunnerError::Unsupported {
                kernel: kernel.entry(),
                needed: kernel.module().min_capability().to_string(),
                found: self.info.compute_capability.to_string(),
            })
    }

    fn function(&self, kernel: &'static Kernel) -> Result<LoadedFunction, RunnerError> {
        self.module_of(kernel)?.function(kernel)
    }

    /// Device pointer of a chain buffer with room for `elements`, reused across calls.
    fn chain_storage(&mut self, elements: u64) -> Result<u64, RunnerError> {
        let needed = usize::try_from(elements)
            .map_err(|_| RunnerError::InvalidRequest("chain buffer too large".into()))?;
        let large_enough = self
            .chain_buffer
            .as_ref()
            .is_some_and(|b| b.len() >= needed);
        if !large_enough {
            // Free the old buffer first so the peak is one buffer, not two.
            self.chain_buffer = None;
            // SAFETY: the buffer is written by init_chain before any kernel reads it.
            let buffer = DeviceBuffer::<u32>::uninitialized(needed)?;
            self.chain_buffer = Some(buffer);
        }
        Ok(self
            .chain_buffer
            .as_ref()
            .map(DeviceBuffer::device_ptr)
            .expect("allocated above"))
    }

    /// Launches `function`, timed with events, and waits for it.
    fn timed_launch(
        &self,
        function: &LoadedFunction,
        shape: LaunchShape,
        args: &[(&str, Arg)],
    ) -> Result<Duration, RunnerError> {
        let start = Event::new()?;
        let stop = Event::new()?;
        start.record(&self.stream)?;
        function.launch(self.stream.handle(), shape, args)?;
        stop.record(&self.stream)?;
        self.stream
            .synchronize("cuStreamSynchronize (kernel execution)")?;
        stop.elapsed_since(&start)
    }

    /// Sets the dynamic shared-memory limit and the carveout of a function.
    fn configure_shared(
        &self,
        function: &LoadedFunction,
        dynamic_bytes: u32,
        carveout: Carveout,
    ) -> Result<(), RunnerError> {
        let optin = self.info.shared_per_block_optin_bytes;
        if u64::from(dynamic_bytes) > optin {
            return Err(RunnerError::InvalidRequest(format!(
                "launch needs {dynamic_bytes} B of shared memory, the device allows {optin} B per block"
            )));
        }
        if dynamic_bytes > STATIC_SHARED_LIMIT {
            function.set_attribute(
                ffi::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic_bytes as i32,
            )?;
        }
        let carveout = match carveout {
            Carveout::DriverDefault => CARVEOUT_DEFAULT,
            Carveout::Percent(p) if p <= 100 => i32::from(p),
            Carveout::Percent(p) => {
                return Err(RunnerError::InvalidRequest(format!(
                    "carveout {p}% is over 100%"
                )))
            }
        };
        function.set_attribute(
            ffi::FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            carveout,
        )
    }

    /// Evicts everything from the L2 by writing one word into every 128-byte line of a
    /// buffer twice the L2's size, with the parallel init kernel.
    fn flush_l2(&mut self) -> Result<(), RunnerError> {
        let elements = 2 * self.info.l2_bytes.max(1 << 20) / 4;
        if self
            .flush_buffer
            .as_ref()
            .is_none_or(|b| (b.len() as u64) < elements)
        {
            self.flush_buffer = None;
            // SAFETY: only written (by init_chain), never read.
            let buffer = DeviceBuffer::<u32>::uninitialized(elements as usize)?;
            self.flush_buffer = Some(buffer);
        }
        let ptr = self
            .flush_buffer
            .as_ref()
            .map(DeviceBuffer::device_ptr)
            .expect("allocated above");
        let line_elems = 32u32;
        let nodes = u32::try_from(elements / u64::from(line_elems))
            .map_err(|_| RunnerError::InvalidRequest("L2 too large to flush".into()))?;
        self.init_chains_at(ptr, 0, &[nodes], line_elems, 1)?;
        Ok(())
    }

    /// Writes the chains of `plan` into device memory with the parallel init kernel.
    fn build_chains(&mut self, plan: &ChainPlan) -> Result<u64, RunnerError> {
        let chain = self.chain_storage(plan.total_elements())?;
        self.init_chains_at(chain, plan.block_stride, &plan.nodes, plan.stride_elems, 1)?;
        Ok(chain)
    }

    /// Runs the parallel init kernel: array `y` of `nodes` starts at element
    /// `y * block_stride` of `chain` and gets `nodes[y]` nodes `stride_elems` apart, each
    /// written over `node_words` words (the next index, then zeros).
    fn init_chains_at(
        &self,
        chain: u64,
        block_stride: u64,
        nodes: &[u32],
        stride_elems: u32,
        node_words: u32,
    ) -> Result<(), RunnerError> {
        let counts = DeviceBuffer::from_slice(nodes)?;
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
                ("nodes", Arg::U64(counts.device_ptr())),
                ("stride", Arg::U32(stride_elems)),
                ("node_words", Arg::U32(node_words)),
            ],
        )?;
        Ok(())
    }
}

/// How a request's chains are laid out in one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ChainPlan {
    /// Nodes of each chain.
    nodes: Vec<u32>,
    /// Elements between consecutive chains.
    block_stride: u64,
    /// Elements between consecutive nodes.
    stride_elems: u32,
    /// Elements each block copies into shared memory (shared path), else 0.
    shared_elems: u32,
}

impl ChainPlan {
    fn new(request: &ChaseRequest, info: &DeviceInfo) -> Result<ChainPlan, RunnerError> {
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

    fn total_elements(&self) -> u64 {
        self.block_stride * self.nodes.len() as u64
    }

    /// The index a chase returns after `loads` loads from node 0.
    fn index_after(&self, block: usize, loads: u64) -> u32 {
        let nodes = u64::from(self.nodes[block]);
        ((loads % nodes) * u64::from(self.stride_elems)) as u32
    }
}

/// Checks a block's results against its chain: the chase must have followed it.
fn verify_block(
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

impl Backend for CudaBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
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
        let out_block = DeviceBuffer::<u32>::zeroed(2 * blocks)?;
        let mut args = vec![
            ("chain", Arg::U64(chain_arg)),
            ("block_stride", Arg::U64(plan.block_stride)),
            ("shared_nodes_elems", Arg::U32(plan.shared_elems)),
            ("warmup_steps", Arg::U32(request.warmup_steps)),
            ("steps", Arg::U32(steps)),
            ("out_block", Arg::U64(out_block.device_ptr())),
        ];
        let shape = LaunchShape {
            grid: (blocks as u32, 1),
            threads: 32,
            shared_bytes: dynamic,
        };
        let mut results: Vec<BlockSamples> = vec![BlockSamples::default(); blocks];
        let gpu_time = match request.mode {
            ChaseMode::Fine => {
                let latency = DeviceBuffer::<u32>::zeroed(per_block)?;
                let index = DeviceBuffer::<u32>::zeroed(per_block)?;
                args.push(("out_latency", Arg::U64(latency.device_ptr())));
                args.push(("out_index", Arg::U64(index.device_ptr())));
                let time = self.timed_launch(&function, shape, &args)?;
                let host_latency = to_host(&latency)?;
                let host_index = to_host(&index)?;
                for (b, result) in results.iter_mut().enumerate() {
                    let range = b * steps as usize..(b + 1) * steps as usize;
                    result.latencies = host_latency[range.clone()].to_vec();
                    result.indices = host_index[range].to_vec();
                }
                time
            }
            ChaseMode::Coarse => {
                let cycles = DeviceBuffer::<u64>::zeroed(blocks)?;
                args.push(("out_cycles", Arg::U64(cycles.device_ptr())));
                let time = self.timed_launch(&function, shape, &args)?;
                let host_cycles = to_host(&cycles)?;
                for (result, c) in results.iter_mut().zip(host_cycles) {
                    result.total_cycles = Some(c);
                }
                time
            }
        };
        let host_block = to_host(&out_block)?;
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

    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError> {
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
        let latency = DeviceBuffer::<u32>::zeroed(per_block)?;
        let index = DeviceBuffer::<u32>::zeroed(per_block)?;
        let out_block = DeviceBuffer::<u32>::zeroed(2 * blocks)?;
        let gpu_time = self.timed_launch(
            &function,
            LaunchShape {
                grid: (request.blocks, 1),
                threads: request.threads,
                shared_bytes: dynamic,
            },
            &[
                ("chain_a", Arg::U64(arg_a)),
                ("block_stride_a", Arg::U64(stride_a)),
                ("chain_b", Arg::U64(arg_b)),
                ("block_stride_b", Arg::U64(stride_b)),
                ("thread_a", Arg::U32(fill.thread)),
                ("thread_b", Arg::U32(evict.thread)),
                ("warmup_a", Arg::U32(fill.steps)),
                ("warmup_b", Arg::U32(evict.steps)),
                ("steps", Arg::U32(steps)),
                ("out_latency", Arg::U64(latency.device_ptr())),
                ("out_index", Arg::U64(index.device_ptr())),
                ("out_block", Arg::U64(out_block.device_ptr())),
            ],
        )?;
        drop(textures);
        let host_latency = to_host(&latency)?;
        let host_index = to_host(&index)?;
        let host_block = to_host(&out_block)?;
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

    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError> {
        check_pinned(request, self.info.sm_count)?;
        // The chains are laid out as for an ordinary chase with one block per slot.
        let as_chase = ChaseRequest {
            path: LoadPath::GlobalCg,
            mode: ChaseMode::Coarse,
            chains: request.chains.clone(),
            warmup_steps: request.warmup_steps,
            steps: request.steps,
            carveout: Carveout::Percent(0),
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        let plan = ChainPlan::new(&as_chase, &self.info)?;
        let chain = self.build_chains(&plan)?;
        let kernel = catalogue::chase_pinned_global_cg();
        let function = self.function(kernel)?;
        let dynamic = kernel
            .dynamic_shared_bytes(request.sample_steps, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, Carveout::Percent(0))?;
        let slots = request.sms.len();
        let samples = request.sample_steps as usize;
        let sms = DeviceBuffer::from_slice(&request.sms)?;
        let claims = DeviceBuffer::<u32>::zeroed(slots + 1)?;
        let cycles = DeviceBuffer::<u64>::zeroed(slots)?;
        let out_slot = DeviceBuffer::<u32>::zeroed(4 * slots)?;
        let latency = DeviceBuffer::<u32>::zeroed((slots * samples).max(1))?;
        let index = DeviceBuffer::<u32>::zeroed((slots * samples).max(1))?;
        // Every slot's chain has the same length where there are several warps
        // (`check_pinned`), so one offset serves all.
        let first = request.chains[0];
        let warp_offset = request.start_node(&first, 1) * u64::from(plan.stride_elems);
        // Many more blocks than SMs, all resident at once, so that every SM receives at
        // least one.
        let shape = LaunchShape {
            grid: (PINNED_BLOCKS_PER_SM * self.info.sm_count.max(1), 1),
            threads: 32 * request.warps,
            shared_bytes: dynamic,
        };
        let gpu_time = self.timed_launch(
            &function,
            shape,
            &[
                ("chain", Arg::U64(chain)),
                ("block_stride", Arg::U64(plan.block_stride)),
                ("sms", Arg::U64(sms.device_ptr())),
                ("slots", Arg::U32(slots as u32)),
                ("claims", Arg::U64(claims.device_ptr())),
                ("wait_cycles", Arg::U64(PINNED_WAIT_CYCLES)),
                ("warmup_steps", Arg::U32(request.warmup_steps)),
                ("steps", Arg::U32(request.steps)),
                ("out_cycles", Arg::U64(cycles.device_ptr())),
                ("out_slot", Arg::U64(out_slot.device_ptr())),
                ("warp_offset_elems", Arg::U64(warp_offset)),
                ("sample_steps", Arg::U32(request.sample_steps)),
                ("out_latency", Arg::U64(latency.device_ptr())),
                ("out_index", Arg::U64(index.device_ptr())),
            ],
        )?;
        let host_cycles = to_host(&cycles)?;
        let host_slot = to_host(&out_slot)?;
        let host_latency = to_host(&latency)?;
        let host_index = to_host(&index)?;
        // Warp 0 starts at node 0 and makes warm-up, timed and sampled loads.
        let loads = u64::from(request.warmup_steps)
            + u64::from(request.steps)
            + u64::from(request.sample_steps);
        let warmed = u64::from(request.warmup_steps) + u64::from(request.steps);
        let mut out = Vec::with_capacity(slots);
        for (s, &wanted) in request.sms.iter().enumerate() {
            let record = &host_slot[4 * s..4 * s + 4];
            if record[0] == 0 {
                out.push(None);
                continue;
            }
            let slot = PinnedSlot {
                sm: record[1],
                total_cycles: host_cycles[s],
                final_index: record[2],
                together: record[3] != 0,
                samples: host_latency[s * samples..(s + 1) * samples].to_vec(),
            };
            if slot.sm != wanted {
                return Err(RunnerError::WrongResult(format!(
                    "pinned slot {s} ran on SM {}, not on SM {wanted}",
                    slot.sm
                )));
            }
            let expected = plan.index_after(s, loads);
            if slot.final_index != expected {
                return Err(RunnerError::WrongResult(format!(
                    "pinned slot {s} (SM {wanted}): the chase ended on index {}, the chain says {expected}",
                    slot.final_index
                )));
            }
            for (k, &got) in host_index[s * samples..(s + 1) * samples]
                .iter()
                .enumerate()
            {
                let expected = plan.index_after(s, warmed + k as u64 + 1);
                if got != expected {
                    return Err(RunnerError::WrongResult(format!(
                        "pinned slot {s}: sampled load {k} returned index {got}, the chain says {expected}"
                    )));
                }
            }
            out.push(Some(slot));
        }
        Ok(PinnedRun {
            slots: out,
            gpu_time,
        })
    }

    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        check_partition_map(request, self.info.sm_count)?;
        let kernel = catalogue::l2_partition_map();
        let function = self.function(kernel)?;
        let sm_count = self.info.sm_count;
        let lines = request.lines_per_sm;
        let chain_spec = ChainSpec::new(
            u64::from(lines) * u64::from(request.line_bytes),
            request.line_bytes,
        )?;
        let as_chase = ChaseRequest {
            path: LoadPath::GlobalCg,
            mode: ChaseMode::Fine,
            chains: vec![chain_spec; sm_count as usize],
            warmup_steps: 0,
            steps: 2 * lines,
            carveout: Carveout::Percent(0),
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        let plan = ChainPlan::new(&as_chase, &self.info)?;
        let chain = self.build_chains(&plan)?;
        // The arrays start out of the L2: the reference's loads decide what it holds.
        self.flush_l2()?;
        let dynamic = kernel
            .dynamic_shared_bytes(2 * lines, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, Carveout::Percent(0))?;
        let claims = DeviceBuffer::<u32>::zeroed(sm_count as usize + 4)?;
        let per_sm = 2 * lines as usize;
        let latency = DeviceBuffer::<u32>::zeroed(sm_count as usize * per_sm)?;
        let status = DeviceBuffer::<u32>::zeroed(sm_count as usize)?;
        let shape = LaunchShape {
            grid: (PINNED_BLOCKS_PER_SM * sm_count.max(1), 1),
            threads: 32,
            shared_bytes: dynamic,
        };
        let gpu_time = self.timed_launch(
            &function,
            shape,
            &[
                ("chain", Arg::U64(chain)),
                ("block_stride", Arg::U64(plan.block_stride)),
                ("lines", Arg::U32(lines)),
                ("sm_count", Arg::U32(sm_count)),
                ("reference", Arg::U32(request.reference_sm)),
                ("claims", Arg::U64(claims.device_ptr())),
                ("wait_ns", Arg::U64(MAP_WAIT_NS)),
                ("out_latency", Arg::U64(latency.device_ptr())),
                ("out_status", Arg::U64(status.device_ptr())),
            ],
        )?;
        let host_latency = to_host(&latency)?;
        let host_status = to_host(&status)?;
        let sms = host_status
            .iter()
            .enumerate()
            .map(|(sm, &state)| {
                if state != 1 {
                    if state != 0 {
                        log::debug!("partition map: SM {sm} gave up waiting (status {state})");
                    }
                    return None;
                }
                let row = &host_latency[sm * per_sm..(sm + 1) * per_sm];
                Some(SmLineLatencies {
                    cold: row[..lines as usize].to_vec(),
                    warm: row[lines as usize..].to_vec(),
                })
            })
            .collect();
        Ok(PartitionMapRun { sms, gpu_time })
    }

    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        if samples == 0 {
            return Err(RunnerError::InvalidRequest(
                "at least one clock sample".into(),
            ));
        }
        let kernel = catalogue::clock_overhead();
        let function = self.function(kernel)?;
        let dynamic = kernel
            .dynamic_shared_bytes(samples, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, Carveout::DriverDefault)?;
        let out = DeviceBuffer::<u32>::zeroed(samples as usize)?;
        self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: dynamic,
            },
            &[
                ("samples", Arg::U32(samples)),
                ("out", Arg::U64(out.device_ptr())),
            ],
        )?;
        let mut host = to_host(&out)?;
        host.sort_unstable();
        Ok(host[host.len() / 2])
    }

    fn bandwidth(&mut self, request: &BandwidthRequest) -> Result<BandwidthRun, RunnerError> {
        self.run_bandwidth(request)
    }

    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        // About 20 ms at 1–2 GHz: long against %globaltimer's microsecond resolution.
        self.sm_clock_over(30_000_000)
    }

    fn quick_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        // About 1 ms: 0.1 % against the microsecond resolution, enough to see a drop of 3 %.
        self.sm_clock_over(2_000_000)
    }
}

impl CudaBackend {
    /// The SM clock from one block spinning `spin` cycles, against `%globaltimer`.
    fn sm_clock_over(&mut self, spin: u64) -> Result<f64, RunnerError> {
        let function = self.function(catalogue::sm_clock())?;
        let out = DeviceBuffer::<u64>::zeroed(4)?;
        self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: 0,
            },
            &[
                ("spin_cycles", Arg::U64(spin)),
                ("out", Arg::U64(out.device_ptr())),
            ],
        )?;
        let host = to_host(&out)?;
        let (t0, c0, t1, c1) = (host[0], host[1], host[2], host[3]);
        let ns = t1.saturating_sub(t0);
        let cycles = c1.saturating_sub(c0);
        if ns == 0 || cycles < spin {
            return Err(RunnerError::WrongResult(format!(
                "clock measurement: {cycles} cycles in {ns} ns"
            )));
        }
        Ok(cycles as f64 / ns as f64 * 1000.0)
    }
}

/// Reads the device's facts through the driver API.
fn query_device(ordinal: u32, device: c_int) -> Result<DeviceInfo, RunnerError> {
    let attr = |a: c_int| driver::device_attribute(device, a);
    let opt = |a: c_int| attr(a).ok().and_then(|v| u32::try_from(v).ok());
    let bytes = |a: c_int| attr(a).map(|v| v.max(0) as u64);
    Ok(DeviceInfo {
        name: handles::device_name(device)?,
        ordinal,
        compute_capability: ComputeCapability {
            major: attr(ffi::attr::COMPUTE_CAPABILITY_MAJOR)? as u32,
            minor: attr(ffi::attr::COMPUTE_CAPABILITY_MINOR)? as u32,
        },
        sm_count: attr(ffi::attr::MULTIPROCESSOR_COUNT)? as u32,
        sm_clock_khz: opt(ffi::attr::CLOCK_RATE),
        memory_clock_khz: opt(ffi::attr::MEMORY_CLOCK_RATE),
        memory_bus_width_bits: opt(ffi::attr::GLOBAL_MEMORY_BUS_WIDTH),
        total_memory_bytes: handles::device_total_memory(device)?,
        l2_bytes: bytes(ffi::attr::L2_CACHE_SIZE)?,
        persisting_l2_max_bytes: opt(ffi::attr::MAX_PERSISTING_L2_CACHE_SIZE).map(u64::from),
        shared_per_sm_bytes: bytes(ffi::attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        shared_per_block_bytes: bytes(ffi::attr::MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_per_block_optin_bytes: bytes(ffi::attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        reserved_shared_per_block_bytes: opt(ffi::attr::RESERVED_SHARED_MEMORY_PER_BLOCK)
            .map(u64::from),
        registers_per_sm: opt(ffi::attr::MAX_REGISTERS_PER_MULTIPROCESSOR),
        registers_per_block: opt(ffi::attr::MAX_REGISTERS_PER_BLOCK),
        max_threads_per_block: attr(ffi::attr::MAX_THREADS_PER_BLOCK)? as u32,
        max_threads_per_sm: opt(ffi::attr::MAX_THREADS_PER_MULTIPROCESSOR),
        warp_size: attr(ffi::attr::WARP_SIZE)? as u32,
        global_l1_cache_supported: opt(ffi::attr::GLOBAL_L1_CACHE_SUPPORTED).map(|v| v != 0),
        driver_version: driver::driver_version().ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pchase_kernels::Granularity;

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

    #[test]
    fn launch_arguments_name_real_parameters() {
        // Every parameter name the backend passes must exist in the catalogue, for every
        // kernel it launches; a typo would otherwise surface only on a GPU.
        let chase_names = [
            "chain",
            "block_stride",
            "shared_nodes_elems",
            "warmup_steps",
            "steps",
            "out_block",
        ];
        for path in LoadPath::ALL {
            let fine = catalogue::chase(path, Granularity::Fine);
            let coarse = catalogue::chase(path, Granularity::Coarse);
            for name in chase_names.iter().chain(&["out_latency", "out_index"]) {
                assert!(
                    fine.param_index(name).is_some(),
                    "{} lacks {name}",
                    fine.entry()
                );
            }
            for name in chase_names.iter().chain(&["out_cycles"]) {
                assert!(
                    coarse.param_index(name).is_some(),
                    "{} lacks {name}",
                    coarse.entry()
                );
            }
            assert_eq!(fine.params().len(), chase_names.len() + 2);
            assert_eq!(coarse.params().len(), chase_names.len() + 1);
        }
        for (kernel, names) in [
            (
                catalogue::init_chain(),
                &["chain", "block_stride", "nodes", "stride", "node_words"][..],
            ),
            (catalogue::clock_overhead(), &["samples", "out"][..]),
            (catalogue::sm_clock(), &["spin_cycles", "out"][..]),
        ] {
            assert_eq!(kernel.params().len(), names.len());
            for name in names {
                assert!(
                    kernel.param_index(name).is_some(),
                    "{} lacks {name}",
                    kernel.entry()
                );
            }
        }
    }
}
