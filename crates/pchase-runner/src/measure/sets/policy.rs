//! The replacement policy from victims: which line of a full set a new line evicts, after
//! the set was filled in a known order and some of its lines re-touched, compared with what
//! each candidate policy would evict.

use crate::sim::cache::{plru_touch, plru_victim};

/// A deterministic replacement policy a victim pattern is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Candidate {
    /// Least recently used.
    Lru,
    /// First in, first out (a hit changes nothing).
    Fifo,
    /// Tree pseudo-LRU (power-of-two ways).
    TreePlru,
}

impl Candidate {
    /// Every candidate, in the order a tie is reported.
    pub const ALL: [Candidate; 3] = [Candidate::Lru, Candidate::TreePlru, Candidate::Fifo];

    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Candidate::Lru => "LRU",
            Candidate::Fifo => "FIFO",
            Candidate::TreePlru => "tree PLRU",
        }
    }

    /// The line `candidate` evicts when one new line enters a set of `ways` ways after
    /// `sequence` (line labels, the set starting empty), or `None` if the set is not full or
    /// the candidate does not apply (tree PLRU needs a power of two of ways).
    pub fn victim(self, ways: usize, sequence: &[u32]) -> Option<u32> {
        if ways == 0 || (self == Candidate::TreePlru && !ways.is_power_of_two()) || ways > 64 {
            return None;
        }
        // `slots[w]` is the line in way w; `order` the ways from most to least recent
        // (LRU) or newest to oldest fill (FIFO).
        let mut slots: Vec<u32> = Vec::with_capacity(ways);
        let mut order: Vec<usize> = Vec::with_capacity(ways);
        let mut bits = 0u64;
        for &line in sequence {
            let way = match slots.iter().position(|&l| l == line) {
                Some(way) => {
                    if self == Candidate::Lru {
                        order.retain(|&w| w != way);
                        order.insert(0, way);
                    }
                    way
                }
                None if slots.len() < ways => {
                    slots.push(line);
                    order.insert(0, slots.len() - 1);
                    slots.len() - 1
                }
                None => {
                    let way = self.choose(&order, bits, ways);
                    slots[way] = line;
                    order.retain(|&w| w != way);
                    order.insert(0, way);
                    way
                }
            };
            bits = plru_touch(bits, way, ways);
        }
        (slots.len() == ways).then(|| slots[self.choose(&order, bits, ways)])
    }

    fn choose(self, order: &[usize], bits: u64, ways: usize) -> usize {
        match self {
            Candidate::Lru | Candidate::Fifo => order[order.len() - 1],
            Candidate::TreePlru => plru_victim(bits, ways),
        }
    }
}

/// One victim experiment: the set's access sequence before the new line, and the victim
/// each replica (SM) showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VictimTrial {
    /// Lines re-touched after the fill.
    pub retouched: u32,
    /// The set's lines in the order they were loaded (fill, then re-touches).
    pub sequence: Vec<u32>,
    /// Per replica: the line the new one evicted (the first of the set to miss when the
    /// set is read again), `None` where none missed.
    pub victims: Vec<Option<u32>>,
}

/// What the victims say about the policy.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyVerdict {
    /// One way per set: nothing to choose.
    DirectMapped,
    /// Every replica agreed in every trial, and these candidates predict every victim.
    Matches(Vec<Candidate>),
    /// Replicas disagreed: the victim is not a function of the order (random, or adaptive).
    Varies {
        /// Trials whose replicas named more than one victim.
        trials: usize,
        /// The most distinct victims one trial showed.
        distinct: usize,
    },
    /// Deterministic, but no candidate predicts the victims.
    Unmatched,
    /// No trial showed a victim.
    NoVictim,
    /// From the reduction to one set: cyclic chases a few lines over the ways miss on a
    /// share of their loads that grows with the lines over, where LRU and FIFO miss on
    /// every load; beside it the share a uniformly random victim gives.
    Gradual {
        /// `(lines over the ways, share of loads missed)`.
        over_ways: Vec<(u64, f64)>,
        /// The same for a uniformly random victim (simulated).
        uniform_random: Vec<(u64, f64)>,
    },
}

/// Decides the policy from the trials of a set of `ways` ways.
pub fn decide(ways: u32, trials: &[VictimTrial]) -> PolicyVerdict {
    if ways == 1 {
        return PolicyVerdict::DirectMapped;
    }
    let mut varying = 0;
    let mut distinct_max = 0;
    let mut agreed: Vec<(usize, u32)> = Vec::new();
    for (i, t) in trials.iter().enumerate() {
        let mut seen: Vec<u32> = t.victims.iter().flatten().copied().collect();
        seen.sort_unstable();
        seen.dedup();
        distinct_max = distinct_max.max(seen.len());
        if seen.len() > 1 {
            varying += 1;
        } else if let Some(&v) = seen.first() {
            agreed.push((i, v));
        }
    }
    if varying > 0 {
        return PolicyVerdict::Varies {
            trials: varying,
            distinct: distinct_max,
        };
    }
    if agreed.is_empty() {
        return PolicyVerdict::NoVictim;
    }
    let ways = ways as usize;
    let matching: Vec<Candidate> = Candidate::ALL
        .into_iter()
        .filter(|c| {
            agreed
                .iter()
                .all(|&(i, v)| c.victim(ways, &trials[i].sequence) == Some(v))
        })
        .collect();
    if matching.is_empty() {
        PolicyVerdict::Unmatched
    } else {
        PolicyVerdict::Matches(matching)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_differ_after_a_retouch() {
        // Four ways filled 0 1 2 3, then 0 re-touched.
        let seq = [0, 1, 2, 3, 0];
        assert_eq!(Candidate::Lru.victim(4, &seq), Some(1));
        assert_eq!(Candidate::Fifo.victim(4, &seq), Some(0));
        assert_eq!(Candidate::TreePlru.victim(4, &seq), Some(2));
        assert_eq!(Candidate::TreePlru.victim(3, &seq), None);
        assert_eq!(Candidate::Lru.victim(4, &[0, 1, 2]), None, "not full");
    }

    fn trial(retouched: u32, victims: &[u32], c: Candidate) -> VictimTrial {
        let mut sequence: Vec<u32> = (0..4).collect();
        sequence.extend(0..retouched);
        let v = c.victim(4, &sequence);
        VictimTrial {
            retouched,
            sequence,
            victims: if victims.is_empty() {
                vec![v; 3]
            } else {
                victims.iter().map(|&x| Some(x)).collect()
            },
        }
    }

    #[test]
    fn lru_plru_and_random_are_told_apart() {
        for c in Candidate::ALL {
            let trials: Vec<VictimTrial> = (0..4).map(|r| trial(r, &[], c)).collect();
            assert_eq!(decide(4, &trials), PolicyVerdict::Matches(vec![c]), "{c:?}");
        }
        let random = vec![trial(0, &[0, 2, 1], Candidate::Lru)];
        assert_eq!(
            decide(4, &random),
            PolicyVerdict::Varies {
                trials: 1,
                distinct: 3
            }
        );
        assert_eq!(decide(1, &random), PolicyVerdict::DirectMapped);
        let odd = vec![trial(1, &[3, 3], Candidate::Lru)];
        assert_eq!(decide(4, &odd), PolicyVerdict::Unmatched);
    }
}
