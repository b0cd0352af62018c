//! A second, independent look at the L2's capacities: every size the sweep
//! found is probed again around its knee, by two pinned chases of their own at 90 % and
//! 125 % of the edge, whose sampled loads are sorted into the levels the sweep found.
//!
//! Below the near edge the near hits must keep half the share they have in the smallest
//! array of the sweep; above it they must have lost it. Below the far edge far hits must keep at
//! least half their largest share; above it they must have lost that. Capacity that other
//! work took after the sweep shows as misses below an edge; an edge a disturbance during
//! the sweep put too low shows as hits above it. A probe that disagrees runs once more (a
//! co-tenant may have come and gone); what still disagrees is a finding, which the caller
//! marks as a disturbance of the L2.

use std::time::Duration;

use super::{sweep, L2Findings, L2Level, LevelKind};
use crate::backend::Backend;

/// Where the probes go, relative to an edge. Above it by more than the sweep's step
/// (2^(1/4) ≈ 1.19): the H100's near edge is soft, and at 1.1 × it a quiet GPU still gave
/// 94–97 % near hits, over the full share, so a probe there raised false alarms (exit 9 on
/// an idle H100, `--only l2`).
const BELOW: f64 = 0.9;
const ABOVE: f64 = 1.25;

/// The share of `samples` closest (on a log scale) to the level `kind` among `levels`.
pub(crate) fn share_of(levels: &[L2Level], kind: LevelKind, samples: &[f64]) -> f64 {
    let centres: Vec<(LevelKind, f64)> = levels
        .iter()
        .map(|l| (l.kind, l.distribution.p50.max(1.0).ln()))
        .collect();
    let nearest = |v: f64| {
        let v = v.max(1.0).ln();
        centres
            .iter()
            .min_by(|a, b| (a.1 - v).abs().total_cmp(&(b.1 - v).abs()))
            .map(|c| c.0)
    };
    let at = samples
        .iter()
        .filter(|&&v| nearest(v) == Some(kind))
        .count();
    at as f64 / samples.len().max(1) as f64
}

/// One edge to confirm: its name, bytes, level and the share that means "still there".
struct Edge {
    name: &'static str,
    bytes: u64,
    kind: LevelKind,
    full: f64,
}

/// Probes the L2's near and far edges again; one sentence per edge the probes do not
/// confirm (after one repeat). `overhead` is the clock overhead to subtract.
pub fn confirm_l2<B: Backend + ?Sized>(
    backend: &mut B,
    l2: &L2Findings,
    overhead: f64,
) -> Vec<String> {
    let mut edges = Vec::new();
    if let (Some(edge), Some(first)) = (l2.near_edge, l2.points.first()) {
        // As the sweep decided: half the near hits' share at the smallest size; at the edge
        // the report states, never beyond the array an equal share of the L2 holds (the
        // share itself with copies, the whole L2 without). On an H200 (GPU-7ef01d99) the
        // sweep kept half its near hits up to 33.8 MiB in three of six
        // runs, and a probe at 90 % of that, 30.4 MiB, found none: the L2's replacement
        // keeps lines the sweep had used again and again, a fresh array beyond the 30 MiB
        // share keeps nothing.
        let partitions = l2.partition_count();
        let total = backend.device().l2_bytes;
        let share = if l2.keeps_copies == Some(false) {
            total
        } else {
            total / partitions
        };
        let bytes = if share > 0 { edge.min(share) } else { edge };
        edges.push(Edge {
            name: "near",
            bytes,
            kind: LevelKind::NearHit,
            full: 0.5 * share_of(&l2.levels, LevelKind::NearHit, &first.samples),
        });
    }
    if let (Some(bytes), Some(far)) = (l2.far_edge, l2.level(LevelKind::FarHit)) {
        edges.push(Edge {
            name: "far",
            bytes,
            kind: LevelKind::FarHit,
            full: 0.5 * far.peak_share(),
        });
    }
    let mut found = Vec::new();
    for edge in edges {
        let mut verdict = check(backend, l2, &edge, overhead);
        if verdict.is_some() {
            verdict = check(backend, l2, &edge, overhead);
        }
        found.extend(verdict);
    }
    found
}

/// `None` when the edge holds: the level keeps its share below and loses it above.
fn check<B: Backend + ?Sized>(
    backend: &mut B,
    l2: &L2Findings,
    edge: &Edge,
    overhead: f64,
) -> Option<String> {
    let at = |f: f64| ((edge.bytes as f64 * f) as u64 / 128 * 128).max(128);
    let (below, above) = (at(BELOW), at(ABOVE));
    let mut gpu = Duration::ZERO;
    let mut share = |bytes: u64| -> Result<f64, String> {
        match sweep::measure_point(backend, bytes, sweep::SWEEP_SAMPLES, overhead, &mut gpu) {
            Ok(Some(point)) => Ok(share_of(&l2.levels, edge.kind, &point.samples)),
            Ok(None) => Err("the pinned chase missed its SM".into()),
            Err(e) => Err(e.to_string()),
        }
    };
    let name = edge.name;
    let (low, high) = match (share(below), share(above)) {
        (Ok(low), Ok(high)) => (low, high),
        (Err(e), _) | (_, Err(e)) => {
            return Some(format!("L2 {name} edge: the confirming probe failed: {e}"))
        }
    };
    let bytes = edge.bytes;
    let full = edge.full;
    log::debug!(
        "L2 {name} edge {bytes} B confirmation: {name} hits {:.1} % at {below} B, {:.1} % at {above} B (full share {:.1} %)",
        100.0 * low,
        100.0 * high,
        100.0 * full
    );
    if low < full {
        Some(format!(
            "L2 {name} edge {bytes} B not confirmed: at {below} B only {:.0} % of the loads are {name} hits (at least {:.0} % expected)",
            100.0 * low,
            100.0 * full
        ))
    } else if high >= full {
        Some(format!(
            "L2 {name} edge {bytes} B not confirmed: at {above} B still {:.0} % of the loads are {name} hits",
            100.0 * high
        ))
    } else {
        None
    }
}
