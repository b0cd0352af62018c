//! Why a command stopped, and the exit codes: the one place that turns errors into the
//! numbers a script sees. `docs/cli.md` and `memtopo man` list [`Exit::ALL`] (a test
//! checks both).

use pchase_runner::RunnerError;
use thiserror::Error;

use crate::output::Refusal;

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// Success.
    Success = 0,
    /// A benchmark failed (the rest is written), `diff` found differences, or `merge`
    /// flagged a GPU or found one not measured.
    Findings = 1,
    /// A bad command line.
    Usage = 2,
    /// No CUDA driver or no GPU.
    NoGpu = 3,
    /// A bad device index.
    BadDevice = 4,
    /// A bad simulation profile.
    BadProfile = 5,
    /// An output could not be written.
    Output = 6,
    /// A kernel failed to load or run, or a driver call failed.
    Kernel = 7,
    /// The GPU is busy.
    Busy = 8,
    /// Measured, but disturbed while measuring.
    Disturbed = 9,
    /// `--strict`: the self-check found what no reported level explains.
    SelfCheck = 10,
    /// A saved result cannot be read or is invalid.
    Input = 11,
    /// Several GPUs: some were measured, others not.
    SomeGpus = 12,
}

impl Exit {
    /// Every exit code, in numeric order.
    pub const ALL: [Exit; 13] = [
        Exit::Success,
        Exit::Findings,
        Exit::Usage,
        Exit::NoGpu,
        Exit::BadDevice,
        Exit::BadProfile,
        Exit::Output,
        Exit::Kernel,
        Exit::Busy,
        Exit::Disturbed,
        Exit::SelfCheck,
        Exit::Input,
        Exit::SomeGpus,
    ];

    /// The process' exit status.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// One line on what the code means, for the manual page.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Success => "success (diff: no differences; validate: every file valid)",
            Exit::Findings => {
                "a benchmark failed, the rest was measured and written; diff: the results \
                 differ; merge and node runs: a GPU is flagged degraded (merge: or was not \
                 measured)"
            }
            Exit::Usage => "bad command line",
            Exit::NoGpu => "no CUDA driver or no GPU",
            Exit::BadDevice => "bad device index",
            Exit::BadProfile => "bad simulation profile",
            Exit::Output => "an output could not be written",
            Exit::Kernel => "a kernel failed to load or run, or a driver call failed",
            Exit::Busy => {
                "the GPU is busy: other processes, another memtopo, or an exclusive GPU held \
                 by another process"
            }
            Exit::Disturbed => "measured and written, but disturbed while measuring",
            Exit::SelfCheck => "--strict: the self-check found what no reported level explains",
            Exit::Input => "a saved result cannot be read or is invalid",
            Exit::SomeGpus => "several GPUs: some were measured and written, others not",
        }
    }
}

/// Why a command stopped, each with its exit code.
#[derive(Debug, Error)]
pub enum CliError {
    /// The command line asks for something impossible.
    #[error("{0}")]
    Usage(String),
    /// Anything the runner reports.
    #[error("{0}")]
    Runner(#[from] RunnerError),
    /// `--device` names a simulated GPU past the last.
    #[error(
        "device {index} does not exist: {}; `--simulate NxNAME` or `NAME,NAME` simulates \
         several",
        if *count == 1 {
            "the simulated GPU is one device, device 0".to_owned()
        } else {
            format!("the simulated node has {count} GPUs, devices 0 to {}", count - 1)
        }
    )]
    NoSimulatedDevice {
        /// The index asked for.
        index: u32,
        /// The simulated GPUs.
        count: u32,
    },
    /// Another process uses the GPU, or another memtopo holds its lock.
    #[error("the GPU is busy: {0}")]
    Busy(String),
    /// An output could not be written.
    #[error("cannot write {path}: {reason}")]
    Output {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// memtopo itself failed (a thread that could not be started, or stopped on a bug).
    #[error("{0}")]
    Internal(String),
    /// A saved result cannot be read: missing, not JSON or TOML, against the schema, or
    /// beyond the physical bounds.
    #[error("cannot read {path}: {reason}")]
    Input {
        /// The file (`-`: standard input).
        path: String,
        /// Why (the field's path where one is at fault).
        reason: String,
    },
}

impl CliError {
    /// The documented exit code.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::Usage(_) => Exit::Usage,
            CliError::Runner(RunnerError::NoDriver(_) | RunnerError::NoDevice) => Exit::NoGpu,
            CliError::Runner(RunnerError::BadDeviceIndex { .. })
            | CliError::NoSimulatedDevice { .. } => Exit::BadDevice,
            CliError::Runner(RunnerError::DeviceBusy(_)) | CliError::Busy(_) => Exit::Busy,
            CliError::Runner(RunnerError::Profile(_)) => Exit::BadProfile,
            CliError::Output { .. } => Exit::Output,
            CliError::Runner(_) | CliError::Internal(_) => Exit::Kernel,
            CliError::Input { .. } => Exit::Input,
        }
    }
}

impl From<Refusal> for CliError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::UnknownFormat(message) => CliError::Usage(message),
            Refusal::Unwritable { path, reason } => CliError::Output { path, reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_are_numbered_in_order() {
        for (i, exit) in Exit::ALL.iter().enumerate() {
            assert_eq!(usize::from(exit.code()), i, "{exit:?}");
        }
    }
}
