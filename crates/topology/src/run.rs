//! The record of a run (schema 1.3): which GPU, which driver, in which state before and
//! after measuring, beside which other work, when, where and by which command.
//!
//! A result is only as good as the conditions it was taken under: two results that
//! differ may differ because the clocks, the driver or the neighbours differed, and a
//! result taken beside other work on the GPU is marked as such ([`RunRecord::busy`]).
//!
//! ```
//! use topology::*;
//! let mut run = RunRecord::default();
//! run.gpu_uuid = Some("GPU-8d3e1a52-0b7c-4f10-9e61-0011223344ff".into());
//! run.before = Some(GpuState { sm_clock_mhz: Some(1980), ..GpuState::default() });
//! run.after = Some(GpuState { sm_clock_mhz: Some(1410), ..GpuState::default() });
//! run.mark_busy("pid 4711 (python3) computes on the GPU");
//! assert!(run.busy);
//! assert!(run.summary().iter().any(|l| l.contains("SM clock 1980 MHz → 1410 MHz")));
//! ```

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What NVML (or the simulation profile) reported about the GPU at one moment.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct GpuState {
    /// The SM clock, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<u32>,
    /// The memory clock, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_mhz: Option<u32>,
    /// The highest SM clock the GPU allows, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sm_clock_mhz: Option<u32>,
    /// Why the clocks are below their maximum (NVML's throttle or clock-event reasons,
    /// e.g. `sw_power_cap`, `hw_thermal_slowdown`); `gpu_idle` alone is normal at rest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
    /// The GPU temperature, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// The device memory's temperature (the HBM stacks'), °C, where NVML reports one. HBM
    /// refreshes more often when hot, which costs bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_temperature_c: Option<u32>,
    /// Rows of device memory remapped to spares after correctable and uncorrectable
    /// errors, where NVML reports them (from Ampere on), as `[correctable, uncorrectable]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows: Option<[u64; 2]>,
    /// Whether a row remapping waits for the next GPU reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_remap_pending: Option<bool>,
    /// The power draw, W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// The enforced power limit, W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_w: Option<f64>,
    /// Whether ECC is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_enabled: Option<bool>,
    /// Whether persistence mode is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence_mode: Option<bool>,
    /// The compute mode: `default`, `exclusive_process` or `prohibited`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_mode: Option<String>,
    /// Whether MIG is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_enabled: Option<bool>,
    /// The share of the last sample period in which a kernel ran, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_percent: Option<u32>,
    /// Device memory in use, bytes. In the state after a run, memtopo's own memory may still
    /// be counted: the CLI reads that state while it releases its memory and context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<u64>,
    /// The PCIe link's generation now (NVML; schema 1.9). A GPU lowers it when idle to save
    /// power, so it is the trained generation only while the GPU works: the state after
    /// the run is read right after the last benchmark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_generation: Option<u32>,
    /// The PCIe link's width now, lanes (schema 1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u32>,
    /// The highest PCIe generation the GPU and its slot both support (schema 1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_generation: Option<u32>,
    /// The widest PCIe link the GPU and its slot both support, lanes (schema 1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_max_width: Option<u32>,
}

impl GpuState {
    /// The PCIe link as text: `Gen5 x16 (max Gen5 x16)`, `Gen4 x8`; `None` when nothing
    /// of it is known.
    ///
    /// ```
    /// let state = topology::GpuState {
    ///     pcie_generation: Some(4), pcie_width: Some(8),
    ///     pcie_max_generation: Some(5), pcie_max_width: Some(16),
    ///     ..Default::default()
    /// };
    /// assert_eq!(state.pcie_link().as_deref(), Some("Gen4 x8 (max Gen5 x16)"));
    /// ```
    pub fn pcie_link(&self) -> Option<String> {
        let link = |generation: Option<u32>, width: Option<u32>| match (generation, width) {
            (None, None) => None,
            (g, w) => Some(format!("Gen{} x{}", opt(g), opt(w))),
        };
        let now = link(self.pcie_generation, self.pcie_width);
        let max = link(self.pcie_max_generation, self.pcie_max_width);
        match (now, max) {
            (Some(now), Some(max)) => Some(format!("{now} (max {max})")),
            (Some(now), None) => Some(now),
            (None, Some(max)) => Some(format!("max {max}")),
            (None, None) => None,
        }
    }
}

/// Another process found on the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GpuProcess {
    /// Its process id (in the driver's PID namespace).
    pub pid: u32,
    /// Its name, where it can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `compute` or `graphics`.
    pub kind: String,
    /// Device memory it holds, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory_bytes: Option<u64>,
}

impl fmt::Display for GpuProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} ({}, {})",
            self.pid,
            self.name.as_deref().unwrap_or("name unknown"),
            self.kind
        )
    }
}

/// Where, when and under which GPU state a result was taken.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct RunRecord {
    /// When the run started, UTC, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_utc: Option<String>,
    /// The host's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The tool's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// The git commit the tool was built from (`-dirty` when the tree had changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit: Option<String>,
    /// The full command line, one argument per entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command_line: Vec<String>,
    /// The simulation profile, for a simulated GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated_profile: Option<String>,
    /// The GPU's UUID (`GPU-…`, or `MIG-…` for a MIG instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_uuid: Option<String>,
    /// The PCI bus id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// The kernel driver's version, e.g. `"550.54.15"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// The driver's CUDA version, e.g. 12040.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<u32>,
    /// Why the GPU's state could not be read (`NVML unavailable: …`); absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_unavailable: Option<String>,
    /// The GPU's state before measuring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<GpuState>,
    /// The GPU's state after measuring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<GpuState>,
    /// Other processes seen on the GPU, before or after measuring.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_processes: Vec<GpuProcess>,
    /// Measured although other work was on the GPU (`--allow-busy`): every value of
    /// this result may be disturbed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
    /// What made the GPU busy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy_reasons: Vec<String>,
    /// The per-GPU lock: `held` or why it was not taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// What the consistency checks found disturbed during the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disturbances: Vec<String>,
    /// The other GPUs (by UUID) that the same memtopo measured at the same time as this
    /// one, each on a thread of its own (a node run, `--device all`, schema 1.9); absent
    /// when the GPU was measured alone (`--sequential`, or a single GPU).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub concurrent_with: Vec<String>,
}

/// Reads one field of a [`GpuState`] as text.
type StateField = dyn Fn(&GpuState) -> String;

fn opt<T: fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// Whether a row remap waits for a reset, as `yes` or `no` (a remap is not on or off).
fn remap_pending(g: &GpuState) -> Option<&'static str> {
    g.row_remap_pending.map(|v| if v { "yes" } else { "no" })
}

fn yes_no(value: Option<bool>) -> String {
    value.map_or_else(
        || "-".to_owned(),
        |v| if v { "on" } else { "off" }.to_owned(),
    )
}

impl RunRecord {
    /// Marks the result as taken on a busy GPU, for `reason`.
    pub fn mark_busy(&mut self, reason: impl Into<String>) {
        self.busy = true;
        self.busy_reasons.push(reason.into());
    }

    /// The value of one state field before and after: `a → b`, or `a` when equal.
    fn before_after<T: PartialEq + fmt::Display>(
        &self,
        field: impl Fn(&GpuState) -> Option<T>,
        unit: &str,
    ) -> Option<String> {
        let a = self.before.as_ref().and_then(&field);
        let b = self.after.as_ref().and_then(&field);
        let show = |v: &T| format!("{v}{unit}");
        match (a, b) {
            (None, None) => None,
            (Some(a), Some(b)) if a == b => Some(show(&a)),
            (a, b) => Some(format!(
                "{} → {}",
                a.as_ref().map_or_else(|| "-".to_owned(), show),
                b.as_ref().map_or_else(|| "-".to_owned(), show)
            )),
        }
    }

    /// `(name, value)` of every recorded condition, in a fixed order; what the
    /// renderers print and [`crate::diff`] compares.
    pub fn fields(&self) -> Vec<(String, String)> {
        let state = |s: &Option<GpuState>, f: &dyn Fn(&GpuState) -> String| {
            s.as_ref().map_or_else(|| "-".to_owned(), f)
        };
        let mut fields: Vec<(String, String)> = [
            ("date_utc", opt(self.date_utc.as_ref())),
            ("host", opt(self.host.as_ref())),
            ("tool_version", opt(self.tool_version.as_ref())),
            ("git_commit", opt(self.git_commit.as_ref())),
            ("command_line", self.command_line.join(" ")),
            ("simulated_profile", opt(self.simulated_profile.as_ref())),
            ("gpu_uuid", opt(self.gpu_uuid.as_ref())),
            ("pci_bus_id", opt(self.pci_bus_id.as_ref())),
            ("driver_version", opt(self.driver_version.as_ref())),
            ("cuda_driver_version", opt(self.cuda_driver_version)),
            ("state_unavailable", opt(self.state_unavailable.as_ref())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for (name, s) in [("before", &self.before), ("after", &self.after)] {
            let entries: [(&'static str, &StateField); 17] = [
                ("sm_clock_mhz", &|g| opt(g.sm_clock_mhz)),
                ("memory_clock_mhz", &|g| opt(g.memory_clock_mhz)),
                ("max_sm_clock_mhz", &|g| opt(g.max_sm_clock_mhz)),
                ("throttle_reasons", &|g| g.throttle_reasons.join(",")),
                ("temperature_c", &|g| opt(g.temperature_c)),
                ("memory_temperature_c", &|g| opt(g.memory_temperature_c)),
                ("remapped_rows", &|g| {
                    opt(g.remapped_rows.map(|[c, u]| format!("{c},{u}")))
                }),
                ("row_remap_pending", &|g| opt(remap_pending(g))),
                ("power_w", &|g| opt(g.power_w.map(|p| format!("{p:.0}")))),
                ("power_limit_w", &|g| {
                    opt(g.power_limit_w.map(|p| format!("{p:.0}")))
                }),
                ("ecc", &|g| yes_no(g.ecc_enabled)),
                ("persistence_mode", &|g| yes_no(g.persistence_mode)),
                ("compute_mode", &|g| opt(g.compute_mode.as_ref())),
                ("mig", &|g| yes_no(g.mig_enabled)),
                ("utilization_percent", &|g| opt(g.utilization_percent)),
                ("memory_used_bytes", &|g| opt(g.memory_used_bytes)),
                ("pcie_link", &|g| opt(g.pcie_link())),
            ];
            for (field, read) in entries {
                fields.push((format!("{name}.{field}"), state(s, read)));
            }
        }
        fields.push((
            "other_processes".to_owned(),
            self.other_processes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        ));
        for (key, value) in [
            ("busy", self.busy.to_string()),
            ("busy_reasons", self.busy_reasons.join("; ")),
            ("lock", opt(self.lock.as_ref())),
            ("disturbances", self.disturbances.join("; ")),
            ("concurrent_with", self.concurrent_with.join(", ")),
        ] {
            fields.push((key.to_owned(), value));
        }
        fields
    }

    /// A few lines for a terminal or report: identity, state before → after,
    /// neighbours, and the warnings.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut identity = Vec::new();
        if let Some(profile) = &self.simulated_profile {
            identity.push(format!("simulated ({profile})"));
        }
        if let Some(uuid) = &self.gpu_uuid {
            identity.push(uuid.clone());
        }
        if let Some(bus) = &self.pci_bus_id {
            identity.push(format!("PCI {bus}"));
        }
        if let Some(driver) = &self.driver_version {
            identity.push(format!("driver {driver}"));
        }
        if let Some(cuda) = self.cuda_driver_version {
            identity.push(format!("CUDA {}.{}", cuda / 1000, cuda % 1000 / 10));
        }
        if !identity.is_empty() {
            lines.push(format!("GPU: {}", identity.join(", ")));
        }
        let mut state = Vec::new();
        let mut add = |label: &str, value: Option<String>| {
            if let Some(value) = value {
                state.push(format!("{label} {value}"));
            }
        };
        add("SM clock", self.before_after(|g| g.sm_clock_mhz, " MHz"));
        add(
            "memory clock",
            self.before_after(|g| g.memory_clock_mhz, " MHz"),
        );
        add("temperature", self.before_after(|g| g.temperature_c, " °C"));
        add(
            "memory temperature",
            self.before_after(|g| g.memory_temperature_c, " °C"),
        );
        add(
            "remapped rows (correctable, uncorrectable)",
            self.before_after(|g| g.remapped_rows.map(|[c, u]| format!("{c}, {u}")), ""),
        );
        add("row remap pending", self.before_after(remap_pending, ""));
        add(
            "power",
            self.before_after(|g| g.power_w.map(|p| p.round() as i64), " W"),
        );
        add(
            "ECC",
            self.before_after(|g| g.ecc_enabled.map(|v| yes_no(Some(v))), ""),
        );
        add(
            "persistence",
            self.before_after(|g| g.persistence_mode.map(|v| yes_no(Some(v))), ""),
        );
        add(
            "compute mode",
            self.before_after(|g| g.compute_mode.clone(), ""),
        );
        add(
            "MIG",
            self.before_after(|g| g.mig_enabled.map(|v| yes_no(Some(v))), ""),
        );
        add("PCIe", self.before_after(GpuState::pcie_link, ""));
        if !state.is_empty() {
            lines.push(format!("state (before → after): {}", state.join(", ")));
        }
        if let Some(reason) = &self.state_unavailable {
            lines.push(format!("state: {reason}"));
        }
        let throttled: Vec<&String> = self
            .before
            .iter()
            .chain(self.after.iter())
            .flat_map(|g| g.throttle_reasons.iter())
            .filter(|r| r.as_str() != "gpu_idle")
            .collect();
        if !throttled.is_empty() {
            let mut reasons: Vec<&String> = throttled;
            reasons.sort();
            reasons.dedup();
            let reasons: Vec<&str> = reasons.iter().map(|s| s.as_str()).collect();
            lines.push(format!("clocks throttled: {}", reasons.join(", ")));
        }
        if !self.other_processes.is_empty() {
            let list: Vec<String> = self
                .other_processes
                .iter()
                .map(ToString::to_string)
                .collect();
            lines.push(format!("other processes on the GPU: {}", list.join("; ")));
        }
        let mut run = Vec::new();
        if let Some(date) = &self.date_utc {
            run.push(date.clone());
        }
        if let Some(host) = &self.host {
            run.push(format!("host {host}"));
        }
        if let Some(version) = &self.tool_version {
            let commit = self.git_commit.as_deref().unwrap_or("commit unknown");
            run.push(format!("memtopo {version} ({commit})"));
        }
        if !run.is_empty() {
            lines.push(format!("run: {}", run.join(", ")));
        }
        if !self.concurrent_with.is_empty() {
            lines.push(format!(
                "measured at the same time as {} other GPU(s): {}",
                self.concurrent_with.len(),
                self.concurrent_with.join(", ")
            ));
        }
        lines
    }
}
