//! Sets, ways, the address-to-set mapping and the replacement policy of one cache, from
//! fine-grained chases whose every load is classified as a hit or a miss.
//!
//! The method follows the fine-grained pointer chase of Mei & Chu ("Dissecting GPU memory
//! hierarchy through microbenchmarking", 2016): a cyclic chase over one line more than the
//! cache keeps overflows exactly one set, and the lines that miss on every pass are that
//! set's lines. Each load is a hit or a miss by its own latency (a threshold halfway
//! between the cache's hit level and the next level's), never by a mean.
//!
//! 1. **Capacity.** The smallest chase of `n` lines (one node per line) in which some line
//!    misses repeatedly ([`SetProbe::chase`], several passes) is one line more than the
//!    cache keeps: doubling or halving from the expected size, then bisection.
//! 2. **The overflowing set.** The lines that miss in that chase. With the index "line
//!    number modulo `S`" they are `W + 1` lines exactly `S` apart; with a hashed index they
//!    are `W + 1` lines at irregular distances (an XOR-folded index puts one in each aligned
//!    block of `S` lines, at offsets that change from block to block).
//! 3. **Ways, sets, mapping.** Where the set is an arithmetic progression of step `d`,
//!    chases of `k` lines `d` apart (all in that set) confirm the ways independently of
//!    the replacement policy: `W` lines never miss, `W + 1` do. Sets are capacity / ways.
//!    Where the distances are irregular, the same chase runs again: a set has fixed
//!    members, so where it names other lines the conflicts do not repeat and nothing is
//!    determined (the H100's L1). Otherwise the index is hashed; ways are the
//!    set's lines less one, and a power-of-two stride that a modulo index would put into one
//!    set, but that does not conflict, is recorded as the evidence.
//! 4. **Replacement.** Every set filled in a known order (a chase over the whole capacity),
//!    the first `r` lines of each set touched again, then one new line per set (one aligned
//!    block of `S` lines, [`SetProbe::victims`]); reading the set again, the first of its
//!    lines to miss is the victim. LRU, FIFO and tree PLRU each predict it for every `r`
//!    ([`policy::Candidate::victim`]); replicas on several SMs that name different victims
//!    show a policy that is not a function of the order (random).

mod hashed;
pub mod policy;
mod reduce;

use std::collections::BTreeMap;

use crate::error::RunnerError;
pub use policy::{Candidate, PolicyVerdict, VictimTrial};
pub use reduce::{random_share, Reduction, BUSY_PER_PASS, REDUCE_PASSES};

/// One timed load: the chain node it loaded and whether it missed this cache; `None` where
/// a cache in front of it served the load (the constant L1 before the L1.5), so the load
/// says nothing about this one.
pub type Load = (u64, Option<bool>);

/// The chases the search needs, on one cache, in units of its line.
pub trait SetProbe {
    /// A cyclic chase of `nodes` nodes `stride_lines` lines apart, warmed by two passes;
    /// returns at least `passes` passes' worth of timed loads (more where one launch's
    /// window holds more).
    ///
    /// # Errors
    /// The backend's errors.
    fn chase(
        &mut self,
        nodes: u64,
        stride_lines: u64,
        passes: u32,
    ) -> Result<Vec<Load>, RunnerError>;

    /// The victim experiment: a chain A of `nodes` consecutive lines loaded for `fill`
    /// loads (one pass, then its first `fill − nodes` nodes again), then `block`
    /// consecutive lines elsewhere (an aligned block), then A read on from node
    /// `fill mod nodes` for at least one pass. Returns per replica (SM) the timed loads.
    ///
    /// # Errors
    /// The backend's errors.
    fn victims(&mut self, nodes: u64, fill: u64, block: u64)
        -> Result<Vec<Vec<Load>>, RunnerError>;

    /// Whether [`SetProbe::chase_lines`] works here: the reduction to one set needs it, and
    /// a probe without it (the default) leaves that step out.
    fn can_chase_lines(&self) -> bool {
        false
    }

    /// A cyclic chase over `lines` (line numbers from the chain's start, in this order),
    /// warmed by two passes; at least `passes` passes' worth of timed loads, each with its
    /// line ([`SetProbe::list_loads`] of them), or fewer once `enough` of them missed: the
    /// decision the chase serves is then made, and the probe may stop (`u32::MAX`: never).
    ///
    /// # Errors
    /// The backend's errors; [`RunnerError::InvalidRequest`] by default.
    fn chase_lines(
        &mut self,
        lines: &[u64],
        passes: u32,
        enough: u32,
    ) -> Result<Vec<Load>, RunnerError> {
        let _ = (lines, passes, enough);
        Err(RunnerError::InvalidRequest(
            "this probe cannot chase a list of lines".into(),
        ))
    }

    /// The timed loads a whole [`SetProbe::chase_lines`] over `lines` lines and `passes`
    /// passes returns (what a share of misses is counted against): `lines × passes` by
    /// default.
    fn list_loads(&self, lines: u64, passes: u32) -> u64 {
        lines * u64::from(passes)
    }
}

/// How far the search may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetLimits {
    /// The capacity expected (lines): where the search starts.
    pub hint_lines: u64,
    /// The most lines a chase may span (stride × nodes).
    pub max_lines: u64,
    /// The most lines chain A and the block of the victim experiment may span together.
    pub max_victim_lines: u64,
    /// The most nodes whose every load one launch's window sees (the victim experiment
    /// needs a whole pass of A).
    pub window: u64,
}

/// How addresses pick a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetMapping {
    /// The line number modulo `sets`.
    Modulo {
        /// The number of sets.
        sets: u64,
    },
    /// Not a modulo: the overflowing set's lines are irregularly spaced.
    Hashed {
        /// Each of the set's lines lies in its own aligned block of `sets` lines (an
        /// XOR-folded index has this shape), so one such block fills every set once.
        block_per_line: bool,
    },
    /// An XOR hash: set bit `i` is the parity of the line number under `line_masks[i]`
    /// (found by the reduction to one set, over the address bits its chases varied).
    Xor {
        /// One mask per set bit, over line numbers.
        line_masks: Vec<u64>,
    },
}

/// What the search found for one cache.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SetsFinding {
    /// Lines a cyclic chase keeps without a repeated miss (one less than the first
    /// overflowing chase).
    pub capacity_lines: Option<u64>,
    /// The nodes (line numbers from the chain's start) that missed in the first
    /// overflowing chase: one set's lines.
    pub conflict: Vec<u64>,
    /// Ways that keep reused lines.
    pub ways: Option<u32>,
    /// Sets.
    pub sets: Option<u32>,
    /// The mapping, where decided.
    pub mapping: Option<SetMapping>,
    /// The share of the overflowing set's loads that missed in its chase, and whether
    /// every one of its lines missed on every pass.
    pub cyclic_misses: Option<(f64, bool)>,
    /// The victim experiments.
    pub trials: Vec<VictimTrial>,
    /// What the victims say.
    pub policy: Option<PolicyVerdict>,
    /// The observations behind each decision, in words (for notes and `-v`).
    pub evidence: Vec<String>,
    /// Why the geometry is not (fully) determined, where it is not.
    pub undetermined: Option<String>,
    /// Chases and victim experiments run.
    pub probes: u32,
    /// The reduction to one set, where it ran and concluded.
    pub reduction: Option<Reduction>,
}

/// One cache's result: where it was measured, the levels that split hits from misses, and
/// what the search found.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSets {
    /// The element.
    pub element: topology::ElementKind,
    /// The load path of its chases.
    pub path: crate::backend::LoadPath,
    /// The line the chases step by (bytes).
    pub line_bytes: u32,
    /// The hit level (median cycles, with the clock overhead).
    pub hit_cycles: f64,
    /// The next level's hits (median cycles, with the clock overhead): a miss.
    pub miss_cycles: f64,
    /// What the search found.
    pub finding: SetsFinding,
}

impl CacheSets {
    /// Loads slower than this are misses: halfway between the two levels.
    pub fn threshold(&self) -> f64 {
        (self.hit_cycles + self.miss_cycles) / 2.0
    }
}

/// Passes of a capacity decision (enough that a 16-way random set, which misses on about
/// one load in eight, shows a line missing three times).
const DECIDE_PASSES: u32 = 16;
/// Passes of the chase whose misses name the overflowing set.
const CLASS_PASSES: u32 = 24;
/// The most ways a stride test tries.
const MAX_WAYS: u64 = 64;

/// Per node: (observations, misses).
fn per_node(loads: &[Load]) -> BTreeMap<u64, (u32, u32)> {
    let mut counts = BTreeMap::new();
    for &(node, miss) in loads {
        let Some(miss) = miss else { continue };
        let c = counts.entry(node).or_insert((0u32, 0u32));
        c.0 += 1;
        c.1 += u32::from(miss);
    }
    counts
}

/// Whether a node missed repeatedly: at least three times and in at least 2 % of its
/// loads (a rare slow load, an interrupt or a refresh, is not a conflict: two on one node
/// among a few thousand in a few dozen passes happen).
fn repeated((seen, missed): (u32, u32)) -> bool {
    missed >= 3 && f64::from(missed) >= 0.02 * f64::from(seen)
}

/// The nodes that missed repeatedly, ascending.
fn missing_nodes(loads: &[Load]) -> Vec<u64> {
    per_node(loads)
        .into_iter()
        .filter(|&(_, c)| repeated(c))
        .map(|(n, _)| n)
        .collect()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// What a stride test showed.
enum StrideTest {
    /// This many lines fit one set; one more overflow it.
    Ways(u64),
    /// No chase within the limits overflowed.
    NoOverflow,
    /// A cache in front served the chase that would decide.
    Masked,
}

/// The search state: the probe, the limits, the finding being built.
struct Search<'p, P: SetProbe> {
    probe: &'p mut P,
    limits: SetLimits,
    finding: SetsFinding,
}

impl<P: SetProbe> Search<'_, P> {
    fn chase(&mut self, nodes: u64, stride: u64, passes: u32) -> Result<Vec<Load>, RunnerError> {
        self.finding.probes += 1;
        self.probe.chase(nodes, stride, passes)
    }

    fn overflows(&mut self, nodes: u64, stride: u64) -> Result<bool, RunnerError> {
        Ok(!missing_nodes(&self.chase(nodes, stride, DECIDE_PASSES)?).is_empty())
    }

    /// Like `overflows`, but `None` where some node reached this cache fewer than three
    /// times (a cache in front served it): the chase cannot tell.
    fn overflows_seen(&mut self, nodes: u64, stride: u64) -> Result<Option<bool>, RunnerError> {
        let loads = self.chase(nodes, stride, DECIDE_PASSES)?;
        let counts = per_node(&loads);
        if (0..nodes).any(|n| counts.get(&n).is_none_or(|c| c.0 < 3)) {
            return Ok(None);
        }
        Ok(Some(counts.values().any(|&c| repeated(c))))
    }

    /// The smallest overflowing chase at one line per node, or `None` within the limits.
    fn first_overflow(&mut self) -> Result<Option<u64>, RunnerError> {
        let max = self.limits.max_lines;
        let mut x = self.limits.hint_lines.clamp(2, max);
        let (mut lo, mut hi);
        if self.overflows(x, 1)? {
            hi = x;
            loop {
                let down = hi / 2;
                if down < 1 {
                    return Ok(Some(1));
                }
                if !self.overflows(down, 1)? {
                    lo = down;
                    break;
                }
                hi = down;
            }
        } else {
            lo = x;
            loop {
                if x >= max {
                    return Ok(None);
                }
                x = (x + x / 4 + 1).min(max);
                if self.overflows(x, 1)? {
                    hi = x;
                    break;
                }
                lo = x;
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.overflows(mid, 1)? {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Ok(Some(hi))
    }

    /// Ways by stride test: the smallest `k` whose chase of `k` nodes `stride` lines apart
    /// overflows, less one, where the chase of `k − 1` was seen not to; `Masked` where a
    /// cache in front hid the chase that would decide.
    fn ways_at_stride(&mut self, stride: u64) -> Result<StrideTest, RunnerError> {
        let mut clean_below = true;
        for k in 2..=MAX_WAYS + 1 {
            if k * stride > self.limits.max_lines {
                return Ok(StrideTest::NoOverflow);
            }
            match self.overflows_seen(k, stride)? {
                Some(true) if clean_below => return Ok(StrideTest::Ways(k - 1)),
                Some(true) => return Ok(StrideTest::Masked),
                Some(false) => clean_below = true,
                None => clean_below = false,
            }
        }
        Ok(StrideTest::NoOverflow)
    }

    fn note(&mut self, text: String) {
        self.finding.evidence.push(text);
    }
}

/// Runs the search on one cache.
///
/// # Errors
/// The probe's errors.
pub fn search<P: SetProbe>(probe: &mut P, limits: SetLimits) -> Result<SetsFinding, RunnerError> {
    let mut s = Search {
        probe,
        limits,
        finding: SetsFinding::default(),
    };
    let Some(n0) = s.first_overflow()? else {
        s.finding.undetermined = Some(format!(
            "no chase up to {} lines overflowed it (the most the memory it reads allows)",
            limits.max_lines
        ));
        return Ok(s.finding);
    };
    let capacity = n0 - 1;
    s.finding.capacity_lines = Some(capacity);
    let loads = s.chase(n0, 1, CLASS_PASSES)?;
    let counts = per_node(&loads);
    let class: Vec<u64> = counts
        .iter()
        .filter(|(_, &c)| repeated(c))
        .map(|(&n, _)| n)
        .collect();
    let (seen, missed) = class.iter().fold((0u32, 0u32), |(s, m), n| {
        let c = counts[n];
        (s + c.0, m + c.1)
    });
    let every = class.iter().all(|n| counts[n].0 == counts[n].1);
    if seen > 0 {
        s.finding.cyclic_misses = Some((f64::from(missed) / f64::from(seen), every));
    }
    s.note(format!(
        "{capacity} lines kept; at {n0} lines these nodes missed repeatedly: {class:?} ({missed} of their {seen} loads{})",
        if every { ", every one" } else { "" }
    ));
    s.finding.conflict = class.clone();
    if class.len() < 2 {
        s.finding.undetermined = Some(format!(
            "the first overflowing chase ({n0} lines) showed {} line(s) missing repeatedly, too few to name a set",
            class.len()
        ));
        return Ok(s.finding);
    }
    // A modulo index puts the set's lines a multiple of the sets apart (all of them, or
    // those a random policy showed): the stride test at their common step confirms it.
    let base = class[0];
    let step = class.iter().skip(1).fold(0, |g, &c| gcd(g, c - base));
    if step < 2 || !modulo(&mut s, capacity, step, class.len() as u64)? {
        hashed::hashed(&mut s, capacity, &class, every)?;
    }
    if s.finding.ways.is_some() && s.finding.sets.is_some() {
        replacement(&mut s)?;
    } else {
        // No fixed set named by the first overflow: reduce a chase to one set's lines, where
        // the probe can chase a list.
        if s.probe.can_chase_lines() {
            if let Some(found) = reduce::reduce(&mut s, n0)? {
                s.finding.policy = Some(PolicyVerdict::Gradual {
                    over_ways: found.over_ways.clone(),
                    uniform_random: found.random_shares.clone(),
                });
                s.finding.reduction = Some(found);
            }
        }
    }
    Ok(s.finding)
}

/// The overflowing set's lines are multiples of `step` apart (`m` of them seen): whether
/// stride tests confirm a modulo index (then ways, sets and the mapping are set).
fn modulo<P: SetProbe>(
    s: &mut Search<'_, P>,
    capacity: u64,
    step: u64,
    m: u64,
) -> Result<bool, RunnerError> {
    let ways = match s.ways_at_stride(step)? {
        StrideTest::Ways(ways) => {
            s.note(format!(
                "chases of lines {step} apart: {ways} never miss, {} do",
                ways + 1
            ));
            ways
        }
        // A cache in front keeps the small chases: the overflowing set itself, where it
        // is a whole progression that missed on every pass, gives the ways.
        StrideTest::Masked if step * (m - 1) == capacity => {
            s.note(format!(
                "chases of lines {step} apart were served by the cache in front; the ways are the overflowing set's {m} lines less one"
            ));
            m - 1
        }
        _ => {
            s.note(format!(
                "lines {step} apart never overflowed within {MAX_WAYS} ways: not one set"
            ));
            return Ok(false);
        }
    };
    let sets = capacity / ways;
    if capacity % ways != 0 || step % sets != 0 {
        s.note(format!(
            "{ways} ways and the {capacity} lines kept do not make a modulo index with lines {step} apart in one set"
        ));
        return Ok(false);
    }
    if m != ways + 1 {
        s.note(format!(
            "the overflowing set showed {m} of its {} lines missing (a policy that keeps some)",
            ways + 1
        ));
    }
    s.finding.ways = u32::try_from(ways).ok();
    s.finding.sets = u32::try_from(sets).ok();
    s.finding.mapping = Some(SetMapping::Modulo { sets });
    Ok(true)
}

/// The victim experiments, where the mapping lets one aligned block add a line to every
/// set: modulo, or hashed with one set line per aligned block.
fn replacement<P: SetProbe>(s: &mut Search<'_, P>) -> Result<(), RunnerError> {
    let (Some(ways), Some(sets)) = (s.finding.ways, s.finding.sets) else {
        return Ok(());
    };
    let (ways, sets) = (u64::from(ways), u64::from(sets));
    if ways == 1 {
        s.finding.policy = Some(PolicyVerdict::DirectMapped);
        return Ok(());
    }
    let blocks = matches!(
        s.finding.mapping,
        Some(SetMapping::Modulo { .. })
            | Some(SetMapping::Hashed {
                block_per_line: true
            })
    );
    let nodes = sets * ways;
    if !blocks || nodes + sets > s.limits.max_victim_lines || nodes > s.limits.window {
        s.note(format!(
            "replacement: no victim experiment ({})",
            if blocks {
                "the capacity and a block of new lines exceed what the chase may read"
            } else {
                "no aligned block adds one line to every set under this mapping"
            }
        ));
        return Ok(());
    }
    // The set under test: the overflowing set's lines inside the capacity, labelled by
    // their order in the chain.
    let members: Vec<u64> = s
        .finding
        .conflict
        .iter()
        .copied()
        .filter(|&n| n < nodes)
        .collect();
    let label: BTreeMap<u64, u32> = members
        .iter()
        .enumerate()
        .map(|(i, &n)| (n, i as u32))
        .collect();
    let mut retouch: Vec<u64> = vec![0, 1, 2, 3, ways / 2, ways - 1];
    retouch.retain(|&r| r < ways);
    retouch.sort_unstable();
    retouch.dedup();
    for r in retouch {
        let fill = nodes + r * sets;
        s.finding.probes += 1;
        let replicas = s.probe.victims(nodes, fill, sets)?;
        let sequence: Vec<u32> = (0..fill)
            .filter_map(|i| label.get(&(i % nodes)).copied())
            .collect();
        let victims = replicas
            .iter()
            .map(|loads| {
                loads
                    .iter()
                    .filter(|(n, _)| label.contains_key(n))
                    // The first of the set's lines that did not hit: the victim, unless a
                    // cache in front served a line before it (then this replica cannot tell).
                    .find(|(_, miss)| *miss != Some(false))
                    .and_then(|(n, miss)| miss.map(|_| label[n]))
            })
            .collect();
        s.finding.trials.push(VictimTrial {
            retouched: r as u32,
            sequence,
            victims,
        });
    }
    let verdict = policy::decide(ways as u32, &s.finding.trials);
    let shown: Vec<String> = s
        .finding
        .trials
        .iter()
        .map(|t| format!("{} re-touched: victims {:?}", t.retouched, t.victims))
        .collect();
    s.note(format!(
        "replacement: set filled in order, lines re-touched, one new line: {}",
        shown.join("; ")
    ));
    s.finding.policy = Some(verdict);
    Ok(())
}

#[cfg(test)]
mod tests;
