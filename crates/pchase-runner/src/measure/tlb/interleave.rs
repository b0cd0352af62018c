//! The interleave test of a level (step 2b of [`super`]): whether entries smaller than the
//! span the strides found alternate between groups of the level by address, so that walks
//! at the found stride fill only one group.
//!
//! A level whose set index takes the address bit just above its entry's span (two sets,
//! or two halves, by that bit) looks to stride walks exactly like a level of half the
//! entries, each mapping twice the span: at twice the span every node lands in one half and
//! the walk overflows at half the entries; at the span itself it overflows at the whole
//! level, as a walk over entries twice as large would. The H100's third L2-path level is
//! such a level (session 9, `scripts/gpu/tlb_fill.cu`): a flush over the lower 32 MiB of
//! 8192 ranges of 64 MiB leaves every upper 32 MiB translation in place.
//!
//! The walks can still tell the two apart, at half the stride with twice the nodes, in two
//! orders of the same lines. In address order, where an entry maps the whole span,
//! consecutive nodes share it and at most every other load misses; where entries map half
//! and alternate between the halves, both halves overflow and every load misses. Grouped
//! by pairs (every pair's first node, then every second), every load misses either way. So
//! the test asks that the address-order walk overflow like the level (its 5th percentile
//! at least half way up to the level's plateau) and that its lower half of loads be as slow
//! as the grouped walk's (within half the level's miss). Both compare walks of the same
//! lines or the level's own rise, never walks of other lines, whose latencies may differ by
//! more than a first level's miss through the L2 slices they meet: the first build of this
//! test, which compared with the level before's walk, took an H100's level 1 (+10 cycles)
//! for 64 entries of 4 MiB in one run of two, and a second, which compared with the walk of
//! one node fewer per group, missed the third level, whose groups fill gradually.

use super::rise::Rise;
use super::{p5, STRIDES};
use crate::error::RunnerError;

/// The mean of the 10th, 20th, 30th and 40th percentiles (nearest rank): the lower half
/// of the loads, where every other load hitting shows.
fn lower_half(samples: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return f64::INFINITY;
    }
    sorted.sort_by(f64::total_cmp);
    let at = |q: usize| sorted[(sorted.len() * q).div_ceil(100).saturating_sub(1)];
    [10, 20, 30, 40].iter().map(|&q| at(q)).sum::<f64>() / 4.0
}

/// From the span `STRIDES[span]` down to `STRIDES[lowest]`: while the walk of
/// `rise.n × (span / stride)` nodes at the next smaller stride, in address order, overflows
/// like the level and its lower half of loads is as slow as in the same lines grouped by
/// pairs, the entries are that small. Returns the index of the entries' span and the
/// interleave (span found / entries' span: 1 where the walks' span stands); a walk that
/// does not fit the limits ends the test. `probe(nodes, stride, group)`.
pub(super) fn interleave_test(
    lowest: usize,
    span: usize,
    rise: &Rise,
    fits: &impl Fn(u64, u64) -> bool,
    probe: &mut impl FnMut(u64, u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<(usize, u64), RunnerError> {
    let half_miss = (rise.after - rise.before) / 2.0;
    let mut at = span;
    while at > lowest {
        let stride = STRIDES[at - 1];
        let nodes = rise.n * (STRIDES[span] / stride);
        if !fits(nodes, stride) {
            break;
        }
        let in_order = probe(nodes, stride, 1)?;
        if p5(&in_order) - rise.before < half_miss {
            break;
        }
        let paired = probe(nodes, stride, STRIDES[at] / stride)?;
        if lower_half(&paired) - lower_half(&in_order) >= half_miss {
            break;
        }
        at -= 1;
    }
    Ok((at, STRIDES[span] / STRIDES[at]))
}
