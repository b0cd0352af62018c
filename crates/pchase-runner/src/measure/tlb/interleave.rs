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
//! The walks can still tell the two apart, at half the stride with twice the nodes: where
//! an entry maps the whole span, consecutive nodes share an entry and at most every other
//! load misses (the 5th percentile stays on the level before); where entries map half and
//! alternate between the halves, both halves overflow and every load misses.

use super::rise::Rise;
use super::{p5, rises, STRIDES};
use crate::error::RunnerError;

/// From the span `STRIDES[span]` down to `STRIDES[lowest]`: while the walk of
/// `rise.n × (span / stride)` nodes at the next smaller stride rises over the level before
/// (`rise.before`), the entries are that small. Returns the index of the entries' span and
/// the interleave (span found / entries' span: 1 where the walks' span stands); a walk
/// that does not fit the limits ends the test.
pub(super) fn interleave_test(
    lowest: usize,
    span: usize,
    rise: &Rise,
    fits: &impl Fn(u64, u64) -> bool,
    probe: &mut impl FnMut(u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<(usize, u64), RunnerError> {
    let mut at = span;
    while at > lowest {
        let stride = STRIDES[at - 1];
        let nodes = rise.n * (STRIDES[span] / stride);
        if !fits(nodes, stride) || !rises(rise.before, p5(&probe(nodes, stride)?)) {
            break;
        }
        at -= 1;
    }
    Ok((at, STRIDES[span] / STRIDES[at]))
}
