//! Random valid hierarchies: what the pipeline's probes must find in any of them.

use pchase_runner::sim::{Replacement, SimBackend, SimProfile, CONSTANT_BANK_BYTES};
use pchase_runner::{Backend, Carveout, LoadPath};
use proptest::prelude::*;

use super::*;

use super::two_phase::{misses, pass, probe, three_quarters_of, SM_CACHE_PATHS};

#[test]
fn random_profiles_cover_copies_and_shared_and_separate_paths() {
    let (mut several_copies, mut shared_cache, mut separate_caches) = (0, 0, 0);
    for seed in 0..200 {
        let profile = SimProfile::random(seed);
        several_copies += usize::from(profile.caches.iter().any(|c| c.copies_per_sm > 1));
        let first = |path| profile.caches_on_path(path).next();
        for (i, p) in SM_CACHE_PATHS.iter().enumerate() {
            for q in &SM_CACHE_PATHS[i + 1..] {
                match (first(*p), first(*q)) {
                    (Some(a), Some(b)) if a == b => shared_cache += 1,
                    (Some(_), Some(_)) => separate_caches += 1,
                    _ => {}
                }
            }
        }
    }
    assert!(several_copies > 50, "{several_copies} of 200 profiles");
    assert!(
        shared_cache > 50 && separate_caches > 50,
        "{shared_cache} shared, {separate_caches} separate pairs"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_profiles_are_valid_and_their_first_levels_hit(seed in any::<u64>()) {
        let profile = SimProfile::random(seed);
        prop_assert!(profile.validate().is_ok(), "{:?}", profile.validate());
        let text = profile.to_toml_string().unwrap();
        prop_assert_eq!(&SimProfile::from_toml_str(&text).unwrap(), &profile);

        let profile = quiet(profile);
        let steps = 64u32;
        let shared = profile.shared_carveout_for(Carveout::DriverDefault, 8 * u64::from(steps)).unwrap();
        let mut gpu = SimBackend::new(profile.clone()).unwrap();
        for path in LoadPath::ALL {
            let Some(first) = profile.caches_on_path(path).next() else { continue };
            let bytes = first.effective_bytes_at(shared);
            if path == LoadPath::Constant && bytes > 64 * 1024 {
                continue;
            }
            let run = gpu.chase(&fine(path, bytes, first.line_bytes, steps)).unwrap();
            let expected = first.hit_latency
                + profile.path_extra_latency.get(&path).copied().unwrap_or(0)
                + profile.clock.overhead_cycles;
            let block = &run.blocks[0];
            prop_assert!(block.latencies.iter().all(|&l| l == expected),
                "{:?} through `{}`: {:?}, expected {}", path, first.name, block.latencies, expected);
            let nodes = bytes / u64::from(first.line_bytes);
            let final_node = (nodes + u64::from(steps)) % nodes;
            prop_assert_eq!(u64::from(block.final_index), final_node * u64::from(first.line_bytes / 4));
        }
    }

    #[test]
    fn random_profiles_show_a_copy_shared_exactly_when_the_warps_map_to_one(
        seed in any::<u64>(),
        k in 0..8u32,
    ) {
        let profile = quiet(SimProfile::random(seed));
        for path in SM_CACHE_PATHS {
            let Some(cache) = profile.caches_on_path(path).next() else { continue };
            // The largest carveout gives the smallest L1, whatever the timings need.
            let shared = profile.shared_carveout_for(Carveout::Percent(100), 0).unwrap();
            let chain = three_quarters_of(cache, shared);
            let mut request = probe(pass(path, chain, 0), pass(path, chain, 32 * k));
            request.carveout = Carveout::Percent(100);
            if path == LoadPath::Constant
                && 2 * chain.bytes.next_multiple_of(128) > CONSTANT_BANK_BYTES
            {
                continue;
            }
            let missed = misses(&profile, cache, &request);
            if k % cache.copies_per_sm != 0 {
                // Chain A fits the fill thread's copy, which the evict thread never touches.
                prop_assert_eq!(missed, 0, "{} `{}` thread {}", path, cache.name, 32 * k);
            } else if cache.replacement != Replacement::Random {
                // Together the chains overflow some set; LRU there evicts a line of A.
                prop_assert!(missed > 0, "{} `{}` thread {}", path, cache.name, 32 * k);
            }
        }
    }

    #[test]
    fn random_profiles_show_sharing_exactly_when_one_cache_serves_both_paths(seed in any::<u64>()) {
        let profile = quiet(SimProfile::random(seed));
        let shared = profile.shared_carveout_for(Carveout::Percent(100), 0).unwrap();
        for fill in SM_CACHE_PATHS {
            let Some(cache) = profile.caches_on_path(fill).next() else { continue };
            for evict in SM_CACHE_PATHS {
                let shares = cache.serves(evict);
                if shares && profile.caches_on_path(evict).next() != Some(cache) {
                    // A nearer cache on the evict path may keep its loads from reaching
                    // this one: no exact prediction.
                    continue;
                }
                let chain = three_quarters_of(cache, shared);
                let constant_chains = [fill, evict]
                    .iter()
                    .filter(|&&p| p == LoadPath::Constant)
                    .count() as u64;
                if constant_chains * chain.bytes.next_multiple_of(128) > CONSTANT_BANK_BYTES {
                    continue;
                }
                let mut request = probe(pass(fill, chain, 0), pass(evict, chain, 0));
                request.carveout = Carveout::Percent(100);
                let missed = misses(&profile, cache, &request);
                if !shares {
                    prop_assert_eq!(missed, 0, "{} `{}` then {}", fill, cache.name, evict);
                } else if cache.replacement != Replacement::Random {
                    prop_assert!(missed > 0, "{} `{}` then {}", fill, cache.name, evict);
                }
            }
        }
    }
}
