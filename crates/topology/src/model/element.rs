//! The memory elements and what is known about each.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::bandwidth::Bandwidths;
use crate::quantity::{Count, Latency, Size};
use crate::units::Bytes;

use super::geometry::CacheGeometry;
// Only for doc links: the JSON schema's descriptions are these doc comments, so a link
// keeps its short form there and resolves through this import.
#[cfg(doc)]
use super::Topology;

/// A memory element of the GPU: the logical caches and memories a load can hit.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ElementKind {
    /// The L1 data cache (`ld.global.ca`).
    L1Data,
    /// The texture cache (`tex.1d`).
    Texture,
    /// The read-only data cache (`ld.global.nc`).
    ReadOnly,
    /// The first-level constant cache.
    ConstantL1,
    /// The second-level constant cache ("L1.5").
    ConstantL15,
    /// Shared memory.
    SharedMemory,
    /// The L2 cache.
    L2,
    /// Device (global) memory.
    DeviceMemory,
}

impl ElementKind {
    /// Every kind, from the SM outwards.
    pub const ALL: [ElementKind; 8] = [
        ElementKind::L1Data,
        ElementKind::Texture,
        ElementKind::ReadOnly,
        ElementKind::ConstantL1,
        ElementKind::ConstantL15,
        ElementKind::SharedMemory,
        ElementKind::L2,
        ElementKind::DeviceMemory,
    ];

    /// The key in files, e.g. `"constant_l15"`.
    pub fn key(self) -> &'static str {
        match self {
            ElementKind::L1Data => "l1_data",
            ElementKind::Texture => "texture",
            ElementKind::ReadOnly => "read_only",
            ElementKind::ConstantL1 => "constant_l1",
            ElementKind::ConstantL15 => "constant_l15",
            ElementKind::SharedMemory => "shared_memory",
            ElementKind::L2 => "l2",
            ElementKind::DeviceMemory => "device_memory",
        }
    }

    /// The name in reports, e.g. `"Constant L1.5"`.
    pub fn display_name(self) -> &'static str {
        match self {
            ElementKind::L1Data => "L1 data",
            ElementKind::Texture => "Texture",
            ElementKind::ReadOnly => "Read-only",
            ElementKind::ConstantL1 => "Constant L1",
            ElementKind::ConstantL15 => "Constant L1.5",
            ElementKind::SharedMemory => "Shared memory",
            ElementKind::L2 => "L2",
            ElementKind::DeviceMemory => "Device memory",
        }
    }

    /// The short name used in "shared with" columns (as in the thesis: L1D, TXT, RO).
    pub fn abbreviation(self) -> &'static str {
        match self {
            ElementKind::L1Data => "L1D",
            ElementKind::Texture => "TXT",
            ElementKind::ReadOnly => "RO",
            ElementKind::ConstantL1 => "C1",
            ElementKind::ConstantL15 => "C1.5",
            ElementKind::SharedMemory => "SMEM",
            ElementKind::L2 => "L2",
            ElementKind::DeviceMemory => "DRAM",
        }
    }

    /// Whether each SM has its own copy (so a count per SM makes sense).
    pub fn is_per_sm(self) -> bool {
        !matches!(self, ElementKind::L2 | ElementKind::DeviceMemory)
    }
}

impl fmt::Display for ElementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display_name())
    }
}

/// A named quantity of an element, used to say which one a note is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuantityKind {
    /// The capacity.
    Size,
    /// The cache line.
    LineSize,
    /// The fetch granularity.
    FetchGranularity,
    /// The sector.
    SectorSize,
    /// The load latency.
    Latency,
    /// The number per SM.
    CountPerSm,
    /// Which logical caches share the physical one.
    SharedWith,
    /// The L2 partitions.
    Partitions,
    /// The bandwidth.
    Bandwidth,
    /// Associativity, sets, replacement.
    Geometry,
}

impl fmt::Display for QuantityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityKind::Size => "size",
            QuantityKind::LineSize => "line size",
            QuantityKind::FetchGranularity => "fetch granularity",
            QuantityKind::SectorSize => "sector size",
            QuantityKind::Latency => "latency",
            QuantityKind::CountPerSm => "count per SM",
            QuantityKind::SharedWith => "shared with",
            QuantityKind::Partitions => "partitions",
            QuantityKind::Bandwidth => "bandwidth",
            QuantityKind::Geometry => "geometry",
        })
    }
}

/// The L2 cache as one SM sees it: split into partitions, one near and the
/// others far, each with its own latency.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct L2Partitions {
    /// How many partitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Count>,
    /// The size of each partition (the near one as measured from one SM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_each: Option<Size>,
    /// The latency of a hit in the near partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_latency: Option<Latency>,
    /// The latency of a hit in a far partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_latency: Option<Latency>,
    /// The capacity of the far side, every partition but the near one (schema 1.2): measured
    /// as what an SM of the other partition gets alone, or derived as the L2 size minus
    /// `size_each`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_size: Option<Size>,
    /// Whether the near partition keeps copies of lines homed in a far one, so that each
    /// SM's data takes room on both sides (schema 1.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_keeps_far_copies: Option<bool>,
    /// Per SM (`%smid` 0, 1, …): 0 for the partition of the map's reference SM, 1 for the
    /// other one where there are two; `null` where the SM took no part or the map cannot
    /// tell. Empty without a partition map.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_partition: Vec<Option<u32>>,
    /// The SM whose partition is 0 in `sm_partition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_reference_sm: Option<u32>,
    /// With two partitions: which one is home to an address (schema 1.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_map: Option<super::L2AddressMap>,
    /// Why there is no address map where the map found two partitions (schema 1.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_map_not_determined: Option<String>,
    /// The ways of a partition's sets, from minimal eviction sets (`--deep`), or why not
    /// (schema 1.12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<super::L2Ways>,
}

impl L2Partitions {
    /// How many cycles slower a far hit is than a near one (difference of means).
    pub fn far_penalty(&self) -> Option<f64> {
        Some(self.far_latency.as_ref()?.mean.0 - self.near_latency.as_ref()?.mean.0)
    }

    /// How many times slower a far hit is than a near one (ratio of means).
    pub fn far_ratio(&self) -> Option<f64> {
        let near = self.near_latency.as_ref()?.mean.0;
        (near > 0.0).then(|| self.far_latency.as_ref().map(|far| far.mean.0 / near))?
    }
}

/// The L1 size measured at one shared-memory configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CarveoutL1Size {
    /// The carveout the kernel requested, percent of the maximum shared memory; absent
    /// where it requested none (the driver's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carveout_percent: Option<u8>,
    /// The shared memory per SM in force (the configuration), bytes; absent where the
    /// run could not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_bytes: Option<Bytes>,
    /// The dynamic shared memory each block of the kernel asked for, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_shared_bytes: Option<Bytes>,
    /// What this row is: the largest L1 a kernel can get, the driver's default, or one
    /// more configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<CarveoutRole>,
    /// The L1 size measured.
    pub l1_size: Size,
}

/// What a row of the L1's carveout table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CarveoutRole {
    /// The smallest shared-memory configuration a kernel can get: the largest L1.
    LargestL1,
    /// What the driver gives a kernel that uses no shared memory and requests no carveout.
    DriverDefault,
    /// One more configuration.
    Configuration,
}

impl CarveoutRole {
    /// How reports name the row.
    pub fn label(self) -> &'static str {
        match self {
            CarveoutRole::LargestL1 => "largest L1",
            CarveoutRole::DriverDefault => "driver default (no shared memory)",
            CarveoutRole::Configuration => "configuration",
        }
    }
}

/// One memory element and what is known about it. Every quantity is optional:
/// a missing one is "not measured", with the reason in [`Topology::notes`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Element {
    /// The capacity (of one copy, for per-SM elements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// The cache line size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_size: Option<Size>,
    /// The fetch granularity: what one miss brings (the sector size where a miss brings
    /// one sector).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_granularity: Option<Size>,
    /// The sector: the smallest part of a line the cache keeps valid on its own (added in
    /// schema 1.1). It can be smaller than the fetch granularity: the H200's L2 keeps
    /// 32-byte sectors but fetches 64 bytes on a read miss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sector_size: Option<Size>,
    /// The load latency of a hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// How many copies each SM has (Kepler has 4 texture caches per SM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_per_sm: Option<Count>,
    /// The next level a miss goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backed_by: Option<ElementKind>,
    /// Bandwidth: read, write, copy, and for the L2 the near partition's reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidths>,
    /// Sets, ways, set mapping and replacement policy, where the `sets` benchmark
    /// (`--deep`) measured them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub geometry: Option<CacheGeometry>,
    /// L1 data only: whether global loads are cached in L1 at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_loads_cached: Option<bool>,
    /// L1 data only: the L1 size at each shared-memory carveout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub size_per_carveout: Vec<CarveoutL1Size>,
    /// L2 only: the partitions as one SM sees them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<L2Partitions>,
    /// Set when the benchmark behind this element was still disturbed after its repeat
    /// (added in schema 1.5): every value of the element may be wrong. The text says what
    /// the sentinels showed. Every output marks the element's values with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbed: Option<String>,
}

impl Element {
    /// The marker every output puts beside a disturbed element's values.
    pub const DISTURBED_MARK: &'static str = "DISTURBED";

    /// `name`, followed by ` [DISTURBED]` where the element's benchmark stayed disturbed.
    pub fn label(&self, name: &str) -> String {
        match self.disturbed {
            Some(_) => format!("{name} [{}]", Self::DISTURBED_MARK),
            None => name.to_owned(),
        }
    }

    /// Sets the size.
    pub fn set_size(&mut self, size: Size) -> &mut Self {
        self.size = Some(size);
        self
    }

    /// Sets the line size.
    pub fn set_line_size(&mut self, line: Size) -> &mut Self {
        self.line_size = Some(line);
        self
    }

    /// Sets the sector size.
    pub fn set_sector_size(&mut self, sector: Size) -> &mut Self {
        self.sector_size = Some(sector);
        self
    }

    /// Sets the fetch granularity.
    pub fn set_fetch_granularity(&mut self, granularity: Size) -> &mut Self {
        self.fetch_granularity = Some(granularity);
        self
    }

    /// Sets the latency.
    pub fn set_latency(&mut self, latency: Latency) -> &mut Self {
        self.latency = Some(latency);
        self
    }

    /// Sets the count per SM.
    pub fn set_count_per_sm(&mut self, count: Count) -> &mut Self {
        self.count_per_sm = Some(count);
        self
    }

    /// Sets the level that serves this one's misses.
    pub fn set_backed_by(&mut self, next: ElementKind) -> &mut Self {
        self.backed_by = Some(next);
        self
    }

    /// Sets whether global loads are cached (L1 data only).
    pub fn set_global_loads_cached(&mut self, cached: bool) -> &mut Self {
        self.global_loads_cached = Some(cached);
        self
    }

    /// Records the L1 size at one configuration (carveout, shared memory in force, role),
    /// replacing an earlier entry for the same; rows stay sorted by shared memory.
    pub fn set_size_at_carveout(&mut self, entry: CarveoutL1Size) -> &mut Self {
        let key = |e: &CarveoutL1Size| (e.carveout_percent, e.shared_memory_bytes, e.role);
        self.size_per_carveout.retain(|e| key(e) != key(&entry));
        self.size_per_carveout.push(entry);
        self.size_per_carveout
            .sort_by_key(|e| (e.shared_memory_bytes, e.carveout_percent));
        self
    }

    /// The row of the carveout table with `role`.
    pub fn carveout_row(&self, role: CarveoutRole) -> Option<&CarveoutL1Size> {
        self.size_per_carveout.iter().find(|e| e.role == Some(role))
    }

    /// The partitions, created empty if absent (L2 only).
    pub fn partitions_mut(&mut self) -> &mut L2Partitions {
        self.partitions.get_or_insert_with(L2Partitions::default)
    }

    /// The bandwidths, created empty if absent.
    pub fn bandwidth_mut(&mut self) -> &mut Bandwidths {
        self.bandwidth.get_or_insert_with(Bandwidths::default)
    }

    /// The geometry, created empty if absent.
    pub fn geometry_mut(&mut self) -> &mut CacheGeometry {
        self.geometry.get_or_insert_with(CacheGeometry::default)
    }

    /// Whether this element has no quantity at all.
    pub fn is_empty(&self) -> bool {
        *self == Element::default()
    }
}

/// The memory elements, one optional entry per [`ElementKind`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Elements {
    /// The L1 data cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_data: Option<Element>,
    /// The texture cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub texture: Option<Element>,
    /// The read-only cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<Element>,
    /// The constant L1 cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant_l1: Option<Element>,
    /// The constant L1.5 cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constant_l15: Option<Element>,
    /// Shared memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory: Option<Element>,
    /// The L2 cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<Element>,
    /// Device memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_memory: Option<Element>,
}

impl Elements {
    fn slot(&self, kind: ElementKind) -> &Option<Element> {
        match kind {
            ElementKind::L1Data => &self.l1_data,
            ElementKind::Texture => &self.texture,
            ElementKind::ReadOnly => &self.read_only,
            ElementKind::ConstantL1 => &self.constant_l1,
            ElementKind::ConstantL15 => &self.constant_l15,
            ElementKind::SharedMemory => &self.shared_memory,
            ElementKind::L2 => &self.l2,
            ElementKind::DeviceMemory => &self.device_memory,
        }
    }

    fn slot_mut(&mut self, kind: ElementKind) -> &mut Option<Element> {
        match kind {
            ElementKind::L1Data => &mut self.l1_data,
            ElementKind::Texture => &mut self.texture,
            ElementKind::ReadOnly => &mut self.read_only,
            ElementKind::ConstantL1 => &mut self.constant_l1,
            ElementKind::ConstantL15 => &mut self.constant_l15,
            ElementKind::SharedMemory => &mut self.shared_memory,
            ElementKind::L2 => &mut self.l2,
            ElementKind::DeviceMemory => &mut self.device_memory,
        }
    }

    /// The element of `kind`, if present.
    pub fn get(&self, kind: ElementKind) -> Option<&Element> {
        self.slot(kind).as_ref()
    }

    /// The element of `kind`, created empty if absent.
    pub fn get_or_insert(&mut self, kind: ElementKind) -> &mut Element {
        self.slot_mut(kind).get_or_insert_with(Element::default)
    }

    /// Removes and returns the element of `kind`.
    pub fn remove(&mut self, kind: ElementKind) -> Option<Element> {
        self.slot_mut(kind).take()
    }

    /// The present elements, from the SM outwards.
    pub fn iter(&self) -> impl Iterator<Item = (ElementKind, &Element)> + '_ {
        ElementKind::ALL
            .into_iter()
            .filter_map(|kind| self.get(kind).map(|e| (kind, e)))
    }
}

/// A group of logical caches that are one physical cache (e.g. on Volta the L1
/// data, texture and read-only caches).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SharedPhysicalCache {
    /// The logical caches, at least two, each in at most one group.
    pub members: Vec<ElementKind>,
    /// Where the finding came from.
    pub provenance: crate::quantity::Provenance,
}

/// One level of address translation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TlbLevel {
    /// The level, 1 for the first.
    pub level: u8,
    /// The address range it covers: entries × the span one entry maps (`coverage /
    /// entries`, which is the page where an entry holds one page and more where it holds
    /// several: the H100's L2-path entries map 16 MiB over 2 MiB pages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Size>,
    /// The page size it translates, where another source knows it. memtopo leaves it out:
    /// TLB walks measure the span of an entry (`coverage / entries`), not the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<Size>,
    /// The latency added by a miss in this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_latency: Option<Latency>,
    /// The load path whose chases saw it, e.g. `global_ca` (the L1 path) or `global_cg`
    /// (the L2 path) (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Entries it holds, where the span of one is known (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<u64>,
    /// How the walked memory was allocated (schema 1.6): `plain` (one `cuMemAlloc`, the
    /// driver's page size) or `chunked` (separate physical chunks mapped through the
    /// virtual memory management API, pages of at most one chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<String>,
    /// Into how many groups consecutive entry-sized ranges of addresses are dealt (range
    /// `i` to group `i mod interleave`), each group holding `entries / interleave`: a walk
    /// `interleave` entries' spans apart fills one group only (schema 1.6; absent where
    /// the walks found none). The H100's third L2-path level: 2, by address bit 25.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleave: Option<u64>,
}
