//! The launch-shape search: a coordinate search over instruction variant, vector width,
//! unroll, threads per block and blocks per SM, from a seed, keeping the best value seen.
//!
//! The variant is tried against every other; then each ordered coordinate in turn is moved
//! one step up its list of values and, while that helps, further; if the first step up did
//! not help, the same down. A move must beat the best by [`MIN_GAIN`] (a repetition's noise
//! must not walk the search). Rounds repeat while one improved, up to a budget of
//! evaluations.
//!
//! Besides the single coordinates the search moves along *ridges*: pairs that trade
//! parallelism for parallelism at the same bytes in flight per SM (a wider vector or a
//! deeper unroll for fewer threads; more threads for fewer blocks). The H100's L2 showed
//! why: from 8 B × 8 × 1024 threads (10.1 TB/s) every single move lowered the bytes in
//! flight or raised them past what helps, so the search stopped there in some runs, while
//! 16 B × 8 × 512 threads, the same bytes in flight with more of them per thread, reached
//! 12.7–13.3 TB/s in the others.

use crate::bandwidth::{BandwidthOp, BandwidthShape};
use crate::error::RunnerError;

/// The relative gain a move must bring to be taken.
pub const MIN_GAIN: f64 = 0.005;

/// The values the search may give each coordinate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSpace {
    /// Operations (instruction variants) to try.
    pub ops: Vec<BandwidthOp>,
    /// Vector widths, bytes, ascending.
    pub vectors: Vec<u32>,
    /// Unroll factors, ascending.
    pub unrolls: Vec<u32>,
    /// Threads per block, ascending.
    pub threads: Vec<u32>,
    /// Blocks per SM, ascending.
    pub blocks_per_sm: Vec<u32>,
    /// Threads an SM holds at once: shapes asking for more per SM are not tried.
    pub max_threads_per_sm: u32,
}

impl SearchSpace {
    /// Whether `shape` is in the space: its values listed, a catalogue kernel of its
    /// operation, width and unroll, and its blocks resident together.
    pub fn contains(&self, shape: &BandwidthShape) -> bool {
        self.ops.contains(&shape.op)
            && self.vectors.contains(&shape.vector_bytes)
            && self.unrolls.contains(&shape.unroll)
            && self.threads.contains(&shape.threads)
            && self.blocks_per_sm.contains(&shape.blocks_per_sm)
            && shape.blocks_per_sm * shape.threads <= self.max_threads_per_sm
            && shape.kernel().is_ok()
    }

    /// Every shape of the space (for exhaustive checks; the search visits a few).
    pub fn shapes(&self) -> Vec<BandwidthShape> {
        let mut all = Vec::new();
        for &op in &self.ops {
            for &vector_bytes in &self.vectors {
                for &unroll in &self.unrolls {
                    for &threads in &self.threads {
                        for &blocks_per_sm in &self.blocks_per_sm {
                            let shape = BandwidthShape {
                                op,
                                vector_bytes,
                                unroll,
                                blocks_per_sm,
                                threads,
                            };
                            if self.contains(&shape) {
                                all.push(shape);
                            }
                        }
                    }
                }
            }
        }
        all
    }
}

/// What the search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// The best shape.
    pub best: BandwidthShape,
    /// Its value (bytes per second, best of its repetitions).
    pub value: f64,
    /// Every shape evaluated, in order, with its value (`None` where it failed).
    pub evaluated: Vec<(BandwidthShape, Option<f64>)>,
}

/// The coordinates, in the order the search moves them.
#[derive(Debug, Clone, Copy)]
enum Coordinate {
    Op,
    Vector,
    Unroll,
    Threads,
    BlocksPerSm,
    /// Vector width up, threads down (or the reverse): the same bytes in flight.
    VectorForThreads,
    /// Unroll up, threads down (or the reverse).
    UnrollForThreads,
    /// Threads up, blocks per SM down (or the reverse): the same threads per SM.
    ThreadsForBlocks,
}

impl Coordinate {
    const ALL: [Coordinate; 8] = [
        Coordinate::Op,
        Coordinate::Vector,
        Coordinate::Unroll,
        Coordinate::Threads,
        Coordinate::BlocksPerSm,
        Coordinate::VectorForThreads,
        Coordinate::UnrollForThreads,
        Coordinate::ThreadsForBlocks,
    ];

    /// `shape` with this coordinate moved `steps` places along its list, if that exists
    /// (none for the variant, whose list has no order).
    fn moved(
        self,
        space: &SearchSpace,
        shape: &BandwidthShape,
        steps: isize,
    ) -> Option<BandwidthShape> {
        let step_by = |list: &[u32], value: u32, steps: isize| -> Option<u32> {
            let at = list.iter().position(|&v| v == value)?;
            list.get(at.checked_add_signed(steps)?).copied()
        };
        let step = |list: &[u32], value: u32| step_by(list, value, steps);
        let against = |list: &[u32], value: u32| step_by(list, value, -steps);
        let mut next = *shape;
        match self {
            Coordinate::Op => return None,
            Coordinate::Vector => next.vector_bytes = step(&space.vectors, shape.vector_bytes)?,
            Coordinate::Unroll => next.unroll = step(&space.unrolls, shape.unroll)?,
            Coordinate::Threads => next.threads = step(&space.threads, shape.threads)?,
            Coordinate::BlocksPerSm => {
                next.blocks_per_sm = step(&space.blocks_per_sm, shape.blocks_per_sm)?;
            }
            Coordinate::VectorForThreads => {
                next.vector_bytes = step(&space.vectors, shape.vector_bytes)?;
                next.threads = against(&space.threads, shape.threads)?;
            }
            Coordinate::UnrollForThreads => {
                next.unroll = step(&space.unrolls, shape.unroll)?;
                next.threads = against(&space.threads, shape.threads)?;
            }
            Coordinate::ThreadsForBlocks => {
                next.threads = step(&space.threads, shape.threads)?;
                next.blocks_per_sm = against(&space.blocks_per_sm, shape.blocks_per_sm)?;
            }
        }
        Some(next)
    }
}

/// Searches `space` from `seed`, calling `evaluate` at most `budget` times (once per shape).
/// A shape whose evaluation fails is logged and skipped.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] when the seed is not in the space; the seed's own error
/// when it fails (nothing else could be compared with it).
pub fn coordinate_search(
    space: &SearchSpace,
    seed: BandwidthShape,
    budget: usize,
    mut evaluate: impl FnMut(&BandwidthShape) -> Result<f64, RunnerError>,
) -> Result<Search, RunnerError> {
    if !space.contains(&seed) {
        return Err(RunnerError::InvalidRequest(format!(
            "the search's seed ({seed}) is not in its space"
        )));
    }
    let value = evaluate(&seed)?;
    let mut search = Search {
        best: seed,
        value,
        evaluated: vec![(seed, Some(value))],
    };
    let mut try_shape = |search: &mut Search, shape: BandwidthShape| -> bool {
        if search.evaluated.len() >= budget
            || !space.contains(&shape)
            || search.evaluated.iter().any(|(s, _)| *s == shape)
        {
            return false;
        }
        let result = evaluate(&shape);
        let value = match result {
            Ok(v) => Some(v),
            Err(e) => {
                log::debug!("bandwidth search: {shape} failed: {e}");
                None
            }
        };
        search.evaluated.push((shape, value));
        match value {
            Some(v) if v > search.value * (1.0 + MIN_GAIN) => {
                search.best = shape;
                search.value = v;
                true
            }
            _ => false,
        }
    };
    loop {
        let before = search.best;
        for coordinate in Coordinate::ALL {
            if let Coordinate::Op = coordinate {
                // Variants have no order: try each against the best so far.
                for &op in &space.ops {
                    let mut next = search.best;
                    next.op = op;
                    try_shape(&mut search, next);
                }
                continue;
            }
            // Up while it helps; down only if the first step up did not.
            for direction in [1, -1] {
                let mut moved = false;
                while let Some(next) = coordinate.moved(space, &search.best, direction) {
                    if !try_shape(&mut search, next) {
                        break;
                    }
                    moved = true;
                }
                if moved {
                    break;
                }
            }
        }
        if search.best == before || search.evaluated.len() >= budget {
            return Ok(search);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bandwidth::ReadVariant;

    fn space() -> SearchSpace {
        SearchSpace {
            ops: vec![
                BandwidthOp::Read(ReadVariant::Ca),
                BandwidthOp::Read(ReadVariant::Nc),
                BandwidthOp::Read(ReadVariant::Cg),
                BandwidthOp::Read(ReadVariant::Cs),
            ],
            vectors: vec![4, 8, 16],
            unrolls: vec![1, 2, 4, 8],
            threads: vec![128, 256, 512, 1024],
            blocks_per_sm: vec![1, 2, 4, 8, 16],
            max_threads_per_sm: 2048,
        }
    }

    fn seed() -> BandwidthShape {
        BandwidthShape {
            op: BandwidthOp::Read(ReadVariant::Ca),
            vector_bytes: 16,
            unroll: 4,
            blocks_per_sm: 2,
            threads: 512,
        }
    }

    /// A smooth bowl with its top at `top`: every coordinate's distance costs.
    fn bowl(top: BandwidthShape) -> impl Fn(&BandwidthShape) -> f64 {
        move |s| {
            let log = |v: u32| f64::from(v).log2();
            let d = (log(s.vector_bytes) - log(top.vector_bytes)).abs()
                + (log(s.unroll) - log(top.unroll)).abs()
                + (log(s.threads) - log(top.threads)).abs()
                + (log(s.blocks_per_sm) - log(top.blocks_per_sm)).abs()
                + if s.op == top.op { 0.0 } else { 1.0 };
            100.0 / (1.0 + d)
        }
    }

    #[test]
    fn the_search_climbs_to_the_top_of_a_bowl_without_trying_every_shape() {
        let space = space();
        for top in [
            BandwidthShape {
                op: BandwidthOp::Read(ReadVariant::Cs),
                vector_bytes: 16,
                unroll: 8,
                blocks_per_sm: 16,
                threads: 128,
            },
            BandwidthShape {
                op: BandwidthOp::Read(ReadVariant::Nc),
                vector_bytes: 4,
                unroll: 1,
                blocks_per_sm: 1,
                threads: 1024,
            },
        ] {
            let f = bowl(top);
            let search = coordinate_search(&space, seed(), 200, |s| Ok(f(s))).unwrap();
            assert_eq!(search.best, top);
            assert_eq!(search.value, 100.0);
            assert!(
                search.evaluated.len() < space.shapes().len() / 4,
                "{} of {} shapes",
                search.evaluated.len(),
                space.shapes().len()
            );
            assert!(search.evaluated.iter().all(|(s, _)| space.contains(s)));
        }
    }

    #[test]
    fn the_budget_bounds_the_evaluations_and_failures_are_skipped() {
        let space = space();
        let f = bowl(BandwidthShape {
            op: BandwidthOp::Read(ReadVariant::Cg),
            vector_bytes: 4,
            unroll: 1,
            blocks_per_sm: 16,
            threads: 128,
        });
        let search = coordinate_search(&space, seed(), 6, |s| Ok(f(s))).unwrap();
        assert_eq!(search.evaluated.len(), 6);
        // Every 1024-thread shape fails: the search goes on around them.
        let search = coordinate_search(&space, seed(), 100, |s| {
            if s.threads == 1024 {
                Err(RunnerError::InvalidRequest("too many registers".into()))
            } else {
                Ok(f(s))
            }
        })
        .unwrap();
        assert!(search.best.threads < 1024);
        assert!(search
            .evaluated
            .iter()
            .any(|(s, v)| s.threads == 1024 && v.is_none()));
    }

    #[test]
    fn a_seed_outside_the_space_or_failing_is_an_error() {
        let space = space();
        let mut outside = seed();
        outside.blocks_per_sm = 16;
        outside.threads = 1024;
        assert!(coordinate_search(&space, outside, 10, |_| Ok(1.0)).is_err());
        let failing = coordinate_search(&space, seed(), 10, |_| {
            Err(RunnerError::InvalidRequest("no".into()))
        });
        assert!(failing.is_err());
    }

    /// The L2's shape of landscape: the bytes in flight per SM must stay at the top's, and
    /// among those shapes more bytes per thread are better. Every single move from
    /// `start` changes the bytes in flight and loses; only a trade finds the top.
    #[test]
    fn a_ridge_is_climbed_by_trading_threads_for_bytes_per_thread() {
        let space = space();
        let top = BandwidthShape {
            op: BandwidthOp::Read(ReadVariant::Cg),
            vector_bytes: 16,
            unroll: 8,
            blocks_per_sm: 1,
            threads: 512,
        };
        let log = |v: u32| f64::from(v).log2();
        let in_flight = |s: &BandwidthShape| {
            log(s.vector_bytes) + log(s.unroll) + log(s.threads) + log(s.blocks_per_sm)
        };
        let per_thread = |s: &BandwidthShape| log(s.vector_bytes) + log(s.unroll);
        let f = |s: &BandwidthShape| {
            100.0
                - 10.0 * (in_flight(s) - in_flight(&top)).abs()
                - (per_thread(s) - per_thread(&top)).abs()
                - if s.op == top.op { 0.0 } else { 5.0 }
        };
        let start = BandwidthShape {
            vector_bytes: 8,
            threads: 1024,
            ..top
        };
        for single in [
            Coordinate::Vector,
            Coordinate::Unroll,
            Coordinate::Threads,
            Coordinate::BlocksPerSm,
        ] {
            for steps in [1, -1] {
                if let Some(next) = single.moved(&space, &start, steps) {
                    assert!(f(&next) < f(&start), "{next} climbs without a trade");
                }
            }
        }
        let search = coordinate_search(&space, start, 100, |s| Ok(f(s))).unwrap();
        assert_eq!(search.best, top);
    }

    #[test]
    fn small_gains_do_not_move_the_search() {
        let space = space();
        let start = seed();
        let search = coordinate_search(&space, start, 100, |s| {
            Ok(if *s == start { 100.0 } else { 100.2 })
        })
        .unwrap();
        assert_eq!(search.best, start);
    }
}
