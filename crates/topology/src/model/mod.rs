//! The typed model of a GPU's memory topology: the device, its elements, notes, and the
//! topology that holds them.

mod cluster;
mod copy;
mod device;
mod element;
mod geometry;
mod icache;
mod l2_address;
mod l2_ways;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use cluster::{
    ClusterResidency, Clusters, DsmemAtSize, Gpc, GpcContention, RankLatency, TpcContention,
};
pub use copy::{
    CopiesToShared, CopyAtSize, CopyLaunch, CopyNotApplicable, CopyPathKind, CopyPathResult,
};
pub use device::{ComputeCapability, DeviceInfo, Limits};
pub use element::*;
pub use geometry::{CacheGeometry, ReplacementPolicy, SetMapping};
pub use icache::InstructionCacheLevel;
pub use l2_address::L2AddressMap;
pub use l2_ways::{EvictionOutcome, L2Ways, L2WaysTarget};

use crate::quantity::{Conditions, Latency};
use crate::section::Section;
use crate::units::{Megahertz, Nanoseconds};
use crate::version::SchemaVersion;

/// How much a note matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NoteSeverity {
    /// Context for the reader.
    Info,
    /// A value may be off (e.g. Volta's L1 misses before it is full).
    Warning,
    /// A value was not measured; the note gives the reason.
    NotMeasured,
}

/// A measurement note: what failed, what to distrust, what was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Note {
    /// How much it matters.
    pub severity: NoteSeverity,
    /// The element it is about, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<ElementKind>,
    /// The quantity it is about, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantity: Option<QuantityKind>,
    /// The text.
    pub message: String,
}

/// The memory topology of one GPU.
///
/// Build one step by step, as the runner does:
///
/// ```
/// use topology::*;
///
/// let mut topo = Topology::new(DeviceInfo::new("NVIDIA H200", ComputeCapability::new(9, 0), 132));
/// topo.device.limits.shared_memory_per_sm_bytes = Some(Bytes(233_472));
/// topo.conditions.sm_clock_mhz = Some(Megahertz(1980.0));
///
/// let latency = LatencySummary::from_samples(&[38.0, 38.0, 39.0, 38.0]).unwrap();
/// topo.element_mut(ElementKind::L1Data)
///     .set_size(Size::measured(Bytes(238_848), ChangePointEvidence { confidence: Some(0.97), ..Default::default() }))
///     .set_line_size(Size::exact(Bytes(128), Provenance::Benchmark))
///     .set_latency(Latency::measured(latency))
///     .set_count_per_sm(Count::new(1, Provenance::Benchmark));
/// topo.element_mut(ElementKind::Texture).set_line_size(Size::exact(Bytes(128), Provenance::Benchmark));
/// topo.share_physical_cache([ElementKind::L1Data, ElementKind::Texture], Provenance::Benchmark);
/// topo.not_measured(ElementKind::ConstantL15, Some(QuantityKind::Size), "kernel launch failed");
///
/// topo.validate().unwrap();
/// assert!((topo.latency_ns(ElementKind::L1Data).unwrap().get() - 19.32).abs() < 0.01);
/// assert_eq!(topo.shared_with(ElementKind::Texture), vec![ElementKind::L1Data]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Topology {
    /// The file format version.
    pub schema_version: SchemaVersion,
    /// What the API says about the device.
    pub device: DeviceInfo,
    /// The conditions of the run; quantities override them where they differ.
    #[serde(default)]
    pub conditions: Conditions,
    /// The memory elements.
    #[serde(default)]
    pub elements: Elements,
    /// Groups of logical caches that are one physical cache.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_physical_caches: Vec<SharedPhysicalCache>,
    /// Address-translation levels, where the `tlb` benchmark (`--deep`) measured them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tlb: Vec<TlbLevel>,
    /// Instruction-fetch levels, nearest first (schema 1.6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instruction_caches: Vec<InstructionCacheLevel>,
    /// Notes and warnings, including why a value was not measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
    /// The run: GPU identity, driver, GPU state before and after, other processes,
    /// date, host, tool version and command line (schema 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<crate::run::RunRecord>,
    /// Thread-block clusters: the GPCs and distributed shared memory (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Clusters>,
    /// Copies from global to shared memory: the tensor memory accelerator, `cp.async` and
    /// plain loads, per size (schema 1.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies_to_shared: Option<CopiesToShared>,
    /// What benchmarks without a dedicated field measured, keyed by the benchmark's name
    /// ([`Section`], schema 1.8).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sections: BTreeMap<String, Section>,
}

impl Topology {
    /// An empty topology of `device` at the current schema version.
    pub fn new(device: DeviceInfo) -> Self {
        Topology {
            schema_version: SchemaVersion::CURRENT,
            device,
            conditions: Conditions::default(),
            elements: Elements::default(),
            shared_physical_caches: Vec::new(),
            tlb: Vec::new(),
            instruction_caches: Vec::new(),
            notes: Vec::new(),
            run: None,
            clusters: None,
            copies_to_shared: None,
            sections: BTreeMap::new(),
        }
    }

    /// The element of `kind`, if present.
    pub fn element(&self, kind: ElementKind) -> Option<&Element> {
        self.elements.get(kind)
    }

    /// The size of `kind`, if measured: `topo.size(ElementKind::L2)?.value()`.
    pub fn size(&self, kind: ElementKind) -> Option<&crate::quantity::Size> {
        self.element(kind)?.size.as_ref()
    }

    /// The hit latency of `kind`, if measured: `topo.latency(ElementKind::L1Data)?.p50`.
    pub fn latency(&self, kind: ElementKind) -> Option<&Latency> {
        self.element(kind)?.latency.as_ref()
    }

    /// The line size of `kind`, if measured.
    pub fn line_size(&self, kind: ElementKind) -> Option<&crate::quantity::Size> {
        self.element(kind)?.line_size.as_ref()
    }

    /// The element of `kind` for updating, created empty if absent.
    pub fn element_mut(&mut self, kind: ElementKind) -> &mut Element {
        self.elements.get_or_insert(kind)
    }

    /// Records that `members` are one physical cache. A member already in another
    /// group moves that whole group into this one, so groups stay disjoint.
    pub fn share_physical_cache(
        &mut self,
        members: impl IntoIterator<Item = ElementKind>,
        provenance: crate::quantity::Provenance,
    ) {
        let mut merged: Vec<ElementKind> = members.into_iter().collect();
        self.shared_physical_caches.retain(|group| {
            if group.members.iter().any(|m| merged.contains(m)) {
                merged.extend(group.members.iter().copied());
                false
            } else {
                true
            }
        });
        merged.sort();
        merged.dedup();
        self.shared_physical_caches.push(SharedPhysicalCache {
            members: merged,
            provenance,
        });
    }

    /// The logical caches that share `kind`'s physical cache (without `kind`).
    pub fn shared_with(&self, kind: ElementKind) -> Vec<ElementKind> {
        self.shared_physical_caches
            .iter()
            .find(|group| group.members.contains(&kind))
            .map(|group| {
                group
                    .members
                    .iter()
                    .copied()
                    .filter(|m| *m != kind)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Adds a note.
    pub fn add_note(&mut self, note: Note) {
        self.notes.push(note);
    }

    /// Records that `quantity` of `kind` (or the whole element, for `None`) was
    /// not measured, and why.
    pub fn not_measured(
        &mut self,
        kind: ElementKind,
        quantity: Option<QuantityKind>,
        reason: impl Into<String>,
    ) {
        self.notes.push(Note {
            severity: NoteSeverity::NotMeasured,
            element: Some(kind),
            quantity,
            message: reason.into(),
        });
    }

    /// Adds a warning, optionally about one element.
    pub fn warn(&mut self, element: Option<ElementKind>, message: impl Into<String>) {
        self.notes.push(Note {
            severity: NoteSeverity::Warning,
            element,
            quantity: None,
            message: message.into(),
        });
    }

    /// Why `quantity` of `kind` was not measured, if a note says so. A note about
    /// the whole element answers for every quantity of it.
    pub fn not_measured_reason(&self, kind: ElementKind, quantity: QuantityKind) -> Option<&str> {
        self.notes
            .iter()
            .filter(|n| n.severity == NoteSeverity::NotMeasured && n.element == Some(kind))
            .find(|n| n.quantity.is_none() || n.quantity == Some(quantity))
            .map(|n| n.message.as_str())
    }

    /// The clock that converts `latency`'s cycles to nanoseconds: its own measured
    /// clock, else the run's measured clock, else the nominal one.
    pub fn clock_for(&self, latency: &Latency) -> Option<Megahertz> {
        latency
            .conditions
            .as_ref()
            .and_then(|c| c.sm_clock_mhz)
            .or(self.conditions.sm_clock_mhz)
            .or(self.device.sm_clock_mhz)
    }

    /// The mean latency of `kind` in nanoseconds, if it and a clock are known.
    pub fn latency_ns(&self, kind: ElementKind) -> Option<Nanoseconds> {
        let latency = self.element(kind)?.latency.as_ref()?;
        Some(latency.mean_ns(self.clock_for(latency)?))
    }

    /// The L2 partitions, if measured.
    pub fn l2_partitions(&self) -> Option<&L2Partitions> {
        self.element(ElementKind::L2)?.partitions.as_ref()
    }

    /// The name every output gives `kind`: its display name, marked `[DISTURBED]` where
    /// its benchmark stayed disturbed (schema 1.5), so a disturbed value is never shown
    /// plain.
    ///
    /// ```
    /// use topology::{ComputeCapability, DeviceInfo, ElementKind, Topology};
    /// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
    /// assert_eq!(topo.label(ElementKind::L2), "L2");
    /// topo.element_mut(ElementKind::L2).disturbed = Some("L2-hit latency +40 %".into());
    /// assert_eq!(topo.label(ElementKind::L2), "L2 [DISTURBED]");
    /// ```
    pub fn label(&self, kind: ElementKind) -> String {
        let name = kind.display_name();
        self.element(kind)
            .map_or_else(|| name.to_owned(), |e| e.label(name))
    }
}
