//! The spread of each quantity over the GPUs of one model, the GPUs outside it, and
//! merging documents.
//!
//! The rule, per model and quantity: the median of the GPUs' exact values and their
//! median absolute deviation (MAD, scaled by 1.4826 so that it estimates a standard
//! deviation of normal noise) give the allowed range `median ± max(k · MAD, floor)`,
//! `k` = [`SpreadOptions::mad_threshold`] (3.5, the usual cut of the modified z-score).
//! The floor is the tolerance `memtopo diff` uses for the quantity: a latency, clock or
//! bandwidth its run-to-run tolerance ([`crate::tolerance::relative`]: measured over
//! repeated runs of one GPU, never below the kind's relative tolerance) of the median,
//! a latency also more than `sigmas` of its standard errors; a benchmarked size more than
//! the size tolerance (its change-point resolution widens it); a count more than the
//! count tolerance; a size from the driver any difference. So identical GPUs (MAD 0) are
//! not flagged for noise, and one GPU in eight cannot widen the range enough to hide
//! itself. A GPU is flagged when every value consistent with its own (a bound is open on
//! one side) lies outside the range. With two GPUs of a model there is no majority: when
//! they differ beyond the floor both are flagged, each against the other.
//!
//! A flag is [`Severity::Degraded`] when the value lies on the quantity's bad side
//! ([`crate::tolerance::worse`]: a higher latency, a lower bandwidth, clock, size or link
//! count) and also beyond the stable difference healthy GPUs of the model are known to
//! show ([`crate::tolerance::between_gpus`]); otherwise [`Severity::Differs`]. A GPU
//! whose PCIe link runs below its own maximum generation or width is degraded whatever
//! its peers show.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    Flag, Fleet, FleetKind, GpuEntry, GpuFailure, Input, KeyValue, ModelSpread, Node,
    QuantitySpread, Severity, SiblingValue, ValueKind, FLEET_SCHEMA_VERSION,
};
use crate::diff::DiffOptions;
use crate::tolerance::{self, Worse};

/// The tolerances of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpreadOptions {
    /// The floor of latencies in standard errors (`diff --sigmas`).
    pub sigmas: f64,
    /// The floor of latencies, clocks and bandwidths relative to the median
    /// (`diff --latency-tolerance`, 0.02 = 2 %); a quantity whose measured run-to-run
    /// tolerance ([`crate::tolerance`]) is larger takes that one.
    pub relative_tolerance: f64,
    /// The floor of benchmarked sizes relative to the median (`diff --size-tolerance`).
    pub size_tolerance: f64,
    /// The floor of counts (`diff --count-tolerance`).
    pub count_tolerance: u32,
    /// How many scaled MADs from the median a value may lie.
    pub mad_threshold: f64,
}

impl Default for SpreadOptions {
    fn default() -> Self {
        SpreadOptions::from_diff(DiffOptions::default(), 3.5)
    }
}

impl SpreadOptions {
    /// The tolerances of `diff`, with `mad_threshold`.
    pub fn from_diff(diff: DiffOptions, mad_threshold: f64) -> Self {
        SpreadOptions {
            sigmas: diff.sigmas,
            relative_tolerance: diff.relative_tolerance,
            size_tolerance: diff.size_tolerance,
            count_tolerance: diff.count_tolerance,
            mad_threshold,
        }
    }

    /// The smallest distance from `median` that counts for `value` of `path`.
    fn floor(&self, path: &str, value: &KeyValue, median: f64) -> f64 {
        let relative = tolerance::relative(path, self.relative_tolerance);
        match value.kind {
            ValueKind::Latency => {
                (relative * median.abs()).max(self.sigmas * value.error.unwrap_or(0.0))
            }
            ValueKind::Size => self.size_tolerance * median.abs(),
            ValueKind::ApiSize => 0.0,
            ValueKind::Count => f64::from(self.count_tolerance),
            ValueKind::Clock | ValueKind::Bandwidth => relative * median.abs(),
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when
/// empty.
///
/// ```
/// assert_eq!(topology::fleet::median(&[3.0, 1.0, 2.0]), Some(2.0));
/// assert_eq!(topology::fleet::median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
/// ```
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The median and the scaled median absolute deviation (1.4826 · MAD) of `values`.
///
/// ```
/// let (median, mad) = topology::fleet::robust_spread(&[10.0, 11.0, 9.0, 10.0, 50.0]).unwrap();
/// assert_eq!(median, 10.0);
/// assert!((mad - 1.4826).abs() < 1e-9); // the 50 does not widen it
/// ```
pub fn robust_spread(values: &[f64]) -> Option<(f64, f64)> {
    let m = median(values)?;
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    Some((m, 1.4826 * median(&deviations)?))
}

/// Whether `value` lies wholly outside `[low, high]`.
fn outside(value: &KeyValue, (low, high): (f64, f64)) -> bool {
    let (a, b) = value.interval();
    b < low || a > high
}

impl Fleet {
    /// A document of `gpus`, with the spreads and flags computed.
    pub fn build(
        kind: FleetKind,
        gpus: Vec<GpuEntry>,
        failures: Vec<GpuFailure>,
        nodes: Vec<Node>,
        options: SpreadOptions,
    ) -> Fleet {
        let mut fleet = Fleet {
            fleet_schema_version: FLEET_SCHEMA_VERSION,
            kind,
            created_utc: None,
            tool_version: None,
            options,
            nodes,
            gpus,
            failures,
            models: Vec::new(),
            flags: Vec::new(),
            notes: Vec::new(),
        };
        fleet.compare();
        fleet
    }

    /// Joins results and documents into one fleet report. `sources` are (name, what it
    /// holds): a result becomes one GPU whose `file` is its name; a document brings its
    /// nodes, GPUs and failures. A GPU (by UUID) given twice is kept once, its missing
    /// fields filled from the other (a node's document names the node and device index
    /// over a result's host name); a note says so where their values differ, and where
    /// two results hold the same GPU. The spreads and flags are computed afresh with
    /// `options`.
    pub fn merge(sources: Vec<(String, Input)>, options: SpreadOptions) -> Fleet {
        let mut gpus: Vec<GpuEntry> = Vec::new();
        let mut nodes: Vec<Node> = Vec::new();
        let mut failures = Vec::new();
        let mut notes = Vec::new();
        // The UUIDs read from results (not from a node's document), with the first file.
        let mut results: Vec<(String, String)> = Vec::new();
        // `placed`: the entry comes from a node's document, which knows the node and index
        // better than a result's host name does.
        // A node's document adds the GPUs' link values (`links.…`), which a result cannot
        // hold: they do not make the GPU's values differ.
        let measured = |g: &GpuEntry| {
            g.values
                .iter()
                .filter(|(path, _)| !path.starts_with("links."))
                .map(|(p, v)| (p.clone(), v.clone()))
                .collect::<Vec<_>>()
        };
        let mut add = |gpu: GpuEntry, source: &str, placed: bool, notes: &mut Vec<String>| {
            // A GPU in two results: two runs of one GPU, or one file given twice. Counted
            // once, and said so (a node's document and its own result files name the same
            // GPUs without that being news).
            let same = gpu
                .uuid
                .as_ref()
                .and_then(|u| gpus.iter_mut().find(|g| g.uuid.as_ref() == Some(u)));
            let mut twice = false;
            if let (Some(uuid), false) = (&gpu.uuid, placed) {
                match results.iter().find(|(u, _)| u == uuid) {
                    Some((_, first)) => {
                        twice = true;
                        let values = match &same {
                            Some(kept) if measured(kept) != measured(&gpu) => "different values",
                            _ => "the same values",
                        };
                        notes.push(format!(
                            "{uuid} is the GPU of two results, {first} and {source}, with \
                             {values}: it is counted once, with the values of {first}"
                        ));
                    }
                    None => results.push((uuid.clone(), source.to_owned())),
                }
            }
            match same {
                Some(kept) => {
                    if measured(kept) != measured(&gpu) && !twice {
                        notes.push(format!(
                            "{} is in more than one input with different values; the first \
                             (not {source}) is kept",
                            gpu.label()
                        ));
                    }
                    if placed {
                        kept.node = gpu.node.or(kept.node.take());
                        kept.device_index = gpu.device_index.or(kept.device_index);
                    } else {
                        kept.node = kept.node.take().or(gpu.node);
                        kept.device_index = kept.device_index.or(gpu.device_index);
                    }
                    kept.file = kept.file.take().or(gpu.file);
                    kept.exit_code = kept.exit_code.or(gpu.exit_code);
                    kept.pci_bus_id = kept.pci_bus_id.take().or(gpu.pci_bus_id);
                }
                None => gpus.push(gpu),
            }
        };
        for (name, input) in sources {
            match input {
                Input::Result(topo) => {
                    let mut gpu = GpuEntry::from_topology(&topo, None, None);
                    gpu.file = Some(name.clone());
                    add(gpu, &name, false, &mut notes);
                }
                Input::Fleet(doc) => {
                    for node in doc.nodes {
                        if nodes.iter().any(|n| n.name == node.name) {
                            notes.push(format!(
                                "node {} is in more than one input; the first is kept",
                                node.name
                            ));
                        } else {
                            nodes.push(node);
                        }
                    }
                    for gpu in doc.gpus {
                        add(gpu, &name, true, &mut notes);
                    }
                    failures.extend(doc.failures);
                    notes.extend(doc.notes);
                }
            }
        }
        // By node, then device index (the inputs' order where those are unknown).
        gpus.sort_by_key(|g| (g.node.clone(), g.device_index.unwrap_or(u32::MAX)));
        let mut fleet = Fleet::build(FleetKind::Fleet, gpus, failures, nodes, options);
        fleet.notes = notes;
        if fleet.gpus.is_empty() {
            fleet.notes.push("no GPU was measured in the inputs".into());
        }
        fleet
    }

    /// Recomputes the GPUs' link values ([`super::link_values`]), [`Fleet::models`] and
    /// [`Fleet::flags`] from the GPUs' values.
    pub fn compare(&mut self) {
        self.models.clear();
        self.flags.clear();
        super::link_values(&mut self.gpus, &self.nodes);
        let mut models: Vec<&str> = Vec::new();
        for gpu in &self.gpus {
            if !models.contains(&gpu.model.as_str()) {
                models.push(&gpu.model);
            }
        }
        let models: Vec<String> = models.into_iter().map(str::to_owned).collect();
        for model in models {
            let members: Vec<&GpuEntry> = self.gpus.iter().filter(|g| g.model == model).collect();
            let (spread, mut flags) = compare_model(&model, &members, &self.options);
            for gpu in &members {
                for flag in below_maximum(&model, gpu) {
                    if !flags.iter().any(|f| f.path == flag.path && f.is_about(gpu)) {
                        flags.push(flag);
                    }
                }
            }
            self.models.push(spread);
            self.flags.extend(flags);
        }
    }
}

/// The flags of a GPU whose PCIe link runs below its own maximum generation or width.
fn below_maximum(model: &str, gpu: &GpuEntry) -> Vec<Flag> {
    let mut flags = Vec::new();
    for (path, max_path, what) in [
        ("pcie.generation", "pcie.max_generation", "generation"),
        ("pcie.width", "pcie.max_width", "width"),
    ] {
        let (Some(now), Some(max)) = (
            gpu.values.get(path).and_then(KeyValue::exact_value),
            gpu.values.get(max_path).and_then(KeyValue::exact_value),
        ) else {
            continue;
        };
        if now >= max {
            continue;
        }
        flags.push(Flag {
            severity: Severity::Degraded,
            model: model.to_owned(),
            uuid: gpu.uuid.clone(),
            node: gpu.node.clone(),
            device_index: gpu.device_index,
            file: gpu.file.clone(),
            path: path.to_owned(),
            kind: ValueKind::Count,
            value: now,
            median: max,
            allowed: [max, max],
            siblings: Vec::new(),
            reason: format!(
                "the PCIe link's {what} is {now:.0}, below the {max:.0} the GPU and its slot \
                 support: the link trained down (a reseated card, a bad riser or slot)"
            ),
        });
    }
    flags
}

/// Degraded when `value` lies beyond `centre ± width` on the bad side of `path` and beyond
/// the stable difference healthy GPUs show; else differs. With the verdict in words.
fn severity(path: &str, value: &KeyValue, centre: f64, width: f64) -> (Severity, &'static str) {
    let (low, high) = value.interval();
    let beyond = |width: f64| match tolerance::worse(path) {
        Worse::Higher => low > centre + width,
        Worse::Lower => high < centre - width,
        Worse::Neither => false,
    };
    let stable = width.max(tolerance::between_gpus(path) * centre.abs());
    if tolerance::worse(path) == Worse::Neither {
        (Severity::Differs, "the quantity has no worse side: differs")
    } else if beyond(stable) {
        (Severity::Degraded, "worse than its peers: degraded")
    } else if beyond(width) {
        (
            Severity::Differs,
            "within the stable difference healthy GPUs of the model show: differs",
        )
    } else {
        (Severity::Differs, "on the better side: differs")
    }
}

/// The spread of every quantity of one model's GPUs, and the flags.
fn compare_model(
    model: &str,
    members: &[&GpuEntry],
    options: &SpreadOptions,
) -> (ModelSpread, Vec<Flag>) {
    let mut spread = ModelSpread {
        model: model.to_owned(),
        gpus: members.iter().map(|g| g.label()).collect(),
        quantities: Vec::new(),
        note: None,
    };
    let mut flags = Vec::new();
    if members.len() < 2 {
        spread.note = Some(format!(
            "one GPU of this model: nothing to compare it with (only GPUs named {model:?} are \
             compared with each other)"
        ));
    }
    let mut paths: Vec<&String> = members.iter().flat_map(|g| g.values.keys()).collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        let present: Vec<(&GpuEntry, &KeyValue)> = members
            .iter()
            .filter_map(|g| g.values.get(path).map(|v| (*g, v)))
            .collect();
        let exact: Vec<f64> = present
            .iter()
            .filter_map(|(_, v)| v.exact_value())
            .collect();
        let Some((median, mad)) = robust_spread(&exact) else {
            continue;
        };
        let kind = present[0].1.kind;
        spread.quantities.push(QuantitySpread {
            path: path.clone(),
            kind,
            gpus: exact.len() as u32,
            median,
            mad,
            min: exact.iter().copied().fold(f64::INFINITY, f64::min),
            max: exact.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        });
        if exact.len() < 2 {
            continue;
        }
        for &(gpu, value) in &present {
            let siblings: Vec<SiblingValue> = present
                .iter()
                .filter(|(other, _)| !std::ptr::eq(*other, gpu))
                .map(|(other, v)| SiblingValue {
                    gpu: other.label(),
                    value: v.value,
                })
                .collect();
            // Two GPUs: each is compared with the other, not with their mean.
            let centre = if exact.len() == 2 {
                match present
                    .iter()
                    .find(|(other, _)| !std::ptr::eq(*other, gpu))
                    .and_then(|(_, v)| v.exact_value())
                {
                    Some(other) => other,
                    None => continue,
                }
            } else {
                median
            };
            let width = if exact.len() == 2 {
                options.floor(path, value, centre)
            } else {
                (options.mad_threshold * mad).max(options.floor(path, value, centre))
            };
            let allowed = (centre - width, centre + width);
            if !outside(value, allowed) {
                continue;
            }
            let unit = kind.unit();
            let (severity, verdict) = severity(path, value, centre, width);
            let reason = if exact.len() == 2 {
                format!(
                    "{} differs from the other {model} GPU's {centre:.1} {unit} beyond the \
                     tolerance ({width:.1} {unit}); with two GPUs there is no majority to say \
                     which is off; {verdict}",
                    value.display()
                )
            } else {
                format!(
                    "{} lies outside {:.1} … {:.1} {unit}: median {median:.1}, MAD {mad:.2}, \
                     over {} GPUs of {model}; {verdict}",
                    value.display(),
                    allowed.0,
                    allowed.1,
                    exact.len()
                )
            };
            flags.push(Flag {
                severity,
                model: model.to_owned(),
                uuid: gpu.uuid.clone(),
                node: gpu.node.clone(),
                device_index: gpu.device_index,
                file: gpu.file.clone(),
                path: path.clone(),
                kind,
                value: value.value,
                median: centre,
                allowed: [allowed.0, allowed.1],
                siblings,
                reason,
            });
        }
    }
    (spread, flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ComputeCapability, DeviceInfo, ElementKind, Latency, LatencySummary, Topology};

    /// A result of an H100 with this L2 latency, with or without a UUID in its record.
    fn result(l2: f64, uuid: Option<&str>) -> Input {
        let mut topo = Topology::new(DeviceInfo::new(
            "NVIDIA H100",
            ComputeCapability::new(9, 0),
            132,
        ));
        let latency = LatencySummary::from_samples(&[l2 - 1.0, l2, l2 + 1.0]).unwrap();
        topo.element_mut(ElementKind::L2)
            .set_latency(Latency::measured(latency));
        if let Some(uuid) = uuid {
            topo.run = Some(crate::RunRecord {
                gpu_uuid: Some(uuid.into()),
                ..crate::RunRecord::default()
            });
        }
        Input::Result(topo)
    }

    #[test]
    fn results_without_a_uuid_are_told_apart_by_their_file() {
        let sources = vec![
            ("a.json".to_owned(), result(283.0, None)),
            ("b.json".to_owned(), result(284.0, None)),
            ("c.json".to_owned(), result(283.5, None)),
            ("d.json".to_owned(), result(340.0, None)),
        ];
        let fleet = Fleet::merge(sources, SpreadOptions::default());
        let labels: Vec<String> = fleet.gpus.iter().map(GpuEntry::label).collect();
        assert_eq!(labels, ["a.json", "b.json", "c.json", "d.json"]);
        assert_eq!(fleet.flags.len(), 1);
        assert_eq!(fleet.flags[0].label(), "d.json");
        let about: Vec<bool> = fleet
            .gpus
            .iter()
            .map(|g| fleet.flags[0].is_about(g))
            .collect();
        assert_eq!(about, [false, false, false, true]);
        let table = super::super::table(&fleet);
        assert_eq!(table.matches('⚑').count(), 1, "{table}");
        assert!(!table.contains('?'), "{table}");
    }

    #[test]
    fn a_gpu_in_two_results_is_counted_once_and_said_so() {
        let sources = vec![
            ("one.json".to_owned(), result(283.0, Some("GPU-a"))),
            ("two.json".to_owned(), result(283.0, Some("GPU-a"))),
        ];
        let fleet = Fleet::merge(sources, SpreadOptions::default());
        assert_eq!(fleet.gpus.len(), 1);
        assert_eq!(fleet.notes.len(), 1, "{:?}", fleet.notes);
        assert!(
            fleet.notes[0].contains("GPU-a is the GPU of two results, one.json and two.json"),
            "{:?}",
            fleet.notes
        );
    }
}
