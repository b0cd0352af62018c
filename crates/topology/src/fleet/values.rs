//! The quantities of a result that a fleet compares, flattened to numbers by path.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::{ElementKind, Topology};
use crate::quantity::{Count, Latency, Provenance, Size, SizeBound};

/// What kind of quantity a value is: sets its unit and which tolerance of
/// [`crate::diff::DiffOptions`] is its floor.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// A latency's mean, cycles.
    Latency,
    /// A size, bytes.
    Size,
    /// A size the driver reports, bytes: any difference counts.
    ApiSize,
    /// A count (copies per SM, partitions, SMs).
    Count,
    /// A measured clock, MHz.
    Clock,
    /// A bandwidth, GiB/s.
    Bandwidth,
}

impl ValueKind {
    /// The unit in reports.
    pub fn unit(self) -> &'static str {
        match self {
            ValueKind::Latency => "cycles",
            ValueKind::Size | ValueKind::ApiSize => "B",
            ValueKind::Count => "",
            ValueKind::Clock => "MHz",
            ValueKind::Bandwidth => "GiB/s",
        }
    }
}

/// Whether a size value is exact or only a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ValueBound {
    /// The value is the quantity.
    #[default]
    Exact,
    /// The quantity is at least the value.
    AtLeast,
    /// The quantity is at most the value.
    AtMost,
    /// The quantity lies between the value and `high`.
    Between,
}

/// One quantity of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KeyValue {
    /// Its kind.
    pub kind: ValueKind,
    /// The value (a latency's mean; a bound's known end).
    pub value: f64,
    /// Exact, or which bound.
    #[serde(default, skip_serializing_if = "is_exact")]
    pub bound: ValueBound,
    /// The upper end of a `between` bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
    /// A latency's standard error of the mean; a measured size's change-point
    /// resolution (both in the value's unit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<f64>,
}

fn is_exact(bound: &ValueBound) -> bool {
    *bound == ValueBound::Exact
}

impl KeyValue {
    /// An exact value.
    pub fn exact(kind: ValueKind, value: f64) -> Self {
        KeyValue {
            kind,
            value,
            bound: ValueBound::Exact,
            high: None,
            error: None,
        }
    }

    /// The exact value, or `None` for a bound.
    pub fn exact_value(&self) -> Option<f64> {
        (self.bound == ValueBound::Exact).then_some(self.value)
    }

    /// The values consistent with this one: `[low, high]` (a bound is open on one side).
    pub fn interval(&self) -> (f64, f64) {
        let error = self.error.unwrap_or(0.0);
        match self.bound {
            ValueBound::Exact => (self.value - error, self.value + error),
            ValueBound::AtLeast => (self.value - error, f64::INFINITY),
            ValueBound::AtMost => (0.0, self.value + error),
            ValueBound::Between => (self.value - error, self.high.unwrap_or(self.value) + error),
        }
    }

    fn latency(latency: &Latency) -> Self {
        let error = latency.summary().standard_error();
        KeyValue {
            error: error.is_finite().then_some(error),
            ..KeyValue::exact(ValueKind::Latency, latency.mean.0)
        }
    }

    fn size(size: &Size) -> Self {
        let kind = if size.provenance == Provenance::Api {
            ValueKind::ApiSize
        } else {
            ValueKind::Size
        };
        let resolution = size
            .evidence
            .as_ref()
            .and_then(|e| e.resolution)
            .map(|r| r.0 as f64);
        let (value, bound, high) = match size.bound {
            SizeBound::Exact(b) => (b.0 as f64, ValueBound::Exact, None),
            SizeBound::AtLeast(b) => (b.0 as f64, ValueBound::AtLeast, None),
            SizeBound::AtMost(b) => (b.0 as f64, ValueBound::AtMost, None),
            SizeBound::Between(low, high) => {
                (low.0 as f64, ValueBound::Between, Some(high.0 as f64))
            }
        };
        KeyValue {
            kind,
            value,
            bound,
            high,
            error: resolution,
        }
    }

    fn count(count: Count) -> Self {
        KeyValue::exact(ValueKind::Count, f64::from(count.value))
    }

    /// The value in a report: `283.1 cycles`, `50 MiB`, `≥ 64 KiB`, `1976 MHz`.
    pub fn display(&self) -> String {
        let one = |x: f64| match self.kind {
            ValueKind::Size | ValueKind::ApiSize => crate::units::Bytes(x as u64).to_string(),
            ValueKind::Latency => format!("{x:.1} cycles"),
            ValueKind::Count => format!("{x:.0}"),
            ValueKind::Clock => format!("{x:.0} MHz"),
            ValueKind::Bandwidth => format!("{x:.1} GiB/s"),
        };
        match self.bound {
            ValueBound::Exact => one(self.value),
            ValueBound::AtLeast => format!("≥ {}", one(self.value)),
            ValueBound::AtMost => format!("≤ {}", one(self.value)),
            ValueBound::Between => {
                format!(
                    "{} – {}",
                    one(self.value),
                    one(self.high.unwrap_or(self.value))
                )
            }
        }
    }
}

/// The quantities of `topo` a fleet compares, by path (the paths of
/// [`crate::diff`]): per element its sizes, latency, copies per SM, bandwidths and
/// L2 partitions; the device's SM count, memory and L2 size; the measured SM clock; the
/// PCIe link from the run record (`pcie.generation`, `pcie.width` and their maxima; the
/// higher of the states before and after the run, since an idle GPU lowers its link's
/// generation); the sections' bandwidths that the tolerance table names (the host link's
/// copies, `sections.host-link.copy_h2d`, in GiB/s).
///
/// ```
/// use topology::{fleet, *};
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// topo.element_mut(ElementKind::L2).set_size(Size::api(Bytes::mib(50)));
/// let values = fleet::key_values(&topo);
/// assert_eq!(values["elements.l2.size"].value, 52_428_800.0);
/// assert_eq!(values["device.sm_count"].value, 132.0);
/// ```
pub fn key_values(topo: &Topology) -> BTreeMap<String, KeyValue> {
    let mut out = BTreeMap::new();
    let d = &topo.device;
    out.insert(
        "device.sm_count".into(),
        KeyValue::exact(ValueKind::Count, f64::from(d.sm_count)),
    );
    if let Some(bytes) = d.memory_bytes {
        out.insert(
            "device.memory_bytes".into(),
            KeyValue::exact(ValueKind::ApiSize, bytes.0 as f64),
        );
    }
    if let Some(bytes) = d.l2_bytes {
        out.insert(
            "device.l2_bytes".into(),
            KeyValue::exact(ValueKind::ApiSize, bytes.0 as f64),
        );
    }
    if let Some(clock) = topo.conditions.sm_clock_mhz {
        out.insert(
            "conditions.sm_clock_mhz".into(),
            KeyValue::exact(ValueKind::Clock, clock.0),
        );
    }
    if let Some(run) = &topo.run {
        let states: Vec<&crate::GpuState> = run.before.iter().chain(run.after.iter()).collect();
        type Field = fn(&crate::GpuState) -> Option<u32>;
        let fields: [(&str, Field); 4] = [
            ("pcie.generation", |g| g.pcie_generation),
            ("pcie.width", |g| g.pcie_width),
            ("pcie.max_generation", |g| g.pcie_max_generation),
            ("pcie.max_width", |g| g.pcie_max_width),
        ];
        for (path, field) in fields {
            if let Some(value) = states.iter().filter_map(|g| field(g)).max() {
                out.insert(
                    path.into(),
                    KeyValue::exact(ValueKind::Count, f64::from(value)),
                );
            }
        }
    }
    for kind in ElementKind::ALL {
        let Some(e) = topo.element(kind) else {
            continue;
        };
        let mut put = |name: &str, value: Option<KeyValue>| {
            if let Some(value) = value {
                out.insert(format!("elements.{}.{name}", kind.key()), value);
            }
        };
        put("size", e.size.as_ref().map(KeyValue::size));
        put("line_size", e.line_size.as_ref().map(KeyValue::size));
        put(
            "fetch_granularity",
            e.fetch_granularity.as_ref().map(KeyValue::size),
        );
        put("sector_size", e.sector_size.as_ref().map(KeyValue::size));
        put("latency", e.latency.as_ref().map(KeyValue::latency));
        put("count_per_sm", e.count_per_sm.map(KeyValue::count));
        if let Some(bw) = &e.bandwidth {
            let bandwidth = |b: &crate::Bandwidth| KeyValue::exact(ValueKind::Bandwidth, b.value);
            put("bandwidth.read", bw.read.as_ref().map(bandwidth));
            put("bandwidth.write", bw.write.as_ref().map(bandwidth));
            put("bandwidth.copy", bw.copy.as_ref().map(bandwidth));
            put(
                "bandwidth.read_near_partition",
                bw.read_near_partition.as_ref().map(bandwidth),
            );
        }
        if let Some(p) = &e.partitions {
            put("partitions.count", p.count.map(KeyValue::count));
            put(
                "partitions.size_each",
                p.size_each.as_ref().map(KeyValue::size),
            );
            put(
                "partitions.near_latency",
                p.near_latency.as_ref().map(KeyValue::latency),
            );
            put(
                "partitions.far_latency",
                p.far_latency.as_ref().map(KeyValue::latency),
            );
            put(
                "partitions.far_size",
                p.far_size.as_ref().map(KeyValue::size),
            );
        }
    }
    section_values(topo, &mut out);
    out
}

/// The bandwidths of `topo`'s sections that a fleet compares: a row whose path
/// (`sections.<name>.<key>`) the tolerance table names ([`crate::tolerance`]), a number in
/// GB/s or GiB/s, as a [`ValueKind::Bandwidth`] in GiB/s. Only rows with a tolerance are
/// compared, so that a figure that depends on more than the GPU (a pageable copy, through
/// the host's own memory copies) never flags one.
fn section_values(topo: &Topology, out: &mut BTreeMap<String, KeyValue>) {
    const GIB: f64 = 1_073_741_824.0;
    for (name, section) in &topo.sections {
        for row in &section.rows {
            let path = format!("sections.{name}.{}", row.key);
            if crate::tolerance::lookup(&path).is_none()
                || crate::tolerance::HOST_DEPENDENT.contains(&path.as_str())
            {
                continue;
            }
            let crate::RowValue::Number(number) = &row.value else {
                continue;
            };
            let scale = match number.unit.as_str() {
                "GB/s" => 1e9 / GIB,
                "GiB/s" => 1.0,
                _ => continue,
            };
            out.insert(
                path,
                KeyValue {
                    error: number.standard_error.map(|e| e * scale),
                    ..KeyValue::exact(ValueKind::Bandwidth, number.value * scale)
                },
            );
        }
    }
}

/// The quantities of the GPUs' links on their node, added to `gpus`' values: per GPU,
/// `links.nvlink_links`, the fewest active NVLinks from it to any other measured GPU of
/// its node (on an NVSwitch node, the GPU's links into the switches, so one link down
/// shows on its GPU only). A GPU without links measured gets none.
pub fn link_values(gpus: &mut [super::GpuEntry], nodes: &[super::Node]) {
    for gpu in gpus {
        let Some(node) = nodes.iter().find(|n| Some(&n.name) == gpu.node.as_ref()) else {
            continue;
        };
        let fewest = node
            .links
            .iter()
            .filter(|l| match (&gpu.uuid, &l.from_uuid) {
                (Some(a), Some(b)) => a == b,
                _ => Some(l.from) == gpu.device_index,
            })
            .filter_map(|l| l.nvlink_links)
            .min();
        if let Some(links) = fewest {
            gpu.values.insert(
                "links.nvlink_links".into(),
                KeyValue::exact(ValueKind::Count, f64::from(links)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ComputeCapability, DeviceInfo};
    use crate::units::Bytes;

    #[test]
    fn bounds_keep_their_open_side() {
        let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 1));
        topo.element_mut(ElementKind::ConstantL15)
            .set_size(Size::at_least(Bytes::kib(64), Provenance::Benchmark));
        let v = &key_values(&topo)["elements.constant_l15.size"];
        assert_eq!(v.bound, ValueBound::AtLeast);
        assert_eq!(v.exact_value(), None);
        assert_eq!(v.interval(), (65_536.0, f64::INFINITY));
        assert_eq!(v.display(), "≥ 64 KiB");
    }

    #[test]
    fn host_link_bandwidths_are_compared_in_gib_per_s_and_pageable_ones_not() {
        use crate::{Number, RowValue, Section};
        let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 1));
        let number = |value: f64, unit: &str| {
            RowValue::Number(Number {
                value,
                unit: unit.into(),
                provenance: Provenance::Benchmark,
                standard_error: Some(0.1),
            })
        };
        let section = Section::new("Host link")
            .with_row("copy_h2d", "h2d", number(53.687_091_2, "GB/s"))
            .with_row("sm_write", "write", number(50.0, "GiB/s"))
            .with_row("pageable_h2d", "pageable", number(20.0, "GB/s"))
            .with_row("copy_d2h_of_peak", "share", number(85.0, "%"));
        topo.sections.insert("host-link".into(), section);
        let values = key_values(&topo);
        let h2d = &values["sections.host-link.copy_h2d"];
        assert_eq!(h2d.kind, ValueKind::Bandwidth);
        assert!((h2d.value - 50.0).abs() < 1e-6, "{}", h2d.value);
        assert_eq!(values["sections.host-link.sm_write"].value, 50.0);
        assert!(!values.contains_key("sections.host-link.pageable_h2d"));
        assert!(!values.contains_key("sections.host-link.copy_d2h_of_peak"));
    }
}
