//! Timed launches and the shared-memory settings of a function.

use std::time::Duration;

use super::{
    driver::{Arg, LaunchShape, LoadedFunction},
    ffi::{self, StreamHandle},
    CudaBackend,
};
use crate::{backend::Carveout, error::RunnerError};

/// `CU_SHAREDMEM_CARVEOUT_DEFAULT`.
const CARVEOUT_DEFAULT: i32 = -1;

/// Shared memory a block gets without opting in.
const STATIC_SHARED_LIMIT: u32 = 48 * 1024;

impl CudaBackend {
    /// Launches `function`, timed with events, and waits for it.
    pub(super) fn timed_launch(
        &self,
        function: &LoadedFunction,
        shape: LaunchShape,
        args: &[(&str, Arg)],
    ) -> Result<Duration, RunnerError> {
        self.timed(|stream| function.launch(stream, shape, args))
    }

    /// Runs `launch` on the stream between two events, waits, and returns the time between
    /// them.
    pub(super) fn timed(
        &self,
        launch: impl FnOnce(StreamHandle) -> Result<(), RunnerError>,
    ) -> Result<Duration, RunnerError> {
        let (start, stop) = &self.events;
        start.record(&self.stream)?;
        launch(self.stream.handle())?;
        stop.record(&self.stream)?;
        self.stream
            .synchronize("cuStreamSynchronize (kernel execution)")?;
        stop.elapsed_since(start)
    }

    /// Sets the dynamic shared-memory limit and the carveout of a function.
    pub(super) fn configure_shared(
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
}
