//! The checks of every profile field, and the host memory a profile's cache model needs.

use crate::backend::LoadPath;
use crate::device::DeviceInfo;
use crate::error::RunnerError;

use super::*;

impl SimProfile {
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
        if let Some(tlb) = &self.tlb {
            tlb.validate()?;
        }
        if let Some(mlp) = &self.mlp {
            mlp.validate()?;
        }
        if let Some(icache) = &self.icache {
            icache.validate()?;
        }
        if let Some(host) = &self.host_link {
            host.validate()?;
        }
        if let Some(links) = &self.links {
            links.validate()?;
        }
        if let Some((name, _)) = self.benchmarks.iter().find(|(_, truth)| !truth.is_table()) {
            return err(format!("benchmarks.{name}: must be a table"));
        }
        let d = &self.device;
        if d.sm_count == 0 {
            return err("device.sm_count: must be at least 1".into());
        }
        if let Some(clusters) = &self.clusters {
            clusters.validate(d.sm_count)?;
        }
        if let Some(copies) = &self.copies {
            copies.validate(d)?;
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
                if cache.set_index == SetIndex::XorFold {
                    let sets = size / u64::from(cache.line_bytes) / cache.ways_at(size).max(1);
                    if !sets.is_power_of_two() {
                        return err(format!(
                            "{at}: {what}: set_index \"xor-fold\" needs a power of two of sets, not {sets}"
                        ));
                    }
                }
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
        l2.validate_interleave()?;
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

/// One cache's geometry and policies: each is its own profile key, checked together.
#[allow(clippy::too_many_arguments)]
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
        Associativity::Sets(0) => return err("associativity: 0 sets".into()),
        Associativity::Sets(n) => {
            let lines = size / u64::from(line);
            if lines % u64::from(n) != 0 || lines < u64::from(n) {
                return err(format!(
                    "{what}: {lines} lines do not make {n} sets of whole ways"
                ));
            }
            lines / u64::from(n)
        }
    };
    let set_bytes = ways * u64::from(line);
    if size % set_bytes != 0 {
        return err(format!(
            "{what}: {size} B is not a multiple of ways × line ({ways} × {line} B)"
        ));
    }
    if replacement == Replacement::TreePlru && (!ways.is_power_of_two() || ways > 64) {
        return err(format!(
            "replacement: tree PLRU needs a power of two of ways up to 64, not {ways}"
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
    // More candidates than ways (a small configuration of a unified store) draw among all.
    if replacement == (Replacement::RandomOldest { candidates: 0 }) {
        return err("replacement.candidates: 0 (at least 1)".into());
    }
    Ok(())
}
