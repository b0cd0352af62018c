//! The CUDA launch of an [`InstructionFetchRequest`]: the module of the request's segment
//! count is loaded once and kept, from its embedded cubin at the benchmark's size
//! (`pchase_kernels::icache::cubin`) where the GPU has one, else generated
//! (`pchase_kernels::icache::module_ptx`) and JIT-compiled; one block of one warp runs it.
//!
//! With `MEMTOPO_DUMP_PTX=DIR` in the environment the module's PTX is also written to
//! `DIR/icache_<segments>.ptx`, so that a GPU script can assemble it with `ptxas` and count
//! the SASS with `cuobjdump` (`docs/evidence/2026-11-25-h100-icache-code-size/`).

use std::time::Instant;

use pchase_kernels::icache;

use super::{
    driver::{Arg, LaunchShape},
    handles::DeviceBuffer,
    to_host, CudaBackend, LoadedModule,
};
use crate::{
    error::RunnerError,
    icache::{InstructionFetchRequest, InstructionFetchRun},
};

/// The environment variable naming a directory for the generated PTX.
pub const DUMP_PTX_ENV: &str = "MEMTOPO_DUMP_PTX";

impl CudaBackend {
    /// Runs an instruction-fetch request (`Backend::instruction_fetch`).
    pub(super) fn run_instruction_fetch(
        &mut self,
        request: &InstructionFetchRequest,
    ) -> Result<InstructionFetchRun, RunnerError> {
        request.check()?;
        let kernel = icache::kernel();
        self.check_kernel(kernel)?;
        if self
            .icache
            .as_ref()
            .is_none_or(|(segments, _)| *segments != request.segments)
        {
            self.icache = None;
            let segments = request.segments;
            let ptx = || {
                icache::module_ptx(segments).map_err(|e| RunnerError::InvalidRequest(e.to_string()))
            };
            if let Some(dir) = std::env::var_os(DUMP_PTX_ENV) {
                let path = std::path::Path::new(&dir).join(format!("icache_{segments}.ptx"));
                if let Err(e) = std::fs::write(&path, ptx()?) {
                    log::warn!("{DUMP_PTX_ENV}: cannot write {}: {e}", path.display());
                }
            }
            let name = icache::module().name();
            let started = Instant::now();
            let (module, code) = self.loader.load(
                name,
                &format!("{name} ({segments} segments)"),
                |cc| icache::cubin(segments, cc),
                |image| LoadedModule::load_cubin(name, image),
                || LoadedModule::load(name, &ptx()?),
            )?;
            log::info!(
                "loaded {} with {segments} segments ({} KiB of multiply-adds) from {code} in {:.1} ms",
                kernel.entry(),
                icache::code_bytes(segments) >> 10,
                started.elapsed().as_secs_f64() * 1e3
            );
            self.icache = Some((request.segments, module));
        }
        let function = self
            .icache
            .as_ref()
            .map(|(_, module)| module.function(kernel))
            .ok_or_else(|| RunnerError::InvalidRequest("no instruction-fetch module".into()))??;
        let out = DeviceBuffer::<u32>::zeroed((icache::OUT_BYTES / 4) as usize)?;
        let gpu_time = self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: 0,
            },
            &[
                ("out", Arg::U64(out.device_ptr())),
                ("entry", Arg::U32(request.entry)),
                ("warmup", Arg::U32(request.warmup)),
                ("iterations", Arg::U32(request.iterations)),
                ("a", Arg::U32(1.0f32.to_bits())),
                ("b", Arg::U32(0.5f32.to_bits())),
            ],
        )?;
        let host = to_host(&out)?;
        let cycles = u64::from(host[0]) | (u64::from(host[1]) << 32);
        if cycles == 0 {
            return Err(RunnerError::WrongResult(
                "the instruction-fetch kernel reported no cycles".into(),
            ));
        }
        Ok(InstructionFetchRun { cycles, gpu_time })
    }
}
