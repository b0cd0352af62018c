//! Random but valid hierarchies, for property tests.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::backend::LoadPath;
use crate::device::{ComputeCapability, DeviceInfo};

use super::*;

impl SimProfile {
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
                set_index: SetIndex::Modulo,
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
                interleave: L2Interleave::Hash,
                home_bits: Vec::new(),
                home_page_bytes: None,
                set_index: L2SetIndex::Modulo,
                random_sets: 0.0,
            },
            memory: MemorySpec {
                latency: memory_latency,
            },
            tlb: None,
            mlp: None,
            icache: None,
            uuid: None,
            co_tenant: None,
            bandwidth: Some(crate::sim::bandwidth::random_spec(&mut rng)),
            clusters: None,
            copies: None,
            benchmarks: Default::default(),
            links: None,
            host_link: None,
        }
    }
}
