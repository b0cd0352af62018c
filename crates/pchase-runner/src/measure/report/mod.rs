//! Turns [`Measurements`] into a [`topology::Topology`].

use topology::{
    Bytes, CarveoutL1Size, CarveoutRole, ChangePointEvidence, ComputeCapability, Conditions, Count,
    DeviceInfo as TopoDevice, ElementKind, Latency, Megahertz, Note, NoteSeverity, Provenance,
    QuantityKind, Size, Topology,
};

use super::{bench::REGISTRY, ElementResult, Measurements, SizeAtCarveout, SizeFinding};
use crate::{backend::Carveout, device::DeviceInfo};

pub(crate) mod clusters;
pub(crate) mod copies;
mod l2;
pub(crate) use l2::l2_findings;

/// The device facts in the topology's terms; every value has provenance `api`.
pub fn device_info(info: &DeviceInfo) -> TopoDevice {
    let mut device = TopoDevice::new(
        info.name.clone(),
        ComputeCapability::new(info.compute_capability.major, info.compute_capability.minor),
        info.sm_count,
    );
    device.sm_clock_mhz = info.sm_clock_khz.map(|k| Megahertz(f64::from(k) / 1000.0));
    device.memory_clock_mhz = info
        .memory_clock_khz
        .map(|k| Megahertz(f64::from(k) / 1000.0));
    device.memory_bytes = Some(Bytes(info.total_memory_bytes));
    device.memory_bus_width_bits = info.memory_bus_width_bits;
    device.l2_bytes = Some(Bytes(info.l2_bytes));
    device.cuda_driver_api_version = info.driver_version;
    let limits = &mut device.limits;
    limits.shared_memory_per_sm_bytes = Some(Bytes(info.shared_per_sm_bytes));
    limits.shared_memory_per_block_bytes = Some(Bytes(info.shared_per_block_bytes));
    limits.shared_memory_per_block_optin_bytes = Some(Bytes(info.shared_per_block_optin_bytes));
    limits.reserved_shared_memory_per_block_bytes = info.reserved_shared_per_block_bytes.map(Bytes);
    limits.persisting_l2_max_bytes = info.persisting_l2_max_bytes.map(Bytes);
    limits.registers_per_sm = info.registers_per_sm;
    limits.registers_per_block = info.registers_per_block;
    limits.max_threads_per_sm = info.max_threads_per_sm;
    limits.max_threads_per_block = Some(info.max_threads_per_block);
    limits.warp_size = Some(info.warp_size);
    device
}

fn carveout_percent(carveout: Carveout) -> Option<u8> {
    match carveout {
        Carveout::Percent(p) => Some(p),
        Carveout::DriverDefault => None,
    }
}

fn size_of(finding: &SizeFinding, at: &SizeAtCarveout) -> Size {
    let remark = match (at.role, at.config_bytes) {
        (_, Some(config)) => format!(
            "the {} KiB shared-memory configuration, forced by {} B of dynamic shared memory per block at carveout 0 %",
            config / 1024,
            at.reserved_shared_bytes
        ),
        (super::carveout::Role::DriverDefault, None) => {
            "carveout left to the driver, no shared memory".to_string()
        }
        (_, None) => "carveout 0 %, no shared memory".to_string(),
    };
    let conditions = Conditions {
        shared_memory_carveout_percent: carveout_percent(at.carveout),
        remark: Some(remark),
        ..Conditions::default()
    };
    match finding {
        SizeFinding::Exact {
            bytes,
            resolution,
            decision,
        } => Size::measured(
            Bytes(*bytes),
            ChangePointEvidence {
                method: Some(
                    "geometric mapping + exact single change point (L2) + two-sample KS".into(),
                ),
                statistic: Some(decision.statistic),
                p_value: Some(decision.p_value),
                confidence: None,
                resolution: Some(Bytes(*resolution)),
            },
        )
        .with_conditions(conditions),
        SizeFinding::AtLeast { bytes, .. } => {
            Size::at_least(Bytes(*bytes), Provenance::Benchmark).with_conditions(conditions)
        }
    }
}

/// Writes one element's sizes (with the carveout table's rows and their checks where
/// `carveout_table`), lines, latency, latency levels and failures.
pub(crate) fn write_element(
    topo: &mut Topology,
    kind: ElementKind,
    result: &ElementResult,
    carveout_table: bool,
) {
    let note = |severity, quantity, message| Note {
        severity,
        element: Some(kind),
        quantity,
        message,
    };
    let mut notes: Vec<Note> = Vec::new();
    let entry = topo.element_mut(kind);
    if let Some(first) = result.sizes.first() {
        entry.set_size(size_of(&first.finding, first));
    }
    for s in &result.sizes {
        let size = size_of(&s.finding, s);
        if let SizeFinding::AtLeast { reason, .. } = &s.finding {
            notes.push(note(
                NoteSeverity::Warning,
                Some(QuantityKind::Size),
                format!("only a lower bound: {reason}"),
            ));
        }
        if !carveout_table || result.sizes.len() < 2 {
            continue;
        }
        let role = match s.role {
            super::carveout::Role::LargestL1 => CarveoutRole::LargestL1,
            super::carveout::Role::DriverDefault => CarveoutRole::DriverDefault,
            super::carveout::Role::Config => CarveoutRole::Configuration,
        };
        entry.set_size_at_carveout(CarveoutL1Size {
            carveout_percent: carveout_percent(s.carveout),
            shared_memory_bytes: s.config_bytes.map(Bytes),
            kernel_shared_bytes: Some(Bytes(u64::from(s.reserved_shared_bytes))),
            role: Some(role),
            l1_size: size,
        });
    }
    let configs = if carveout_table {
        result.config_rows()
    } else {
        Vec::new()
    };
    // Which configuration the driver's default is: the one whose L1 it equals (to 1 KiB).
    let default_l1 = result
        .sizes
        .iter()
        .find_map(|s| match (&s.role, &s.finding) {
            (super::carveout::Role::DriverDefault, SizeFinding::Exact { bytes, .. }) => {
                Some(*bytes)
            }
            _ => None,
        });
    if let Some(default_l1) = default_l1 {
        let same: Vec<u64> = configs
            .iter()
            .filter(|(_, l1)| l1.abs_diff(default_l1) <= 1024)
            .map(|(c, _)| c / 1024)
            .collect();
        if let [config] = same[..] {
            notes.push(note(
                NoteSeverity::Info,
                Some(QuantityKind::Size),
                format!(
                    "the driver's default for a kernel without shared memory is the {config} KiB configuration: its L1 ({:.2} KiB) equals that row's; the largest L1 any kernel gets is the first row's",
                    default_l1 as f64 / 1024.0
                ),
            ));
        }
    }
    // The proof from above: between neighbouring configurations the L1 shrinks by their
    // step, so each ran with the configuration its shared bytes forced.
    let checks = super::carveout::step_checks(&configs);
    if !checks.is_empty() {
        let bad: Vec<String> = checks
            .iter()
            .filter(|c| !c.agrees)
            .map(|c| {
                format!(
                    "{} → {} KiB: the L1 shrank by {:.2} KiB",
                    c.from_config / 1024,
                    c.to_config / 1024,
                    c.l1_shrank as f64 / 1024.0
                )
            })
            .collect();
        let store: Vec<String> = configs
            .iter()
            .map(|(c, l1)| format!("{:.2}", (c + l1) as f64 / 1024.0))
            .collect();
        if bad.is_empty() {
            notes.push(note(
                NoteSeverity::Info,
                Some(QuantityKind::Size),
                format!(
                    "every shared-memory configuration was in force as forced: between neighbours the L1 shrinks by their step; L1 + shared = {} KiB",
                    store.join(", ")
                ),
            ));
        } else {
            notes.push(note(
                NoteSeverity::Warning,
                Some(QuantityKind::Size),
                format!(
                    "a configuration may not have been the one forced: {} (L1 + shared = {} KiB)",
                    bad.join("; "),
                    store.join(", ")
                ),
            ));
        }
    }
    // The share of observations that agreed with the value is its confidence.
    let agreed = |line: &super::LineFinding, method: &str| {
        Size::exact(Bytes(line.bytes), Provenance::Benchmark).with_evidence(ChangePointEvidence {
            method: Some(method.into()),
            confidence: Some(line.agreement),
            ..ChangePointEvidence::default()
        })
    };
    if let Some(line) = &result.line {
        entry.set_fetch_granularity(agreed(
            line,
            "spacing of misses in a 4-byte-stride chase (confidence: share of spacings equal to it)",
        ));
    }
    if let Some(line) = &result.line_bytes {
        entry.set_line_size(agreed(
            line,
            "runs of misses after an eviction (confidence: share of runs of this length)",
        ));
    }
    if let Some(latency) = result.latency {
        entry.set_latency(Latency::measured(latency));
    }
    if result.latency_levels.len() > 1 {
        let levels: Vec<String> = result
            .latency_levels
            .iter()
            .map(|m| {
                format!(
                    "p50 {:.0} (p5 {:.0}, p95 {:.0}) cycles for {:.0} % of the loads",
                    m.distribution.p50,
                    m.distribution.p5,
                    m.distribution.p95,
                    100.0 * m.share
                )
            })
            .collect();
        notes.push(note(
            NoteSeverity::Info,
            Some(QuantityKind::Latency),
            format!(
                "the latency samples have {} levels: {}; the latency reported is the fastest (through the SM's own L2 partition, where the L2 has several)",
                levels.len(),
                levels.join("; ")
            ),
        ));
    }
    for failure in &result.failures {
        notes.push(note(NoteSeverity::NotMeasured, None, failure.clone()));
    }
    for n in notes {
        topo.add_note(n);
    }
}

/// The global-load caching decision, with a note where the L1 does not cache.
pub(crate) fn global_caching(measured: &Measurements, topo: &mut Topology) {
    if let Some(caches) = measured.l1_caches_global_loads {
        topo.element_mut(ElementKind::L1Data)
            .set_global_loads_cached(caches);
        if !caches {
            topo.add_note(Note {
                severity: NoteSeverity::Info,
                element: Some(ElementKind::L1Data),
                quantity: None,
                message: "the L1 does not cache global loads on this GPU (`ld.global.ca` loads take as long as L2 hits): it has no size on that path; texture and read-only loads are measured on their own".into(),
            });
        }
    }
}

/// Builds the topology of `info` from what a session measured.
pub fn to_topology(info: &DeviceInfo, measured: &Measurements, tool_version: &str) -> Topology {
    let mut topo = Topology::new(device_info(info));
    topo.conditions = Conditions {
        sm_clock_mhz: measured.sm_clock_mhz.map(Megahertz),
        tool: Some("memtopo".into()),
        tool_version: Some(tool_version.into()),
        ..Conditions::default()
    };
    // Each benchmark writes what it measured, in the order they run.
    for benchmark in REGISTRY {
        benchmark.report(measured, &mut topo);
    }
    // Sizes from the API.
    topo.element_mut(ElementKind::SharedMemory)
        .set_size(Size::api(Bytes(info.shared_per_sm_bytes)));
    topo.element_mut(ElementKind::L2)
        .set_size(Size::api(Bytes(info.l2_bytes)));
    topo.element_mut(ElementKind::DeviceMemory)
        .set_size(Size::api(Bytes(info.total_memory_bytes)));
    topo.element_mut(ElementKind::SharedMemory)
        .set_count_per_sm(Count::new(1, Provenance::Api));
    mark_disturbed(measured, &mut topo);
    topo
}

/// Marks every element whose benchmark stayed disturbed after its repeat (schema 1.5), so
/// that no output shows its values plain; a benchmark of no element (the relations) and
/// one its repeat cleared mark nothing here (the run's notes say what happened).
fn mark_disturbed(measured: &Measurements, topo: &mut Topology) {
    for d in measured.disturbed.iter().filter(|d| !d.cleared_by_repeat) {
        let Some(element) = d.element else { continue };
        let text = format!("{}: {}", d.benchmark, d.findings.join("; "));
        let slot = &mut topo.element_mut(element).disturbed;
        match slot {
            Some(before) => {
                before.push_str("; ");
                before.push_str(&text);
            }
            None => *slot = Some(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{analysis::SweepDecision, carveout::Role, ElementResult, SizeAtCarveout};

    fn info() -> DeviceInfo {
        crate::sim::SimProfile::bundled("volta")
            .expect("bundled")
            .device
    }

    #[test]
    fn carveouts_bounds_and_failures_reach_the_topology() {
        let exact = |bytes| SizeFinding::Exact {
            bytes,
            resolution: 32,
            decision: SweepDecision {
                change_index: 5,
                accepted: true,
                statistic: 1.0,
                p_value: 1e-6,
                critical: 0.5,
            },
        };
        let measured = Measurements {
            sm_clock_mhz: Some(1380.0),
            l1_caches_global_loads: Some(true),
            elements: vec![
                (
                    ElementKind::L1Data,
                    ElementResult {
                        sizes: vec![
                            SizeAtCarveout {
                                carveout: Carveout::Percent(0),
                                reserved_shared_bytes: 7168,
                                config_bytes: Some(8192),
                                role: Role::LargestL1,
                                finding: exact(98_304),
                            },
                            SizeAtCarveout {
                                carveout: Carveout::DriverDefault,
                                reserved_shared_bytes: 0,
                                config_bytes: None,
                                role: Role::DriverDefault,
                                finding: SizeFinding::AtLeast {
                                    bytes: 24_576,
                                    reason: "test".into(),
                                },
                            },
                            SizeAtCarveout {
                                carveout: Carveout::Percent(0),
                                reserved_shared_bytes: 15_360,
                                config_bytes: Some(16_384),
                                role: Role::Config,
                                finding: exact(90_112),
                            },
                        ],
                        ..ElementResult::default()
                    },
                ),
                (
                    ElementKind::Texture,
                    ElementResult {
                        failures: vec!["kernel failed".into()],
                        ..ElementResult::default()
                    },
                ),
            ],
            ..Measurements::default()
        };
        let topo = to_topology(&info(), &measured, "test");
        topo.validate().expect("a valid topology");
        let l1 = topo.element(ElementKind::L1Data).expect("L1");
        assert_eq!(
            l1.size.as_ref().and_then(|s| s.bound.exact()),
            Some(Bytes(98_304))
        );
        assert_eq!(l1.size_per_carveout.len(), 3);
        let largest = l1.carveout_row(CarveoutRole::LargestL1).expect("largest");
        assert_eq!(
            (largest.carveout_percent, largest.shared_memory_bytes),
            (Some(0), Some(Bytes(8192)))
        );
        let default = l1
            .carveout_row(CarveoutRole::DriverDefault)
            .expect("default");
        assert_eq!(default.carveout_percent, None);
        assert!(topo
            .notes
            .iter()
            .any(|n| n.message.contains("was in force as forced")));
        assert_eq!(l1.global_loads_cached, Some(true));
        let notes: Vec<_> = topo.notes.iter().map(|n| (n.severity, n.element)).collect();
        assert!(notes.contains(&(NoteSeverity::Info, Some(ElementKind::L1Data))));
        assert!(notes.contains(&(NoteSeverity::Warning, Some(ElementKind::L1Data))));
        assert_eq!(
            topo.not_measured_reason(ElementKind::Texture, QuantityKind::Size),
            Some("kernel failed")
        );
    }
}
