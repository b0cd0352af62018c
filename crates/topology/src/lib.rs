//! The typed model of a GPU's memory topology, its file formats and renderers.
//!
//! A [`Topology`] holds what the driver reports about a device ([`DeviceInfo`])
//! and, per memory element ([`ElementKind`]: L1 data, texture, read-only,
//! constant L1 and L1.5, shared memory, L2, device memory), the measured
//! quantities: sizes in [`Bytes`] that may be only a bound ("≥ 64 KiB"),
//! latencies as distributions in [`Cycles`] with nanoseconds derived from the
//! measured SM clock, each with its [`Provenance`], uncertainty and
//! [`Conditions`]. Relations say which logical caches share one physical
//! cache, how many of each an SM has and which level backs which; [`Note`]s say
//! what was not measured and why.
//!
//! The crate knows nothing about CUDA or measurement. It reads and writes JSON
//! and TOML with a `schema_version` and validates what it loads (errors name the
//! file, line and field) against the published JSON Schema ([`schema`]); it exports the
//! JSON layout of MT4G v1.x that sys-sage loads ([`mt4g`]), the memory-system options of
//! a GPGPU-Sim configuration ([`gpgpusim`]) and one row per value ([`quantities()`], CSV);
//! it renders a terminal table, a Markdown report and an SVG diagram ([`render`]); and it
//! diffs two topologies beyond their uncertainty ([`diff`]). The README's examples run
//! as doc tests too.
//!
//! ```
//! use topology::*;
//!
//! // Build step by step, as a measurement run does.
//! let mut topo = Topology::new(DeviceInfo::new("Example GPU", ComputeCapability::new(8, 0), 108));
//! topo.conditions.sm_clock_mhz = Some(Megahertz(1410.0));
//! topo.element_mut(ElementKind::ConstantL15)
//!     .set_size(Size::at_least(Bytes::kib(64), Provenance::Benchmark))
//!     .set_latency(Latency::measured(LatencySummary::from_samples(&[114.0, 114.0, 115.0]).unwrap()));
//! topo.not_measured(ElementKind::Texture, None, "texture benchmark failed: launch timeout");
//!
//! // Files round-trip and are validated on load.
//! # let dir = std::env::temp_dir().join(format!("topology-crate-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("example.json");
//! topo.save(&path)?;
//! let back = Topology::load(&path)?;
//! assert_eq!(back, topo);
//! # std::fs::remove_dir_all(&dir).unwrap();
//!
//! // Quantities read as the file writes them.
//! assert_eq!(back.size(ElementKind::ConstantL15).unwrap().value(), Bytes::kib(64));
//! assert_eq!(back.latency(ElementKind::ConstantL15).unwrap().p50, Cycles(114.0));
//!
//! // Renderers.
//! let table = render::table(&back);
//! assert!(table.contains("≥ 64 KiB"));
//! assert!(table.contains("not measured"));
//!
//! // Loading rejects contradictions and says which field is wrong.
//! let json = topo.to_json_string()?;
//! let broken = json.replace("\"value\": 65536", "\"value\": 0");
//! let err = Topology::from_json_str(&broken).unwrap_err();
//! assert!(err.to_string().contains("elements.constant_l15.size.value"), "{err}");
//! # Ok::<(), topology::Error>(())
//! ```

#![deny(missing_docs)]

mod bandwidth;
pub mod diff;
mod error;
pub mod fleet;
mod format;
pub mod gpgpusim;
mod model;
pub mod mt4g;
mod number;
mod quantities;
mod quantity;
pub mod raw;
pub mod render;
mod run;
pub mod schema;
mod section;
pub mod tolerance;
mod units;
mod validate;
mod version;

pub use bandwidth::{Bandwidth, BandwidthLaunch, BandwidthPeak};
pub use error::{Error, Format, Violation};
pub use format::json_schema;
pub use model::{
    Bandwidths, CacheGeometry, CarveoutL1Size, CarveoutRole, ClusterResidency, Clusters,
    ComputeCapability, CopiesToShared, CopyAtSize, CopyLaunch, CopyNotApplicable, CopyPathKind,
    CopyPathResult, DeviceInfo, DsmemAtSize, Element, ElementKind, Elements, EvictionOutcome, Gpc,
    GpcContention, InstructionCacheLevel, L2AddressMap, L2Partitions, L2Ways, L2WaysTarget, Limits,
    Note, NoteSeverity, QuantityKind, RankLatency, ReplacementPolicy, SetMapping,
    SharedPhysicalCache, TlbLevel, Topology, TpcContention,
};
pub use quantities::{quantities, quantities_csv, QuantityRow};
pub use quantity::{
    ChangePointEvidence, Conditions, Count, Latency, LatencySummary, Provenance, Size, SizeBound,
};
pub use run::{GpuProcess, GpuState, RunRecord};
pub use section::{Number, RowValue, Section, SectionRow};
pub use units::{ByteUnit, Bytes, CycleUnit, Cycles, GibPerSecondUnit, Megahertz, Nanoseconds};
pub use version::SchemaVersion;

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;
