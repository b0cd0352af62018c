//! The L2's ways, from minimal eviction sets. From the SM of the partition map's reference,
//! with lines homed in that SM's own partition only (the `l2` benchmark's address map, each
//! page's bit learnt from first loads), a target line is loaded, then a candidate set of
//! lines, then the target is timed again: a miss means the set evicted it. A set that does
//! is grown from a partition's worth of lines, then reduced by group testing ([`reduce`])
//! to one none of whose lines can go; under LRU-like replacement it holds as many lines as
//! the target's set has ways. Each test is one launch of three rounds, decided by their
//! majority against a threshold midway between the target's reload alone (a hit) and after
//! every candidate line (a miss). The ways are the size the majority of the minimal sets
//! agree on, where at least two agree; sets per partition follow from the partition's
//! size. On GPUs (`scripts/gpu/l2_evict.cu`) most H200 targets and some H100 targets
//! reduced to 16 lines, the others stalled with thousands left: the stalls are reported,
//! never turned into a count.

mod probe;
mod reduce;

use std::time::Duration;

use pchase_kernels::probes;
use rand::{rngs::Xoshiro256PlusPlus, seq::SliceRandom, SeedableRng};
use topology::{
    ElementKind, EvictionOutcome, L2Ways, L2WaysTarget, Note, NoteSeverity, QuantityKind, Topology,
};

use super::{Benchmark, Info};
use crate::{
    error::RunnerError,
    measure::{
        l2::{home::AddressMap, LevelKind},
        stats::median,
        Measurements, Session,
    },
    sim::{Replacement, SimProfile},
};
use probe::Prober;
use reduce::Budget;

/// The ways benchmark.
pub(crate) struct L2WaysBench {
    info: Info,
}

/// The L2's ways from minimal eviction sets.
pub(crate) static L2_WAYS: L2WaysBench = L2WaysBench {
    info: Info {
        name: "l2-ways",
        summary: "the L2's ways: lines homed in one SM's partition (the `l2` address map) that evict a target line, reduced by group testing to minimal eviction sets, whose size most of them agree on; sets per partition derived from it",
        element: None,
        needs: &["l2"],
        automatic: false,
        deep: true,
        kernels: || vec![&probes::L2_WAYS],
    },
};

/// Target lines, each reduced on its own.
const TARGETS: usize = 4;
/// Rounds of one eviction test (one launch): the majority decides.
const ROUNDS: u32 = 3;
/// Rounds of the target's reload alone that give the hit level.
const HIT_ROUNDS: u32 = 5;
/// The probe's memory, in L2 sizes: half of its lines are homed in each of two partitions,
/// so the near ones are twice the L2, four partitions' worth.
const REGION_L2S: u64 = 4;
/// The page whose lines share one home bit, and the granule the region is sized in.
const PAGE_BYTES: u64 = crate::measure::l2::home::PAGE_BYTES;
/// Lines of each page timed to learn its home bit. One more is loaded before them and not
/// counted: the page's first load may also wait for its translation.
const LINES_PER_PAGE: u64 = 8;
/// How many more of a page's votes must name one bit than the other for the page to be
/// used: a vote can be wrong, since device memory's slow tail through the near partition
/// lies where memory through the far one does (on an H200 712 against 713 cycles, some
/// 10 % of the loads). With all four of four votes required, a third of an H200's pages
/// were left out in two runs of three; a margin of four of eight leaves out some 4 % and
/// takes a page's bit wrongly with some five wrong votes of eight (below 0.1 %).
const PAGE_VOTE_MARGIN: u32 = 4;
/// The candidate sets tried in turn until one evicts the target, in a partition's lines: a
/// set of as many lines as a partition holds has, on average, as many lines in the
/// target's set as it has ways, so the first evicts most targets and the last nearly all.
const GROWTH: [f64; 4] = [1.25, 1.5, 2.0, 3.0];
/// The miss must exceed the hit by this fraction of it to be told apart.
const MIN_MISS_OVER_HIT: f64 = 0.25;
/// Eviction tests of one target's reduction.
const MAX_TESTS: u64 = 1500;
/// Lines the tests of one target's reduction may load (each once per round), in a
/// partition's lines: a reduction from 1.25 partitions loaded 40 to 70 in the simulator,
/// one from twice that about twice as many; a stall stops sooner.
const MAX_LINE_LOADS_IN_PARTITIONS: u64 = 120;
/// The seed of the candidates' order: the same lines, in the same order, in every run.
const ORDER_SEED: u64 = 0x12_5eed;

/// What the `l2` benchmark gave this one to work with.
struct Plan {
    /// The SM that measures: the partition map's reference.
    sm: u32,
    /// The L2's line.
    line_bytes: u32,
    /// Partitions, from the map.
    partitions: u64,
    /// With two partitions: the home function, and the levels of the L2 path (kind, p50) to
    /// tell a page's bit by.
    homes: Option<(AddressMap, Vec<(LevelKind, f64)>)>,
    /// The clock reads' cycles.
    overhead: f64,
}

impl Plan {
    fn of(m: &Measurements) -> Result<Plan, String> {
        let l2 = m.l2.as_ref().ok_or("the L2 benchmark gave no result")?;
        let map = l2
            .map
            .as_ref()
            .map_err(|why| format!("no partition map: {why}"))?;
        let line_bytes = match &l2.line {
            Ok(line) => u32::try_from(line.bytes).map_err(|_| "an L2 line beyond 4 GiB")?,
            Err(why) => return Err(format!("no L2 line: {why}")),
        };
        let homes = match (map.count, &l2.address) {
            (1, _) => None,
            (2, Some(Ok(found))) => {
                let levels: Vec<(LevelKind, f64)> = l2
                    .levels
                    .iter()
                    .map(|l| (l.kind, l.distribution.p50))
                    .collect();
                let has = |kind| levels.iter().any(|&(k, _)| k == kind);
                if !has(LevelKind::MemoryViaNear) || !has(LevelKind::MemoryViaFar) {
                    return Err("no levels of device memory through the near and the far partition to tell a page's home by".into());
                }
                Some((found.map.clone(), levels))
            }
            (2, Some(Err(why))) => return Err(format!("no address map: {why}")),
            (count, _) => {
                return Err(format!(
                    "{count} partitions and no address map to choose the lines homed in one of them"
                ))
            }
        };
        Ok(Plan {
            sm: map.reference_sm,
            line_bytes,
            partitions: u64::from(map.count.max(1)),
            homes,
            overhead: f64::from(m.clock_overhead.unwrap_or(0)),
        })
    }
}

/// The home a first load's latency shows: `Some(true)` for the measuring SM's partition
/// (memory through it), `Some(false)` for the other (a far hit, or memory through it), `None`
/// for a near hit (the line, or the near partition's copy of it, was still there) or a
/// level of neither.
fn home_shown(cycles: f64, levels: &[(LevelKind, f64)]) -> Option<bool> {
    let (kind, _) = levels
        .iter()
        .min_by(|a, b| (a.1 - cycles).abs().total_cmp(&(b.1 - cycles).abs()))?;
    match kind {
        LevelKind::MemoryViaNear => Some(true),
        LevelKind::FarHit | LevelKind::MemoryViaFar => Some(false),
        _ => None,
    }
}

/// The lines of the region homed in the measuring SM's partition. Each page's bit comes
/// from the first loads of [`LINES_PER_PAGE`] of its lines after a flush (other lines, two
/// L2s of them), each a miss through its home partition, each a vote: a page whose votes
/// name one bit fewer than [`PAGE_VOTE_MARGIN`] times more than the other is left out. A reload of a far line right after its first load shows
/// nothing: the near partition already holds its copy (on the H100 and the H200 every
/// page's first line read near that way, `scripts/gpu/l2_evict.cu`).
///
/// `Ok(Err(reason))` where too many pages are left out: the address map does not hold here.
fn near_lines(
    p: &mut Prober<'_, '_>,
    (map, levels): &(AddressMap, Vec<(LevelKind, f64)>),
    region_lines: u64,
    l2_lines: u64,
) -> Result<Result<Vec<u32>, String>, RunnerError> {
    let line = u64::from(p.line_bytes());
    // A first launch gives the memory's address, which the pages are counted from.
    p.first_loads(&[0])?;
    let base = p.address().unwrap_or(0);
    let page_bytes = map.page_bytes.max(line);
    let first_page = base / page_bytes;
    let page_of = |l: u64| ((base + l * line) / page_bytes - first_page) as usize;
    let pages = page_of(region_lines - 1) + 1;
    // Lines a quarter of a page apart, from each page's first line in the region, after one
    // half a quarter in (loaded first, not counted).
    let step = (page_bytes / line / LINES_PER_PAGE).max(2);
    let first_in_page = |page: u64| {
        ((first_page + page) * page_bytes)
            .saturating_sub(base)
            .div_ceil(line)
    };
    let (probed, counted): (Vec<u32>, Vec<bool>) = (0..pages as u64)
        .flat_map(|page| {
            let first = first_in_page(page);
            std::iter::once((first + step / 2, false))
                .chain((0..LINES_PER_PAGE).map(move |k| (first + k * step, true)))
        })
        .filter(|&(l, _)| l < region_lines)
        .map(|(l, counted)| (l as u32, counted))
        .unzip();
    // The flush: two L2s of the other lines, once, after a target no one times.
    let mut sorted = probed.clone();
    sorted.sort_unstable();
    let flush: Vec<u32> = (1..region_lines as u32)
        .filter(|l| sorted.binary_search(l).is_err())
        .take((2 * l2_lines) as usize)
        .collect();
    p.reloads(flush.first().copied().unwrap_or(0), &flush, 1)?;
    let firsts = p.first_loads(&probed)?;
    for ((&l, &cycles), &c) in probed.iter().zip(&firsts).zip(&counted) {
        let l = u64::from(l);
        log::trace!(
            "l2-ways: first load: page {} line {l} parity {} counted {c}: {cycles:.0} cycles",
            page_of(l),
            map.parity(base + l * line)
        );
    }
    // home = parity ^ page bit, true in the reference's partition (the measuring SM's).
    // Per page, the votes for bit 0 and for bit 1.
    let mut votes: Vec<[u32; 2]> = vec![[0, 0]; pages];
    for ((&l, &cycles), _) in probed.iter().zip(&firsts).zip(&counted).filter(|(_, &c)| c) {
        let Some(near) = home_shown(cycles, levels) else {
            continue;
        };
        let l = u64::from(l);
        let vote = near ^ map.parity(base + l * line);
        votes[page_of(l)][usize::from(vote)] += 1;
    }
    let page_bit: Vec<Option<bool>> = votes
        .iter()
        .map(|&[zero, one]| {
            if one >= zero + PAGE_VOTE_MARGIN {
                Some(true)
            } else if zero >= one + PAGE_VOTE_MARGIN {
                Some(false)
            } else {
                None
            }
        })
        .collect();
    let left_out = page_bit.iter().filter(|b| b.is_none()).count();
    log::debug!(
        "l2-ways: {} of {pages} pages' home bits told by their first loads",
        pages - left_out
    );
    if left_out * 8 > pages {
        return Ok(Err(format!(
            "the address map does not hold in the probe's memory: the first loads of {left_out} of its {pages} pages do not name their page's bit by {PAGE_VOTE_MARGIN} votes of {LINES_PER_PAGE}"
        )));
    }
    Ok(Ok((0..region_lines)
        .filter(|&l| page_bit[page_of(l)].is_some_and(|bit| map.parity(base + l * line) ^ bit))
        .map(|l| l as u32)
        .collect()))
}

fn measure(
    s: &mut Session<'_>,
    gpu: &mut Duration,
    plan: &Plan,
) -> Result<Result<L2Ways, String>, RunnerError> {
    let l2_bytes = s.backend.device().l2_bytes.max(1 << 20);
    let region_bytes = (REGION_L2S * l2_bytes).next_multiple_of(PAGE_BYTES);
    let line = u64::from(plan.line_bytes);
    let region_lines = region_bytes / line;
    let partition_bytes = l2_bytes / plan.partitions;
    let partition_lines = partition_bytes / line;
    let mut p = Prober::new(
        s,
        gpu,
        plan.sm,
        plan.line_bytes,
        region_bytes,
        plan.overhead,
    );
    let mut pool: Vec<u32> = match &plan.homes {
        None => (0..region_lines).map(|l| l as u32).collect(),
        Some(homes) => match near_lines(&mut p, homes, region_lines, l2_bytes / line)? {
            Ok(lines) => lines,
            Err(why) => return Ok(Err(why)),
        },
    };
    let smallest = (GROWTH[0] * partition_lines as f64) as usize;
    if pool.len() < smallest + TARGETS {
        return Ok(Err(format!(
            "{} lines of the probe's memory are homed in SM {}'s partition, fewer than the {} a first candidate set needs",
            pool.len(),
            plan.sm,
            smallest + TARGETS
        )));
    }
    pool.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(ORDER_SEED));
    let targets = pool.split_off(pool.len() - TARGETS);
    // The levels: the first target's reload alone, and after every candidate line.
    let hit = median(&p.reloads(targets[0], &[], HIT_ROUNDS)?);
    let miss = median(&p.reloads(targets[0], &pool, ROUNDS)?);
    if miss < (1.0 + MIN_MISS_OVER_HIT) * hit {
        return Ok(Err(format!(
            "after all {} candidate lines the target's reload took {miss:.0} cycles, against {hit:.0} alone: no miss to tell from a hit",
            pool.len()
        )));
    }
    let threshold = (hit + miss) / 2.0;
    let budget = Budget {
        tests: MAX_TESTS,
        line_loads: MAX_LINE_LOADS_IN_PARTITIONS * partition_lines,
    };
    let mut found = Vec::with_capacity(TARGETS);
    for &target in &targets {
        let mut evicts = |set: &[u32]| -> Result<bool, RunnerError> {
            let reloads = p.reloads(target, set, ROUNDS)?;
            Ok(2 * reloads.iter().filter(|&&c| c >= threshold).count() > reloads.len())
        };
        let mut tests = 1;
        if evicts(&[])? {
            found.push(not_evicted(tests));
            continue;
        }
        let mut start = None;
        for factor in GROWTH {
            let n = ((factor * partition_lines as f64) as usize).min(pool.len());
            tests += 1;
            if evicts(&pool[..n])? {
                start = Some(pool[..n].to_vec());
                break;
            }
        }
        let Some(start) = start else {
            found.push(not_evicted(tests));
            continue;
        };
        let r = reduce::reduce(start, budget, &mut evicts)?;
        log::debug!(
            "l2-ways: target {target}: {} with {} lines after {} tests ({} lines loaded per round)",
            r.outcome.name(),
            r.lines.len(),
            r.tests,
            r.line_loads
        );
        found.push(L2WaysTarget {
            outcome: r.outcome,
            lines: r.lines.len() as u64,
            needed: r.needed,
            tests: tests + r.tests,
        });
    }
    let outcomes: Vec<(EvictionOutcome, u64)> =
        found.iter().map(|t| (t.outcome, t.lines)).collect();
    let decided = reduce::decide(&outcomes);
    let ways = decided.as_ref().ok().copied();
    let sets_per_partition = ways
        .map(|w| u64::from(w) * line)
        .filter(|&bytes| bytes > 0 && partition_bytes % bytes == 0)
        .map(|bytes| partition_bytes / bytes);
    Ok(Ok(L2Ways {
        ways,
        not_determined: decided.err(),
        targets: found,
        sets_per_partition,
        measuring_sm: plan.sm,
        hit_cycles: hit,
        miss_cycles: miss,
        threshold_cycles: threshold,
        launches: p.launches,
    }))
}

/// A target that no candidate set evicted (or that missed alone), after `tests` tests.
fn not_evicted(tests: u64) -> L2WaysTarget {
    L2WaysTarget {
        outcome: EvictionOutcome::NotEvicted,
        lines: 0,
        needed: None,
        tests,
    }
}

/// What the L2's organisation note leaves open: the sentence the `sets` benchmark's L2 note
/// ends with, true to what this benchmark found.
pub(crate) fn l2_organisation_open(measured: &Measurements) -> String {
    let ways = measured
        .l2_ways
        .as_ref()
        .and_then(|w| w.as_ref().ok())
        .and_then(|w| w.ways.map(|ways| (ways, w.sets_per_partition)));
    let index = "a chase from one SM sees each line at its partition's latency, whatever slice and set of the partition hold it, so its misses cannot tell an overflowing set from a line of another slice";
    match ways {
        Some((ways, sets)) => format!(
            "Ways: {ways}, from minimal eviction sets of lines homed in one partition (`l2-ways`){}. Not determined: how a partition's sets are split into slices, and the set index (which address bits choose a line's slice and set): {index}.",
            sets.map_or(String::new(), |s| format!("; {s} sets per partition, derived from its size"))
        ),
        None => format!(
            "Not determined: its sets, ways and set index (the ways come from `l2-ways`, `--deep`): {index}."
        ),
    }
}

impl Benchmark for L2WaysBench {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let name = self.info.name;
        let plan = match Plan::of(&s.results) {
            Ok(plan) => plan,
            Err(why) => {
                s.results.l2_ways = Some(Err(why));
                return;
            }
        };
        let result = s.timed(name, |s, gpu| measure(s, gpu, &plan));
        s.results.l2_ways = Some(match result {
            Ok(found) => found,
            Err(e) => Err(e.to_string()),
        });
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        let note = |severity, message: String| Note {
            severity,
            element: Some(ElementKind::L2),
            quantity: Some(QuantityKind::Geometry),
            message,
        };
        match &measured.l2_ways {
            Some(Ok(ways)) => {
                if let Some(why) = &ways.not_determined {
                    topo.add_note(note(
                        NoteSeverity::Info,
                        format!("L2 ways not determined: {why}"),
                    ));
                }
                topo.element_mut(ElementKind::L2).partitions_mut().ways = Some(ways.clone());
            }
            Some(Err(why)) => topo.add_note(note(
                NoteSeverity::NotMeasured,
                format!("L2 ways not measured: {why}"),
            )),
            None => {}
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let truth = profile.l2.ways();
        // Where the probe cannot run, or the `l2` benchmark gave no partition map or no
        // address map to choose lines by, there is nothing to find (the run says why).
        let capability = pchase_kernels::ComputeCapability::from(profile.device.compute_capability);
        let runs = capability >= probes::L2_WAYS.min_capability() && Plan::of(m).is_ok();
        // LRU in every set and timings that mislead a majority of three rarely: the ways
        // must be found, and right.
        let clean = profile.l2.replacement == Replacement::Lru
            && profile.l2.random_sets == 0.0
            && profile.noise.outlier_probability < 0.01;
        let found = match &m.l2_ways {
            Some(Ok(found)) => found,
            _ if !runs => return Ok(()),
            None => return Err("the L2's ways were not measured".into()),
            Some(Err(why)) if clean => return Err(format!("L2 ways not measured: {why}")),
            Some(Err(_)) => return Ok(()),
        };
        match found.ways {
            Some(ways) if u64::from(ways) != truth => Err(format!(
                "{ways} L2 ways, truth {truth} ({:?})",
                found.targets
            )),
            Some(ways) => {
                let sets = profile.l2.partition_bytes()
                    / (u64::from(ways) * u64::from(profile.l2.line_bytes));
                match found.sets_per_partition {
                    Some(found) if found != sets => {
                        Err(format!("{found} sets per partition, truth {sets}"))
                    }
                    _ => Ok(()),
                }
            }
            None if clean => Err(format!(
                "the ways of an LRU L2 were not determined: {}",
                found.not_determined.as_deref().unwrap_or("no reason")
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_l2_note_says_what_the_ways_left_open() {
        let mut m = Measurements::default();
        let open = l2_organisation_open(&m);
        assert!(
            open.starts_with("Not determined: its sets, ways and set index"),
            "{open}"
        );
        m.l2_ways = Some(Ok(L2Ways {
            ways: Some(16),
            not_determined: None,
            targets: Vec::new(),
            sets_per_partition: Some(15_360),
            measuring_sm: 0,
            hit_cycles: 280.0,
            miss_cycles: 550.0,
            threshold_cycles: 415.0,
            launches: 1800,
        }));
        let open = l2_organisation_open(&m);
        assert!(
            open.starts_with("Ways: 16, from minimal eviction sets"),
            "{open}"
        );
        assert!(open.contains("15360 sets per partition, derived"), "{open}");
        assert!(open.contains("Not determined: how a partition's sets are split into slices"));
        assert!(!open.contains("its sets, ways"));
    }
}
