//! A simulated GPU's link to its host (`[host_link]` in a profile): the rates and the
//! latency the host-link benchmark should find.

use serde::{Deserialize, Serialize};

use super::profile_error;
use crate::error::RunnerError;

/// What the host link of a simulated GPU does: each path's rate per direction, GB/s
/// (10⁹ bytes per second), and one load's round trip over it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostLinkSpec {
    /// Copy engine, pinned host memory into device memory.
    pub copy_h2d_gb_per_s: f64,
    /// Copy engine, device memory into pinned host memory.
    pub copy_d2h_gb_per_s: f64,
    /// Host to device while device to host runs at once.
    pub both_h2d_gb_per_s: f64,
    /// Device to host while host to device runs at once.
    pub both_d2h_gb_per_s: f64,
    /// Copy engine, pageable host memory into device memory.
    pub pageable_h2d_gb_per_s: f64,
    /// Copy engine, device memory into pageable host memory.
    pub pageable_d2h_gb_per_s: f64,
    /// SMs reading mapped pinned host memory.
    pub sm_read_gb_per_s: f64,
    /// SMs writing mapped pinned host memory.
    pub sm_write_gb_per_s: f64,
    /// One load's round trip from an SM to host memory and back, nanoseconds.
    pub latency_ns: f64,
}

impl HostLinkSpec {
    /// Every rate by its field name.
    pub fn rates(&self) -> [(&'static str, f64); 8] {
        [
            ("copy_h2d_gb_per_s", self.copy_h2d_gb_per_s),
            ("copy_d2h_gb_per_s", self.copy_d2h_gb_per_s),
            ("both_h2d_gb_per_s", self.both_h2d_gb_per_s),
            ("both_d2h_gb_per_s", self.both_d2h_gb_per_s),
            ("pageable_h2d_gb_per_s", self.pageable_h2d_gb_per_s),
            ("pageable_d2h_gb_per_s", self.pageable_d2h_gb_per_s),
            ("sm_read_gb_per_s", self.sm_read_gb_per_s),
            ("sm_write_gb_per_s", self.sm_write_gb_per_s),
        ]
    }

    /// Checks that every rate and the latency are positive and finite (a rate of at most
    /// 1000 GB/s: no host link is faster).
    pub(crate) fn validate(&self) -> Result<(), RunnerError> {
        for (name, rate) in self.rates() {
            if !(rate.is_finite() && rate > 0.0 && rate <= 1000.0) {
                return Err(profile_error(format!(
                    "host_link.{name}: {rate} is not a rate above 0 and at most 1000 GB/s"
                )));
            }
        }
        if !(self.latency_ns.is_finite() && self.latency_ns > 0.0 && self.latency_ns < 1e6) {
            return Err(profile_error(format!(
                "host_link.latency_ns: {} is not a latency above 0 and below 1 ms",
                self.latency_ns
            )));
        }
        Ok(())
    }
}
