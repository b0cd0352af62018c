//! The CUDA launch of a [`BandwidthRequest`]: the module loaded whole from its cubin the
//! first time a bandwidth kernel is launched, where the GPU has one; else each bandwidth
//! kernel JIT-compiled as a module of its own the first time it is launched
//! (`pchase_kernels::bandwidth::kernel_ptx`), so that only the shapes a search visits are
//! compiled. Buffers kept between requests, one untimed launch, then every repetition timed
//! with events.

use std::time::Duration;

use pchase_kernels::{
    bandwidth::{self as kernels, ReadVariant},
    Kernel,
};

use super::driver::{check, Arg, LaunchShape};
use super::{ffi, CudaBackend, DeviceBuffer, LoadedFunction, LoadedModule, ModuleCode};
use crate::{
    backend::Carveout,
    bandwidth::{
        check_bandwidth, BandwidthOp, BandwidthRequest, BandwidthRun, BandwidthShape, RegionLayout,
    },
    error::RunnerError,
};

/// The byte every buffer is filled with before it is read: not zero, so that no memory
/// system could shortcut the reads of a page it knows to be zero.
const FILL_BYTE: u8 = 0xa5;

/// The bandwidth benchmarks' kernels and device memory, kept between requests (the tuner
/// launches dozens of shapes over one buffer).
#[derive(Debug, Default)]
pub(super) struct BandwidthState {
    /// The whole module, loaded from its cubin.
    whole: Option<LoadedModule>,
    /// The kernels JIT-compiled so far, each its own module, by entry name (no cubin for
    /// the GPU, or `MEMTOPO_JIT=1`).
    modules: Vec<(&'static str, LoadedModule)>,
    /// The buffer read (and a copy's source).
    src: Option<DeviceBuffer<u32>>,
    /// The buffer written (and a copy's destination).
    dst: Option<DeviceBuffer<u32>>,
    /// The second read and written buffers of a request that streams from device memory
    /// (`alternates`): every other launch uses them.
    src_b: Option<DeviceBuffer<u32>>,
    dst_b: Option<DeviceBuffer<u32>>,
    /// Where a thread whose loads XOR to the key would store (`u32` per thread).
    sink: Option<DeviceBuffer<u32>>,
}

impl BandwidthState {
    /// Frees the buffers (the kernels stay loaded).
    pub(super) fn free_buffers(&mut self) {
        self.src = None;
        self.dst = None;
        self.src_b = None;
        self.dst_b = None;
        self.sink = None;
    }
}

/// Whether consecutive launches of `request` use two disjoint sets of buffers: where its
/// region is at least four L2s it streams from device memory, and one buffer would let a
/// launch find the previous one's last lines in the L2 (a launch that ended within an L2
/// of where the next begins hands it up to an L2 of hits: 60 MiB of a 4.8 GB launch on
/// the H200, where one shape then read 100.6 % of the API peak). The L2's
/// own levels, whose data must stay there, use one buffer.
fn alternates(request: &BandwidthRequest, info: &crate::DeviceInfo) -> bool {
    matches!(request.layout, RegionLayout::GridStride)
        && info.l2_bytes > 0
        && request.region_bytes >= 4 * info.l2_bytes
}

/// A buffer of at least `bytes` in `slot`, reallocated (the old one freed first) when too
/// small; filled with [`FILL_BYTE`] when allocated.
fn ensure(slot: &mut Option<DeviceBuffer<u32>>, bytes: u64) -> Result<u64, RunnerError> {
    let words = usize::try_from(bytes.div_ceil(4))
        .map_err(|_| RunnerError::InvalidRequest(format!("a buffer of {bytes} B")))?;
    if slot.as_ref().is_none_or(|b| b.len() < words) {
        *slot = None;
        let buffer = DeviceBuffer::<u32>::uninitialized(words.max(1))?;
        // SAFETY: the range is the allocation just made.
        check("cuMemsetD8", unsafe {
            ffi::cuMemsetD8(buffer.device_ptr(), FILL_BYTE, words.max(1) * 4)
        })?;
        *slot = Some(buffer);
    }
    Ok(slot.as_ref().map(DeviceBuffer::device_ptr).unwrap_or(0))
}

/// The arguments of a launch of `op`, by parameter name: the addressing
/// `(block_stride, block_phase, step, mask)` and the buffers `[src, dst, sink]` (each passed
/// only where the kernel has the parameter).
fn launch_args(
    op: BandwidthOp,
    iterations: u32,
    (block_stride, block_phase, step, mask): (u64, u32, u32, u32),
    [src, dst, sink]: [u64; 3],
) -> Vec<(&'static str, Arg)> {
    let mut args = vec![
        ("block_phase", Arg::U32(block_phase)),
        ("step", Arg::U32(step)),
        ("mask", Arg::U32(mask)),
        ("iterations", Arg::U32(iterations)),
    ];
    if matches!(op, BandwidthOp::Read(_) | BandwidthOp::Copy) {
        args.push(("src", Arg::U64(src)));
    }
    if matches!(op, BandwidthOp::Write | BandwidthOp::Copy) {
        args.push(("dst", Arg::U64(dst)));
    }
    if op != BandwidthOp::SharedRead {
        args.push(("block_stride", Arg::U64(block_stride)));
    }
    if matches!(op, BandwidthOp::Read(_) | BandwidthOp::SharedRead) {
        args.push(("sink", Arg::U64(sink)));
    }
    args
}

impl CudaBackend {
    /// The function of `kernel`: from the whole module, loaded from its cubin the first
    /// time any bandwidth kernel is asked for, where the GPU has one; else JIT-compiled
    /// alone the first time it is asked for.
    ///
    /// Compiling ahead on other threads does not help: the driver holds its lock while it
    /// JIT-compiles, and with three threads compiling every bandwidth kernel from the start
    /// of an H200 run with an empty JIT cache the first benchmark began only after some 55
    /// of them, 0.8 s later.
    fn bandwidth_function(
        &mut self,
        kernel: &'static Kernel,
    ) -> Result<LoadedFunction, RunnerError> {
        self.check_kernel(kernel)?;
        if let Some(module) = &self.bandwidth.whole {
            return module.function(kernel);
        }
        if let Some((_, module)) = self
            .bandwidth
            .modules
            .iter()
            .find(|(entry, _)| *entry == kernel.entry())
        {
            return module.function(kernel);
        }
        let ptx = kernels::kernel_ptx(kernel).ok_or_else(|| {
            RunnerError::InvalidRequest(format!("{} is not a bandwidth kernel", kernel.entry()))
        })?;
        let module = kernels::module();
        let name = module.name();
        let label = match self.loader.choose(name, |cc| module.cubin(cc)) {
            Ok(_) => format!("{name} (first used by {})", kernel.entry()),
            Err(_) => format!("{name}, kernel {} alone", kernel.entry()),
        };
        let (loaded, code) = self.loader.load(
            name,
            &label,
            |cc| module.cubin(cc),
            |image| LoadedModule::load_cubin(name, image),
            || LoadedModule::load(name, &ptx),
        )?;
        let function = loaded.function(kernel)?;
        match code {
            ModuleCode::Cubin(_) => self.bandwidth.whole = Some(loaded),
            ModuleCode::Ptx(_) => self.bandwidth.modules.push((kernel.entry(), loaded)),
        }
        Ok(function)
    }

    /// Whether the whole bandwidth module is loaded (from its cubin).
    pub fn bandwidth_module_loaded(&self) -> bool {
        self.bandwidth.whole.is_some()
    }

    /// Names of the bandwidth kernels JIT-compiled so far (each a module of its own); none
    /// when the module came from its cubin ([`CudaBackend::bandwidth_module_loaded`]).
    pub fn loaded_bandwidth_kernels(&self) -> Vec<&'static str> {
        self.bandwidth
            .modules
            .iter()
            .map(|(entry, _)| *entry)
            .collect()
    }

    /// Reads `region` bytes (a power of two) of the read buffer once with `ld.global.cg`
    /// over the whole GPU (the L2 flush: `CudaBackend::flush_l2`).
    pub(super) fn read_through_l2(&mut self, region: u64) -> Result<(), RunnerError> {
        let shape = BandwidthShape {
            op: BandwidthOp::Read(ReadVariant::Cg),
            vector_bytes: 16,
            unroll: 4,
            blocks_per_sm: 2,
            threads: 1024,
        };
        let per_iteration =
            u64::from(shape.blocks(self.info.sm_count)) * shape.block_iteration_bytes();
        let iterations = u32::try_from(region.div_ceil(per_iteration.max(1)))
            .unwrap_or(u32::MAX)
            .max(1);
        // One timed repetition is the least a request has: the region is read twice.
        self.run_bandwidth(&BandwidthRequest {
            shape,
            layout: RegionLayout::GridStride,
            region_bytes: region.clamp(4096, 1 << 31),
            iterations,
            repetitions: 1,
            warm_up: true,
        })?;
        Ok(())
    }

    /// Runs a bandwidth request (`Backend::bandwidth`).
    pub(super) fn run_bandwidth(
        &mut self,
        request: &BandwidthRequest,
    ) -> Result<BandwidthRun, RunnerError> {
        self.run_bandwidth_over(request, None)
    }

    /// Runs a bandwidth request whose reads or writes go to `over` (a device pointer to at
    /// least the request's buffer, e.g. mapped host memory) instead of the backend's
    /// buffers, each timed launch after an L2 flush and none untimed; `None`: the
    /// backend's device buffers.
    pub(super) fn run_bandwidth_over(
        &mut self,
        request: &BandwidthRequest,
        over: Option<u64>,
    ) -> Result<BandwidthRun, RunnerError> {
        check_bandwidth(request, &self.info)?;
        let kernel = request.kernel()?;
        let function = self.bandwidth_function(kernel)?;
        let sm_count = self.info.sm_count;
        let shape = &request.shape;
        let blocks = shape.blocks(sm_count);
        let (block_stride, block_phase, step, mask) = request.addressing(sm_count);
        let buffer = request.buffer_bytes(sm_count);
        let threads = u64::from(blocks) * u64::from(shape.threads);
        let alternate = over.is_none() && alternates(request, &self.info);
        let buffers = &mut self.bandwidth;
        let (reads, writes) = match shape.op {
            BandwidthOp::Read(_) => (true, false),
            BandwidthOp::Write => (false, true),
            BandwidthOp::Copy => (true, true),
            BandwidthOp::SharedRead => (false, false),
        };
        let used = |slot: &mut Option<DeviceBuffer<u32>>, needed: bool| {
            if needed {
                ensure(slot, buffer)
            } else {
                Ok(0)
            }
        };
        let mut sets = vec![match over {
            Some(pointer) => (
                if reads { pointer } else { 0 },
                if writes { pointer } else { 0 },
            ),
            None => (
                used(&mut buffers.src, reads)?,
                used(&mut buffers.dst, writes)?,
            ),
        }];
        if alternate {
            sets.push((
                used(&mut buffers.src_b, reads)?,
                used(&mut buffers.dst_b, writes)?,
            ));
        }
        let sink = match shape.op {
            BandwidthOp::Read(_) | BandwidthOp::SharedRead => {
                ensure(&mut buffers.sink, 4 * threads)?
            }
            _ => 0,
        };
        // Global reads get the largest L1 (the L1 read needs every block's region in it);
        // shared reads the largest shared memory (as many blocks per SM as fit).
        let (dynamic, carveout) = match (shape.op, request.layout) {
            (BandwidthOp::SharedRead, _) => (
                u32::try_from(request.region_bytes)
                    .map_err(|_| RunnerError::InvalidRequest("shared region over 4 GiB".into()))?,
                Carveout::Percent(100),
            ),
            (BandwidthOp::Read(_), RegionLayout::PerBlock) => (0, Carveout::Percent(0)),
            _ => (0, Carveout::DriverDefault),
        };
        self.configure_shared(&function, dynamic, carveout)?;
        let launch = LaunchShape {
            grid: (blocks, 1),
            threads: shape.threads,
            shared_bytes: dynamic,
        };
        let args: Vec<_> = sets
            .into_iter()
            .map(|(src, dst)| {
                launch_args(
                    shape.op,
                    request.iterations,
                    (block_stride, block_phase, step, mask),
                    [src, dst, sink],
                )
            })
            .collect();
        let (elapsed, gpu_time) = if let Some(pointer) = over {
            // Memory elsewhere (mapped host memory): the L2 may keep lines of it, so no
            // untimed launch, and every timed one starts after an L2 flush. The flush runs
            // a launch of its own; the sink is fetched again after it.
            let mut elapsed = Vec::new();
            for _ in 0..request.repetitions {
                self.flush_l2()?;
                let sink = match shape.op {
                    BandwidthOp::Read(_) => ensure(&mut self.bandwidth.sink, 4 * threads)?,
                    _ => 0,
                };
                let args = launch_args(
                    shape.op,
                    request.iterations,
                    (block_stride, block_phase, step, mask),
                    [pointer, pointer, sink],
                );
                elapsed.push(self.timed_launch(&function, launch, &args)?);
            }
            let total = elapsed.iter().sum();
            (elapsed, total)
        } else {
            // One untimed launch first where asked (it brings the data into the cache under
            // test and the clocks up); each repetition is timed on its own, all back to back.
            self.timed_launches(
                &function,
                launch,
                &args,
                request.repetitions,
                request.warm_up,
            )?
        };
        if elapsed.contains(&Duration::ZERO) {
            return Err(RunnerError::WrongResult(format!(
                "a bandwidth launch ({}) took no measurable time",
                shape
            )));
        }
        Ok(BandwidthRun {
            elapsed,
            bytes_per_launch: request.bytes_per_launch(sm_count),
            gpu_time,
        })
    }
}

#[cfg(test)]
mod tests {
    use pchase_kernels::bandwidth::ReadVariant;

    use crate::backend::Backend;
    use crate::bandwidth::{BandwidthRequest, BandwidthShape, RegionLayout};

    use super::*;

    #[test]
    fn launch_arguments_name_every_parameter_once_for_every_kernel() {
        for kernel in kernels::kernels() {
            let shape = kernels::shape_of(kernel).expect("a bandwidth kernel");
            let args = launch_args(shape.op, 1, (0, 0, 0, 0), [0, 0, 0]);
            let mut passed: Vec<&str> = args.iter().map(|(name, _)| *name).collect();
            let mut declared: Vec<&str> = kernel.params().iter().map(|p| p.name()).collect();
            passed.sort_unstable();
            declared.sort_unstable();
            assert_eq!(passed, declared, "{}", kernel.entry());
            for (name, arg) in &args {
                let index = kernel.param_index(name).expect("declared");
                let ty = kernel.params()[index].ty();
                assert_eq!(
                    matches!(arg, Arg::U64(_)),
                    ty == pchase_kernels::ParamType::U64,
                    "{}: {name}",
                    kernel.entry()
                );
            }
        }
    }

    /// Device memory's requests alternate between two sets of buffers; the L2's, whose data
    /// must stay, and the per-block levels do not.
    #[test]
    fn only_requests_that_stream_from_device_memory_alternate_buffers() {
        let h100 = crate::sim::SimProfile::bundled("h100").expect("bundled");
        let device = &h100.device;
        let request = |level| {
            let plan = crate::measure::bandwidth::LevelPlan::new(level, device, 1980.0, None, None)
                .expect("plan");
            plan.request(
                plan.seed,
                device.sm_count,
                Duration::from_millis(1),
                3,
                true,
            )
        };
        use crate::bandwidth::BandwidthLevel as L;
        for level in [L::MemoryRead, L::MemoryWrite, L::MemoryCopy] {
            assert!(alternates(&request(level), device), "{level}");
        }
        for level in [L::L1, L::Shared, L::L2Near, L::L2, L::L2Write] {
            assert!(!alternates(&request(level), device), "{level}");
        }
        // The L2 flush reads twice the L2 (a power of two): one buffer.
        let mut flush = request(L::MemoryRead);
        flush.region_bytes = (2 * device.l2_bytes).next_power_of_two();
        assert!(!alternates(&flush, device));
    }

    #[test]
    fn requests_are_checked_before_the_driver_is_touched() {
        // Without a driver this fails at CudaBackend::new; the check itself needs none.
        let Ok(mut gpu) = CudaBackend::new(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let request = BandwidthRequest {
            shape: BandwidthShape {
                op: BandwidthOp::Read(ReadVariant::Cs),
                vector_bytes: 4,
                unroll: 1,
                blocks_per_sm: 1,
                threads: 128,
            },
            layout: RegionLayout::GridStride,
            region_bytes: 1 << 20,
            iterations: 1,
            repetitions: 1,
            warm_up: true,
        };
        assert!(matches!(
            gpu.bandwidth(&request),
            Err(RunnerError::InvalidRequest(_))
        ));
    }
}
