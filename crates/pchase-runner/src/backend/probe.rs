//! Probe launches: a kernel of module `probes` (`pchase_kernels::probes`) described by its
//! arguments, which both backends run without a request type of its own. The CUDA backend
//! launches it; the simulated GPU asks the benchmark's own model ([`ProbeModel`]) what the
//! kernel would have written, given what the simulation knows ([`SimulatedGpu`]). A benchmark
//! with a probe therefore keeps its launch, its model and its analysis in one module.
//!
//! ```
//! use pchase_runner::{ProbeArg, ProbeLaunch};
//! # fn main() -> Result<(), pchase_runner::RunnerError> {
//! # let Some(kernel) = pchase_kernels::probes::kernels().next() else { return Ok(()) };
//! // Arguments are named as the catalogue names the kernel's parameters; a buffer is device
//! // memory holding these words before the launch, read back after it.
//! let mut launch = ProbeLaunch::new(kernel, 1, 32);
//! for param in kernel.params() {
//!     launch = launch.arg(param.name(), match param.ty() {
//!         pchase_kernels::ParamType::U32 => ProbeArg::U32(1),
//!         _ => ProbeArg::Buffer(vec![0; 64]),
//!     });
//! }
//! launch.check()?;
//! assert!(ProbeLaunch::new(kernel, 1, 32).check().is_err(), "arguments missing");
//! # Ok(()) }
//! ```

use std::time::Duration;

use pchase_kernels::{Kernel, KernelKind, LoadPath, ParamType};

use crate::{device::DeviceInfo, error::RunnerError};

/// One argument of a [`ProbeLaunch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeArg {
    /// A `.u32` parameter.
    U32(u32),
    /// A `.u64` parameter passed as a number.
    U64(u64),
    /// A `.u64` parameter that points to device memory holding these words when the kernel
    /// starts; what the kernel left there is returned in [`ProbeRun::buffers`].
    Buffer(Vec<u32>),
    /// A `.u64` parameter that points to at least this many bytes of the backend's reused
    /// chase memory (the chain buffer), neither written before the launch nor read back: the
    /// same device address launch after launch while no larger one is asked for, so that
    /// the lines a probe reads keep their places (their L2 homes and sets) from one launch
    /// to the next. [`ProbeRun::resident_address`] gives the address.
    Resident(u64),
}

/// A launch of a probe kernel: grid, block, dynamic shared memory and named arguments.
#[derive(Debug, Clone)]
pub struct ProbeLaunch {
    /// The kernel, of module `probes`.
    pub kernel: &'static Kernel,
    /// Blocks in the grid.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory per block, bytes.
    pub shared_bytes: u32,
    /// The arguments by parameter name, one for each of the kernel's parameters.
    pub args: Vec<(&'static str, ProbeArg)>,
}

/// What a [`ProbeLaunch`] left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRun {
    /// The words of each [`ProbeArg::Buffer`] after the launch, in argument order.
    pub buffers: Vec<Vec<u32>>,
    /// Device time of the launch.
    pub gpu_time: Duration,
    /// The device address of the [`ProbeArg::Resident`] memory, where the launch had one.
    pub resident_address: Option<u64>,
}

/// What a [`ProbeModel`] says the kernel wrote, and how long it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatedProbe {
    /// The words of each [`ProbeArg::Buffer`] after the launch, in argument order.
    pub buffers: Vec<Vec<u32>>,
    /// SM cycles the launch took (the simulated GPU turns them into device time).
    pub cycles: u64,
}

impl ProbeLaunch {
    /// A launch of `kernel` over `blocks` blocks of `threads` threads, no dynamic shared
    /// memory, no arguments yet.
    pub fn new(kernel: &'static Kernel, blocks: u32, threads: u32) -> Self {
        ProbeLaunch {
            kernel,
            blocks,
            threads,
            shared_bytes: 0,
            args: Vec::new(),
        }
    }

    /// The launch with `bytes` of dynamic shared memory per block.
    pub fn shared(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }

    /// The launch with one more argument.
    pub fn arg(mut self, name: &'static str, value: ProbeArg) -> Self {
        self.args.push((name, value));
        self
    }

    /// The value of argument `name`, if given.
    pub fn value(&self, name: &str) -> Option<&ProbeArg> {
        self.args.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The `.u32` argument `name`.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] when it is missing or not a `.u32`.
    pub fn u32(&self, name: &str) -> Result<u32, RunnerError> {
        match self.value(name) {
            Some(ProbeArg::U32(v)) => Ok(*v),
            _ => Err(RunnerError::InvalidRequest(format!(
                "probe `{}`: no .u32 argument `{name}`",
                self.kernel.entry()
            ))),
        }
    }

    /// The initial words of every [`ProbeArg::Buffer`], in argument order.
    pub fn buffers(&self) -> Vec<&[u32]> {
        self.args
            .iter()
            .filter_map(|(_, v)| match v {
                ProbeArg::Buffer(words) => Some(words.as_slice()),
                _ => None,
            })
            .collect()
    }

    /// Checks the launch against the catalogue: a probe kernel, at least one thread, every
    /// parameter given once with its type (a buffer for a `.u64` pointer), nothing else, and
    /// no empty buffer.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] naming what is wrong.
    pub fn check(&self) -> Result<(), RunnerError> {
        let entry = self.kernel.entry();
        let bad = |what: String| {
            Err(RunnerError::InvalidRequest(format!(
                "probe `{entry}`: {what}"
            )))
        };
        if self.kernel.kind() != KernelKind::Probe {
            return bad("not a kernel of module `probes`".into());
        }
        if self.blocks == 0 || self.threads == 0 {
            return bad(format!(
                "{} block(s) of {} thread(s)",
                self.blocks, self.threads
            ));
        }
        for (i, (name, value)) in self.args.iter().enumerate() {
            if self.args[..i].iter().any(|(n, _)| n == name) {
                return bad(format!("argument `{name}` given twice"));
            }
            let Some(param) = self.kernel.params().iter().find(|p| p.name() == *name) else {
                return bad(format!("no parameter `{name}`"));
            };
            let fits = matches!(
                (param.ty(), value),
                (ParamType::U32, ProbeArg::U32(_))
                    | (
                        ParamType::U64,
                        ProbeArg::U64(_) | ProbeArg::Buffer(_) | ProbeArg::Resident(_)
                    )
            );
            if !fits {
                return bad(format!(
                    "argument `{name}` does not fit its {} parameter",
                    param.ty().ptx()
                ));
            }
            if matches!(value, ProbeArg::Buffer(words) if words.is_empty()) {
                return bad(format!("buffer `{name}` is empty"));
            }
            if matches!(value, ProbeArg::Resident(0)) {
                return bad(format!("resident memory `{name}` of 0 bytes"));
            }
            if matches!(value, ProbeArg::Resident(_))
                && self.args[..i]
                    .iter()
                    .any(|(_, v)| matches!(v, ProbeArg::Resident(_)))
            {
                return bad(format!(
                    "resident memory `{name}`: a launch has one resident region at most"
                ));
            }
        }
        if let Some(missing) = self
            .kernel
            .params()
            .iter()
            .find(|p| self.value(p.name()).is_none())
        {
            return bad(format!("argument `{}` missing", missing.name()));
        }
        Ok(())
    }
}

/// What the simulated GPU knows, as a benchmark's [`ProbeModel`] sees it.
pub trait SimulatedGpu {
    /// The simulated device.
    fn device(&self) -> &DeviceInfo;

    /// The profile's truth for `benchmark` (its `[benchmarks.<name>]` table), if it has one.
    fn truth(&self, benchmark: &str) -> Option<&toml::Value>;

    /// The hit latency of the first cache on `path` (shared memory's latency for
    /// [`LoadPath::Shared`]), cycles; `None` where the path has no cache.
    fn hit_latency(&self, path: LoadPath) -> Option<u32>;

    /// Cycles of one timed load's noise: the profile's jitter and, rarely, its outlier.
    fn noise(&mut self) -> i64;

    /// SMs per GPC of the simulated GPU's clusters (its profile's `clusters.gpc_sms`), if
    /// it has clusters.
    fn gpc_sms(&self) -> Option<&[u32]>;

    /// Cycles a timed load's two clock reads add to it (the profile's
    /// `clock.overhead_cycles`).
    fn clock_overhead(&self) -> u32;

    /// The device address a [`ProbeArg::Resident`] argument gets: the same in every launch.
    fn resident_address(&self) -> u64;

    /// Empties the simulated L2, as the start of every simulated launch does.
    fn l2_reset(&mut self);

    /// Cycles of one `.cg` load of `address` by SM `sm` through the simulated L2, without
    /// noise or clock overhead: a near or a far hit's latency, or device memory's (plus the
    /// far partition's penalty for a line homed there). The load fills what it passes, as
    /// a chase's does.
    fn l2_load(&mut self, sm: u32, address: u64) -> u32;

    /// The sets, as (partition, set), that a `.cg` load of `address` by SM `sm` looks up
    /// and may fill in the simulated L2: its home partition's, and the near partition's set
    /// of its copy where the near partition keeps copies of far lines. Every replacement
    /// policy of the simulator is a set's own, so loads whose sets differ never change
    /// what the other's set holds.
    fn l2_sets(&self, sm: u32, address: u64) -> [Option<(u32, u64)>; 2];
}

/// A benchmark's model of its probe on the simulated GPU: what the kernel would have left in
/// its buffers. It lives beside the benchmark, as its analysis does.
pub trait ProbeModel {
    /// Runs `launch` on the model.
    ///
    /// # Errors
    /// [`RunnerError::Unsupported`] where the simulated GPU has no truth for the probe; any
    /// error the real launch could give.
    fn simulate(
        &self,
        gpu: &mut dyn SimulatedGpu,
        launch: &ProbeLaunch,
    ) -> Result<SimulatedProbe, RunnerError>;
}
