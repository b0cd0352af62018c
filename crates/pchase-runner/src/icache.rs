//! Instruction-fetch requests: one warp runs `segments − entry` segments
//! of straight-line multiply-adds in a loop ([`pchase_kernels::icache`]); thread 0 times the
//! iterations after the warm-up.
//!
//! ```
//! use pchase_runner::icache::InstructionFetchRequest;
//! let request = InstructionFetchRequest::new(2048, 1536, 1, 64)?;
//! // 512 segments of 32 multiply-adds: 256 KiB of code on Volta and later.
//! assert_eq!(request.code_bytes(), 256 << 10);
//! assert_eq!(request.instructions_per_iteration(), 512 * 32);
//! assert!(InstructionFetchRequest::new(16, 16, 1, 1).is_err());
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

use std::time::Duration;

use pchase_kernels::icache;

use crate::error::RunnerError;

/// A run of the instruction-fetch kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstructionFetchRequest {
    /// Segments of the module (its JIT-compiled size); one module per count is loaded and
    /// kept.
    pub segments: u32,
    /// The segment the loop enters at: `segments − entry` segments run per iteration.
    pub entry: u32,
    /// Untimed iterations first (they bring the code into the caches it fits).
    pub warmup: u32,
    /// Timed iterations.
    pub iterations: u32,
}

impl InstructionFetchRequest {
    /// A checked request.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a module size outside
    /// 1 ..= [`icache::MAX_SEGMENTS`], an entry not below it, or no timed iteration.
    pub fn new(
        segments: u32,
        entry: u32,
        warmup: u32,
        iterations: u32,
    ) -> Result<Self, RunnerError> {
        let request = InstructionFetchRequest {
            segments,
            entry,
            warmup,
            iterations,
        };
        request.check()?;
        Ok(request)
    }

    /// What every backend requires of a request.
    ///
    /// # Errors
    /// As [`InstructionFetchRequest::new`].
    pub fn check(&self) -> Result<(), RunnerError> {
        if !(1..=icache::MAX_SEGMENTS).contains(&self.segments) {
            return Err(RunnerError::InvalidRequest(format!(
                "an instruction-fetch module has 1 to {} segments, asked for {}",
                icache::MAX_SEGMENTS,
                self.segments
            )));
        }
        if self.entry >= self.segments {
            return Err(RunnerError::InvalidRequest(format!(
                "entry segment {} is not below the module's {} segments",
                self.entry, self.segments
            )));
        }
        if self.iterations == 0 {
            return Err(RunnerError::InvalidRequest(
                "an instruction-fetch run needs a timed iteration".into(),
            ));
        }
        if self.warmup.checked_add(self.iterations).is_none() {
            return Err(RunnerError::InvalidRequest(
                "warm-up plus timed iterations overflow u32".into(),
            ));
        }
        Ok(())
    }

    /// Segments run per iteration.
    pub fn run_segments(&self) -> u32 {
        self.segments - self.entry
    }

    /// Multiply-adds run per iteration.
    pub fn instructions_per_iteration(&self) -> u64 {
        u64::from(self.run_segments()) * u64::from(icache::SEGMENT_INSTRUCTIONS)
    }

    /// Bytes of SASS the multiply-adds of one iteration occupy (16 bytes each from Volta
    /// on).
    pub fn code_bytes(&self) -> u64 {
        icache::code_bytes(self.run_segments())
    }
}

/// What one run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstructionFetchRun {
    /// `%clock64` cycles of the timed iterations, thread 0.
    pub cycles: u64,
    /// Device time of the launch.
    pub gpu_time: Duration,
}

impl InstructionFetchRun {
    /// Cycles per multiply-add of `request` (the loop's own few instructions included in the
    /// time, not in the count).
    pub fn cycles_per_instruction(&self, request: &InstructionFetchRequest) -> f64 {
        let instructions = request.instructions_per_iteration() * u64::from(request.iterations);
        self.cycles as f64 / instructions.max(1) as f64
    }
}
