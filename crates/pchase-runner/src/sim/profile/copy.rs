//! The profile's copies from global to shared memory: per copy path, the latency
//! of one copy and the rates it streams at. A profile without a `[copies]` table models a
//! GPU whose copies were never described; a path the device's compute capability lacks
//! (`cp.async` before 8.0, the bulk copies before 9.0) must not be listed.

use std::collections::BTreeMap;

use pchase_kernels::copy::CopyPath;
use serde::{Deserialize, Serialize};

use crate::device::DeviceInfo;
use crate::error::RunnerError;

/// One copy path of a simulated GPU.
///
/// A round of `depth` copies of `bytes` by one block, with `blocks` blocks copying on the
/// same SM, takes `latency_cycles + depth × bytes / min(stream_bytes_per_cycle,
/// peak_bytes_per_cycle / blocks)` cycles: a fixed cost (issue, the first bytes' round
/// trip to the L2, completion), then the data at the rate one block's copies stream, shared
/// with the SM's other blocks under the SM's ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopyPathSpec {
    /// The fixed cycles of one round (issue to completion of the smallest copy).
    pub latency_cycles: f64,
    /// Bytes per cycle one block's copies stream at.
    pub stream_bytes_per_cycle: f64,
    /// Bytes per cycle one SM reaches at most.
    pub peak_bytes_per_cycle: f64,
}

impl CopyPathSpec {
    /// Cycles of one round (without the clock overhead and noise).
    ///
    /// ```
    /// use pchase_runner::sim::CopyPathSpec;
    /// let spec = CopyPathSpec { latency_cycles: 500.0, stream_bytes_per_cycle: 64.0, peak_bytes_per_cycle: 128.0 };
    /// assert_eq!(spec.round_cycles(6400, 1, 1), 600.0);
    /// // Four blocks share the SM's 128 B/cycle: 32 each.
    /// assert_eq!(spec.round_cycles(6400, 1, 4), 700.0);
    /// ```
    pub fn round_cycles(&self, bytes: u32, depth: u32, blocks: u32) -> f64 {
        let rate = self
            .stream_bytes_per_cycle
            .min(self.peak_bytes_per_cycle / f64::from(blocks.max(1)));
        self.latency_cycles + f64::from(depth) * f64::from(bytes) / rate
    }

    /// Bytes per SM cycle with `blocks` blocks of `depth` copies of `bytes` on every SM.
    pub fn sm_rate(&self, bytes: u32, depth: u32, blocks: u32) -> f64 {
        f64::from(blocks) * f64::from(depth) * f64::from(bytes)
            / self.round_cycles(bytes, depth, blocks)
    }
}

/// The copies of a simulated GPU: one entry per path it has, keyed by the path's name
/// (`plain_v16`, `cp_async_ca_4`, …, `bulk`, `bulk_tensor_2d`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopySpec {
    /// Where the numbers come from.
    #[serde(default)]
    pub source: String,
    /// The paths.
    pub paths: BTreeMap<String, CopyPathSpec>,
}

impl CopySpec {
    /// The spec of `path`, if the profile lists it.
    pub fn path(&self, path: CopyPath) -> Option<&CopyPathSpec> {
        self.paths.get(path.name())
    }

    /// Checks names, values and that the listed paths are exactly those the device's
    /// compute capability has.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] naming the field.
    pub fn validate(&self, device: &DeviceInfo) -> Result<(), RunnerError> {
        let err = |m: String| Err(RunnerError::Profile(format!("copies.{m}")));
        for name in self.paths.keys() {
            if !CopyPath::ALL.iter().any(|p| p.name() == name) {
                let known: Vec<&str> = CopyPath::ALL.iter().map(|p| p.name()).collect();
                return err(format!("paths.{name}: unknown path; known: {known:?}"));
            }
        }
        let cc = pchase_kernels::ComputeCapability::from(device.compute_capability);
        for path in CopyPath::ALL {
            let has = cc >= path.min_capability();
            match (self.path(path), has) {
                (Some(_), false) => {
                    return err(format!(
                        "paths.{path}: needs compute capability {}, the device has {cc}",
                        path.min_capability()
                    ))
                }
                (None, true) => {
                    return err(format!(
                        "paths.{path}: missing (the device's compute capability {cc} has it)"
                    ))
                }
                _ => {}
            }
            if let Some(spec) = self.path(path) {
                for (name, value) in [
                    ("latency_cycles", spec.latency_cycles),
                    ("stream_bytes_per_cycle", spec.stream_bytes_per_cycle),
                    ("peak_bytes_per_cycle", spec.peak_bytes_per_cycle),
                ] {
                    if !(value.is_finite() && value > 0.0) {
                        return err(format!("paths.{path}.{name}: {value} is not positive"));
                    }
                }
            }
        }
        Ok(())
    }
}
