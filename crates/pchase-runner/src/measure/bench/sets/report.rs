//! The sets benchmark's part of the topology: each cache's geometry with its evidence, and
//! what can and cannot be said of the L2's.

use topology::{
    Bytes, CacheGeometry, Count, ElementKind, Note, NoteSeverity, Provenance, ReplacementPolicy,
    SetMapping, Size, Topology,
};

use super::STEPS;
use crate::measure::{
    sets::{self, CacheSets, PolicyVerdict},
    Measurements,
};

/// Writes every measured cache's geometry, and the L2 note.
pub(super) fn report(measured: &Measurements, topo: &mut Topology) {
    for found in &measured.sets {
        let geometry = geometry(found);
        topo.element_mut(found.element).geometry = Some(geometry);
    }
    if !measured.sets.is_empty() {
        l2_note(measured, topo);
    }
}

/// The topology's geometry of one cache.
fn geometry(found: &CacheSets) -> CacheGeometry {
    let f = &found.finding;
    let line = u64::from(found.line_bytes);
    let count = |v: Option<u32>| v.map(|v| Count::new(v, Provenance::Benchmark));
    let mut evidence = vec![format!(
        "{} chases of {} B lines, {STEPS} timed loads each (8 × {STEPS} B of shared memory in every launch, so the L1 keeps one configuration); a load above {:.0} cycles, halfway between this cache's hits ({:.0}) and the next level's ({:.0}), is a miss",
        found.path,
        line,
        found.threshold(),
        found.hit_cycles,
        found.miss_cycles
    )];
    evidence.extend(f.evidence.iter().cloned());
    let set_mapping = match &f.mapping {
        Some(sets::SetMapping::Modulo { sets }) => Some(SetMapping::Modulo {
            set_stride: Bytes(sets * line),
            address_bits: sets.is_power_of_two().then(|| {
                let low = line.trailing_zeros();
                [low, low + sets.trailing_zeros()]
            }),
        }),
        Some(sets::SetMapping::Hashed { block_per_line }) => Some(SetMapping::Hashed {
            description: if *block_per_line {
                format!(
                    "the lines of one set are unevenly spaced, one in each aligned block of {} lines (an XOR of higher address bits into the set bits has this shape); lines a power-of-two multiple of the sets apart do not share a set",
                    f.sets.unwrap_or(0)
                )
            } else {
                format!("the lines of one set are unevenly spaced: {:?}", f.conflict)
            },
        }),
        Some(sets::SetMapping::Xor { line_masks }) => Some(SetMapping::Hashed {
            description: format!(
                "an XOR hash: within the window the chases covered (the chain buffer's first {} lines), set bit i is a constant XOR the parity of the byte offset under mask i ({}); address bits above the window take part too (at other offsets the same lines fall into other sets)",
                line_masks
                    .iter()
                    .map(|m| 1u64 << (64 - m.leading_zeros()))
                    .max()
                    .unwrap_or(0),
                line_masks
                    .iter()
                    .map(|m| format!("{:#x}", m * line))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
        None => None,
    };
    let mut not_determined = f.undetermined.clone();
    let replacement = match &f.policy {
        None => None,
        Some(PolicyVerdict::DirectMapped) => {
            Some(ReplacementPolicy::Other("none (direct-mapped)".into()))
        }
        Some(PolicyVerdict::Matches(c)) if c.len() == 1 => Some(match c[0] {
            sets::Candidate::Lru => ReplacementPolicy::Lru,
            sets::Candidate::Fifo => ReplacementPolicy::Fifo,
            sets::Candidate::TreePlru => ReplacementPolicy::TreePlru,
        }),
        Some(PolicyVerdict::Matches(c)) => Some(ReplacementPolicy::Other(format!(
            "{} (the victims fit each)",
            c.iter().map(|c| c.name()).collect::<Vec<_>>().join(" or ")
        ))),
        Some(PolicyVerdict::Varies { trials, distinct }) => {
            evidence.push(format!(
                "replacement: in {trials} experiment(s) the SMs' victims differed (up to {distinct} different lines): not a function of the access order"
            ));
            Some(ReplacementPolicy::Random)
        }
        Some(PolicyVerdict::Gradual {
            over_ways,
            uniform_random,
        }) => {
            let shares = |v: &[(u64, f64)]| {
                v.iter()
                    .map(|(j, share)| format!("+{j}: {:.1} %", 100.0 * share))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            evidence.push(format!(
                "replacement: cyclic chases over the ways plus j lines of one set missed {} of their loads (LRU and FIFO: every load; a uniformly random victim: {})",
                shares(over_ways),
                shares(uniform_random)
            ));
            let lru_like = over_ways.first().is_some_and(|&(_, s)| s > 0.9);
            let random_like = over_ways
                .iter()
                .zip(uniform_random)
                .all(|(&(_, m), &(_, r))| m <= 1.5 * r + 0.002);
            Some(if lru_like {
                ReplacementPolicy::Other(
                    "LRU or FIFO (every load one line over the ways missed)".into(),
                )
            } else if random_like {
                ReplacementPolicy::Random
            } else {
                ReplacementPolicy::Other(format!(
                    "neither LRU/FIFO nor a uniformly random victim: one line over the ways misses {:.1} % of the loads ({:.1} % for uniform random), as a victim chosen among the older lines would",
                    100.0 * over_ways.first().map_or(0.0, |v| v.1),
                    100.0 * uniform_random.first().map_or(0.0, |v| v.1)
                ))
            })
        }
        Some(PolicyVerdict::Unmatched) => Some(ReplacementPolicy::Other(
            "deterministic, but neither LRU, FIFO nor tree PLRU".into(),
        )),
        Some(PolicyVerdict::NoVictim) => {
            let why = "replacement: no line of a full set missed after a new line entered";
            not_determined = Some(match not_determined {
                Some(other) => format!("{other}; {why}"),
                None => why.to_owned(),
            });
            None
        }
    };
    CacheGeometry {
        associativity: count(f.ways),
        sets: count(f.sets),
        replacement,
        size: match (f.ways, f.sets) {
            (Some(w), Some(s)) => Some(Size::exact(
                Bytes(u64::from(w) * u64::from(s) * line),
                Provenance::Benchmark,
            )),
            _ => f
                .capacity_lines
                .map(|c| Size::exact(Bytes(c * line), Provenance::Benchmark)),
        },
        line_size: Some(Size::exact(Bytes(line), Provenance::Benchmark)),
        set_mapping,
        evidence,
        not_determined,
    }
}

/// What the L2's measurements say about its organisation, and what they cannot.
fn l2_note(measured: &Measurements, topo: &mut Topology) {
    let l2 = topo.element(ElementKind::L2);
    let mut known = Vec::new();
    if let Some(e) = l2 {
        if let (Some(line), Some(sector)) = (&e.line_size, &e.sector_size) {
            known.push(format!(
                "lines of {line} kept valid by {sector} sectors (a line is allocated, its sectors filled one by one)"
            ));
        }
        if let Some(fetch) = &e.fetch_granularity {
            known.push(format!("a read miss fetches {fetch}"));
        }
    }
    if let Some(Ok(map)) = measured.l2.as_ref().map(|l2| &l2.map) {
        let shares: Vec<f64> = map.far_share.iter().flatten().copied().collect();
        let mean = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
        known.push(format!(
            "{} partitions; an SM of another partition finds {:.0} % of consecutive lines far, so lines are interleaved over the partitions finely (the map does not record each line's home, so the granularity itself is not resolved)",
            map.count,
            100.0 * mean
        ));
    }
    let message = format!(
        "L2 organisation: {}. {}",
        if known.is_empty() {
            "nothing beyond its size and line was measured".to_owned()
        } else {
            known.join("; ")
        },
        crate::measure::bench::l2_ways::l2_organisation_open(measured)
    );
    topo.notes.push(Note {
        severity: NoteSeverity::Info,
        element: Some(ElementKind::L2),
        quantity: None,
        message,
    });
}
