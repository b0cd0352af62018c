//! The CUDA backend: a context on one GPU, the embedded PTX modules, and the launches of
//! the catalogue's kernels. Every driver call of the crate is in this module, through
//! integer-typed declarations (`ffi`), never through cust's enum-typed `CUresult`.
//!
//! The parts: `device` (who the device is and what it reports), this file (the context,
//! the loaded modules and the [`Backend`] impl), `launch` (timed launches and shared-memory
//! settings), `chains` (laying out, writing and verifying chains; the L2 flush),
//! `chase` (the chase and two-phase launches, texture binding included), `pinned` (the
//! SM-pinned chase and the partition map), `clock` (clock overhead and SM clock),
//! `icache` (the instruction-fetch kernel, generated at the size asked for), `probe` (the
//! probes, launched from their arguments),
//! `cluster` (the thread-block-cluster requests), `cluster_driver` (`cuLaunchKernelEx`
//! and `cuOccupancyMaxActiveClusters`, looked up through `cuGetProcAddress`), `copy` (copies
//! from global to shared memory), `tensor_map` (`cuTensorMapEncodeTiled`, looked up the
//! same way), `vmm` (the TLB walks' memory: plain, or separately mapped chunks through the
//! virtual memory management API) and `walk` (the TLB walks).

mod bandwidth;
mod chains;
mod chase;
mod clock;
mod cluster;
mod cluster_driver;
mod code;
mod copy;
mod device;
mod driver;
mod errors;
mod ffi;
mod handles;
mod host;
mod icache;
mod launch;
mod list;
mod peer;
mod pinned;
mod probe;
mod scratch;
mod tensor_map;
pub mod vmm;
mod walk;

use pchase_kernels::{catalogue, Kernel};

use crate::{
    backend::{
        Backend, ChaseRequest, ChaseRun, PartitionMapRequest, PartitionMapRun, PinnedRequest,
        PinnedRun, TwoPhaseRequest,
    },
    bandwidth::{BandwidthRequest, BandwidthRun},
    device::DeviceInfo,
    error::RunnerError,
};
use driver::{LoadedFunction, LoadedModule};
use handles::{Context, DeviceBuffer, Event, Stream};

pub use code::{CodePreference, ModuleCode, PtxReason, JIT_ENV};
pub use device::{identify, DeviceIdentity};
pub use errors::{known_codes as known_error_codes, name as error_name};
pub use peer::{CudaNode, FloatingBackend};

/// Copies a device buffer to a new host vector.
fn to_host<T: handles::DeviceWord>(buffer: &DeviceBuffer<T>) -> Result<Vec<T>, RunnerError> {
    buffer.to_host()
}

/// The message of a raw `CUresult`, by name, for any code (also ones newer than this
/// crate): what every driver error of this backend is reported with.
pub fn describe_result(code: u32) -> String {
    errors::describe(code)
}

/// A GPU driven through CUDA.
///
/// Fields drop in declaration order: buffers and modules go before the context, and its
/// context is made current first (`Drop`), whichever thread drops it and whatever is
/// current there (a node's links drop the backends of every GPU on one thread).
#[derive(Debug)]
pub struct CudaBackend {
    single_thread_fill: bool,
    bandwidth: bandwidth::BandwidthState,
    copy: copy::CopyState,
    /// The host link's pinned and device buffers (`host.rs`).
    host: host::HostState,
    /// The instruction-fetch module loaded last, by its segment count.
    icache: Option<(u32, LoadedModule)>,
    /// Module `probes`, once a probe has been launched.
    probes: Option<LoadedModule>,
    /// Which code each module is loaded from, and what each was loaded from.
    loader: code::Loader,
    /// The TLB walks' region and its memory (before the context, which drops last).
    walk: Option<(crate::walk::WalkRegion, walk::WalkMemory)>,
    chain_buffer: Option<DeviceBuffer<u32>>,
    /// Every launch's outputs, regions of one reused buffer.
    outputs: scratch::Scratch,
    /// Small launch inputs (node counts, SM lists), regions of another.
    inputs: scratch::Scratch,
    /// The events every timed launch records, reused.
    events: (Event, Event),
    /// The events between back-to-back timed launches (`timed_launches`), grown on demand.
    sequence_events: Vec<Event>,
    modules: Vec<LoadedModule>,
    stream: Stream,
    info: DeviceInfo,
    context: Context,
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
    /// supports, each from its cubin where memtopo ships one for the device's compute
    /// capability, else from its PTX (`MEMTOPO_JIT=1`: from the PTX always).
    ///
    /// # Errors
    /// No driver, no device, a bad index, a bad `MEMTOPO_JIT`, or a module that fails to
    /// load (with the driver's JIT log).
    pub fn new(ordinal: u32) -> Result<CudaBackend, RunnerError> {
        Self::with_code(ordinal, CodePreference::from_env()?)
    }

    /// [`CudaBackend::new`] with the code preference given, not read from the environment.
    ///
    /// # Errors
    /// As [`CudaBackend::new`].
    pub fn with_code(ordinal: u32, preference: CodePreference) -> Result<CudaBackend, RunnerError> {
        let device = device::checked_device(ordinal)?;
        let started = std::time::Instant::now();
        let context = Context::new(device)?;
        log::debug!(
            "created the context in {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
        let info = device::query_device(ordinal, device)?;
        let stream = Stream::new()?;
        let cc = pchase_kernels::ComputeCapability::from(info.compute_capability);
        let mut loader = code::Loader::new(cc, preference);
        let mut modules = Vec::new();
        for module in catalogue::modules() {
            if module.loaded_on_demand() {
                log::debug!("module {}: loaded on first use", module.name());
            } else if module.supports(cc) {
                modules.push(loader.load_module(module)?);
            } else {
                log::info!(
                    "skipping module {}: needs compute capability {}, device has {}",
                    module.name(),
                    module.min_capability(),
                    info.compute_capability
                );
            }
        }
        Ok(CudaBackend {
            single_thread_fill: false,
            bandwidth: bandwidth::BandwidthState::default(),
            copy: copy::CopyState::default(),
            host: host::HostState::default(),
            icache: None,
            probes: None,
            loader,
            walk: None,
            chain_buffer: None,
            outputs: scratch::Scratch::default(),
            inputs: scratch::Scratch::default(),
            events: (Event::new()?, Event::new()?),
            sequence_events: Vec::new(),
            modules,
            stream,
            info,
            context,
        })
    }

    /// Builds chains with one thread instead of the parallel init kernel's grid. The
    /// chains are the same; this exists to show that the parallel fill does not change
    /// what the single timing thread then measures (`tests/it/gpu.rs`).
    pub fn set_single_thread_fill(&mut self, single: bool) {
        self.single_thread_fill = single;
    }

    /// Frees the device memory the benchmarks kept between launches (chains, bandwidth
    /// buffers, the TLB walks' region, launch outputs); the context and modules stay.
    /// What a release costs is then told apart from the context's own teardown (`-vv`).
    pub fn free_memory(&mut self) {
        self.chain_buffer = None;
        self.walk = None;
        self.bandwidth.free_buffers();
        self.host = host::HostState::default();
        self.outputs = scratch::Scratch::default();
        self.inputs = scratch::Scratch::default();
    }

    /// Names of the modules loaded on this device when the backend was created.
    pub fn loaded_modules(&self) -> Vec<&'static str> {
        self.modules.iter().map(LoadedModule::name).collect()
    }

    /// Every module load so far, in order (the on-demand modules when first used; each
    /// bandwidth kernel JIT-compiled alone is a load of module `bandwidth`): the module's
    /// name and what it was loaded from.
    pub fn module_loads(&self) -> &[(&'static str, ModuleCode)] {
        self.loader.loaded()
    }

    /// Checks that this device can run `kernel`.
    fn check_kernel(&self, kernel: &'static Kernel) -> Result<(), RunnerError> {
        self.info.check_kernel(kernel)
    }

    fn module_of(&self, kernel: &'static Kernel) -> Result<&LoadedModule, RunnerError> {
        self.check_kernel(kernel)?;
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
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // The fields then go in this context; destroying it takes it off this thread.
        // SAFETY: a live context, destroyed only when the fields have gone.
        let code = unsafe { ffi::cuCtxSetCurrent(self.context.handle()) };
        if code != ffi::SUCCESS {
            log::warn!("cuCtxSetCurrent before release: {}", errors::describe(code));
        }
    }
}

impl Backend for CudaBackend {
    fn device(&self) -> &DeviceInfo {
        &self.info
    }

    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        self.launch_chase(request)
    }

    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError> {
        self.launch_two_phase(request)
    }

    fn list_chase(
        &mut self,
        request: &crate::backend::ListChaseRequest,
    ) -> Result<ChaseRun, RunnerError> {
        self.launch_list_chase(request)
    }

    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError> {
        self.launch_pinned_chase(request)
    }

    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        self.launch_partition_map(request)
    }

    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        self.launch_clock_overhead(samples)
    }

    fn host(&mut self) -> Option<&mut dyn crate::host::HostBackend> {
        Some(self)
    }

    fn bandwidth(&mut self, request: &BandwidthRequest) -> Result<BandwidthRun, RunnerError> {
        self.run_bandwidth(request)
    }

    fn instruction_fetch(
        &mut self,
        request: &crate::icache::InstructionFetchRequest,
    ) -> Result<crate::icache::InstructionFetchRun, RunnerError> {
        self.run_instruction_fetch(request)
    }

    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        // About 20 ms at 1–2 GHz: long against %globaltimer's microsecond resolution.
        self.sm_clock_over(30_000_000)
    }

    fn quick_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        // About 0.3 ms at 2 GHz (1 ms at 600 MHz): at most a third of a percent against the
        // microsecond resolution, a ninth of the 3 % drop the sentinel is to see. Read after
        // every benchmark, each tenth of a millisecond here is some 6 ms of a default run.
        self.sm_clock_over(600_000)
    }

    fn warm_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        // About 2 ms at 2 GHz: 0.05 % against the microsecond resolution, a fortieth of the
        // clock's run-to-run tolerance (2 %); the 30-million-cycle window (15 ms) is for a
        // clock that may still be rising.
        self.sm_clock_over(4_000_000)
    }

    fn copy(
        &mut self,
        request: &crate::copy::CopyRequest,
    ) -> Result<crate::copy::CopyRun, RunnerError> {
        self.run_copy(request)
    }

    fn walks(&mut self) -> Option<&mut dyn crate::walk::WalkBackend> {
        Some(self)
    }

    fn probe(
        &mut self,
        launch: &crate::backend::ProbeLaunch,
        _model: &dyn crate::backend::ProbeModel,
    ) -> Result<crate::backend::ProbeRun, RunnerError> {
        self.run_probe(launch)
    }

    fn clusters(&mut self) -> Option<&mut dyn crate::cluster::ClusterBackend> {
        // Thread-block clusters arrived with compute capability 9.0 (the `hopper` module).
        let cc = pchase_kernels::ComputeCapability::from(self.info.compute_capability);
        if catalogue::hopper_module().supports(cc) {
            Some(self)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::LoadPath;
    use pchase_kernels::Granularity;

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
                catalogue::two_phase_block(),
                &[
                    "chain_a",
                    "nodes_a",
                    "stride_a",
                    "chain_b",
                    "nodes_b",
                    "stride_b",
                    "steps",
                    "out_latency",
                    "out_index",
                    "out_block",
                ][..],
            ),
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
