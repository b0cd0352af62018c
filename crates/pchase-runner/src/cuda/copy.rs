//! The launch of a [`CopyRequest`]: the copy modules loaded whole on first use
//! (from their cubin where the GPU has one), one source buffer (word `i` holding `i`) kept
//! between requests, the tensor map encoded per request, and every block's last slot checked
//! against the source.

use pchase_kernels::{copy as kernels, Kernel};

use super::{
    driver::{Arg, LaunchShape, LoadedFunction, LoadedModule},
    handles::DeviceBuffer,
    tensor_map::Tiled2d,
    to_host, CudaBackend,
};
use crate::{
    backend::Carveout,
    copy::{CopyBlock, CopyRequest, CopyRun, CopySource},
    error::RunnerError,
};

/// The copy modules loaded so far and the source buffer.
#[derive(Debug, Default)]
pub(super) struct CopyState {
    modules: Vec<LoadedModule>,
    src: Option<DeviceBuffer<u32>>,
}

impl CudaBackend {
    /// The function of a copy kernel, loading its module the first time.
    fn copy_function(&mut self, kernel: &'static Kernel) -> Result<LoadedFunction, RunnerError> {
        self.check_kernel(kernel)?;
        let name = kernel.module().name();
        if !self.copy.modules.iter().any(|m| m.name() == name) {
            let module = self.loader.load_module(kernel.module())?;
            self.copy.modules.push(module);
        }
        self.copy
            .modules
            .iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| RunnerError::InvalidRequest(format!("module {name} not loaded")))?
            .function(kernel)
    }

    /// The source buffer, at least `bytes` long, word `i` holding `i`.
    fn copy_source(&mut self, bytes: u64) -> Result<u64, RunnerError> {
        let words = usize::try_from(bytes.div_ceil(4))
            .map_err(|_| RunnerError::InvalidRequest(format!("a source of {bytes} B")))?;
        if self.copy.src.as_ref().is_none_or(|b| b.len() < words) {
            self.copy.src = None;
            let words = words.next_power_of_two();
            let host: Vec<u32> = (0..words).map(|i| i as u32).collect();
            self.copy.src = Some(DeviceBuffer::from_slice(&host)?);
        }
        Ok(self.copy.src.as_ref().map_or(0, DeviceBuffer::device_ptr))
    }

    /// Runs a copy request (`Backend::copy`).
    pub(super) fn run_copy(&mut self, request: &CopyRequest) -> Result<CopyRun, RunnerError> {
        request.check()?;
        let kernel = request.kernel();
        let function = self.copy_function(kernel)?;
        let shared = u32::try_from(request.shared_bytes()).map_err(|_| {
            RunnerError::InvalidRequest(format!("{} B of shared memory", request.shared_bytes()))
        })?;
        // All shared memory to the carveout, so that every block of the launch is resident
        // at once (the bandwidth assumes it).
        self.configure_shared(&function, shared, Carveout::Percent(100))?;
        let src = self.copy_source(request.source.buffer_bytes(request.bytes))?;
        let grid = request.grid as usize;
        let rounds = DeviceBuffer::<u32>::zeroed((grid * request.rounds as usize).max(1))?;
        let cycles = DeviceBuffer::<u64>::zeroed(grid)?;
        let out_block = DeviceBuffer::<u32>::zeroed(2 * grid)?;
        let mut args = vec![
            ("bytes", Arg::U32(request.bytes)),
            ("depth", Arg::U32(request.depth)),
            ("warmup_rounds", Arg::U32(request.warmup_rounds)),
            ("rounds", Arg::U32(request.rounds)),
            ("out_round", Arg::U64(rounds.device_ptr())),
            ("out_cycles", Arg::U64(cycles.device_ptr())),
            ("out_block", Arg::U64(out_block.device_ptr())),
        ];
        match request.source {
            CopySource::Linear { regions } => {
                args.push(("src", Arg::U64(src)));
                args.push(("regions", Arg::U32(regions)));
            }
            CopySource::Tensor2d {
                tiles_per_row,
                tile_rows,
                box_w,
                box_h,
            } => {
                let map = Tiled2d {
                    global: src,
                    width: u64::from(tiles_per_row) * u64::from(box_w),
                    height: u64::from(tile_rows) * u64::from(box_h),
                    box_w,
                    box_h,
                }
                .encode()?;
                args.push(("tmap", Arg::TensorMap(map)));
                args.push(("tiles_per_row", Arg::U32(tiles_per_row)));
                args.push(("tile_rows", Arg::U32(tile_rows)));
                args.push(("box_w", Arg::U32(box_w)));
                args.push(("box_h", Arg::U32(box_h)));
            }
        }
        let shape = LaunchShape {
            grid: (request.grid, 1),
            threads: request.threads,
            shared_bytes: shared,
        };
        let gpu_time = self.timed_launch(&function, shape, &args)?;
        let rows = to_host(&out_block)?;
        let cycles = to_host(&cycles)?;
        let rounds = to_host(&rounds)?;
        let per = request.rounds as usize;
        let mut blocks = Vec::with_capacity(grid);
        for b in 0..grid {
            let want = request.expected_check_word(b as u32);
            let got = u64::from(rows[2 * b + 1]);
            if got != want {
                return Err(RunnerError::WrongResult(format!(
                    "{} block {b}: the last slot holds word {got}, the source's region has {want}",
                    kernels::kernel(request.path).entry()
                )));
            }
            blocks.push(CopyBlock {
                sm: rows[2 * b],
                cycles: cycles[b],
                rounds: rounds[b * per..(b + 1) * per].to_vec(),
            });
        }
        Ok(CopyRun { blocks, gpu_time })
    }
}
