//! Finding a rise (steps 1 and 4 of [`super`]): the base walks, doubling and bisection
//! to the first walk past the rise, the largest walk the limits allow, and the miss
//! cost's distribution.

use topology::LatencySummary;

use super::{p5, rises, sorted_finite, step_bytes};
use crate::error::RunnerError;

/// The first rising node count of a walk and the latencies around it.
#[derive(Debug, Clone)]
pub(super) struct Rise {
    pub(super) n: u64,
    pub(super) before: f64,
    pub(super) after: f64,
    pub(super) samples: Vec<f64>,
    pub(super) before_samples: Vec<f64>,
}

/// Where a search for the next rise starts: the largest walk known not to rise (`n`
/// nodes, its samples) and the level it is on (`base`, a 5th percentile).
#[derive(Debug, Clone)]
pub(super) struct Start {
    pub(super) n: u64,
    pub(super) base: f64,
    pub(super) samples: Vec<f64>,
}

/// The base of a stride: walks of 1, 2, 4 and 8 nodes (those that fit); the base is the
/// lowest 5th percentile, the start the largest of them that does not rise over it.
pub(super) fn base_walks(
    stride: u64,
    fits: &impl Fn(u64, u64) -> bool,
    probe: &mut impl FnMut(u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<Start, RunnerError> {
    let mut walks = Vec::new();
    for n in [1, 2, 4, 8] {
        if n == 1 || fits(n, stride) {
            let samples = probe(n, stride)?;
            walks.push((n, p5(&samples), samples));
        }
    }
    let base = walks.iter().map(|w| w.1).fold(f64::INFINITY, f64::min);
    let (n, _, samples) = walks
        .into_iter()
        .rev()
        .find(|w| !rises(base, w.1))
        .unwrap_or((1, base, Vec::new()));
    Ok(Start { n, base, samples })
}

/// The miss cost's distribution: the shift of every quantile from the level before (the
/// start walk's loads) to the level's plateau (sorted loads paired by rank), each at least
/// 0; without the start walk's loads, the plateau's loads less the level before.
pub(super) fn miss(rise: &Rise) -> Option<LatencySummary> {
    let (after, before) = (
        sorted_finite(&rise.samples),
        sorted_finite(&rise.before_samples),
    );
    let costs: Vec<f64> = if before.is_empty() || after.len() < 2 {
        after.iter().map(|v| (v - rise.before).max(0.0)).collect()
    } else {
        let last = (after.len() - 1) as f64;
        after
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let rank = (i as f64 / last * (before.len() - 1) as f64).round() as usize;
                // A rank whose load got faster is noise, not a negative cost.
                (v - before[rank.min(before.len() - 1)]).max(0.0)
            })
            .collect()
    };
    LatencySummary::from_samples(&costs)
}

/// The bytes `nodes` map: one page each where the page is known, else the walk's bytes.
pub(super) fn reach(nodes: u64, page: Option<u64>, stride: u64) -> u64 {
    match page {
        Some(p) => nodes * p,
        None => nodes * step_bytes(stride),
    }
}

/// The most nodes `fits` allows at `stride` (limits are monotone in the node count).
pub(super) fn largest_fitting(stride: u64, fits: &impl Fn(u64, u64) -> bool) -> u64 {
    let (mut lo, mut hi) = (1u64, 1u64 << 40);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid, stride) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// The smallest `n > start.n` whose latency rises over `start.base` (the level at
/// `start.n`): doubling until a walk rises, then bisection for the first walk at least
/// half the way up to that walk's level. `None` when no `n` the limits allow rises.
pub(super) fn first_rise(
    start: Start,
    stride: u64,
    fits: &impl Fn(u64, u64) -> bool,
    probe: &mut impl FnMut(u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<Option<Rise>, RunnerError> {
    let Start {
        n: from,
        base,
        samples: start_samples,
    } = start;
    let top = largest_fitting(stride, fits);
    let (mut lo, mut lo_value) = (from, base);
    let mut n = from;
    let (mut hi, plateau) = loop {
        if n >= top {
            return Ok(None);
        }
        n = (n * 2).min(top);
        let samples = probe(n, stride)?;
        let value = p5(&samples);
        if rises(base, value) {
            break (n, samples);
        }
        (lo, lo_value) = (n, value.min(lo_value));
    };
    // Past the rise: above the base by a rise and by half the way to the level of the first
    // doubling that rose (`target`, the plateau). A level that fills gradually (the H100's
    // second: p5 269 at 2048 nodes, 273-275 at 2176-2240, 357 from 2304) is counted where
    // it is complete, not where its first loads begin to miss. The level's plateau is that
    // walk's, not the bisected boundary's (which may still be mid-transition), and the next
    // level's search starts from it.
    let target = p5(&plateau);
    let past = |value: f64| rises(base, value) && value - base >= (target - base) / 2.0;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let value = p5(&probe(mid, stride)?);
        if past(value) {
            hi = mid;
        } else {
            (lo, lo_value) = (mid, value.min(lo_value));
        }
    }
    Ok(Some(Rise {
        n: hi,
        before: lo_value.min(base),
        after: target,
        samples: plateau,
        before_samples: start_samples,
    }))
}
