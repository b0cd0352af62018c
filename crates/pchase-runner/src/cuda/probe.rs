//! The CUDA launch of a [`ProbeLaunch`]: module `probes` is loaded (from its cubin where the
//! GPU has one) when a probe is first launched; each buffer argument becomes device memory
//! holding its words, read back after the timed launch; a resident argument is the chain
//! buffer, as it is.

use pchase_kernels::probes;

use super::{
    driver::{Arg, LaunchShape},
    handles::DeviceBuffer,
    CudaBackend,
};
use crate::{
    backend::{Carveout, ProbeArg, ProbeLaunch, ProbeRun},
    error::RunnerError,
};

impl CudaBackend {
    /// Runs a probe (`Backend::probe`).
    pub(super) fn run_probe(&mut self, launch: &ProbeLaunch) -> Result<ProbeRun, RunnerError> {
        launch.check()?;
        self.check_kernel(launch.kernel)?;
        if self.probes.is_none() {
            self.probes = Some(self.loader.load_module(probes::module())?);
        }
        let function = self
            .probes
            .as_ref()
            .map(|module| module.function(launch.kernel))
            .ok_or_else(|| RunnerError::InvalidRequest("module `probes` not loaded".into()))??;
        self.configure_shared(&function, launch.shared_bytes, Carveout::DriverDefault)?;
        // The resident region is the chain buffer: its address stays while no larger
        // chain is asked for (nothing else runs between a benchmark's launches).
        let resident = match launch.args.iter().find_map(|(_, v)| match v {
            ProbeArg::Resident(bytes) => Some(*bytes),
            _ => None,
        }) {
            Some(bytes) => Some(self.chain_storage(bytes.div_ceil(4))?),
            None => None,
        };
        let buffers = launch
            .buffers()
            .into_iter()
            .map(DeviceBuffer::<u32>::from_slice)
            .collect::<Result<Vec<_>, _>>()?;
        let mut next = buffers.iter();
        let args: Vec<(&str, Arg)> = launch
            .args
            .iter()
            .map(|(name, value)| {
                let arg = match value {
                    ProbeArg::U32(v) => Arg::U32(*v),
                    ProbeArg::U64(v) => Arg::U64(*v),
                    ProbeArg::Buffer(_) => {
                        Arg::U64(next.next().map_or(0, DeviceBuffer::device_ptr))
                    }
                    ProbeArg::Resident(_) => Arg::U64(resident.unwrap_or(0)),
                };
                (*name, arg)
            })
            .collect();
        let gpu_time = self.timed_launch(
            &function,
            LaunchShape {
                grid: (launch.blocks, 1),
                threads: launch.threads,
                shared_bytes: launch.shared_bytes,
            },
            &args,
        )?;
        let buffers = buffers
            .iter()
            .map(DeviceBuffer::to_host)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ProbeRun {
            buffers,
            gpu_time,
            resident_address: resident,
        })
    }
}
