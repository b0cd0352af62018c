//! The specialised searches (functional pruning for L2, the fused kernel loop
//! for RBF, one change point as the best split) against the generic,
//! cost-agnostic ones on random piecewise signals: same objective, and segment
//! costs that are the cost's own.

use cpd::{dynp, pelt, CostSweep, SearchOptions, SegmentCost, Segmentation};
use ndarray::Array2;
use proptest::prelude::*;

use crate::support::{assert_close, make_cost};

/// Forwards everything but `as_l2` / `as_rbf`, so searches take the generic
/// (sweep-based, pruned) path.
struct Generic<'a>(&'a dyn SegmentCost);

impl SegmentCost for Generic<'_> {
    fn n_samples(&self) -> usize {
        self.0.n_samples()
    }
    fn min_segment_len(&self) -> usize {
        self.0.min_segment_len()
    }
    fn segment_cost(&self, start: usize, end: usize) -> f64 {
        self.0.segment_cost(start, end)
    }
    fn is_split_superadditive(&self) -> bool {
        self.0.is_split_superadditive()
    }
    fn split_costs(
        &self,
        start: usize,
        end: usize,
        splits: &[usize],
        left: &mut [f64],
        right: &mut [f64],
    ) {
        self.0.split_costs(start, end, splits, left, right)
    }
    fn sweep(&self) -> Box<dyn CostSweep + '_> {
        self.0.sweep()
    }
}

/// `columns` columns of piecewise-constant levels (jumps of ±1 to ±4 at random
/// places, about every `spacing` samples) plus uniform noise, from a seed.
fn signal(n: usize, columns: usize, spacing: usize, seed: u64) -> Array2<f64> {
    let mut state = seed | 1;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut levels = vec![0.0; columns];
    Array2::from_shape_fn((n, columns), |(_, j)| {
        if j == 0 && uniform() < 1.0 / spacing as f64 {
            for level in levels.iter_mut() {
                *level += (1.0 + 3.0 * uniform()) * if uniform() < 0.5 { 1.0 } else { -1.0 };
            }
        }
        levels[j] + uniform() - 0.5
    })
}

/// The segment costs reported are the cost's own, and add up to the objective.
fn check_consistent(cost: &dyn SegmentCost, seg: &Segmentation, what: &str) {
    let mut start = 0;
    for (&end, &reported) in seg.segment_ends.iter().zip(&seg.segment_costs) {
        assert_close(reported, cost.segment_cost(start, end), 1e-9, what);
        start = end;
    }
    let changes = seg.segment_ends.len() - 1;
    assert_close(
        seg.total_cost() + seg.penalty * changes as f64,
        seg.objective,
        1e-12,
        what,
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn specialised_searches_equal_the_generic_ones(
        n in 12usize..90,
        columns in 1usize..=2,
        spacing in 5usize..40,
        seed in any::<u64>(),
        k in 1usize..=4,
        min_size in 1usize..=4,
        jump in 1usize..=3,
        penalty in 0.05f64..15.0,
    ) {
        let signal = signal(n, columns, spacing, seed);
        let options = SearchOptions::new(min_size, jump);
        for name in ["l2", "rbf"] {
            let cost = make_cost(name, &signal, Some(0.5));
            let generic = Generic(cost.as_ref());
            let fast = pelt(cost.as_ref(), penalty, options).unwrap();
            let slow = pelt(&generic, penalty, options).unwrap();
            assert_close(fast.objective, slow.objective, 1e-9, &format!("{name} pelt"));
            check_consistent(cost.as_ref(), &fast, &format!("{name} pelt"));
            let max = options.max_change_points(n, min_size);
            if max == 0 {
                continue;
            }
            let k = k.min(max);
            let fast = dynp(cost.as_ref(), k, options).unwrap();
            let slow = dynp(&generic, k, options).unwrap();
            assert_close(fast.objective, slow.objective, 1e-9, &format!("{name} dynp k={k}"));
            prop_assert_eq!(fast.segment_ends.len(), k + 1);
            check_consistent(cost.as_ref(), &fast, &format!("{name} dynp"));
        }
    }
}

#[test]
fn long_l2_and_rbf_searches_agree_with_the_generic_ones() {
    // Long segments are where functional pruning and the kernel loop's chunking
    // (eight starts at a time, remainders) do real work.
    let signal = signal(700, 1, 150, 7);
    let options = SearchOptions::new(5, 1);
    for name in ["l2", "rbf"] {
        let cost = make_cost(name, &signal, Some(0.1));
        let generic = Generic(cost.as_ref());
        for k in [1, 3, 6] {
            let fast = dynp(cost.as_ref(), k, options).unwrap();
            let slow = dynp(&generic, k, options).unwrap();
            assert_eq!(fast.segment_ends, slow.segment_ends, "{name} dynp k={k}");
            assert_close(fast.objective, slow.objective, 1e-9, name);
        }
        let penalty = if name == "l2" { 20.0 } else { 3.0 };
        let fast = pelt(cost.as_ref(), penalty, options).unwrap();
        let slow = pelt(&generic, penalty, options).unwrap();
        assert_eq!(fast.segment_ends, slow.segment_ends, "{name} pelt");
        assert_close(fast.objective, slow.objective, 1e-9, name);
        check_consistent(cost.as_ref(), &fast, name);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Long series with long segments: several blocks of kernel chunks, and a
    /// live window past the point where L2 PELT hands its dense start over to
    /// functional pruning.
    #[test]
    fn long_specialised_searches_equal_the_generic_ones(
        n in 300usize..700,
        spacing in 150usize..400,
        seed in any::<u64>(),
        k in 1usize..=3,
        min_size in 1usize..=4,
        penalty in 0.5f64..20.0,
    ) {
        let signal = signal(n, 1, spacing, seed);
        let options = SearchOptions::new(min_size, 1);
        for name in ["l2", "rbf"] {
            let cost = make_cost(name, &signal, Some(0.5));
            let generic = Generic(cost.as_ref());
            let fast = pelt(cost.as_ref(), penalty, options).unwrap();
            let slow = pelt(&generic, penalty, options).unwrap();
            assert_close(fast.objective, slow.objective, 1e-9, &format!("{name} pelt"));
            check_consistent(cost.as_ref(), &fast, &format!("{name} pelt"));
            let fast = dynp(cost.as_ref(), k, options).unwrap();
            let slow = dynp(&generic, k, options).unwrap();
            assert_close(fast.objective, slow.objective, 1e-9, &format!("{name} dynp k={k}"));
            check_consistent(cost.as_ref(), &fast, &format!("{name} dynp"));
        }
    }
}
