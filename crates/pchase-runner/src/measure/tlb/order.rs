//! The order test of a rise (step 3 of [`super`]): the same lines in address order and in
//! groups of one line per entry-sized range, which only translation tells apart.

use super::{p5, rises, STRIDES};
use crate::error::RunnerError;

/// The order test of a rise ([`crate::walk::WalkRequest::group`]): the same `nodes` lines
/// `stride` apart walked in address order and in groups of `group` (one group per span
/// the rise's stride search found), 5th percentiles in cycles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrderCheck {
    /// The walks' stride.
    pub stride: u64,
    /// Nodes per group of the grouped walk (the span over the stride).
    pub group: u64,
    /// Nodes of both walks (the rising node count times `group`).
    pub nodes: u64,
    /// The 5th percentile in address order.
    pub sequential: f64,
    /// The 5th percentile in grouped order.
    pub grouped: f64,
}

impl OrderCheck {
    /// Whether the grouped walk rose over the address-order walk of the same lines: the
    /// rise depends on the order of the address ranges, as translation does.
    pub fn confirms(&self) -> bool {
        rises(self.sequential, self.grouped)
    }
}

/// The stride and group of the order test of a rise whose span search ended at
/// `STRIDES[span]`: an eighth of the span (a smaller group where the smallest stride is
/// reached), so that eight neighbours share one span in address order; `None` at the
/// smallest stride, where nothing can be grouped.
///
/// ```
/// use pchase_runner::measure::tlb::{order_stride, STRIDES};
/// let at = |bytes: u64| STRIDES.iter().position(|&s| s == bytes).unwrap();
/// assert_eq!(order_stride(at(16 << 20)), Some((2 << 20, 8)));
/// assert_eq!(order_stride(at(128 << 10)), Some((64 << 10, 2)));
/// assert_eq!(order_stride(0), None);
/// ```
pub fn order_stride(span: usize) -> Option<(u64, u64)> {
    let small = span.saturating_sub(3);
    (small < span).then(|| (STRIDES[small], STRIDES[span] / STRIDES[small]))
}

/// The order test of a rise at `n` nodes whose span search ended at `STRIDES[span]`: the
/// same lines in address order and grouped ([`OrderCheck`]); `None` where the walks do
/// not fit the limits (the test then tries a larger stride with smaller groups, down to
/// groups of two).
pub(super) fn order_check(
    span: usize,
    n: u64,
    fits: &impl Fn(u64, u64) -> bool,
    probe: &mut impl FnMut(u64, u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<Option<OrderCheck>, RunnerError> {
    let Some((first, _)) = order_stride(span) else {
        return Ok(None);
    };
    let whole = STRIDES[span];
    for &stride in STRIDES[..span].iter().filter(|&&s| s >= first) {
        let group = whole / stride;
        let nodes = n * group;
        if !fits(nodes, stride) {
            continue;
        }
        let sequential = p5(&probe(nodes, stride, 1)?);
        let grouped = p5(&probe(nodes, stride, group)?);
        return Ok(Some(OrderCheck {
            stride,
            group,
            nodes,
            sequential,
            grouped,
        }));
    }
    Ok(None)
}
