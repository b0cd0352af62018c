//! The reduction to one set, for a cache whose first overflow names no fixed set: the
//! search's step 3 found conflicts that do not repeat, or a set whose lines do not all miss
//! on every pass (a victim chosen with randomness). The H100's and H200's L1 are such
//! caches (`docs/evidence/2026-11-26-h100-h200-l1-sets/`).
//!
//! 1. **One set.** From a chase a little past the first overflow, every line whose absence
//!    leaves the chase missing ([`BUSY_PER_PASS`] misses a pass or more) is dropped, in
//!    address order. Lines of sets that do not overflow change nothing and go; so do the
//!    lines of all but the last overflowing set. What is left is one set's lines plus the
//!    one or two over its ways; a second look keeps only the lines whose absence ends the
//!    misses (where two sets were left, the other's lines are not needed) and repeats.
//!
//!
//!    The drop in address order is run in parts with the same outcome and a fraction of
//!    the chases. Until the first line is kept, the chase is the list less a prefix, which
//!    overflows for every prefix up to some length and for none beyond it: bisection finds
//!    that length, and the line after the prefix is the first kept (a chase missed 0 or at
//!    least 52 times on the H100 and H200, against a threshold of 24). From there on one
//!    set holds exactly one line over its ways and no other set overflows, so exactly that
//!    set's later lines are kept, and whether a line is one of them is a test of its own:
//!    the chase from the first kept line without it stops missing. Lines tested in an
//!    order spread over the window give members of the set whose line numbers soon have
//!    constant parities under as few masks as an XOR index has set bits; the lines those
//!    masks name with the first kept line are the candidate. Where the candidate
//!    overflows, every line of the set is in it (no other set reaches one line over its
//!    ways), and the second look, which tests each line anyway, drops any other; where no
//!    candidate overflows after [`GATHER_MAX`] tests, the drop goes on line by line. A
//!    chase that has missed as often as its decision needs stops early.
//! 2. **Ways.** The smallest prefix of that set (in address order) whose chase misses
//!    beyond stray slow loads, less one: `W` lines of one set never miss, whatever the
//!    policy.
//! 3. **Sets and mapping.** Sets = capacity / `W`. Where the set's line numbers satisfy
//!    constant parities under `log2(sets)` independent bit masks, the index is that XOR
//!    hash; the masks must predict the set's further lines (a chase of `W + j` of the
//!    lines they name overflows).
//! 4. **Replacement**, from the miss share of cyclic chases over `W + j` lines of the set:
//!    LRU and FIFO miss on every load, a uniformly random victim on about `2j / W` of them;
//!    the share measured is reported beside both.

use super::{Search, SetMapping, SetProbe};
use crate::error::RunnerError;

/// Timed passes of every chase of the reduction.
pub const REDUCE_PASSES: u32 = 8;

/// Misses a pass from which a chase counts as still overflowing: on the H100 and H200 a set
/// one line over its ways misses 11 to 12 times a pass (2.6 % of 435 loads); elsewhere
/// stray slow loads stay below it.
pub const BUSY_PER_PASS: u32 = 3;

/// Lines tested for membership of the first kept line's set at most before the drop goes
/// on line by line: an XOR index of 4 sets over 11 line bits needs some 12 members spread
/// over the window (about 50 tests) for its masks.
pub const GATHER_MAX: usize = 192;

/// Lines past the first overflow the reduction starts from.
const START_PAST: u64 = 32;

/// The most lines a reduction starts from: each line dropped costs a chase over the rest
/// (about 1 ms on an H100 at 1 800 lines), so a larger cache is left to the evidence.
pub const REDUCE_MAX_LINES: u64 = 4096;

/// The further lines of the set the replacement chases add.
const OVER: [u64; 4] = [1, 2, 4, 8];

/// What the reduction found, beside the finding's ways, sets and mapping.
#[derive(Debug, Clone, PartialEq)]
pub struct Reduction {
    /// One set's lines (line numbers from the chain's start) that still overflow.
    pub set_lines: Vec<u64>,
    /// Chases of `W + j` lines of the set: `(j, share of loads missed)`.
    pub over_ways: Vec<(u64, f64)>,
    /// The share a uniformly random victim would give at each `j` (simulated).
    pub random_shares: Vec<(u64, f64)>,
}

/// Misses from which a reduction chase counts as still overflowing.
const BUSY_MISSES: u32 = BUSY_PER_PASS * REDUCE_PASSES;

/// The misses among `loads`.
fn misses(loads: &[super::Load]) -> u32 {
    let missed = loads.iter().filter(|l| l.1 == Some(true)).count();
    u32::try_from(missed).unwrap_or(u32::MAX)
}

/// `set` without its `k`-th line.
fn without(set: &[u64], k: usize) -> Vec<u64> {
    let mut out = set.to_vec();
    out.remove(k);
    out
}

impl<P: SetProbe> Search<'_, P> {
    /// Misses of a chase over `lines` in [`REDUCE_PASSES`] passes (stopped once `enough`
    /// missed), and its loads.
    fn list_misses(&mut self, lines: &[u64], enough: u32) -> Result<(u32, usize), RunnerError> {
        self.finding.probes += 1;
        let loads = self.probe.chase_lines(lines, REDUCE_PASSES, enough)?;
        Ok((misses(&loads), loads.len()))
    }

    /// Whether a chase over `lines` still overflows; a list of fewer than two lines
    /// overflows no cache of more than one way and is not chased.
    fn busy(&mut self, lines: &[u64]) -> Result<bool, RunnerError> {
        Ok(lines.len() >= 2 && self.list_misses(lines, BUSY_MISSES)?.0 >= BUSY_MISSES)
    }

    /// Whether a chase over `lines` misses beyond stray slow loads (more than 2 and more
    /// than 0.2 % of its loads: an interrupt or the simulator's outliers are not a
    /// conflict, while one line over the ways missed 2.3–2.9 % on the H100 and H200).
    fn misses_at_all(&mut self, lines: &[u64]) -> Result<bool, RunnerError> {
        let loads = self.probe.list_loads(lines.len() as u64, REDUCE_PASSES);
        let limit = 2.0 + 0.002 * loads as f64;
        // The first count above the limit decides: the chase may stop there.
        let enough = limit.floor() as u32 + 1;
        let (missed, _) = self.list_misses(lines, enough)?;
        Ok(f64::from(missed) > limit)
    }
}

/// Runs the reduction from the first overflow `n0`; `None` where it cannot conclude (the
/// evidence says why), else the set, with ways, sets, mapping and capacity set.
///
/// # Errors
/// The probe's errors.
pub(super) fn reduce<P: SetProbe>(
    s: &mut Search<'_, P>,
    n0: u64,
) -> Result<Option<Reduction>, RunnerError> {
    let start = (n0 + START_PAST).min(s.limits.max_lines);
    if start > REDUCE_MAX_LINES {
        s.note(format!(
            "reduction: not tried from {start} lines (at most {REDUCE_MAX_LINES})"
        ));
        return Ok(None);
    }
    let mut set: Vec<u64> = (0..start).collect();
    if !s.busy(&set)? {
        s.note(format!(
            "reduction: a chase of {start} lines missed fewer than {BUSY_PER_PASS} times a pass; not reduced"
        ));
        return Ok(None);
    }
    // The drop in address order, first part: the longest prefix whose removal leaves the
    // chase overflowing goes, and the line after it is the first kept.
    let (mut lo, mut hi) = (0usize, set.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if s.busy(&set[mid..])? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    set.drain(..lo);
    // Second part: members of the first kept line's set, tested in a spread order, until
    // their masks name lines that overflow together; else the drop line by line.
    set = match named_set(s, &set, start)? {
        Some(named) => named,
        None => {
            let mut i = 1;
            while i < set.len() {
                let without = without(&set, i);
                if s.busy(&without)? {
                    set = without;
                } else {
                    i += 1;
                }
            }
            set
        }
    };
    // Only the lines whose absence ends the misses belong to the one set (where two sets
    // were left each a little over, the other set's lines are not needed).
    for _ in 0..3 {
        let mut needed = Vec::new();
        for k in 0..set.len() {
            if !s.busy(&without(&set, k))? {
                needed.push(set[k]);
            }
        }
        if needed.len() == set.len() {
            break;
        }
        s.note(format!(
            "reduction: {} of the {} lines left were not needed; kept the {} that were",
            set.len() - needed.len(),
            set.len(),
            needed.len()
        ));
        set = needed;
        if !s.busy(&set)? {
            s.note("reduction: the needed lines alone no longer overflow; not reduced".into());
            return Ok(None);
        }
    }
    // Ways: the smallest missing prefix, by bisection (no prefix of W lines misses).
    let (mut lo, mut hi) = (1usize, set.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if s.misses_at_all(&set[..mid])? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let ways = lo as u64;
    let capacity = n0 - 1;
    let sets = ((capacity + ways / 2) / ways).max(1);
    s.note(format!(
        "reduction: {} lines of one set still overflow ({start} lines at the start); its first {ways} never miss, {} do: {ways} ways; {capacity} lines kept / {ways} = {sets} sets",
        set.len(),
        ways + 1
    ));
    let masks = xor_masks(&set, start);
    let expected_masks = sets
        .is_power_of_two()
        .then(|| sets.trailing_zeros() as usize);
    if Some(masks.len()) != expected_masks {
        s.finding.undetermined = Some(format!(
            "reduction: the {} lines left share constant parities under {} independent masks of the line number, not the {} that {sets} sets of {ways} ways need: they are not one set of an XOR index (or not one set), so ways and sets are not stated",
            set.len(),
            masks.len(),
            expected_masks.map_or("log2".to_string(), |m| m.to_string())
        ));
        return Ok(None);
    }
    // The lines the masks put into this set, in address order: the set's further lines.
    let members: Vec<u64> = (0..s.limits.max_lines.min(16 * start))
        .filter(|&l| parities(l, &masks) == parities(set[0], &masks))
        .collect();
    let mut over_ways = Vec::new();
    for j in OVER {
        let k = (ways + j) as usize;
        if k > members.len() {
            break;
        }
        let (missed, loads) = s.list_misses(&members[..k], u32::MAX)?;
        over_ways.push((j, f64::from(missed) / loads.max(1) as f64));
    }
    let fits = members.len() > ways as usize && !s.misses_at_all(&members[..ways as usize])?;
    let overflows = fits && s.misses_at_all(&members[..=ways as usize])?;
    if !overflows {
        s.finding.undetermined = Some(format!(
            "reduction: masks {} fit the {} lines left but the lines they name do not overflow at {} ways plus one: not one set, ways and sets not stated",
            hex_list(&masks),
            set.len(),
            ways
        ));
        return Ok(None);
    }
    s.note(format!(
        "the set's lines share constant parities under the masks {} of the line number; the lines these masks name fit at {ways} and overflow at {}: an XOR-hashed index of {sets} sets",
        hex_list(&masks),
        ways + 1
    ));
    s.finding.mapping = Some(SetMapping::Xor {
        line_masks: masks.clone(),
    });
    s.finding.ways = u32::try_from(ways).ok();
    s.finding.sets = u32::try_from(sets).ok();
    s.finding.capacity_lines = Some(ways * sets);
    if ways * sets != capacity {
        s.note(format!(
            "capacity: {} lines ({sets} × {ways}); the first chase to miss repeatedly had {n0} lines, as a set one line over its ways misses on a few per cent of its loads only",
            ways * sets
        ));
    }
    let random_shares = over_ways
        .iter()
        .map(|&(j, _)| (j, random_share(ways, j)))
        .collect();
    s.finding.undetermined = None;
    Ok(Some(Reduction {
        set_lines: set,
        over_ways,
        random_shares,
    }))
}

/// The set of `set[0]` within `set` (a list from the first kept line on, where that line's
/// set is one line over its ways and no other set is), named by the masks of members found
/// by tests in a spread order; `None` where no named candidate overflowed within
/// [`GATHER_MAX`] tests.
fn named_set<P: SetProbe>(
    s: &mut Search<'_, P>,
    set: &[u64],
    start: u64,
) -> Result<Option<Vec<u64>>, RunnerError> {
    let others = set.len().saturating_sub(1);
    let mut members = vec![set[0]];
    let mut tried: Vec<u64> = Vec::new();
    for (tests, k) in spread(others).take(GATHER_MAX).enumerate() {
        if s.busy(&without(set, k + 1))? {
            continue;
        }
        members.push(set[k + 1]);
        let masks = xor_masks(&members, start);
        if masks.is_empty() {
            break;
        }
        if masks == tried {
            continue;
        }
        let named: Vec<u64> = set
            .iter()
            .copied()
            .filter(|&l| parities(l, &masks) == parities(set[0], &masks))
            .collect();
        let overflows = named.len() < set.len() && s.busy(&named)?;
        log::debug!(
            "reduction: {} members of the first kept line's set after {} tests; masks {} name {} lines, which {}",
            members.len(),
            tests + 1,
            hex_list(&masks),
            named.len(),
            if overflows { "overflow" } else { "do not overflow" }
        );
        if overflows {
            return Ok(Some(named));
        }
        tried = masks;
    }
    Ok(None)
}

/// `0..n` in an order spread over the range: `j·a mod n` with `a` the integer nearest
/// `0.618·n` coprime to `n`, so that the first few indices already fall all over it.
fn spread(n: usize) -> impl Iterator<Item = usize> {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let a = ((n as f64 * 0.618) as usize..n)
        .find(|&a| gcd(a, n) == 1)
        .unwrap_or(1);
    (0..n).map(move |j| j * a % n)
}

/// The parity of `line & mask` for each mask.
fn parities(line: u64, masks: &[u64]) -> Vec<u32> {
    masks.iter().map(|m| (line & m).count_ones() & 1).collect()
}

/// `masks` (over line numbers) as hex, joined by commas. The report states them in bytes,
/// where the line size is known.
fn hex_list(masks: &[u64]) -> String {
    masks
        .iter()
        .map(|m| format!("{m:#x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A basis (reduced row echelon form, highest bit first) of the bit masks over the bits
/// that vary among `0..span` under which every line of `set` has the same parity.
pub(super) fn xor_masks(set: &[u64], span: u64) -> Vec<u64> {
    let bits = 64 - span.saturating_sub(1).leading_zeros();
    let Some(&first) = set.first() else {
        return Vec::new();
    };
    // Each difference first ^ line must have even parity under every mask: the masks are
    // the null space of the differences.
    let mut rows: Vec<u64> = Vec::new();
    for &line in &set[1..] {
        insert(&mut rows, first ^ line);
    }
    // Null space of `rows` (an echelon basis of the differences) within `bits` bits.
    let pivots: Vec<(u32, u64)> = rows.iter().map(|&r| (63 - r.leading_zeros(), r)).collect();
    let mut basis = Vec::new();
    for free in 0..bits {
        if pivots.iter().any(|&(p, _)| p == free) {
            continue;
        }
        // The mask with bit `free` set, and the pivot bits that make every row even.
        let mut mask = 1u64 << free;
        for &(p, r) in pivots.iter().rev() {
            if (r & mask).count_ones() % 2 == 1 {
                mask ^= 1 << p;
            }
        }
        basis.push(mask);
    }
    let mut reduced = Vec::new();
    for m in basis {
        insert(&mut reduced, m);
    }
    reduced.sort_unstable_by(|a, b| b.cmp(a));
    reduced
}

/// Adds `v` to a fully reduced echelon basis `rows` (each row's top bit is set in no other
/// row).
fn insert(rows: &mut Vec<u64>, mut v: u64) {
    for &r in rows.iter() {
        let top = 63 - r.leading_zeros();
        if v >> top & 1 == 1 {
            v ^= r;
        }
    }
    if v == 0 {
        return;
    }
    let top = 63 - v.leading_zeros();
    for r in rows.iter_mut() {
        if *r >> top & 1 == 1 {
            *r ^= v;
        }
    }
    rows.push(v);
    rows.sort_unstable_by(|a, b| b.cmp(a));
}

/// The share of loads a cyclic chase of `ways + over` lines of one set misses under a
/// uniformly random victim, by a small deterministic simulation (64 passes after 8).
pub fn random_share(ways: u64, over: u64) -> f64 {
    let n = (ways + over) as usize;
    let mut held: Vec<usize> = Vec::with_capacity(ways as usize);
    let mut present = vec![false; n];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let (mut missed, mut seen) = (0u64, 0u64);
    for pass in 0..72 {
        for line in 0..n {
            let hit = present[line];
            if pass >= 8 {
                seen += 1;
                missed += u64::from(!hit);
            }
            if hit {
                continue;
            }
            if held.len() as u64 >= ways {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let victim = (state % held.len() as u64) as usize;
                present[held[victim]] = false;
                held[victim] = line;
            } else {
                held.push(line);
            }
            present[line] = true;
        }
    }
    missed as f64 / seen.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_masks_of_an_xor_index_are_found_from_one_sets_lines() {
        // The H100's L1: set bits = parities under 0x2b5 and 0x5da.
        let hash = |l: u64| ((l & 0x2b5).count_ones() & 1, (l & 0x5da).count_ones() & 1);
        let set: Vec<u64> = (47..1781).filter(|&l| hash(l) == hash(47)).collect();
        let masks = xor_masks(&set, 1781);
        assert_eq!(masks.len(), 2, "{masks:x?}");
        // The same space: every combination of the two masks.
        let span = |m: &[u64]| {
            let mut v = vec![m[0], m[1], m[0] ^ m[1]];
            v.sort_unstable();
            v
        };
        assert_eq!(span(&masks), span(&[0x2b5, 0x5da]));
        // Lines above the span's bits play no part (0x800 is always 0 below 1781).
        assert!(masks.iter().all(|m| m >> 11 == 0));
    }

    #[test]
    fn a_random_victim_misses_a_little_past_the_ways() {
        let one = random_share(434, 1);
        assert!(one > 0.0 && one < 0.01, "{one}");
        assert!(random_share(434, 8) > 4.0 * one);
        assert_eq!(random_share(16, 0), 0.0);
    }
}
