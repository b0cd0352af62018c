//! Group testing (Vila, Köpf and Morales, "Theory and Practice of Finding Eviction Sets",
//! IEEE S&P 2019): a set of lines that evicts a target is split into chunks, and a chunk
//! is dropped whenever the target is still evicted without it. Under LRU-like replacement
//! only the lines of the target's set matter and `ways` of them evict it, so with more
//! chunks than ways some chunk can always go, and the set shrinks to one in which no line
//! can: as many lines as the set has ways. Each line of the result is then checked to be
//! needed on its own.
//!
//! The eviction test is given as a closure (on the GPU: one probe launch, decided by the
//! majority of its rounds), so the reduction is tested here against a model set.

use topology::EvictionOutcome;

/// Chunks a set is split into: more than the ways of any L2 the method is meant for (the
/// H100's and H200's 16), as the method needs ways + 1 at least.
pub(crate) const CHUNKS: usize = 32;
const _: () = assert!(
    CHUNKS > 16,
    "more chunks than the H100's and H200's 16 ways"
);

/// The largest set whose lines are each checked to be needed; a reduction that ends with
/// more lines stalled.
pub(crate) const CHECKED_AT_MOST: usize = 64;

/// What bounds one target's reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Eviction tests.
    pub(crate) tests: u64,
    /// Lines loaded by the tests (each test loads its set once per round): what the GPU
    /// time grows with.
    pub(crate) line_loads: u64,
}

/// How one target's reduction ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reduction {
    /// How it ended.
    pub(crate) outcome: EvictionOutcome,
    /// The set it ended with.
    pub(crate) lines: Vec<u32>,
    /// Of them, those found needed one by one (a set of at most [`CHECKED_AT_MOST`]).
    pub(crate) needed: Option<u64>,
    /// Tests it took.
    pub(crate) tests: u64,
    /// Lines the tests loaded, once per round counted once.
    pub(crate) line_loads: u64,
}

/// Counts the tests and lines of one reduction against its budget.
struct Tester<F> {
    evicts: F,
    tests: u64,
    line_loads: u64,
    budget: Budget,
}

impl<F, E> Tester<F>
where
    F: FnMut(&[u32]) -> Result<bool, E>,
{
    fn test(&mut self, set: &[u32]) -> Result<bool, E> {
        self.tests += 1;
        self.line_loads += set.len() as u64;
        (self.evicts)(set)
    }

    fn spent(&self) -> bool {
        self.tests >= self.budget.tests || self.line_loads >= self.budget.line_loads
    }
}

/// `set` without the lines `from..to`.
fn without(set: &[u32], from: usize, to: usize) -> Vec<u32> {
    let mut rest = Vec::with_capacity(set.len().saturating_sub(to - from));
    rest.extend_from_slice(&set[..from]);
    rest.extend_from_slice(&set[to.min(set.len())..]);
    rest
}

/// Reduces `set`, which evicts the target, by group testing; `evicts` tells whether a set
/// still does. A pass splits the set into [`CHUNKS`] chunks and drops each chunk the
/// target does not need; passes go on until a pass of one-line chunks is done, a pass of
/// larger chunks dropped nothing twice (a noisy test gets one more pass), or the budget is
/// spent. A set of at most [`CHECKED_AT_MOST`] lines is then checked line by line.
///
/// # Errors
/// The first error of `evicts`.
pub(crate) fn reduce<E>(
    mut set: Vec<u32>,
    budget: Budget,
    evicts: impl FnMut(&[u32]) -> Result<bool, E>,
) -> Result<Reduction, E> {
    let mut t = Tester {
        evicts,
        tests: 0,
        line_loads: 0,
        budget,
    };
    let mut idle_passes = 0;
    while set.len() > 1 && !t.spent() {
        let chunk = set.len().div_ceil(CHUNKS);
        let mut dropped = false;
        let mut c = 0;
        // After a drop the chunk numbering refers to the smaller set: the same `c` again.
        while c * chunk < set.len() && set.len() > 1 && !t.spent() {
            let rest = without(&set, c * chunk, (c + 1) * chunk);
            if t.test(&rest)? {
                set = rest;
                dropped = true;
            } else {
                c += 1;
            }
        }
        if chunk == 1 {
            break;
        }
        if !dropped {
            idle_passes += 1;
            if idle_passes > 1 {
                break;
            }
        }
    }
    let (outcome, needed) = if set.len() <= CHECKED_AT_MOST {
        let mut needed = 0;
        for i in 0..set.len() {
            if !t.test(&without(&set, i, i + 1))? {
                needed += 1;
            }
        }
        let outcome = if needed == set.len() {
            EvictionOutcome::Minimal
        } else {
            EvictionOutcome::NotMinimal
        };
        (outcome, Some(needed as u64))
    } else {
        (EvictionOutcome::Stalled, None)
    };
    Ok(Reduction {
        outcome,
        lines: set,
        needed,
        tests: t.tests,
        line_loads: t.line_loads,
    })
}

/// The ways: the size of minimal set that more than half of the minimal targets share, and
/// at least two of them; otherwise why there is none. `targets` are (outcome, lines).
pub(crate) fn decide(targets: &[(EvictionOutcome, u64)]) -> Result<u32, String> {
    let minimal: Vec<u64> = targets
        .iter()
        .filter(|(o, _)| *o == EvictionOutcome::Minimal)
        .map(|&(_, lines)| lines)
        .collect();
    let count = |outcome: EvictionOutcome| targets.iter().filter(|(o, _)| *o == outcome).count();
    if minimal.len() < 2 {
        return Err(format!(
            "{} of {} targets ended in a minimal eviction set ({} not minimal, {} stalled, {} not evicted): two must agree",
            minimal.len(),
            targets.len(),
            count(EvictionOutcome::NotMinimal),
            count(EvictionOutcome::Stalled),
            count(EvictionOutcome::NotEvicted)
        ));
    }
    let mut sizes: Vec<(u64, usize)> = Vec::new();
    for &lines in &minimal {
        match sizes.iter_mut().find(|(l, _)| *l == lines) {
            Some((_, n)) => *n += 1,
            None => sizes.push((lines, 1)),
        }
    }
    sizes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let (lines, agree) = sizes[0];
    if agree < 2 || 2 * agree <= minimal.len() {
        let all: Vec<String> = minimal.iter().map(u64::to_string).collect();
        return Err(format!(
            "the minimal eviction sets disagree: {} lines; no size has more than half of them",
            all.join(", ")
        ));
    }
    u32::try_from(lines).map_err(|_| format!("a minimal set of {lines} lines"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAYS: usize = 16;
    const BUDGET: Budget = Budget {
        tests: 5_000,
        line_loads: u64::MAX,
    };

    /// A model LRU set: a set evicts the target when it holds `WAYS` of the target's
    /// set's lines (those `line % sets == 0`).
    fn lru(sets: u32) -> impl FnMut(&[u32]) -> Result<bool, ()> {
        move |set| Ok(set.iter().filter(|&&l| l % sets == 0).count() >= WAYS)
    }

    #[test]
    fn an_lru_set_reduces_to_its_ways_each_line_needed() {
        // 50,000 lines, 2,000 sets: 25 of the target's set among them.
        let set: Vec<u32> = (1..=50_000).collect();
        let r = reduce(set, BUDGET, lru(2000)).unwrap();
        assert_eq!(r.outcome, EvictionOutcome::Minimal);
        assert_eq!(r.lines.len(), WAYS);
        assert!(r.lines.iter().all(|l| l % 2000 == 0));
        assert_eq!(r.needed, Some(WAYS as u64));
        // Passes of 32 tests, each shrinking the set to at most half, then the check.
        assert!(r.tests < 600, "{} tests", r.tests);
    }

    #[test]
    fn a_noisy_or_random_set_ends_not_minimal_or_stalled_never_minimal_at_a_wrong_size() {
        // The target is evicted by chance, more often the more of its set's lines load.
        let mut state = 12345u64;
        let mut coin = move |p: f64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) < p
        };
        let random = |set: &[u32]| -> Result<bool, ()> {
            let n = set.iter().filter(|&&l| l % 500 == 0).count() as i32;
            Ok(coin(1.0 - (15.0f64 / 16.0).powi(n)))
        };
        let r = reduce((1..=40_000).collect(), BUDGET, random).unwrap();
        assert_ne!(r.outcome, EvictionOutcome::Minimal, "{r:?}");
        assert!(r.tests <= BUDGET.tests + CHECKED_AT_MOST as u64);
    }

    #[test]
    fn the_budget_stops_a_reduction() {
        let tight = Budget {
            tests: 10,
            line_loads: u64::MAX,
        };
        let r = reduce((1..=50_000).collect(), tight, lru(2000)).unwrap();
        assert_eq!(r.outcome, EvictionOutcome::Stalled);
        assert_eq!(r.tests, 10);
        let loads = Budget {
            tests: u64::MAX,
            line_loads: 100_000,
        };
        let r = reduce((1..=50_000).collect(), loads, lru(2000)).unwrap();
        assert_eq!(r.outcome, EvictionOutcome::Stalled);
        assert!(r.line_loads >= 100_000 && r.line_loads < 160_000);
    }

    #[test]
    fn errors_of_the_test_are_passed_on() {
        let r = reduce((1..=100).collect(), BUDGET, |_| Err("launch failed"));
        assert_eq!(r.unwrap_err(), "launch failed");
    }

    #[test]
    fn the_majority_of_two_or_more_minimal_sets_decides() {
        use EvictionOutcome::*;
        assert_eq!(
            decide(&[(Minimal, 16), (Minimal, 16), (Stalled, 3000)]),
            Ok(16)
        );
        assert_eq!(
            decide(&[
                (Minimal, 16),
                (Minimal, 16),
                (Minimal, 17),
                (NotMinimal, 19)
            ]),
            Ok(16)
        );
        let one = decide(&[(Minimal, 16), (Stalled, 3000), (NotEvicted, 0)]).unwrap_err();
        assert!(
            one.starts_with("1 of 3 targets ended in a minimal"),
            "{one}"
        );
        assert!(one.contains("1 stalled, 1 not evicted"), "{one}");
        let split = decide(&[(Minimal, 16), (Minimal, 16), (Minimal, 12), (Minimal, 12)]);
        assert!(split.unwrap_err().contains("disagree: 16, 16, 12, 12"));
        assert!(decide(&[(Minimal, 16), (Minimal, 17)]).is_err());
    }
}
