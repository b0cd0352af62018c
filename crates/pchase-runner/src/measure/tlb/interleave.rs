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
//! alternate between the halves, both halves overflow and every load misses. The walk is
//! compared with the one of two nodes fewer (each half full, not overflowing) over nearly
//! the same lines, not with the level before's walk over other lines, whose 5th percentile
//! may differ by more than a first level's miss through the L2 slices its lines meet (the
//! first build of this test took an H100's level 1 for 64 entries of 4 MiB in one run of two).

use super::rise::Rise;
use super::{p5, rises, STRIDES};
use crate::error::RunnerError;

/// From the span `STRIDES[span]` down to `STRIDES[lowest]`: while the walk of
/// `rise.n × (span / stride)` nodes at the next smaller stride rises over the walk of
/// `(rise.n − 1) × (span / stride)` nodes (every group full, none overflowing), the
/// entries are that small. Returns the index of the entries' span and
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
        let factor = STRIDES[span] / stride;
        let nodes = rise.n * factor;
        if !fits(nodes, stride) {
            break;
        }
        // Against the walk of (n - 1) × factor nodes at the same stride (every group full
        // but not overflowing), nearly the same lines: a walk of other lines may sit a few
        // cycles higher by its L2 slices alone (an H100's level 1 costs only +10).
        let full = p5(&probe((rise.n - 1) * factor, stride)?);
        if !rises(full, p5(&probe(nodes, stride)?)) {
            break;
        }
        at -= 1;
    }
    Ok((at, STRIDES[span] / STRIDES[at]))
}
