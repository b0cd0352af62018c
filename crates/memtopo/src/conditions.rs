//! The conditions of a run: who and where, the GPU's state before and after, whether
//! other work shares the GPU (refused unless `--allow-busy`; how long a look waits for a
//! utilisation reading to fall is `crate::settle`'s), and what changed while measuring.

use topology::{GpuProcess, GpuState, RunRecord};

/// One look at the GPU.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Clocks, temperature, power, modes.
    pub state: GpuState,
    /// Processes using the GPU (never this one: it has no context yet before measuring).
    pub processes: Vec<GpuProcess>,
    /// The kernel driver's version.
    pub driver_version: Option<String>,
    /// Whether utilisation lags (NVML averages over its last sample period), so that a
    /// busy reading without any process is looked at again before it counts.
    pub settles: bool,
}

/// Something that can look at the GPU: NVML, or the simulated GPU's profile.
pub trait StateSource {
    /// The GPU now.
    fn observe(&mut self) -> Result<Observation, String>;

    /// Adds to `state` what is looked at only once before and once after a run, not at
    /// every look of the busy check: the device memory's temperature and remapped rows.
    fn add_memory_conditions(&mut self, _state: &mut GpuState) {}
}

/// Why the GPU counts as busy, from one observation (empty: it is not).
pub fn busy_reasons(observation: &Observation) -> Vec<String> {
    let own = std::process::id();
    let mut reasons: Vec<String> = observation
        .processes
        .iter()
        .filter(|p| p.pid != own)
        .map(|p| {
            let memory = p
                .used_memory_bytes
                .map(|b| format!(", {} MiB", b >> 20))
                .unwrap_or_default();
            format!("{p}{memory} uses the GPU")
        })
        .collect();
    let utilization = observation.state.utilization_percent.unwrap_or(0);
    if reasons.is_empty() && utilization > 0 {
        reasons.push(format!(
            "the GPU is {utilization} % utilised with no process visible (another container or VM?)"
        ));
    }
    if observation.state.compute_mode.as_deref() == Some("prohibited") {
        reasons.push("the GPU's compute mode is prohibited".to_string());
    }
    reasons
}

/// What changed between `before` and `after` that makes the values doubtful: new
/// processes, a clock that dropped, throttling that began.
pub fn disturbances(before: &Observation, after: &Observation) -> Vec<String> {
    let mut found = Vec::new();
    for p in &after.processes {
        if p.pid != std::process::id() && !before.processes.iter().any(|b| b.pid == p.pid) {
            found.push(format!("{p} appeared on the GPU while measuring"));
        }
    }
    let idle_after = after.state.throttle_reasons.iter().any(|r| r == "gpu_idle");
    if let (Some(a), Some(b)) = (before.state.sm_clock_mhz, after.state.sm_clock_mhz) {
        // At rest the clock is low and rises under load; only a drop below the
        // starting clock, beyond a few percent, is a disturbance, and not one that
        // NVML explains as the GPU idling again (memtopo has finished by then).
        if !idle_after && f64::from(b) < 0.95 * f64::from(a) {
            found.push(format!("the SM clock dropped from {a} MHz to {b} MHz"));
        }
    }
    const SLOWDOWNS: [&str; 5] = [
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ];
    for reason in &after.state.throttle_reasons {
        if SLOWDOWNS.contains(&reason.as_str()) && !before.state.throttle_reasons.contains(reason) {
            found.push(format!(
                "the clocks were throttled while measuring ({reason})"
            ));
        }
    }
    found
}

/// The run's identity: date, host, version, commit and command line.
pub fn base_record() -> RunRecord {
    let date = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok());
    RunRecord {
        date_utc: Some(date),
        host,
        tool_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        git_commit: Some(env!("MEMTOPO_GIT_COMMIT").to_string()),
        command_line: std::env::args().collect(),
        ..RunRecord::default()
    }
}

/// Adds what `observation` saw to `record` (the driver version, new processes other than
/// this one: a node run reads a GPU's state after its run with the context it keeps for
/// the links still open).
pub fn absorb(record: &mut RunRecord, observation: &Observation) {
    if record.driver_version.is_none() {
        record.driver_version = observation.driver_version.clone();
    }
    let own = std::process::id();
    for p in &observation.processes {
        if p.pid != own && !record.other_processes.iter().any(|q| q.pid == p.pid) {
            record.other_processes.push(p.clone());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn process(pid: u32) -> GpuProcess {
        GpuProcess {
            pid,
            name: Some("python3".into()),
            kind: "compute".into(),
            used_memory_bytes: Some(3 << 30),
        }
    }

    pub(crate) fn at(clock: u32) -> Observation {
        Observation {
            state: GpuState {
                sm_clock_mhz: Some(clock),
                ..GpuState::default()
            },
            ..Observation::default()
        }
    }

    #[test]
    fn other_processes_make_the_gpu_busy_and_are_named() {
        let mut o = at(1980);
        assert!(busy_reasons(&o).is_empty());
        o.processes.push(process(4711));
        let reasons = busy_reasons(&o);
        assert_eq!(
            reasons,
            ["pid 4711 (python3, compute), 3072 MiB uses the GPU"]
        );
        // This process itself never counts.
        o.processes = vec![process(std::process::id())];
        assert!(busy_reasons(&o).is_empty());
    }

    #[test]
    fn the_record_names_other_processes_once_and_never_this_one() {
        let mut record = RunRecord::default();
        let mut o = at(1980);
        // After a node run's GPU: its context, kept for the links, is this process.
        o.processes = vec![process(4711), process(std::process::id())];
        absorb(&mut record, &o);
        absorb(&mut record, &o);
        let pids: Vec<u32> = record.other_processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [4711]);
    }

    #[test]
    fn utilisation_without_a_process_is_busy() {
        let mut o = at(1980);
        o.state.utilization_percent = Some(87);
        assert!(busy_reasons(&o)[0].contains("87 % utilised"));
    }

    #[test]
    fn disturbances_are_new_processes_clock_drops_and_throttling() {
        let before = at(1980);
        assert!(disturbances(&before, &at(1975)).is_empty());
        assert!(
            disturbances(&at(345), &at(1980)).is_empty(),
            "a clock rising from rest"
        );
        let mut idle = at(345);
        idle.state.throttle_reasons = vec!["gpu_idle".into()];
        assert!(
            disturbances(&before, &idle).is_empty(),
            "idling after the run"
        );
        let mut after = at(1410);
        after.processes.push(process(99));
        after.state.throttle_reasons = vec!["hw_thermal_slowdown".into()];
        let found = disturbances(&before, &after);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].contains("pid 99"));
        assert!(found[1].contains("1980 MHz to 1410 MHz"));
        assert!(found[2].contains("hw_thermal_slowdown"));
    }
}
