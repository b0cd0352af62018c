//! The interleave test of a level (step 2b of [`super`]): whether entries smaller than the
//! span the strides found alternate between groups of the level by address, so that walks
//! at the found stride fill only one group.
//!
//! A level whose set index takes the address bit just above its entry's span (two sets,
//! or two halves, by that bit) looks to stride walks exactly like a level of half the
//! entries, each mapping twice the span: at twice the span every node lands in one half and
//! the walk overflows at half the entries; at the span itself it overflows at the whole
//! level, as a walk over entries twice as large would. The H100's third L2-path level is
//! such a level (`scripts/gpu/tlb_fill.cu`): a flush over the lower 32 MiB of
//! 8192 ranges of 64 MiB leaves every upper 32 MiB translation in place.
//!
//! The walks can still tell the two apart, at half the stride with twice the nodes, in two
//! orders of the same lines. In address order, where an entry maps the whole span,
//! consecutive nodes share it and at most every other load misses; where entries map half
//! and alternate between the halves, both halves overflow and every load misses. Grouped
//! by pairs (every pair's first node, then every second), every load misses either way. So
//! the test asks that the address-order walk overflow like the level (its 5th percentile
//! three quarters of the way up to the level's plateau: even its fastest loads miss) and
//! that its quantiles lie within a quarter of the level's miss of the grouped walk's (half
//! the loads hitting would put them about half a miss lower). Both compare walks of the
//! same lines or the level's own rise, never walks of other lines, whose latencies may
//! differ by more than a first level's miss through the L2 slices they meet; and a level
//! whose half miss would not count as a rise is not tested (an H100's level 1, +10 cycles:
//! `scripts/gpu/tlb_fill.cu` shows its whole 16 MiB filled by one miss). Two other
//! comparisons fail: with the level before's walk, an H100's level 1 read as 64 entries of
//! 4 MiB in one run of two; with the walk of one node fewer per group, the third level,
//! whose groups fill gradually, went unseen.

use super::rise::Rise;
use super::{nearest_rank, p5, rises, sorted_finite, STRIDES};
use crate::error::RunnerError;

/// The mean shift of the 10th to 90th percentiles (nearest rank, in steps of 10) from
/// `from` to `to`: where the lines' own latencies spread more than a miss (an H100's L2
/// slices: about 50 cycles against a first level's 10), a miss in half the loads shifts
/// every quantile by about half the miss.
fn mean_shift(from: &[f64], to: &[f64]) -> f64 {
    let (a, b) = (sorted_finite(from), sorted_finite(to));
    if a.is_empty() || b.is_empty() {
        return f64::INFINITY;
    }
    (1..=9)
        .map(|k| nearest_rank(&b, 10 * k) - nearest_rank(&a, 10 * k))
        .sum::<f64>()
        / 9.0
}

/// From the span `STRIDES[span]` down to `STRIDES[lowest]`: while the walk of
/// `rise.n × (span / stride)` nodes at the next smaller stride, in address order, overflows
/// like the level and is as slow as the same lines grouped by pairs, the entries are that
/// small. Returns the index of the entries' span and the interleave (span found / entries'
/// span: 1 where the walks' span stands, or where half the level's miss would not count as
/// a rise and the test does not run); a walk that does not fit the limits ends the test.
/// `probe(nodes, stride, group)`.
pub(super) fn interleave_test(
    lowest: usize,
    span: usize,
    rise: &Rise,
    fits: &impl Fn(u64, u64) -> bool,
    probe: &mut impl FnMut(u64, u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<(usize, u64), RunnerError> {
    let miss = rise.after - rise.before;
    // The walks below differ by half a miss where entries are whole: a difference that
    // would not count as a rise cannot decide (an H100's level 1: +10 over 250 cycles).
    if !rises(rise.before, rise.before + miss / 2.0) {
        return Ok((span, 1));
    }
    let mut at = span;
    while at > lowest {
        let stride = STRIDES[at - 1];
        let nodes = rise.n * (STRIDES[span] / stride);
        if !fits(nodes, stride) {
            break;
        }
        let in_order = probe(nodes, stride, 1)?;
        if p5(&in_order) - rise.before < 0.75 * miss {
            break;
        }
        let paired = probe(nodes, stride, STRIDES[at] / stride)?;
        if mean_shift(&in_order, &paired) >= miss / 4.0 {
            break;
        }
        at -= 1;
    }
    Ok((at, STRIDES[span] / STRIDES[at]))
}
