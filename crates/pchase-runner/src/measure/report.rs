//! Turns [`Measurements`] into a [`topology::Topology`].

use topology::{
    Bytes, CarveoutL1Size, ChangePointEvidence, ComputeCapability, Conditions, Count,
    DeviceInfo as TopoDevice, ElementKind, Latency, Megahertz, Provenance, QuantityKind, Size,
    Topology,
};

use super::{Element, ElementResult, Measurements, SizeFinding};
use crate::{backend::Carveout, device::DeviceInfo};

/// The topology element an [`Element`] is written to.
pub fn element_kind(element: Element) -> ElementKind {
    match element {
        Element::L1 => ElementKind::L1Data,
        Element::Texture => ElementKind::Texture,
        Element::ReadOnly => ElementKind::ReadOnly,
        Element::ConstantL1 => ElementKind::ConstantL1,
        Element::ConstantL15 => ElementKind::ConstantL15,
        Element::Shared => ElementKind::SharedMemory,
        Element::L2 => ElementKind::L2,
        Element::DeviceMemory => ElementKind::DeviceMemory,
    }
}

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

fn size_of(finding: &SizeFinding, carveout: Carveout) -> Size {
    let conditions = Conditions {
        shared_memory_carveout_percent: carveout_percent(carveout),
        remark: matches!(carveout, Carveout::DriverDefault)
            .then(|| "carveout left to the driver".to_string()),
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

fn write_element(topo: &mut Topology, element: Element, result: &ElementResult) {
    let kind = element_kind(element);
    let entry = topo.element_mut(kind);
    if let Some(first) = result.sizes.first() {
        entry.set_size(size_of(&first.finding, first.carveout));
    }
    if element == Element::L1 {
        for s in &result.sizes {
            if let Some(percent) = carveout_percent(s.carveout) {
                entry.set_size_at_carveout(CarveoutL1Size {
                    carveout_percent: percent,
                    shared_memory_bytes: None,
                    l1_size: size_of(&s.finding, s.carveout),
                });
            }
        }
    }
    if let Some(line) = &result.line {
        entry.set_fetch_granularity(Size::exact(Bytes(line.bytes), Provenance::Benchmark));
    }
    if let Some(latency) = result.latency {
        entry.set_latency(Latency::measured(latency));
    }
    let mut notes: Vec<(Option<QuantityKind>, String)> = Vec::new();
    for s in &result.sizes {
        if let SizeFinding::AtLeast { reason, .. } = &s.finding {
            notes.push((
                Some(QuantityKind::Size),
                format!("only a lower bound: {reason}"),
            ));
        }
    }
    for failure in &result.failures {
        notes.push((None, failure.clone()));
    }
    for (quantity, message) in notes {
        if message.starts_with("only a lower bound") {
            topo.warn(Some(kind), message);
        } else {
            topo.not_measured(kind, quantity, message);
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
    if let Some(caches) = measured.l1_caches_global_loads {
        topo.element_mut(ElementKind::L1Data)
            .set_global_loads_cached(caches);
    }
    for (element, result) in &measured.elements {
        write_element(&mut topo, *element, result);
    }
    // Per-SM elements measured on one SM each: one copy per SM until the caches-per-SM
    // benchmark says otherwise; sizes from the API.
    topo.element_mut(ElementKind::SharedMemory)
        .set_size(Size::api(Bytes(info.shared_per_sm_bytes)));
    topo.element_mut(ElementKind::L2)
        .set_size(Size::api(Bytes(info.l2_bytes)));
    topo.element_mut(ElementKind::DeviceMemory)
        .set_size(Size::api(Bytes(info.total_memory_bytes)));
    topo.element_mut(ElementKind::SharedMemory)
        .set_count_per_sm(Count::new(1, Provenance::Api));
    topo
}
