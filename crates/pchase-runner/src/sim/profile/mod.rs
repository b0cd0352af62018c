//! The simulation profile: a TOML description of a GPU's memory hierarchy with its true
//! sizes, lines, latencies and replacement policies.
//!
//! A profile is the known truth the measurement pipeline is checked against. Every field
//! is validated when the profile is built ([`SimProfile::validate`]); a bad profile is a
//! [`RunnerError::Profile`] naming the field, never a panic and never a silently
//! different simulation.
//!
//! This file holds the profile's types and the questions the simulator asks of them; the
//! rest is split by what it does: `load` (TOML in and out, and the bundled profiles),
//! `validate` (every field's checks and the memory budget) and `random` (valid random
//! hierarchies for property tests).

mod cluster;
mod copy;
mod host;
mod l2;
mod links;
mod load;
mod random;
mod validate;

pub use cluster::{deal_sms, ClusterSpec};
pub use copy::{CopyPathSpec, CopySpec};
pub use host::HostLinkSpec;
pub use l2::{L2Interleave, L2SetIndex, L2Spec};
pub use links::LinkSpec;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backend::{Carveout, LoadPath};
use crate::device::DeviceInfo;
use crate::error::RunnerError;

/// Size of the module's constant array (`memtopo_const_chain`): every constant-path chain
/// lives inside these 64 KiB.
pub const CONSTANT_BANK_BYTES: u64 = 64 * 1024;

/// A simulated GPU: device facts, the SM-level caches, the L2, device memory and the noise
/// of the measurement.
///
/// Latencies are the cycles a load served at that level takes, *without* the clock
/// overhead of the measurement; a fine-grained chase reports latency + clock overhead,
/// as the real kernel does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimProfile {
    /// Short name, e.g. `volta`.
    pub name: String,
    /// What the profile models and where its numbers come from.
    #[serde(default)]
    pub description: String,
    /// Seed of the simulator's random numbers (jitter, outliers, random replacement).
    pub seed: u64,
    /// What the simulated driver API reports.
    pub device: DeviceInfo,
    /// SM clock and measurement overhead.
    pub clock: ClockSpec,
    /// Latency jitter and outliers.
    #[serde(default)]
    pub noise: NoiseSpec,
    /// Extra cycles every load through a path pays on top of the level's latency (the
    /// texture pipeline makes texture loads slower than `ld.global` hits in the same cache).
    #[serde(default, with = "path_names::map")]
    pub path_extra_latency: BTreeMap<LoadPath, u32>,
    /// Shared memory.
    pub shared_memory: SharedMemorySpec,
    /// The SM-private caches, nearest first: a load through path P looks them up in this
    /// order (those that list P), then the L2, then device memory.
    #[serde(rename = "cache", default)]
    pub caches: Vec<CacheSpec>,
    /// The L2, shared by all SMs.
    pub l2: L2Spec,
    /// Device memory.
    pub memory: MemorySpec,
    /// Address translation (`[tlb]`, `docs/simulator.md`); absent: translation is free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlb: Option<super::TlbSpec>,
    /// Outstanding-request limits (`[mlp]`, `docs/simulator.md`); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp: Option<super::MlpSpec>,
    /// Instruction caches (`[icache]`, `docs/simulator.md`); absent: the instruction-fetch
    /// benchmark has nothing to find and says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icache: Option<super::IcacheSpec>,
    /// The simulated GPU's UUID: a profile that names one is locked like a real GPU
    /// (one memtopo at a time); bundled profiles have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Other work sharing the GPU (`docs/simulator.md`, "Co-tenants").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub co_tenant: Option<super::CoTenant>,
    /// The throughput of each level, for the bandwidth benchmarks (`sim/bandwidth.rs`);
    /// without it they report "not measured".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<super::BandwidthSpec>,
    /// Thread-block clusters, GPCs and distributed shared memory; absent on GPUs without
    /// clusters (compute capability below 9.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClusterSpec>,
    /// Copies from global to shared memory (`cp.async`, the bulk copies, plain loads), per
    /// path; absent where no path was described (then the copy benchmark fails where the
    /// device's compute capability has paths, and is "not applicable" where it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<CopySpec>,
    /// The truth of benchmarks that keep their own model of their probe (`[benchmarks.<name>]`,
    /// `crate::backend::ProbeModel`), keyed by the benchmark's name; each benchmark reads
    /// and checks its own table. Absent: those benchmarks have nothing to find and say so.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub benchmarks: BTreeMap<String, toml::Value>,
    /// The GPU's links (`[links]`, `docs/simulator.md`): its PCIe link as NVML would report
    /// it, and its active NVLinks; absent: not reported (NVLink: 18 between GPUs of one
    /// model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<LinkSpec>,
    /// The GPU's link to its host (`[host_link]`, `docs/simulator.md`): the rates and
    /// latency the host-link benchmark should find; absent: it has nothing to measure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link: Option<HostLinkSpec>,
}

/// The SM clock and the cost of reading it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockSpec {
    /// SM clock under load, in MHz (what `measure_sm_clock_mhz` reports, with jitter).
    pub sm_mhz: f64,
    /// Cycles two clock reads around a load add to its latency (with the dependent
    /// shared-memory store of the fine-grained kernel).
    pub overhead_cycles: u32,
}

/// Measurement noise added to every timed load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NoiseSpec {
    /// Standard deviation of the normal jitter of each load, in cycles (rounded per load).
    #[serde(default)]
    pub jitter_stdev_cycles: f64,
    /// Probability that a load is an outlier (e.g. hit by a refresh or an interrupt).
    #[serde(default)]
    pub outlier_probability: f64,
    /// Cycles an outlier adds.
    #[serde(default)]
    pub outlier_extra_cycles: u32,
}

/// Shared memory's latency (its sizes are in [`DeviceInfo`] and in a unified store's
/// carveouts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedMemorySpec {
    /// Cycles of an `ld.shared` in a dependent chain.
    pub latency: u32,
}

/// Device memory behind the L2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    /// Cycles of a load that misses every cache.
    pub latency: u32,
}

/// How many lines of a set an address can go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AssociativityRepr", into = "AssociativityRepr")]
pub enum Associativity {
    /// `n` ways per set; the number of sets is size / (line × ways).
    Ways(u32),
    /// One set holding every line.
    Full,
    /// `n` sets; the ways are size / (line × sets), so that a unified store's L1 gains and
    /// loses ways, not sets, with its configuration, as the H100's and H200's L1 does (four
    /// sets of 434 ways at 217 KiB, 298 at 149 KiB). In TOML `{ sets = 4 }`.
    Sets(u32),
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum AssociativityRepr {
    Ways(u32),
    Word(String),
    Sets { sets: u32 },
}

impl TryFrom<AssociativityRepr> for Associativity {
    type Error = String;
    fn try_from(repr: AssociativityRepr) -> Result<Self, String> {
        match repr {
            AssociativityRepr::Ways(n) => Ok(Associativity::Ways(n)),
            AssociativityRepr::Word(w) if w == "full" => Ok(Associativity::Full),
            AssociativityRepr::Sets { sets } => Ok(Associativity::Sets(sets)),
            AssociativityRepr::Word(w) => Err(format!(
                "associativity `{w}` is neither a number of ways, \"full\" nor {{ sets = n }}"
            )),
        }
    }
}

impl From<Associativity> for AssociativityRepr {
    fn from(a: Associativity) -> Self {
        match a {
            Associativity::Ways(n) => AssociativityRepr::Ways(n),
            Associativity::Full => AssociativityRepr::Word("full".to_owned()),
            Associativity::Sets(sets) => AssociativityRepr::Sets { sets },
        }
    }
}

/// Which line of a full set a miss evicts.
///
/// In TOML: `replacement = { policy = "lru" }`, `{ policy = "random" }`,
/// `{ policy = "early-miss", reserved_ways = 1 }` or
/// `{ policy = "random-oldest", candidates = 96 }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Replacement {
    /// Least recently used.
    Lru,
    /// A uniformly random way (from the profile's seeded generator).
    Random,
    /// Misses before capacity, as the L1 of Volta and later does: LRU over only
    /// `ways - reserved_ways` ways of each set, the reserved ways never keeping reused
    /// data. A cyclic chase therefore starts to miss at
    /// `size × (ways − reserved_ways) / ways` instead of `size`.
    EarlyMiss {
        /// Ways per set that never hold reusable data (≥ 1, < ways).
        reserved_ways: u32,
    },
    /// Tree pseudo-LRU: a binary tree of `ways − 1` bits per set points to the
    /// victim; every access turns the bits on its way's path to point away from it. Ways
    /// must be a power of two. Differs from LRU once a hit re-orders the set: after lines
    /// A B C D of a 4-way set and a hit on A, LRU evicts B, tree PLRU evicts C.
    TreePlru,
    /// A victim drawn uniformly among the `candidates` least recently used lines of the set:
    /// between LRU (`candidates` = 1) and uniformly random (= the ways). A cyclic chase one
    /// line over the ways misses on about `2 / candidates` of its loads; the H100's and
    /// H200's L1 miss on 2.3–2.9 % (`docs/evidence/2026-11-26-h100-h200-l1-sets/`).
    RandomOldest {
        /// How many of the oldest lines the victim is drawn from (≥ 1; more than the ways
        /// draw among all of them).
        candidates: u32,
    },
}

/// Which set a line goes to.
///
/// In TOML: `set_index = "modulo"` (the default) or `set_index = "xor-fold"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetIndex {
    /// The line number modulo the number of sets: consecutive lines in consecutive sets,
    /// lines `sets` apart in one set.
    #[default]
    Modulo,
    /// The XOR of every `log2(sets)`-bit field of the line number (the number of sets must
    /// be a power of two): an aligned block of `sets` lines still fills every set once, but
    /// lines a power-of-two multiple of `sets` apart fall into different sets, as a hashed
    /// index spreads them.
    XorFold,
}

impl SetIndex {
    fn is_modulo(&self) -> bool {
        *self == SetIndex::Modulo
    }
}

/// A unified L1/shared-memory store: the L1 gets what shared memory does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnifiedStore {
    /// Bytes of the store per SM (L1 + shared memory).
    pub store_bytes: u64,
    /// The shared-memory sizes per SM the driver accepts, ascending.
    pub shared_carveouts_bytes: Vec<u64>,
    /// The shared-memory size the driver picks when no carveout is set (and the launch
    /// needs no more).
    pub default_shared_bytes: u64,
}

/// One physical SM-private cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// Name, e.g. `L1` or `constant L1.5`.
    pub name: String,
    /// Capacity in bytes; absent for a cache in a unified store (see `unified`).
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Set when the cache shares its store with shared memory; its size then depends on
    /// the carveout: `store_bytes − shared carveout`.
    #[serde(default)]
    pub unified: Option<UnifiedStore>,
    /// Line size: the set mapping and the tag granularity.
    pub line_bytes: u32,
    /// Sector size: the fill granularity (a miss fills one sector of its line). Defaults
    /// to the line size.
    #[serde(default)]
    pub sector_bytes: Option<u32>,
    /// Ways per set, or `"full"`.
    pub associativity: Associativity,
    /// Replacement policy.
    pub replacement: Replacement,
    /// Which set a line goes to; defaults to the line number modulo the sets.
    #[serde(default, skip_serializing_if = "SetIndex::is_modulo")]
    pub set_index: SetIndex,
    /// Cycles of a load served by this cache.
    pub hit_latency: u32,
    /// Copies of this cache per SM (e.g. four texture caches on Kepler, one per warp
    /// scheduler). Thread `t` uses copy `(t / warp_size) % copies_per_sm`
    /// ([`CacheSpec::copy_for_thread`]) and never sees another copy's contents.
    #[serde(default = "one")]
    pub copies_per_sm: u32,
    /// The load paths that go through this cache.
    #[serde(with = "path_names::list")]
    pub paths: Vec<LoadPath>,
}

fn one() -> u32 {
    1
}

impl CacheSpec {
    /// The sector size (the line size unless set).
    pub fn sector(&self) -> u32 {
        self.sector_bytes.unwrap_or(self.line_bytes)
    }

    /// The copy of this cache that thread `thread` of a block uses: its warp's index modulo
    /// the copies, `(thread / warp_size) % copies_per_sm`. Kepler's four texture caches
    /// belong to its four warp schedulers, and warps are dealt to the schedulers in turn,
    /// so threads 0 and `32 k` share a copy exactly when `k` is a multiple of the copies.
    pub fn copy_for_thread(&self, thread: u32, warp_size: u32) -> u32 {
        (thread / warp_size.max(1)) % self.copies_per_sm.max(1)
    }

    /// Whether loads through `path` go through this cache.
    pub fn serves(&self, path: LoadPath) -> bool {
        self.paths.contains(&path)
    }

    /// Capacity with `shared_bytes` of the SM's store given to shared memory (ignored for a
    /// cache that is not in a unified store).
    pub fn size_at(&self, shared_bytes: u64) -> u64 {
        match &self.unified {
            Some(u) => u.store_bytes.saturating_sub(shared_bytes),
            None => self.size_bytes.unwrap_or(0),
        }
    }

    /// Ways per set at a capacity of `size` bytes.
    pub fn ways_at(&self, size: u64) -> u64 {
        ways_for(self.associativity, size, self.line_bytes)
    }

    /// The capacity a cyclic chase sees before it misses, at `shared_bytes` of shared
    /// memory: the size, less the reserved ways of [`Replacement::EarlyMiss`].
    pub fn effective_bytes_at(&self, shared_bytes: u64) -> u64 {
        let size = self.size_at(shared_bytes);
        match self.replacement {
            Replacement::EarlyMiss { reserved_ways } => {
                let ways = self.ways_at(size);
                size / ways * (ways - u64::from(reserved_ways).min(ways))
            }
            _ => size,
        }
    }
}

pub(crate) fn ways_for(associativity: Associativity, size: u64, line: u32) -> u64 {
    match associativity {
        Associativity::Ways(n) => u64::from(n),
        Associativity::Full => size / u64::from(line.max(1)),
        Associativity::Sets(n) => size / u64::from(line.max(1)) / u64::from(n.max(1)),
    }
}

/// The most host memory a profile's cache model may take: a profile beyond it is refused
/// (a typo of a few zeros must not make the simulator allocate tens of gigabytes).
pub const SIM_MEMORY_BUDGET: u64 = 2 << 30;

pub(super) fn profile_error(message: String) -> RunnerError {
    RunnerError::Profile(message)
}

impl SimProfile {
    /// The caches a load through `path` looks up, nearest first.
    pub fn caches_on_path(&self, path: LoadPath) -> impl Iterator<Item = &CacheSpec> {
        self.caches.iter().filter(move |c| c.serves(path))
    }

    /// Whether some SM cache serves `ld.global.ca` (the answer of the global-caching test).
    pub fn caches_global_loads(&self) -> bool {
        self.caches_on_path(LoadPath::GlobalCa).next().is_some()
    }

    /// The cache in a unified L1/shared store, if any.
    pub fn unified_cache(&self) -> Option<&CacheSpec> {
        self.caches.iter().find(|c| c.unified.is_some())
    }

    /// Shared memory per SM the simulated driver configures for a launch that asks for
    /// `carveout` and needs `dynamic_shared_bytes` per block: the smallest accepted
    /// carveout at least as large as both. Without a unified store, shared memory is fixed.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] when the percentage exceeds 100 or the launch needs
    /// more shared memory than a block may have.
    pub fn shared_carveout_for(
        &self,
        carveout: Carveout,
        dynamic_shared_bytes: u64,
    ) -> Result<u64, RunnerError> {
        let needed =
            dynamic_shared_bytes + self.device.reserved_shared_per_block_bytes.unwrap_or(0);
        if dynamic_shared_bytes > self.device.shared_per_block_optin_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "the launch needs {dynamic_shared_bytes} B of dynamic shared memory, a block may have at most {} B",
                self.device.shared_per_block_optin_bytes
            )));
        }
        if let Carveout::Percent(p) = carveout {
            if p > 100 {
                return Err(RunnerError::InvalidRequest(format!(
                    "carveout of {p} % exceeds 100 %"
                )));
            }
        }
        let Some(store) = self.unified_cache().and_then(|c| c.unified.as_ref()) else {
            return Ok(self.device.shared_per_sm_bytes);
        };
        let max_shared = store
            .shared_carveouts_bytes
            .last()
            .copied()
            .unwrap_or_default();
        let preferred = match carveout {
            Carveout::DriverDefault => store.default_shared_bytes,
            Carveout::Percent(p) => (max_shared * u64::from(p)).div_ceil(100),
        };
        let wanted = preferred.max(needed);
        store
            .shared_carveouts_bytes
            .iter()
            .copied()
            .find(|&c| c >= wanted)
            .ok_or_else(|| {
                RunnerError::InvalidRequest(format!(
                    "the launch needs {needed} B of shared memory per SM, the largest carveout is {max_shared} B"
                ))
            })
    }
}

/// Serde helpers: load paths by their catalogue names (`global_ca`, `texture`, ...).
mod path_names {
    use super::LoadPath;

    fn parse(name: &str) -> Result<LoadPath, String> {
        LoadPath::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = LoadPath::ALL.iter().map(|p| p.name()).collect();
                format!("unknown load path `{name}`; known: {}", known.join(", "))
            })
    }

    pub(super) mod list {
        use serde::{de::Error, Deserialize, Deserializer, Serializer};

        use super::{parse, LoadPath};

        pub(crate) fn serialize<S: Serializer>(
            paths: &[LoadPath],
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_seq(paths.iter().map(|p| p.name()))
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Vec<LoadPath>, D::Error> {
            Vec::<String>::deserialize(d)?
                .iter()
                .map(|n| parse(n).map_err(D::Error::custom))
                .collect()
        }
    }

    pub(super) mod map {
        use std::collections::BTreeMap;

        use serde::{de::Error, Deserialize, Deserializer, Serializer};

        use super::{parse, LoadPath};

        pub(crate) fn serialize<S: Serializer>(
            map: &BTreeMap<LoadPath, u32>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_map(map.iter().map(|(p, v)| (p.name(), v)))
        }

        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<BTreeMap<LoadPath, u32>, D::Error> {
            BTreeMap::<String, u32>::deserialize(d)?
                .into_iter()
                .map(|(n, v)| parse(&n).map(|p| (p, v)).map_err(D::Error::custom))
                .collect()
        }
    }
}
