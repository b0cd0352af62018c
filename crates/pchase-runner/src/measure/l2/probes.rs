//! The L2's sector and the hit/miss threshold of the cold chase (the allocation line is in
//! `line.rs`, the fetch granularity in `fetch.rs`): probes that need an L2 cold or partly
//! written, each decided load by load (`docs/measurement.md`, "The L2 partitions").

use std::time::Duration;

use crate::{
    backend::{Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, ChaseRun, LoadPath},
    error::RunnerError,
};

use super::super::stats::{median, quantile};

/// Nodes of an evicting chain are 33 lines of 128 B apart (an odd number of lines, so that
/// they fall into sets and partitions all over the L2 whatever its hash): the line probe's
/// chain B and the sector probe's chain.
pub(super) const EVICTING_SPACING: u32 = 33 * 128;

/// How the L2's sector was found.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Sector {
    /// The sector, bytes.
    pub bytes: u64,
    /// Each written width (bytes) and the median latency of the reads after it, cycles.
    pub medians: Vec<(u32, f64)>,
    /// For each width, the share of nodes whose read hit.
    pub hit_share: Vec<f64>,
}

/// The first block's latencies of a launch.
pub(super) fn first_block(run: ChaseRun) -> Result<Vec<u32>, RunnerError> {
    run.blocks
        .into_iter()
        .next()
        .map(|b| b.latencies)
        .ok_or_else(|| RunnerError::WrongResult("an L2 launch returned no block".into()))
}

/// The hit/miss threshold from a cold 4-byte-stride chase whose misses are its loads
/// `0, per, 2·per, …`, and the far partition's level if one was measured (raw cycles):
/// 1.25 × the slowest hits + 4 cycles, or halfway to the fastest misses where that is
/// lower; `None` when hits and misses overlap. The slowest hits are the cold chase's 99th
/// percentile of hits or the far level, whichever is slower, unless the far level is
/// within 15 % of the fastest misses (then it was memory); the fastest misses are their
/// 1st percentile. Close to the hits rather than halfway: a miss that finds its DRAM row
/// open comes back much faster than the cold chase's misses (on the H200 from 400 cycles,
/// against 700 and more), while hits stay below 1.25 × the slowest hit level.
pub(super) fn hit_miss_threshold(cold: &[u32], per: usize, far: Option<f64>) -> Option<f64> {
    if per < 2 {
        return None;
    }
    let (mut hits, mut misses): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for (k, &v) in cold.iter().enumerate() {
        if k % per == 0 {
            misses.push(f64::from(v));
        } else {
            hits.push(f64::from(v));
        }
    }
    if hits.is_empty() || misses.is_empty() {
        return None;
    }
    hits.sort_by(f64::total_cmp);
    misses.sort_by(f64::total_cmp);
    let fast_miss = quantile(&misses, 0.01);
    let slow_hit = far
        .filter(|&f| f < 0.85 * fast_miss)
        .map_or(quantile(&hits, 0.99), |f| f.max(quantile(&hits, 0.99)));
    (fast_miss > slow_hit).then_some((1.25 * slow_hit + 4.0).min((slow_hit + fast_miss) / 2.0))
}

/// Nodes of the sector probe: 64 nodes 33 lines of 128 B apart (one line each, in 64 sets
/// even of a small L2 indexed by address bits; 264 KiB, inside one 2 MiB page).
const SECTOR_PROBE_NODES: u32 = 64;

/// The L2's sector: the smallest part of a line it keeps valid on its own.
///
/// A read cannot show it where a miss fetches more than a sector (the H200 fetches 64
/// bytes). A write can: after an L2 flush, the first `w` bytes of each of 64 nodes 33
/// lines apart are written, and a cold `.cg` chase reads each node's first word. Where the
/// L2 keeps per-sector valid bits and fetches a partly written sector only when it is
/// read, the read hits once `w` covers the whole sector holding it. `w` runs over 4, 8,
/// …, up to the line (or 256 B). Each node is judged against itself: its read after the
/// widest write (a hit) and after the 4-byte write (a miss, unless the sector is 4 B) must
/// be clearly apart, and after a width `w` it hits when its latency is nearer the first.
/// The sector is the first width after which at least 90 % of the nodes hit, and every
/// wider one must do so too. If the two references are not apart, a 4-byte write already
/// made reads hit (or none did), and the result says so.
pub(super) fn l2_sector<B: Backend + ?Sized>(
    backend: &mut B,
    largest: u32,
    gpu_time: &mut Duration,
) -> Result<Result<L2Sector, String>, RunnerError> {
    let chain = ChainSpec::new(
        u64::from(SECTOR_PROBE_NODES) * u64::from(EVICTING_SPACING),
        EVICTING_SPACING,
    )?;
    let mut widths = Vec::new();
    let mut width = 4u32;
    while width <= largest {
        widths.push(width);
        width *= 2;
    }
    let mut reads: Vec<Vec<f64>> = Vec::with_capacity(widths.len());
    for &width in &widths {
        let run = backend.chase(&ChaseRequest {
            path: LoadPath::GlobalCg,
            mode: ChaseMode::Fine,
            chains: vec![chain],
            warmup_steps: 0,
            steps: SECTOR_PROBE_NODES,
            carveout: Carveout::Percent(0),
            flush_l2: true,
            reserve_shared_bytes: 0,
            written_bytes: width,
        })?;
        *gpu_time += run.gpu_time;
        let latencies: Vec<f64> = first_block(run)?.into_iter().map(f64::from).collect();
        if latencies.len() != SECTOR_PROBE_NODES as usize {
            return Err(RunnerError::WrongResult(format!(
                "the L2 sector probe returned {} samples for {SECTOR_PROBE_NODES} nodes",
                latencies.len()
            )));
        }
        reads.push(latencies);
    }
    let medians: Vec<(u32, f64)> = widths
        .iter()
        .zip(&reads)
        .map(|(&w, r)| (w, median(r)))
        .collect();
    let (Some(miss), Some(hit)) = (reads.first(), reads.last()) else {
        return Ok(Err("no write width to try".into()));
    };
    let apart = hit.iter().zip(miss).filter(|&(h, m)| *h < 0.8 * m).count();
    if widths.len() < 2 || apart < SECTOR_PROBE_NODES as usize * 9 / 10 {
        return Ok(Err(format!(
            "reads after a 4-byte and after a {largest}-byte write are not apart (medians {medians:.0?} cycles): the sector is 4 B or the L2 does not keep written bytes apart"
        )));
    }
    let hit_share: Vec<f64> = reads
        .iter()
        .map(|r| {
            r.iter()
                .zip(hit.iter().zip(miss))
                .filter(|&(v, (h, m))| (v - h).abs() < (v - m).abs())
                .count() as f64
                / r.len() as f64
        })
        .collect();
    let hits: Vec<bool> = hit_share.iter().map(|&share| share >= 0.9).collect();
    let Some(first) = hits.iter().position(|&h| h) else {
        return Ok(Err(format!(
            "no write width made reads hit (medians {medians:.0?} cycles)"
        )));
    };
    if !hits[first..].iter().all(|&h| h) {
        return Ok(Err(format!(
            "reads hit after some widths and missed after wider ones (medians {medians:.0?} cycles, hit shares {hit_share:.2?})"
        )));
    }
    Ok(Ok(L2Sector {
        bytes: u64::from(widths[first]),
        medians,
        hit_share,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_lies_between_the_slowest_hit_and_the_fastest_miss() {
        // One miss (600) per 16 loads; hits at a near (260) and a far (300) level.
        let cold: Vec<u32> = (0..256)
            .map(|k| match k % 16 {
                0 => 600 + (k % 7),
                k if k % 2 == 0 => 260,
                _ => 300,
            })
            .collect();
        assert_eq!(hit_miss_threshold(&cold, 16, None), Some(379.0));
        // Memory only a little slower than the far level: halfway between them.
        let close: Vec<u32> = cold
            .iter()
            .map(|&v| if v >= 600 { 340 } else { v })
            .collect();
        assert_eq!(hit_miss_threshold(&close, 16, None), Some(320.0));
        // A far level the cold chase did not see (near copies) counts as a hit level; one
        // as slow as memory does not.
        assert_eq!(hit_miss_threshold(&cold, 16, Some(400.0)), Some(500.0));
        assert_eq!(hit_miss_threshold(&cold, 16, Some(590.0)), Some(379.0));
        // Spaced wrongly, the "misses" include hits: no threshold.
        assert_eq!(hit_miss_threshold(&cold, 8, None), None);
    }
}
