//! Segment costs over half-open index ranges `[start, end)`.
//!
//! A cost is fitted once to a signal (the precomputation), after which the cost
//! of any segment is cheap: O(d) for [`L2Cost`] and [`RankCost`] (prefix sums),
//! O(d²)–O(d³) for [`NormalCost`] (prefix sums of outer products),
//! O(len · d) for [`L1Cost`] (a median needs the segment) and, for [`RbfCost`],
//! O(1) amortised along a sweep of segment ends (see [`CostSweep`]).
//!
//! Users add their own cost by implementing [`SegmentCost`]; every search in
//! [`crate::search`] accepts any implementation.

pub(crate) mod kernel_row;
mod l1;
mod l2;
mod normal;
mod rank;
mod rbf;

pub(crate) use l1::median_in_place;
pub use l1::L1Cost;
pub use l2::L2Cost;
pub use normal::NormalCost;
pub use rank::RankCost;
pub use rbf::{Gamma, RbfCost};

/// A cost of contiguous segments of one fitted signal.
///
/// Segments are half-open: `segment_cost(start, end)` covers samples
/// `start..end`. Searches only ask for segments with
/// `end - start >= min_segment_len()` and `end <= n_samples()`.
pub trait SegmentCost {
    /// Number of samples (rows) of the fitted signal.
    fn n_samples(&self) -> usize;

    /// Shortest segment on which the cost is defined (1 unless overridden).
    fn min_segment_len(&self) -> usize {
        1
    }

    /// Cost of the segment `start..end`.
    fn segment_cost(&self, start: usize, end: usize) -> f64;

    /// Whether splitting a segment never raises the total cost:
    /// `c(a, b) >= c(a, m) + c(m, b)` for every admissible `a < m < b`.
    ///
    /// PELT and the pruned dynamic programme discard candidates using this
    /// inequality; when it holds, pruning keeps their results exact. It holds for
    /// every cost that is a minimum over segment parameters of a sum over samples
    /// (all built-in costs). The default is `false`, which switches pruning off,
    /// so a user cost is always searched exactly.
    fn is_split_superadditive(&self) -> bool {
        false
    }

    /// Writes `c(start, t)` into `left[i]` and `c(t, end)` into `right[i]` for
    /// every split `t = splits[i]` (sorted ascending, strictly inside the segment).
    ///
    /// The default calls [`SegmentCost::segment_cost`] twice per split; the
    /// kernel cost overrides it with running sums, O(len²) instead of O(len³).
    fn split_costs(
        &self,
        start: usize,
        end: usize,
        splits: &[usize],
        left: &mut [f64],
        right: &mut [f64],
    ) {
        for ((&t, l), r) in splits.iter().zip(left.iter_mut()).zip(right.iter_mut()) {
            *l = self.segment_cost(start, t);
            *r = self.segment_cost(t, end);
        }
    }

    /// This cost as an [`L2Cost`], if it is one.
    ///
    /// [`crate::dynp`] and [`crate::pelt`] run a specialised exact algorithm on
    /// the L2 cost (functional pruning over the segment mean, on its prefix
    /// sums). Only [`L2Cost`] returns `Some`; a user cost that wraps one may
    /// forward this call to get the same speed, provided its
    /// [`SegmentCost::segment_cost`] is the wrapped L2 cost.
    fn as_l2(&self) -> Option<&L2Cost> {
        None
    }

    /// This cost as an [`RbfCost`], if it is one: [`crate::dynp`] and
    /// [`crate::pelt`] then run a fused, vectorised loop over the kernel rows.
    /// Only [`RbfCost`] returns `Some` (a wrapper may forward, as for
    /// [`SegmentCost::as_l2`]).
    fn as_rbf(&self) -> Option<&RbfCost> {
        None
    }

    /// A cursor that produces costs of segments with increasing ends.
    ///
    /// The default asks [`SegmentCost::segment_cost`] for each segment; costs
    /// that are cheaper to update along a sweep than to query at random (the
    /// kernel cost) override it.
    fn sweep(&self) -> Box<dyn CostSweep + '_> {
        Box::new(RandomAccessSweep { cost: self })
    }
}

/// Produces the costs of segments that share an end, for ends visited in
/// increasing order.
pub trait CostSweep {
    /// Writes `c(starts[i], end)` into `costs[i]`.
    ///
    /// Callers promise that `end` strictly increases from call to call, that
    /// `starts` is sorted ascending with every start at most
    /// `end - min_segment_len`, that `costs.len() == starts.len()`, and that the
    /// smallest start never decreases from call to call (so a sweep may forget
    /// the past).
    fn costs_ending_at(&mut self, end: usize, starts: &[usize], costs: &mut [f64]);
}

/// The sweep of a cost with cheap random access.
struct RandomAccessSweep<'a, C: ?Sized> {
    cost: &'a C,
}

impl<C: SegmentCost + ?Sized> CostSweep for RandomAccessSweep<'_, C> {
    fn costs_ending_at(&mut self, end: usize, starts: &[usize], costs: &mut [f64]) {
        for (cost, &start) in costs.iter_mut().zip(starts) {
            *cost = self.cost.segment_cost(start, end);
        }
    }
}

/// Sum of segment costs of a segmentation given by its exclusive segment ends
/// (the last end must equal `cost.n_samples()`).
pub fn sum_of_costs<C: SegmentCost + ?Sized>(cost: &C, segment_ends: &[usize]) -> f64 {
    segment_costs(cost, segment_ends).iter().sum()
}

/// The cost of every segment of a segmentation given by its exclusive ends.
pub fn segment_costs<C: SegmentCost + ?Sized>(cost: &C, segment_ends: &[usize]) -> Vec<f64> {
    let mut start = 0;
    segment_ends
        .iter()
        .map(|&end| {
            let c = cost.segment_cost(start, end);
            start = end;
            c
        })
        .collect()
}
