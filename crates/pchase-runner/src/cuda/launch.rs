//! Timed launches and the shared-memory settings of a function.

use std::time::Duration;

use super::{
    driver::{Arg, LaunchShape, LoadedFunction},
    ffi::{self, StreamHandle},
    handles::Event,
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

    /// Launches `function` once untimed (where `warm_up`) and then `timed` times, back to
    /// back with an event between each two, and waits once at the end: returns the timed
    /// launches' durations and the device time of all of them.
    ///
    /// No launch waits for the host, so the GPU never idles between two timed launches, and
    /// what one launch leaves unfinished is paid within the next, as within one long kernel.
    /// Device-memory writes need that: a launch ends with up to some 25 MiB of dirty lines in
    /// the H100's L2 (Nsight Compute counted 486–495 MiB written to DRAM per 512 MiB
    /// launch), and with a wait after each launch the L2 wrote them back in the idle gap,
    /// outside every timing: one write launch of five came out at 100.6 % of the API's peak.
    ///
    /// Launch `i` (the untimed one, where there is one, is 0) takes its arguments from
    /// `args[i % args.len()]`.
    pub(super) fn timed_launches(
        &mut self,
        function: &LoadedFunction,
        shape: LaunchShape,
        args: &[Vec<(&str, Arg)>],
        timed: u32,
        warm_up: bool,
    ) -> Result<(Vec<Duration>, Duration), RunnerError> {
        if args.is_empty() {
            return Err(RunnerError::InvalidRequest(
                "a timed sequence without arguments".into(),
            ));
        }
        let untimed = usize::from(warm_up);
        let needed = timed as usize + untimed + 1;
        while self.sequence_events.len() < needed {
            self.sequence_events.push(Event::new()?);
        }
        let events = &self.sequence_events[..needed];
        events[0].record(&self.stream)?;
        for (i, event) in events[1..].iter().enumerate() {
            function.launch(self.stream.handle(), shape, &args[i % args.len()])?;
            event.record(&self.stream)?;
        }
        self.stream
            .synchronize("cuStreamSynchronize (kernel execution)")?;
        let elapsed = events[untimed..]
            .windows(2)
            .map(|pair| pair[1].elapsed_since(&pair[0]))
            .collect::<Result<Vec<_>, _>>()?;
        let total = events[needed - 1].elapsed_since(&events[0])?;
        Ok((elapsed, total))
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
