//! The simulation profile: a TOML description of a GPU's memory hierarchy with its true
//! sizes, lines, latencies and replacement policies.
//!
//! A profile is the known truth the measurement pipeline is checked against. Every field
//! is validated when the profile is built ([`SimProfile::validate`]); a bad profile is a
//! [`RunnerError::Profile`] naming the field, never a panic and never a silently
//! different simulation.

use std::collections::BTreeMap;
use std::path::Path;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::backend::{Carveout, LoadPath};
use crate::device::{ComputeCapability, DeviceInfo};
use crate::error::RunnerError;

/// Size of the module's constant array (`memtopo_const_chain`): every constant-path chain
/// lives inside these 64 KiB.
pub const CONSTANT_BANK_BYTES: u64 = 64 * 1024;

/// Bundled profiles: name and TOML text (the files in `examples/profiles/`).
const BUNDLED: &[(&str, &str)] = &[
    (
        "kepler",
        include_str!("../../../../examples/profiles/kepler.toml"),
    ),
    (
        "maxwell",
        include_str!("../../../../examples/profiles/maxwell.toml"),
    ),
    (
        "volta",
        include_str!("../../../../examples/profiles/volta.toml"),
    ),
    (
        "h100",
        include_str!("../../../../examples/profiles/h100.toml"),
    ),
    (
        "h200",
        include_str!("../../../../examples/profiles/h200.toml"),
    ),
];

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
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum AssociativityRepr {
    Ways(u32),
    Word(String),
}

impl TryFrom<AssociativityRepr> for Associativity {
    type Error = String;
    fn try_from(repr: AssociativityRepr) -> Result<Self, String> {
        match repr {
            AssociativityRepr::Ways(n) => Ok(Associativity::Ways(n)),
            AssociativityRepr::Word(w) if w == "full" => Ok(Associativity::Full),
            AssociativityRepr::Word(w) => Err(format!(
                "associativity `{w}` is neither a number of ways nor \"full\""
            )),
        }
    }
}

impl From<Associativity> for AssociativityRepr {
    fn from(a: Associativity) -> Self {
        match a {
            Associativity::Ways(n) => AssociativityRepr::Ways(n),
            Associativity::Full => AssociativityRepr::Word("full".to_owned()),
        }
    }
}

/// Which line of a full set a miss evicts.
///
/// In TOML: `replacement = { policy = "lru" }`, `{ policy = "random" }` or
/// `{ policy = "early-miss", reserved_ways = 1 }`.
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

/// The L2: shared by all SMs, split into partitions; one SM reaches its near partition at
/// `near_latency` and the others at `far_latency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2Spec {
    /// Total capacity in bytes (equal to `device.l2_bytes`).
    pub size_bytes: u64,
    /// Line size.
    pub line_bytes: u32,
    /// Sector (fill) size; defaults to the line size.
    #[serde(default)]
    pub sector_bytes: Option<u32>,
    /// Ways per set of each partition, or `"full"`.
    pub associativity: Associativity,
    /// Replacement policy of each partition.
    pub replacement: Replacement,
    /// Number of partitions; each holds `size_bytes / partitions`, and every line has one
    /// home partition chosen by a hash of its address.
    #[serde(default = "one")]
    pub partitions: u32,
    /// Cycles of a hit in the SM's near partition.
    pub near_latency: u32,
    /// Cycles of a hit in another partition; defaults to `near_latency`.
    #[serde(default)]
    pub far_latency: Option<u32>,
    /// Whether the near partition also keeps a copy of every far line the SM loads (as
    /// NVIDIA describes the A100's L2), so that far data the SM reuses is then served near.
    #[serde(default)]
    pub near_keeps_far_copies: bool,
}

impl L2Spec {
    /// The sector size (the line size unless set).
    pub fn sector(&self) -> u32 {
        self.sector_bytes.unwrap_or(self.line_bytes)
    }

    /// The far latency (the near one unless set).
    pub fn far(&self) -> u32 {
        self.far_latency.unwrap_or(self.near_latency)
    }

    /// Capacity of one partition.
    pub fn partition_bytes(&self) -> u64 {
        self.size_bytes / u64::from(self.partitions.max(1))
    }
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

fn ways_for(associativity: Associativity, size: u64, line: u32) -> u64 {
    match associativity {
        Associativity::Ways(n) => u64::from(n),
        Associativity::Full => size / u64::from(line.max(1)),
    }
}

/// The most host memory a profile's cache model may take: a profile beyond it is refused
/// (a typo of a few zeros must not make the simulator allocate tens of gigabytes).
pub const SIM_MEMORY_BUDGET: u64 = 2 << 30;

fn profile_error(message: String) -> RunnerError {
    RunnerError::Profile(message)
}

impl SimProfile {
    /// Names of the bundled profiles, for [`SimProfile::bundled`].
    pub fn bundled_names() -> impl Iterator<Item = &'static str> {
        BUNDLED.iter().map(|(name, _)| *name)
    }

    /// A profile shipped in `examples/profiles/` by name (`kepler`, `maxwell`, `volta`,
    /// `h100`, `h200`).
    ///
    /// # Errors
    /// [`RunnerError::Profile`] for an unknown name (the message lists the known ones).
    pub fn bundled(name: &str) -> Result<SimProfile, RunnerError> {
        let text = BUNDLED
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, text)| *text)
            .ok_or_else(|| {
                let known: Vec<&str> = SimProfile::bundled_names().collect();
                profile_error(format!(
                    "no bundled profile `{name}`; known: {}",
                    known.join(", ")
                ))
            })?;
        SimProfile::from_toml_str(text)
    }

    /// Parses and validates a profile.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] when the TOML is malformed or a value is invalid.
    pub fn from_toml_str(text: &str) -> Result<SimProfile, RunnerError> {
        let profile: SimProfile =
            toml::from_str(text).map_err(|e| profile_error(e.to_string().trim().to_owned()))?;
        profile.validate()?;
        Ok(profile)
    }

    /// Reads, parses and validates a profile file.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] when the file cannot be read or is not a valid profile.
    pub fn load(path: impl AsRef<Path>) -> Result<SimProfile, RunnerError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| profile_error(format!("cannot read {}: {e}", path.display())))?;
        SimProfile::from_toml_str(&text)
            .map_err(|e| profile_error(format!("{}: {}", path.display(), strip_prefix(&e))))
    }

    /// The profile as TOML (parses back to an equal profile).
    ///
    /// # Errors
    /// [`RunnerError::Profile`] if serialisation fails (it does not for a valid profile).
    pub fn to_toml_string(&self) -> Result<String, RunnerError> {
        toml::to_string(self).map_err(|e| profile_error(e.to_string()))
    }

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

    /// Checks every field; the message names the first bad one.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] describing the first problem found.
    pub fn validate(&self) -> Result<(), RunnerError> {
        let err = |m: String| Err(profile_error(m));
        if self.name.trim().is_empty() {
            return err("name: must not be empty".into());
        }
        if let Some(tenant) = &self.co_tenant {
            tenant.validate()?;
        }
        if let Some(bandwidth) = &self.bandwidth {
            bandwidth.validate()?;
        }
        let d = &self.device;
        if d.sm_count == 0 {
            return err("device.sm_count: must be at least 1".into());
        }
        if d.warp_size == 0 || d.max_threads_per_block == 0 {
            return err("device.warp_size / device.max_threads_per_block: must be positive".into());
        }
        if d.shared_per_block_bytes > d.shared_per_block_optin_bytes {
            return err(format!(
                "device.shared_per_block_bytes ({}) exceeds device.shared_per_block_optin_bytes ({})",
                d.shared_per_block_bytes, d.shared_per_block_optin_bytes
            ));
        }
        if d.shared_per_block_optin_bytes > d.shared_per_sm_bytes {
            return err(format!(
                "device.shared_per_block_optin_bytes ({}) exceeds device.shared_per_sm_bytes ({})",
                d.shared_per_block_optin_bytes, d.shared_per_sm_bytes
            ));
        }
        if !(self.clock.sm_mhz.is_finite() && self.clock.sm_mhz > 0.0) {
            return err(format!(
                "clock.sm_mhz: {} is not a positive number",
                self.clock.sm_mhz
            ));
        }
        let n = &self.noise;
        if !(n.jitter_stdev_cycles.is_finite() && n.jitter_stdev_cycles >= 0.0) {
            return err(format!(
                "noise.jitter_stdev_cycles: {} is not a non-negative number",
                n.jitter_stdev_cycles
            ));
        }
        if !(0.0..=1.0).contains(&n.outlier_probability) {
            return err(format!(
                "noise.outlier_probability: {} is not in [0, 1]",
                n.outlier_probability
            ));
        }
        if self.shared_memory.latency == 0 {
            return err("shared_memory.latency: must be positive".into());
        }
        if self.memory.latency == 0 {
            return err("memory.latency: must be positive".into());
        }
        let mut names = std::collections::BTreeSet::new();
        let mut unified = 0;
        for (i, cache) in self.caches.iter().enumerate() {
            let at = format!("cache[{i}] `{}`", cache.name);
            if cache.name.trim().is_empty() {
                return err(format!("cache[{i}].name: must not be empty"));
            }
            if !names.insert(cache.name.as_str()) {
                return err(format!("{at}: name: a second cache has this name"));
            }
            if cache.paths.is_empty() {
                return err(format!("{at}: paths: no load path goes through it"));
            }
            if cache.paths.contains(&LoadPath::Shared) {
                return err(format!(
                    "{at}: paths: `shared` loads go to shared memory, not through a cache"
                ));
            }
            if cache.paths.contains(&LoadPath::GlobalCg) {
                return err(format!(
                    "{at}: paths: `global_cg` loads are cached in the L2 only, not in an SM cache"
                ));
            }
            let mut seen = cache.paths.clone();
            seen.sort();
            seen.dedup();
            if seen.len() != cache.paths.len() {
                return err(format!("{at}: paths: a path is listed twice"));
            }
            if cache.hit_latency == 0 {
                return err(format!("{at}: hit_latency: must be positive"));
            }
            if cache.copies_per_sm == 0 {
                return err(format!("{at}: copies_per_sm: must be at least 1"));
            }
            let sizes: Vec<(String, u64)> = match (&cache.size_bytes, &cache.unified) {
                (Some(_), Some(_)) => {
                    return err(format!(
                        "{at}: size_bytes: a cache in a unified store takes its size from `unified`, give one of them"
                    ))
                }
                (None, None) => return err(format!("{at}: size_bytes: missing")),
                (Some(size), None) => vec![("size_bytes".to_owned(), *size)],
                (None, Some(store)) => {
                    unified += 1;
                    validate_store(&at, store, d)?;
                    store
                        .shared_carveouts_bytes
                        .iter()
                        .map(|s| {
                            (
                                format!("unified: L1 at a shared carveout of {s} B"),
                                store.store_bytes - s,
                            )
                        })
                        .collect()
                }
            };
            for (what, size) in sizes {
                validate_geometry(
                    &at,
                    &what,
                    size,
                    cache.line_bytes,
                    cache.sector(),
                    cache.associativity,
                    cache.replacement,
                )?;
            }
        }
        if unified > 1 {
            return err("cache: more than one cache has a unified store".into());
        }
        let cached = self.caches_global_loads();
        if let Some(reported) = d.global_l1_cache_supported {
            if reported != cached {
                return err(format!(
                    "device.global_l1_cache_supported = {reported}, but {} cache serves `global_ca`",
                    if cached { "a" } else { "no" }
                ));
            }
        }
        let l2 = &self.l2;
        if l2.size_bytes != d.l2_bytes {
            return err(format!(
                "l2.size_bytes ({}) differs from device.l2_bytes ({})",
                l2.size_bytes, d.l2_bytes
            ));
        }
        if l2.partitions == 0 {
            return err("l2.partitions: must be at least 1".into());
        }
        if l2.size_bytes % u64::from(l2.partitions) != 0 {
            return err(format!(
                "l2.partitions: {} does not divide l2.size_bytes ({})",
                l2.partitions, l2.size_bytes
            ));
        }
        validate_geometry(
            "l2",
            "partition size (size_bytes / partitions)",
            l2.partition_bytes(),
            l2.line_bytes,
            l2.sector(),
            l2.associativity,
            l2.replacement,
        )?;
        if l2.near_latency == 0 || l2.far() == 0 {
            return err("l2.near_latency / l2.far_latency: must be positive".into());
        }
        let needed = self.model_bytes();
        if needed > SIM_MEMORY_BUDGET {
            return err(format!(
                "the caches of this profile need {:.1} GiB of host memory to simulate (every copy of every SM cache on {} SMs, and the L2), over the simulator's budget of {} GiB",
                needed as f64 / f64::from(1u32 << 30),
                d.sm_count,
                SIM_MEMORY_BUDGET >> 30
            ));
        }
        Ok(())
    }

    /// Host memory the cache model needs at most: one entry (16 bytes) per line of every
    /// copy of every SM cache at its largest (a unified cache with all the store) on every
    /// SM, and of the L2.
    pub fn model_bytes(&self) -> u64 {
        const ENTRY: u64 = 16;
        let per_sm: u64 = self
            .caches
            .iter()
            .map(|c| {
                (c.size_at(0) / u64::from(c.line_bytes.max(1)))
                    .saturating_mul(u64::from(c.copies_per_sm))
            })
            .fold(0u64, u64::saturating_add);
        let l2 = self.l2.size_bytes / u64::from(self.l2.line_bytes.max(1));
        per_sm
            .saturating_mul(u64::from(self.device.sm_count))
            .saturating_add(l2)
            .saturating_mul(ENTRY)
    }

    /// A random but valid hierarchy for property tests: one to three SM caches, each with
    /// one to four copies per SM, over random paths (so two paths may share a physical
    /// cache or go through separate ones, and one path may pass several), well-separated latencies (nearer levels are faster), an L2 of one or two
    /// partitions. Caches are at most 64 KiB and the L2 at most 4 MiB, so chases stay fast.
    pub fn random(seed: u64) -> SimProfile {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let kib = 1024u64;
        let sm_count = rng.random_range(1..=8u32);
        let cache_count = rng.random_range(1..=3usize);
        // Assign each SM-cached path to a subset of the caches, in order (`.cg` caches
        // in L2 only and shared loads go to shared memory, so neither is among them).
        let cached_paths = [
            LoadPath::GlobalCa,
            LoadPath::GlobalNc,
            LoadPath::Texture,
            LoadPath::Constant,
        ];
        let mut paths: Vec<Vec<LoadPath>> = vec![Vec::new(); cache_count];
        for path in cached_paths {
            for cache_paths in paths.iter_mut() {
                if rng.random_bool(0.5) {
                    cache_paths.push(path);
                }
            }
        }
        // Every cache needs a path: give an empty one the path of its index.
        for (i, cache_paths) in paths.iter_mut().enumerate() {
            if cache_paths.is_empty() {
                cache_paths.push(cached_paths[i % cached_paths.len()]);
            }
        }
        let mut latency = rng.random_range(15..=60u32);
        let mut caches = Vec::with_capacity(cache_count);
        let mut unified_taken = false;
        let mut shared_per_sm = 48 * kib;
        for (i, cache_paths) in paths.into_iter().enumerate() {
            let line_bytes = 1u32 << rng.random_range(5..=8u32);
            let sector_bytes = if line_bytes > 32 && rng.random_bool(0.4) {
                Some(32)
            } else {
                None
            };
            let lines_exp = rng.random_range(5..=9u32); // 32..512 lines
            let lines = 1u64 << lines_exp;
            let associativity = if lines <= 128 && rng.random_bool(0.2) {
                Associativity::Full
            } else {
                Associativity::Ways(1 << rng.random_range(0..=4u32).min(lines_exp))
            };
            let size = lines * u64::from(line_bytes);
            let ways = ways_for(associativity, size, line_bytes);
            let replacement = match rng.random_range(0..4u32) {
                0 | 1 => Replacement::Lru,
                2 => Replacement::Random,
                _ if ways >= 2 => Replacement::EarlyMiss {
                    reserved_ways: rng
                        .random_range(1..ways.min(4) as u32 + 1)
                        .min(ways as u32 - 1),
                },
                _ => Replacement::Lru,
            };
            let (size_bytes, unified) = if !unified_taken && rng.random_bool(0.3) {
                unified_taken = true;
                // Carveouts of 0, 1, 2 and 3 times `size` leave the L1 1 to 4 times `size`,
                // always a whole number of sets.
                let carveouts: Vec<u64> = (0..4).map(|k| k * size).collect();
                shared_per_sm = carveouts[3];
                let store = UnifiedStore {
                    store_bytes: 4 * size,
                    shared_carveouts_bytes: carveouts.clone(),
                    default_shared_bytes: carveouts[rng.random_range(0..4usize)],
                };
                (None, Some(store))
            } else {
                (Some(size), None)
            };
            caches.push(CacheSpec {
                name: format!("cache{i}"),
                size_bytes,
                unified,
                line_bytes,
                sector_bytes,
                associativity,
                replacement,
                hit_latency: latency,
                copies_per_sm: rng.random_range(1..=4u32),
                paths: cache_paths,
            });
            latency += rng.random_range(20..=60u32);
        }
        let partitions = rng.random_range(1..=2u32);
        let l2_line = 1u32 << rng.random_range(5..=7u32);
        let l2_size = (1u64 << rng.random_range(18..=22u32)) * u64::from(partitions) / 2;
        let near_latency = latency + rng.random_range(40..=100u32);
        let far_latency = near_latency + rng.random_range(60..=150u32);
        let memory_latency = far_latency + rng.random_range(100..=300u32);
        let global_cached = caches.iter().any(|c| c.serves(LoadPath::GlobalCa));
        let shared_per_block = shared_per_sm.min(48 * kib);
        let device = DeviceInfo {
            name: format!("simulated random GPU {seed}"),
            ordinal: 0,
            compute_capability: ComputeCapability { major: 7, minor: 0 },
            sm_count,
            sm_clock_khz: Some(1_000_000),
            memory_clock_khz: None,
            memory_bus_width_bits: None,
            total_memory_bytes: 1 << 32,
            l2_bytes: l2_size,
            persisting_l2_max_bytes: None,
            shared_per_sm_bytes: shared_per_sm,
            shared_per_block_bytes: shared_per_block,
            shared_per_block_optin_bytes: shared_per_sm,
            reserved_shared_per_block_bytes: Some(0),
            registers_per_sm: None,
            registers_per_block: None,
            max_threads_per_block: 1024,
            max_threads_per_sm: None,
            warp_size: 32,
            global_l1_cache_supported: Some(global_cached),
            driver_version: None,
        };
        let mut path_extra_latency = BTreeMap::new();
        if rng.random_bool(0.5) {
            path_extra_latency.insert(LoadPath::Texture, rng.random_range(0..=50u32));
        }
        SimProfile {
            name: format!("random-{seed}"),
            description: "generated by SimProfile::random".to_owned(),
            seed,
            device,
            clock: ClockSpec {
                sm_mhz: f64::from(rng.random_range(800..=2000u32)),
                overhead_cycles: rng.random_range(0..=40u32),
            },
            noise: NoiseSpec {
                jitter_stdev_cycles: f64::from(rng.random_range(0..=20u32)) / 10.0,
                outlier_probability: f64::from(rng.random_range(0..=10u32)) / 10_000.0,
                outlier_extra_cycles: rng.random_range(0..=500u32),
            },
            path_extra_latency,
            shared_memory: SharedMemorySpec {
                latency: rng.random_range(15..=40u32),
            },
            caches,
            l2: L2Spec {
                size_bytes: l2_size,
                line_bytes: l2_line,
                sector_bytes: (l2_line > 32 && rng.random_bool(0.5)).then_some(32),
                associativity: Associativity::Ways(1 << rng.random_range(2..=4u32)),
                replacement: Replacement::Lru,
                partitions,
                near_latency,
                far_latency: (partitions > 1).then_some(far_latency),
                near_keeps_far_copies: partitions > 1 && rng.random_bool(0.5),
            },
            memory: MemorySpec {
                latency: memory_latency,
            },
            uuid: None,
            co_tenant: None,
            bandwidth: Some(super::bandwidth::random_spec(&mut rng)),
        }
    }
}

fn strip_prefix(e: &RunnerError) -> String {
    match e {
        RunnerError::Profile(m) => m.clone(),
        other => other.to_string(),
    }
}

fn validate_store(at: &str, store: &UnifiedStore, device: &DeviceInfo) -> Result<(), RunnerError> {
    let c = &store.shared_carveouts_bytes;
    if c.is_empty() {
        return Err(profile_error(format!(
            "{at}: unified.shared_carveouts_bytes: empty"
        )));
    }
    if c.windows(2).any(|w| w[0] >= w[1]) {
        return Err(profile_error(format!(
            "{at}: unified.shared_carveouts_bytes: not strictly ascending"
        )));
    }
    let max = c[c.len() - 1];
    if max >= store.store_bytes {
        return Err(profile_error(format!(
            "{at}: unified.shared_carveouts_bytes: the largest carveout ({max} B) leaves no L1 in a store of {} B",
            store.store_bytes
        )));
    }
    if !c.contains(&store.default_shared_bytes) {
        return Err(profile_error(format!(
            "{at}: unified.default_shared_bytes: {} is not one of the carveouts",
            store.default_shared_bytes
        )));
    }
    if max != device.shared_per_sm_bytes {
        return Err(profile_error(format!(
            "{at}: unified.shared_carveouts_bytes: the largest carveout ({max} B) differs from device.shared_per_sm_bytes ({} B)",
            device.shared_per_sm_bytes
        )));
    }
    Ok(())
}

fn validate_geometry(
    at: &str,
    what: &str,
    size: u64,
    line: u32,
    sector: u32,
    associativity: Associativity,
    replacement: Replacement,
) -> Result<(), RunnerError> {
    let err = |m: String| Err(profile_error(format!("{at}: {m}")));
    if line < 4 || !line.is_power_of_two() {
        return err(format!("line_bytes: {line} is not a power of two ≥ 4"));
    }
    if sector < 4 || !sector.is_power_of_two() || sector > line {
        return err(format!(
            "sector_bytes: {sector} is not a power of two between 4 and the line size ({line})"
        ));
    }
    if line / sector > 64 {
        return err(format!(
            "sector_bytes: more than 64 sectors per line ({line} / {sector})"
        ));
    }
    if size == 0 || size % u64::from(line) != 0 {
        return err(format!(
            "{what}: {size} B is not a positive multiple of the line size ({line} B)"
        ));
    }
    let ways = match associativity {
        Associativity::Ways(0) => return err("associativity: 0 ways".into()),
        Associativity::Ways(n) => u64::from(n),
        Associativity::Full => size / u64::from(line),
    };
    let set_bytes = ways * u64::from(line);
    if size % set_bytes != 0 {
        return err(format!(
            "{what}: {size} B is not a multiple of ways × line ({ways} × {line} B)"
        ));
    }
    if let Replacement::EarlyMiss { reserved_ways } = replacement {
        if reserved_ways == 0 || u64::from(reserved_ways) >= ways {
            return err(format!(
                "replacement.reserved_ways: {reserved_ways} is not between 1 and ways − 1 ({})",
                ways.saturating_sub(1)
            ));
        }
    }
    Ok(())
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
