//! How the sets benchmark's results relate to a simulation profile's truth.

use topology::ElementKind;

use super::{BANK, STEPS};
use crate::{
    backend::{Carveout, LoadPath},
    measure::{
        sets::{Candidate, PolicyVerdict, SetMapping},
        Measurements,
    },
    sim::{Replacement, SetIndex, SimProfile},
};

/// What a profile's cache must be measured as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedGeometry {
    /// Ways that keep reused lines (less an early-miss policy's reserved ways).
    pub ways: u64,
    /// Sets.
    pub sets: u64,
    /// Whether the index is hashed (XOR-folded).
    pub hashed: bool,
    /// The policy the victims must show.
    pub replacement: Replacement,
    /// Whether the benchmark can reach it (a constant cache larger than the bank cannot
    /// overflow).
    pub reachable: bool,
}

/// The truth for `element` in `profile`, at the configuration the benchmark's launches get;
/// `None` where the profile has no such cache (or, for the L1, none that caches global
/// loads).
pub fn expected_geometry(profile: &SimProfile, element: ElementKind) -> Option<ExpectedGeometry> {
    let (cache, line_limit) = match element {
        ElementKind::L1Data => (profile.caches_on_path(LoadPath::GlobalCa).next()?, None),
        ElementKind::ConstantL1 => (profile.caches_on_path(LoadPath::Constant).next()?, Some(())),
        ElementKind::ConstantL15 => (profile.caches_on_path(LoadPath::Constant).nth(1)?, Some(())),
        _ => return None,
    };
    let shared = profile
        .shared_carveout_for(Carveout::Percent(0), 8 * u64::from(STEPS))
        .ok()?;
    let size = cache.size_at(shared);
    let line = u64::from(cache.line_bytes);
    let all_ways = cache.ways_at(size);
    let ways = match cache.replacement {
        Replacement::EarlyMiss { reserved_ways } => all_ways - u64::from(reserved_ways),
        _ => all_ways,
    };
    let sets = size / line / all_ways;
    // The first overflowing chase and the stride test must fit the bank.
    let reachable = line_limit.is_none() || (sets * (ways + 1)).max(sets * ways + 1) <= BANK / line;
    Some(ExpectedGeometry {
        ways,
        sets,
        hashed: cache.set_index == SetIndex::XorFold,
        replacement: cache.replacement,
        reachable,
    })
}

/// Every cache the profile has: measured as its truth, or reported undetermined where the
/// benchmark cannot reach it.
pub(super) fn check(profile: &SimProfile, m: &Measurements) -> Result<(), String> {
    for element in [
        ElementKind::L1Data,
        ElementKind::ConstantL1,
        ElementKind::ConstantL15,
    ] {
        let Some(truth) = expected_geometry(profile, element) else {
            continue;
        };
        let found = m
            .sets
            .iter()
            .find(|c| c.element == element)
            .ok_or_else(|| format!("sets {element}: not measured"))?;
        let f = &found.finding;
        if !truth.reachable {
            if f.ways.is_some() {
                return Err(format!(
                    "sets {element}: {:?} ways reported for a cache the bank cannot overflow",
                    f.ways
                ));
            }
            continue;
        }
        let got = (f.ways.map(u64::from), f.sets.map(u64::from));
        if got != (Some(truth.ways), Some(truth.sets)) {
            return Err(format!(
                "sets {element}: {got:?} (ways, sets), truth ({}, {}); {:?}",
                truth.ways, truth.sets, f.evidence
            ));
        }
        let mapping_ok = match f.mapping {
            Some(SetMapping::Modulo { sets }) => !truth.hashed && sets == truth.sets,
            Some(SetMapping::Hashed { .. } | SetMapping::Xor { .. }) => truth.hashed,
            None => false,
        };
        if !mapping_ok {
            return Err(format!(
                "sets {element}: mapping {:?}, truth {}",
                f.mapping,
                if truth.hashed { "hashed" } else { "modulo" }
            ));
        }
        let policy_ok = match (&f.policy, truth.replacement) {
            (Some(PolicyVerdict::DirectMapped), _) => truth.ways == 1,
            (Some(PolicyVerdict::Matches(c)), Replacement::Lru | Replacement::EarlyMiss { .. }) => {
                c.contains(&Candidate::Lru)
            }
            (Some(PolicyVerdict::Matches(c)), Replacement::TreePlru) => {
                c.contains(&Candidate::TreePlru)
            }
            (
                Some(PolicyVerdict::Varies { .. } | PolicyVerdict::Gradual { .. }),
                Replacement::Random,
            ) => true,
            (Some(PolicyVerdict::Gradual { over_ways, .. }), Replacement::RandomOldest { .. }) => {
                over_ways
                    .first()
                    .is_some_and(|&(_, share)| share > 0.0 && share < 0.9)
            }
            _ => false,
        };
        if !policy_ok {
            return Err(format!(
                "sets {element}: replacement {:?}, truth {:?}; {:?}",
                f.policy, truth.replacement, f.evidence
            ));
        }
    }
    Ok(())
}
