//! Turns [`Measurements`] into a [`topology::Topology`]: the device facts, then each
//! benchmark of the registry writes its own part ([`super::bench::Benchmark::report`], with
//! the rows it shares with others in `bench::element` and its own beside it), then the
//! marks on what stayed disturbed.

use topology::{
    Bytes, ComputeCapability, Conditions, Count, DeviceInfo as TopoDevice, ElementKind, Megahertz,
    Provenance, Size, Topology,
};

use super::{bench::REGISTRY, Measurements};
use crate::device::DeviceInfo;

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
    if !measured.chase_sms.is_empty() {
        let partitions = topo.l2_partitions();
        let sms: Vec<String> = measured
            .chase_sms
            .iter()
            .map(|&sm| {
                let side = partitions.and_then(|p| {
                    let reference = p.map_reference_sm?;
                    match p.sm_partition.get(sm as usize).copied().flatten()? {
                        0 => Some(format!(", in SM {reference}'s L2 partition")),
                        _ => Some(format!(", in the other L2 partition than SM {reference}'s")),
                    }
                });
                format!("{sm} (`%smid`){}", side.unwrap_or_default())
            })
            .collect();
        topo.notes.push(topology::Note {
            severity: topology::NoteSeverity::Info,
            element: None,
            quantity: None,
            message: format!(
                "the one-block latency chases ran on SM {}; on the H100 and H200 the constant L1.5's latency differs between SMs by their place in the GPC, and a TLB miss's cost by their L2 partition (docs/measurement.md)",
                sms.join(", ")
            ),
        });
    }
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
    use topology::{CarveoutRole, NoteSeverity, QuantityKind};

    use super::*;
    use crate::backend::Carveout;
    use crate::measure::{
        analysis::SweepDecision, carveout::Role, ElementResult, SizeAtCarveout, SizeFinding,
    };

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
