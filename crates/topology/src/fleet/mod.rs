//! Many GPUs in one document: a node's summary and a fleet's report.
//!
//! A [`Fleet`] holds, per GPU, the quantities worth comparing across GPUs ([`KeyValue`]s
//! taken from its [`Topology`] by [`key_values`]), the GPUs whose measurement failed and
//! why, each node's peer links (the interconnect between its GPUs), and what comparing
//! the GPUs of one model found: the spread of each quantity (median and median absolute
//! deviation) and every GPU whose value lies outside it ([`Flag`]). A node summary
//! (`memtopo --device all`) is a fleet document of one node; `memtopo merge` joins node
//! summaries and single results into one.
//!
//! The document has its own version, [`FLEET_SCHEMA_VERSION`] (`fleet_schema_version`,
//! read like a topology's: every minor of its major), and its JSON Schema is
//! [`json_schema`] (`docs/schema/fleet.schema.json`).
//!
//! ```
//! use topology::{fleet, *};
//!
//! let gpu = |uuid: &str, l2: f64| {
//!     let mut topo = Topology::new(DeviceInfo::new("NVIDIA H100", ComputeCapability::new(9, 0), 132));
//!     let latency = LatencySummary::from_samples(&[l2 - 1.0, l2, l2 + 1.0]).unwrap();
//!     topo.element_mut(ElementKind::L2).set_latency(Latency::measured(latency));
//!     fleet::GpuEntry::from_topology(&topo, Some(uuid.into()), None)
//! };
//! let gpus = vec![gpu("GPU-a", 283.0), gpu("GPU-b", 284.0), gpu("GPU-c", 283.5), gpu("GPU-d", 340.0)];
//! let report = fleet::Fleet::build(fleet::FleetKind::Fleet, gpus, Vec::new(), Vec::new(), fleet::SpreadOptions::default());
//! assert_eq!(report.flags.len(), 1);
//! assert_eq!(report.flags[0].uuid.as_deref(), Some("GPU-d"));
//! assert_eq!(report.flags[0].path, "elements.l2.latency");
//! let back = fleet::Fleet::from_json_str(&report.to_json_string()?)?;
//! assert_eq!(back, report);
//! # Ok::<(), topology::Error>(())
//! ```

mod render;
mod spread;
mod values;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use render::{html, markdown, table};
pub use spread::{median, robust_spread, SpreadOptions};
pub use values::{key_values, link_values, KeyValue, ValueBound, ValueKind};

use crate::error::Error;
use crate::model::Topology;
use crate::quantity::Latency;
use crate::version::SchemaVersion;

/// The version of the fleet document this crate writes.
pub const FLEET_SCHEMA_VERSION: SchemaVersion = SchemaVersion { major: 1, minor: 2 };

/// What a fleet document covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FleetKind {
    /// The GPUs of one node, measured by one `memtopo --device …`.
    Node,
    /// Results of several nodes (or runs) joined by `memtopo merge`.
    Fleet,
}

/// One GPU: where it is, which result file holds it, and its key values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuEntry {
    /// The node (the Slurm node name, else the host name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The CUDA device index on its node at measuring time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_index: Option<u32>,
    /// The GPU's UUID; the GPU's name in the fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The PCI bus id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// The model (the device name the driver reports); only GPUs of one model are
    /// compared with each other.
    pub model: String,
    /// The result file, relative to the document where it was written beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// memtopo's exit code for this GPU (0, or 1, 9, 10: measured with findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// The simulation profile, for a simulated GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated_profile: Option<String>,
    /// The result's warnings and not-measured notes, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The compared quantities by path (`elements.l2.latency`).
    pub values: BTreeMap<String, KeyValue>,
}

impl GpuEntry {
    /// The entry of a result: its model, UUID and bus id (from the run record unless
    /// `uuid` is given), its warnings and its key values.
    pub fn from_topology(topo: &Topology, uuid: Option<String>, node: Option<String>) -> Self {
        let run = topo.run.as_ref();
        let warnings = topo
            .notes
            .iter()
            .filter(|n| n.severity != crate::model::NoteSeverity::Info)
            .map(|n| match n.element {
                Some(e) => format!("{}: {}", e.key(), n.message),
                None => n.message.clone(),
            })
            .collect();
        GpuEntry {
            node: node.or_else(|| run.and_then(|r| r.host.clone())),
            device_index: None,
            uuid: uuid.or_else(|| run.and_then(|r| r.gpu_uuid.clone())),
            pci_bus_id: run.and_then(|r| r.pci_bus_id.clone()),
            model: topo.device.name.clone(),
            file: None,
            exit_code: None,
            simulated_profile: run.and_then(|r| r.simulated_profile.clone()),
            warnings,
            values: key_values(topo),
        }
    }

    /// How the GPU is named in reports: its UUID, else `node:index`, else its result
    /// file, else `?`.
    pub fn label(&self) -> String {
        label(
            self.uuid.as_deref(),
            self.node.as_deref(),
            self.device_index,
            self.file.as_deref(),
        )
    }
}

/// A GPU's name in reports: its UUID, else `node:index`, else `device index`, else its
/// result file (the one name that tells apart results without a UUID), else `?`.
fn label(uuid: Option<&str>, node: Option<&str>, index: Option<u32>, file: Option<&str>) -> String {
    match (uuid, node, index, file) {
        (Some(uuid), ..) => uuid.to_owned(),
        (None, Some(node), Some(i), _) => format!("{node}:{i}"),
        (None, None, Some(i), _) => format!("device {i}"),
        (None, _, None, Some(file)) => file.to_owned(),
        _ => "?".into(),
    }
}

/// A GPU that was asked for and not measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GpuFailure {
    /// The node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The CUDA device index asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_index: Option<u32>,
    /// The UUID, where the GPU got as far as being identified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// memtopo's exit code for it (docs/cli.md).
    pub exit_code: u8,
    /// The error.
    pub error: String,
}

/// What one GPU of a node sees of another: whether it may read the other's memory and
/// how fast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeerLink {
    /// The reading GPU's device index.
    pub from: u32,
    /// The GPU whose memory is read.
    pub to: u32,
    /// The reading GPU's UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_uuid: Option<String>,
    /// The other GPU's UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_uuid: Option<String>,
    /// Whether `from` can access `to`'s memory (`cuDeviceCanAccessPeer`).
    pub peer_access: bool,
    /// Active NVLink links between the two (NVML), where known; 0: connected otherwise
    /// (PCIe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_links: Option<u32>,
    /// The driver's relative performance rank of the link (`CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_rank: Option<i32>,
    /// A load by `from` of `to`'s memory that `to`'s L2 holds (a warm chain), cycles of
    /// `from`'s SM clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_warm: Option<Latency>,
    /// A load by `from` of a line of `to`'s memory that no cache holds (`to`'s L2
    /// flushed first), cycles of `from`'s SM clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_cold: Option<Latency>,
    /// `from`'s SM clock that converts the latencies to nanoseconds, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    /// The bandwidth of a peer copy from `to`'s memory into `from`'s (`cuMemcpyPeerAsync`),
    /// GiB/s: the median of the repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_gib_per_s: Option<f64>,
    /// Bytes per copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_bytes: Option<u64>,
    /// What could not be measured and why, or how it was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl PeerLink {
    /// The mean of a latency in nanoseconds at the link's clock.
    pub fn nanoseconds(&self, latency: Option<&Latency>) -> Option<f64> {
        Some(latency?.mean.0 / self.sm_clock_mhz? * 1e3)
    }
}

/// One node: its name, what was asked for, and its GPUs' links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Node {
    /// The node's name.
    pub name: String,
    /// The host name, where it differs from the node name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The devices asked for (`all`, `0,3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices_requested: Option<String>,
    /// How many CUDA devices the node has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_count: Option<u32>,
    /// How the GPUs were measured: `concurrent` (all at once, each on a thread of its
    /// own) or `sequential` (one after another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The peer links between the measured GPUs (both directions of each pair).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<PeerLink>,
    /// Notes on the node (why the links were not measured, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The spread of one quantity over the GPUs of one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QuantitySpread {
    /// The quantity's path.
    pub path: String,
    /// Its kind (sets the unit and the tolerance).
    pub kind: ValueKind,
    /// How many GPUs have an exact value of it.
    pub gpus: u32,
    /// The median of their values.
    pub median: f64,
    /// The median absolute deviation from the median, scaled by 1.4826 to estimate a
    /// standard deviation.
    pub mad: f64,
    /// The smallest and largest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

/// The GPUs of one model and the spread of each quantity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelSpread {
    /// The model.
    pub model: String,
    /// Its GPUs (labels).
    pub gpus: Vec<String>,
    /// Per quantity.
    pub quantities: Vec<QuantitySpread>,
    /// Why nothing or not everything was compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A sibling's value beside a flagged one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SiblingValue {
    /// The sibling GPU.
    pub gpu: String,
    /// Its value.
    pub value: f64,
}

/// What a flag says of its GPU (fleet schema 1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worse than its peers (or than its own maximum) beyond the quantity's tolerance, in
    /// the quantity's bad direction and beyond the stable spread healthy GPUs of the model
    /// show: slower, smaller, fewer links, lower clocks, a PCIe link trained below its
    /// maximum. `merge` and node runs exit 1 for it. Documents older than 1.2 knew no
    /// other kind of flag, so a flag without a severity is this one.
    #[default]
    Degraded,
    /// Different from its peers beyond the tolerance, but not worse: better, a quantity
    /// with no bad direction (a line size), or worse by no more than healthy GPUs of the
    /// model differ from each other. Informational; exit 0.
    Differs,
}

impl Severity {
    /// `degraded` or `differs`, as in the document.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Degraded => "degraded",
            Severity::Differs => "differs",
        }
    }
}

/// A GPU whose value lies outside its model's spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Flag {
    /// Degraded, or differs (fleet schema 1.2).
    #[serde(default)]
    pub severity: Severity,
    /// The model.
    pub model: String,
    /// The flagged GPU's UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its device index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_index: Option<u32>,
    /// Its result file (what tells apart GPUs without a UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The quantity.
    pub path: String,
    /// Its kind.
    pub kind: ValueKind,
    /// The GPU's value.
    pub value: f64,
    /// The model's median.
    pub median: f64,
    /// The values that would not have been flagged: `[low, high]`.
    pub allowed: [f64; 2],
    /// The other GPUs' values of the model, in the order of the document's GPUs.
    pub siblings: Vec<SiblingValue>,
    /// Why, in words.
    pub reason: String,
}

impl Flag {
    /// The flagged GPU's name in reports, as [`GpuEntry::label`] names it.
    pub fn label(&self) -> String {
        label(
            self.uuid.as_deref(),
            self.node.as_deref(),
            self.device_index,
            self.file.as_deref(),
        )
    }

    /// Whether the flag is about `gpu`.
    pub fn is_about(&self, gpu: &GpuEntry) -> bool {
        self.uuid == gpu.uuid
            && self.node == gpu.node
            && self.device_index == gpu.device_index
            && (self.file.is_none() || self.file == gpu.file)
    }
}

/// A node's summary or a fleet's report (see the [module](self)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Fleet {
    /// The version of this document format.
    pub fleet_schema_version: SchemaVersion,
    /// A node or a fleet.
    pub kind: FleetKind,
    /// When the document was made, UTC, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_utc: Option<String>,
    /// The tool's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// The tolerances the flags were decided with.
    pub options: SpreadOptions,
    /// The nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// The measured GPUs.
    #[serde(default)]
    pub gpus: Vec<GpuEntry>,
    /// The GPUs asked for and not measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<GpuFailure>,
    /// Per model, the spread of each quantity.
    #[serde(default)]
    pub models: Vec<ModelSpread>,
    /// The values outside their model's spread, and the PCIe links below their maximum.
    #[serde(default)]
    pub flags: Vec<Flag>,
    /// Notes on the whole document (a GPU found twice, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Fleet {
    /// The flags that say a GPU is degraded (what makes `merge` exit 1).
    pub fn degraded(&self) -> impl Iterator<Item = &Flag> {
        self.flags
            .iter()
            .filter(|f| f.severity == Severity::Degraded)
    }

    /// Reads and checks a fleet document (JSON).
    pub fn from_json_str(text: &str) -> Result<Fleet, Error> {
        let tree = crate::format::json_tree(text)?;
        let version = tree
            .get("fleet_schema_version")
            .ok_or_else(|| Error::Field {
                path: "fleet_schema_version".into(),
                message: "missing (a fleet document names its version, e.g. \"1.0\")".into(),
            })?
            .as_str()
            .ok_or_else(|| "must be a string like \"1.0\"".to_owned())
            .and_then(str::parse::<SchemaVersion>)
            .map_err(|message| Error::Field {
                path: "fleet_schema_version".into(),
                message,
            })?;
        if version.major != FLEET_SCHEMA_VERSION.major {
            return Err(Error::Field {
                path: "fleet_schema_version".into(),
                message: format!(
                    "{version} has major version {}, this reader understands major {} only",
                    version.major, FLEET_SCHEMA_VERSION.major
                ),
            });
        }
        if version > FLEET_SCHEMA_VERSION {
            return Err(Error::Field {
                path: "fleet_schema_version".into(),
                message: format!(
                    "{version} is newer than {FLEET_SCHEMA_VERSION}, the newest this reader \
                     knows; read it with a newer memtopo (a newer minor version may add \
                     fields this one would drop)"
                ),
            });
        }
        let fleet: Fleet = crate::format::typed(tree)?;
        fleet.check()?;
        Ok(fleet)
    }

    /// Checks and writes the document as pretty-printed JSON.
    pub fn to_json_string(&self) -> Result<String, Error> {
        self.check()?;
        crate::format::pretty_json(self)
    }

    /// Every value must be a finite number from 0: a broken value never becomes a
    /// flag or a median.
    fn check(&self) -> Result<(), Error> {
        let mut violations = Vec::new();
        for (i, gpu) in self.gpus.iter().enumerate() {
            for (path, value) in &gpu.values {
                let numbers = [Some(value.value), value.high, value.error];
                if numbers
                    .into_iter()
                    .flatten()
                    .any(|x| !x.is_finite() || x < 0.0)
                {
                    violations.push(crate::error::Violation {
                        path: format!("gpus[{i}].values.{path}"),
                        message: "must be a finite number from 0".into(),
                    });
                }
            }
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid { violations })
        }
    }
}

/// What a file given to `merge` holds: one GPU's result, or a node's or fleet's document.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Input {
    /// A single result (`memtopo -o x.json`).
    Result(Topology),
    /// A node summary or a fleet report.
    Fleet(Fleet),
}

impl Input {
    /// Reads JSON: a document with `fleet_schema_version` is a fleet document, anything
    /// else is read as a topology (and gets that reader's errors).
    pub fn from_json_str(text: &str) -> Result<Input, Error> {
        let is_fleet = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .is_some_and(|tree| tree.get("fleet_schema_version").is_some());
        if is_fleet {
            Fleet::from_json_str(text).map(Input::Fleet)
        } else {
            Topology::from_json_str(text).map(Input::Result)
        }
    }
}

/// The JSON Schema (draft 2020-12) of the fleet document, generated from the types;
/// [`crate::schema::FLEET`] (`crates/topology/schema/fleet.schema.json`, copied to
/// `docs/schema/`) is this document.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(Fleet);
    crate::schema::pin_version(&mut schema, "fleet_schema_version", FLEET_SCHEMA_VERSION);
    schema.insert(
        "$id".into(),
        "https://example.invalid/memtopo/fleet.schema.json".into(),
    );
    schema.insert(
        "description".into(),
        format!(
            "A node summary or fleet report of memtopo (fleet schema version {}). \
             Generated from the `topology` crate; do not edit.",
            FLEET_SCHEMA_VERSION
        )
        .into(),
    );
    schema.to_value()
}
