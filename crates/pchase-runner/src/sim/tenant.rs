//! A co-tenant on the simulated GPU: other work that shares it, as on a cluster node or a
//! CI runner. It arrives at a given launch (from the start, or mid-run) and from then on
//! keeps part of every SM's first-level caches and of the L2 occupied, slows the L2 and
//! device memory down, and may pull the SM clock down (a power or thermal cap).
//!
//! The simulated GPU's state ([`super::SimBackend::observe`]) lists the co-tenant as a
//! process only when it is `visible` (a process in another container or VM is not), and
//! reports its utilisation, as NVML would.
//!
//! ```toml
//! [co_tenant]
//! start_launch = 40          # arrives at the 40th launch; 0 = there from the start
//! end_launch = 45            # gone from the 45th launch on (absent: stays)
//! visible = false            # not in the process list (another container)
//! utilization_percent = 0    # what the GPU's utilisation shows
//! l1_stolen_bytes = 65536    # of each SM's first-level caches
//! l2_stolen_bytes = 1048576  # of the L2 (spread over its partitions)
//! latency_factor = 1.3       # L2 and device memory latencies × 1.3
//! sm_clock_factor = 0.7      # SM clock × 0.7
//! ```

use serde::{Deserialize, Serialize};

use crate::error::RunnerError;

fn default_pid() -> u32 {
    4242
}

fn default_name() -> String {
    "co-tenant".to_string()
}

fn one() -> f64 {
    1.0
}

fn yes() -> bool {
    true
}

/// Other work sharing the simulated GPU (`[co_tenant]` of a profile).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoTenant {
    /// Its process id in the simulated process list.
    #[serde(default = "default_pid")]
    pub pid: u32,
    /// Its process name.
    #[serde(default = "default_name")]
    pub name: String,
    /// Whether the GPU's process list shows it.
    #[serde(default = "yes")]
    pub visible: bool,
    /// The launch from which it runs (launches count from 0; 0 = from the start).
    #[serde(default)]
    pub start_launch: u64,
    /// The launch from which it is gone again (none: it stays to the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_launch: Option<u64>,
    /// The GPU utilisation reported while it runs, percent.
    #[serde(default)]
    pub utilization_percent: u32,
    /// Bytes of each SM's first-level caches (every copy) it keeps occupied.
    #[serde(default)]
    pub l1_stolen_bytes: u64,
    /// Bytes of the L2 it keeps occupied.
    #[serde(default)]
    pub l2_stolen_bytes: u64,
    /// Factor on the L2 and device-memory latencies while it runs.
    #[serde(default = "one")]
    pub latency_factor: f64,
    /// Factor on the SM clock while it runs.
    #[serde(default = "one")]
    pub sm_clock_factor: f64,
}

impl CoTenant {
    /// Checks the fields; the error names the field.
    pub fn validate(&self) -> Result<(), RunnerError> {
        let bad = |m: String| Err(RunnerError::Profile(format!("co_tenant.{m}")));
        if !(self.latency_factor.is_finite() && self.latency_factor >= 1.0) {
            return bad(format!(
                "latency_factor: {} is not a number ≥ 1",
                self.latency_factor
            ));
        }
        if !(self.sm_clock_factor.is_finite()
            && self.sm_clock_factor > 0.0
            && self.sm_clock_factor <= 1.0)
        {
            return bad(format!(
                "sm_clock_factor: {} is not in (0, 1]",
                self.sm_clock_factor
            ));
        }
        if self.end_launch.is_some_and(|end| end <= self.start_launch) {
            return bad(format!(
                "end_launch: {:?} is not after start_launch {}",
                self.end_launch, self.start_launch
            ));
        }
        if self.utilization_percent > 100 {
            return bad(format!(
                "utilization_percent: {} is over 100",
                self.utilization_percent
            ));
        }
        Ok(())
    }

    /// Whether it runs at launch number `launch`.
    pub fn active_at(&self, launch: u64) -> bool {
        launch >= self.start_launch && self.end_launch.is_none_or(|end| launch < end)
    }

    /// `latency` as it is while the co-tenant runs.
    pub fn inflate(&self, latency: u32) -> u32 {
        (f64::from(latency) * self.latency_factor).round() as u32
    }
}

/// What the simulated GPU reports about itself, as NVML would.
#[derive(Debug, Clone, PartialEq)]
pub struct SimObservation {
    /// The SM clock now, MHz.
    pub sm_clock_mhz: f64,
    /// The utilisation now, percent.
    pub utilization_percent: u32,
    /// The processes it lists: `(pid, name)`.
    pub processes: Vec<(u32, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(text: &str) -> Result<CoTenant, String> {
        toml::from_str::<CoTenant>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_a_visible_harmless_tenant_from_the_start() {
        let t = tenant("").unwrap();
        assert!(t.visible && t.active_at(0));
        assert_eq!((t.latency_factor, t.sm_clock_factor), (1.0, 1.0));
        assert_eq!(t.inflate(200), 200);
        t.validate().unwrap();
    }

    #[test]
    fn bad_factors_are_refused_by_name() {
        for (text, field) in [
            ("latency_factor = 0.5", "co_tenant.latency_factor"),
            ("sm_clock_factor = 1.5", "co_tenant.sm_clock_factor"),
            ("sm_clock_factor = 0.0", "co_tenant.sm_clock_factor"),
            ("utilization_percent = 101", "co_tenant.utilization_percent"),
        ] {
            let err = tenant(text).unwrap().validate().unwrap_err().to_string();
            assert!(err.contains(field), "{text}: {err}");
        }
        assert!(
            tenant("l3_stolen_bytes = 1").is_err(),
            "unknown keys are errors"
        );
    }

    #[test]
    fn it_arrives_at_its_launch() {
        let t = tenant("start_launch = 40\nlatency_factor = 1.5").unwrap();
        assert!(!t.active_at(39) && t.active_at(40) && t.active_at(1 << 40));
        let brief = tenant("start_launch = 40\nend_launch = 42").unwrap();
        assert!(brief.active_at(41) && !brief.active_at(42));
        assert!(tenant("start_launch = 4\nend_launch = 4")
            .unwrap()
            .validate()
            .is_err());
        assert_eq!(t.inflate(200), 300);
    }
}
