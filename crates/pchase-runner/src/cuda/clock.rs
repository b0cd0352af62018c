//! The clocks: the overhead of reading `%clock`, and the SM clock against `%globaltimer`.

use pchase_kernels::catalogue;

use super::{
    driver::{Arg, LaunchShape},
    CudaBackend,
};
use crate::{backend::Carveout, error::RunnerError};

impl CudaBackend {
    /// [`Backend::clock_overhead`](crate::backend::Backend::clock_overhead) on this GPU.
    pub(super) fn launch_clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
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
        let out = self.outputs.outputs(&[samples as usize], &self.stream)?;
        self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: dynamic,
            },
            &[
                ("samples", Arg::U32(samples)),
                ("out", Arg::U64(out.ptr(0))),
            ],
        )?;
        let mut host = out.read()?.u32s(0).to_vec();
        host.sort_unstable();
        Ok(host[host.len() / 2])
    }

    /// The SM clock from one block spinning `spin` cycles, against `%globaltimer`.
    ///
    /// Its four `u64` outputs are a region of the reused outputs buffer, like a chase's:
    /// the sentinels measure the clock after every benchmark, and a buffer of its own
    /// (allocated, zeroed, copied back and freed each time) was host time at every one.
    pub(super) fn sm_clock_over(&mut self, spin: u64) -> Result<f64, RunnerError> {
        let function = self.function(catalogue::sm_clock())?;
        let out = self.outputs.outputs(&[2 * 4], &self.stream)?;
        self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: 0,
            },
            &[
                ("spin_cycles", Arg::U64(spin)),
                ("out", Arg::U64(out.ptr(0))),
            ],
        )?;
        let host = out.read()?.u64s(0);
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
