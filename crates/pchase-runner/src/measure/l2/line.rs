//! The L2's allocation line: the bytes one tag covers, read from which lines of a warmed
//! chain A a sparse chain B evicts, load by load (`docs/measurement.md`, "The L2
//! partitions", step 7).

use std::time::Duration;

use crate::{
    backend::{Backend, Carveout, ChainSpec, LoadPath, Phase, TwoPhaseRequest},
    error::RunnerError,
};

use super::super::stats::slow_runs;
use super::probes::{first_block, EVICTING_SPACING};

/// How the L2's allocation line was found.
#[derive(Debug, Clone, PartialEq)]
pub struct L2Line {
    /// The line, bytes.
    pub bytes: u64,
    /// Share of miss runs that start and end on a multiple of the line (at least 0.9).
    pub agreement: f64,
    /// Miss runs seen.
    pub runs: usize,
    /// Share of the re-timed loads that missed.
    pub miss_share: f64,
    /// Chain A (warmed, then re-timed), bytes.
    pub array_bytes: u64,
    /// Nodes of the evicting chain B.
    pub evicting_nodes: u32,
    /// The latency between hits and misses used to tell them apart, cycles (raw, with the
    /// clock overhead).
    pub threshold: f64,
    /// The fetch unit the nodes were spaced by, bytes.
    pub granularity: u64,
    /// The timed loads' latencies, raw cycles; load `k` read byte `k × granularity` of the
    /// array.
    pub latencies: Vec<u32>,
}

/// Re-timed loads of the line probe: 8192 one-fetch-unit nodes (512 KiB at 64 B, inside
/// one 2 MiB page, so the TLB does not add slow loads), 64 KiB of timing buffer.
const LINE_PROBE_STEPS: u32 = 8192;

/// The largest power of two `units` (up to 256) such that at least 90 % of `runs` start and
/// end on a multiple of it, and that share.
pub(super) fn aligned_unit(runs: &[(usize, usize)]) -> (usize, f64) {
    let agreement = |unit: usize| {
        runs.iter()
            .filter(|(start, len)| start % unit == 0 && len % unit == 0)
            .count() as f64
            / runs.len() as f64
    };
    let mut best = (1, agreement(1));
    for shift in 1..=8 {
        let share = agreement(1 << shift);
        if share >= 0.9 {
            best = (1 << shift, share);
        }
    }
    best
}

/// The allocation line in fetch units from the runs of misses: the smallest power of two
/// `u` (from 2 up to [`aligned_unit`]'s) that enough runs show *alone*, else
/// [`aligned_unit`]'s, with the share of runs aligned to it.
///
/// Evicting a line takes all its fetch units, so a run of exactly `u` units starting on a
/// multiple of `u` cannot come from a line larger than `u`; two neighbouring lines evicted
/// together make a run of `2u` that is still aligned to `2u`, and where most evictions come
/// in such pairs (the H100 and H200 at some densities: runs of 256 B beside isolated runs
/// of 128 B) the largest aligned unit is twice the line. Stray slow loads also make short
/// runs, but mostly of one unit: `u` is taken when at least 8 runs are exactly `u` long and
/// aligned and they outnumber the runs shorter than `u` four to one. (A share of all runs
/// is not asked for: on an H100, GPU-74b75669, 10 of 339 runs were one 128-byte line
/// alone and none was shorter, while pairs made 228: a rule that wanted 5 % read 256 B.)
pub(super) fn line_unit(runs: &[(usize, usize)]) -> (usize, f64) {
    let (largest, _) = aligned_unit(runs);
    let share = |unit: usize| {
        runs.iter()
            .filter(|(start, len)| start % unit == 0 && len % unit == 0)
            .count() as f64
            / runs.len().max(1) as f64
    };
    let mut unit = 2;
    while unit < largest {
        let alone = runs
            .iter()
            .filter(|&&(start, len)| len == unit && start % unit == 0)
            .count();
        let shorter = runs.iter().filter(|&&(_, len)| len < unit).count();
        if alone >= 8 && alone >= 4 * shorter {
            return (unit, share(unit));
        }
        unit *= 2;
    }
    (largest, share(largest))
}

/// The L2's allocation line: the bytes one tag covers, read from which lines an eviction
/// takes away.
///
/// One block loads chain A, one node per fetch unit, over [`A_SHARE`] % of the capacity
/// one SM's accesses get, in address order (the L2 flushed first, so that A's first lines
/// are its oldest), then loads a sparse chain B whose nodes are 33 lines apart, and one
/// thread then re-times A's first nodes. A block, not one thread, loads A and B: one
/// thread's chase took about 100 ms of GPU time per launch on an H200 where A held
/// 18–22 MiB; the block's passes take a few milliseconds (`TwoPhaseRequest::block_fill`).
/// Each node of B lands in some set; where that set is full it evicts the set's least
/// recently used line of A, and lines of one set are far apart in A: the evicted lines are
/// isolated, and each shows as a run of misses, one per fetch unit it held. The line is the
/// largest power-of-two multiple of the fetch unit on which at least 90 % of the runs start
/// and end (two evicted lines side by side make a run of twice the line, still aligned to
/// it). A cyclic chase over an array that only partly fits is no substitute: on the H200
/// it evicts whole 256-byte partition chunks at once, or misses everything.
///
/// A load counts as a miss above `threshold` cycles. B starts with one node per 4 lines
/// of A (at least 8) and grows (fourfold, or at most 2.5-fold where a launch showed some
/// runs), up to one per line, until the re-timed pass shows at least 128 runs (so that a
/// few stray slow loads cannot outvote them) or more than half
/// of A missed; where the first launch already missed more than half, B shrinks fourfold
/// until a launch evicts too few. Where one fourfold step went from too few runs to more
/// than half missed (a cache whose sets fill evenly overflows in all of them at once), up
/// to six bisections of B's node count search between the two. The launch with the most
/// runs (at least 16) decides. B starts that dense because sparser starts waste launches:
/// on the H100 starts of one node per 1024, 256 and 64 lines evicted next to nothing, each
/// a launch of about 100 ms (a single-thread pass over A). With A at 60 % of the onset, one
/// node per 8 lines of A gave 14–74 runs on the H100 and 0–16 on the H200 where the onset
/// was 25 MiB, four times as many 480–990 runs.
///
/// A must fit by itself: runs of misses of a kilobyte or more are not B's (its nodes, 33
/// lines apart, evict isolated lines) but A's own overflow, which takes its oldest lines,
/// the re-timed ones; they are left out of the runs, and where the first launch has more
/// than [`A_OVERFLOW_SHARE`] of the re-timed loads in them, the search starts again with A
/// four fifths as large, at most [`A_SHRINKS`] times (on the H200 an A of 21 MiB had 3 to
/// 5 % of its loads in long runs in five of six runs and 19 % in one). On the H200 A at
/// 85 % of a near edge of 28.4 or 30 MiB lost 56 and 63 % of its first lines with 193 and
/// 203 B nodes, in runs of 1 KiB to 256 KiB; on H100s A at 85 % of 24.3 MiB lost 13 to
/// 35 %.
pub(super) fn l2_line<B: Backend + ?Sized>(
    backend: &mut B,
    capacity: u64,
    granularity: u64,
    threshold: f64,
    gpu_time: &mut Duration,
) -> Result<Result<L2Line, String>, RunnerError> {
    let unit = match u32::try_from(granularity) {
        Ok(g) if g >= 4 && g % 4 == 0 => g,
        _ => return Ok(Err(format!("fetch granularity {granularity} B"))),
    };
    let mut bytes = (capacity / 100 * A_SHARE) / u64::from(unit) * u64::from(unit);
    let mut overflowed = Vec::new();
    for shrink in 0..=A_SHRINKS {
        if bytes < 64 * u64::from(unit) {
            return Ok(Err(format!("an L2 of {capacity} B is too small to probe")));
        }
        let search = line_search(backend, bytes, unit, threshold, gpu_time)?;
        if search.first_long_share > A_OVERFLOW_SHARE && shrink < A_SHRINKS {
            log::debug!(
                "L2 line probe: A of {bytes} B overflowed by itself ({:.0} % of the re-timed loads in runs of 1 KiB or more in the first launch); shrinking it",
                100.0 * search.first_long_share
            );
            overflowed.push(format!(
                "{bytes} B ({:.0} % in long runs)",
                100.0 * search.first_long_share
            ));
            bytes = (bytes / 5 * 4) / u64::from(unit) * u64::from(unit);
            continue;
        }
        return Ok(search.best.ok_or_else(|| {
            let before = if overflowed.is_empty() {
                String::new()
            } else {
                format!("; larger arrays overflowed: {}", overflowed.join(", "))
            };
            format!(
                "too few evicted lines in the re-timed loads over {bytes} B ({}){before}",
                search.seen.join(", ")
            )
        }));
    }
    Ok(Err(format!(
        "chain A overflowed the L2 by itself at every size tried: {}",
        overflowed.join(", ")
    )))
}

/// Share of A's re-timed loads in runs of misses of [`LONG_RUN_BYTES`] or more in the first
/// launch above which A overflowed by itself.
const A_OVERFLOW_SHARE: f64 = 0.1;

/// A run of misses this long is not B's doing (eight 128-byte lines side by side, or four
/// of 256 B, where B's nodes are 33 lines apart).
const LONG_RUN_BYTES: u64 = 1024;

/// Chain A's bytes, per cent of the capacity passed (the onset of the near overflow). With
/// the L2 flushed by writing, A at 85 % overflowed by itself in every default run on the
/// H100 (the onset 25 MiB, A 21.25 MiB, 26–48 % of the re-timed loads in long runs) and at
/// 70 % in most runs on the H200 whose onset was 30 MiB (A 21 MiB, 14–25 %); the flush
/// reads (`CudaBackend::flush_l2`), and after it A keeps its lines to about 22 MiB (H100)
/// and 26 MiB (H200).
const A_SHARE: u64 = 70;

/// How often the line probe shrinks an A that overflowed by itself.
const A_SHRINKS: u32 = 3;

/// The share of `latencies` above `threshold` in runs of at least `units` loads, a run
/// that reaches the end included.
fn long_run_share(latencies: &[u32], threshold: f64, units: usize) -> f64 {
    let mut long = 0;
    let mut run = 0;
    for &v in latencies.iter().chain(std::iter::once(&0)) {
        if f64::from(v) > threshold {
            run += 1;
        } else {
            if run >= units {
                long += run;
            }
            run = 0;
        }
    }
    long as f64 / latencies.len().max(1) as f64
}

/// One search of [`l2_line`] with chain A of `bytes`.
struct LineSearch {
    /// The launch with the most runs (at least 16).
    best: Option<L2Line>,
    /// The share of re-timed loads in runs of [`LONG_RUN_BYTES`] or more in the first
    /// launch.
    first_long_share: f64,
    /// One line per launch, for the error.
    seen: Vec<String>,
}

fn line_search<B: Backend + ?Sized>(
    backend: &mut B,
    bytes: u64,
    unit: u32,
    threshold: f64,
    gpu_time: &mut Duration,
) -> Result<LineSearch, RunnerError> {
    let granularity = u64::from(unit);
    let a = ChainSpec::new(bytes, unit)?;
    let a_nodes = u32::try_from(a.nodes()).unwrap_or(u32::MAX);
    let room = backend.device().shared_per_block_optin_bytes / 8;
    let steps = u64::from(LINE_PROBE_STEPS).min(a.nodes()).min(room) as u32;
    let lines = (bytes / 128).max(1);
    let block_threads = backend.device().max_threads_per_block.clamp(32, 1024);
    let mut seen = Vec::new();
    let mut best: Option<L2Line> = None;
    let mut first_long_share = None;
    let mut best_all: Option<L2Line> = None;
    // Runs of a kilobyte or more are A's own overflow (its oldest lines), not B's isolated
    // evictions: counted in the miss share, left out of the runs.
    let long_units = usize::try_from(LONG_RUN_BYTES.div_ceil(granularity)).unwrap_or(1);
    // One launch with `evicting` nodes in B: the runs of misses it shows, and its share of
    // misses.
    let mut probe = |evicting: u32,
                     best: &mut Option<L2Line>|
     -> Result<(usize, f64), RunnerError> {
        let b = ChainSpec::new(
            u64::from(evicting) * u64::from(EVICTING_SPACING),
            EVICTING_SPACING,
        )?;
        let run = backend.two_phase(&TwoPhaseRequest {
            fill: Phase {
                path: LoadPath::GlobalCg,
                chain: a,
                thread: 0,
                steps: a_nodes,
            },
            evict: Phase {
                path: LoadPath::GlobalCg,
                chain: b,
                thread: 0,
                steps: evicting,
            },
            timed_steps: steps,
            blocks: 1,
            threads: block_threads,
            carveout: Carveout::Percent(0),
            flush_l2: true,
            block_fill: true,
        })?;
        *gpu_time += run.gpu_time;
        let latencies = first_block(run)?;
        let slow = latencies
            .iter()
            .filter(|&&v| f64::from(v) > threshold)
            .count();
        let miss_share = slow as f64 / latencies.len().max(1) as f64;
        first_long_share.get_or_insert(long_run_share(&latencies, threshold, long_units));
        let all_runs = slow_runs(&latencies, threshold);
        let runs: Vec<(usize, usize)> = all_runs
            .iter()
            .copied()
            .filter(|&(_, len)| len < long_units)
            .collect();
        log::debug!(
            "L2 line probe, A {bytes} B, B {evicting} nodes: {slow} of {} loads above {threshold:.0} cycles, {} runs",
            latencies.len(),
            runs.len()
        );
        seen.push(format!(
            "{evicting} nodes: {} runs, {:.0} % missed",
            runs.len(),
            100.0 * miss_share
        ));
        let count = runs.len();
        // The line these runs give, with this launch's facts.
        let line = |runs: &[(usize, usize)], latencies: Vec<u32>| {
            let (units, agreement) = line_unit(runs);
            L2Line {
                bytes: units as u64 * granularity,
                agreement,
                runs: runs.len(),
                miss_share,
                array_bytes: bytes,
                evicting_nodes: evicting,
                threshold,
                granularity,
                latencies,
            }
        };
        // Where a cache's sets fill evenly and evict in the order A was loaded, B's
        // evictions themselves come as long runs (the simulator's random-1: every launch
        // that evicted anything showed at most 3 short runs): those launches are kept,
        // with every run, for when no launch shows enough short ones.
        let all = all_runs.len();
        if count < 16 && all >= 16 && best_all.as_ref().is_none_or(|b| all > b.runs) {
            best_all = Some(line(&all_runs, latencies.clone()));
        }
        if count >= 16 && best.as_ref().is_none_or(|b| count > b.runs) {
            *best = Some(line(&runs, latencies));
        }
        Ok((count, miss_share))
    };
    // Enough runs to outvote stray slow loads, or so many misses that more eviction would
    // only merge runs.
    let enough = |(runs, miss_share): (usize, f64)| runs >= 128 || miss_share > 0.5;
    let mut fewer: Option<u32> = None;
    let mut too_many: Option<u32> = None;
    let most = u32::try_from(lines).unwrap_or(u32::MAX).max(8);
    let mut evicting = u32::try_from(lines / 4).unwrap_or(u32::MAX).clamp(8, most);
    for _ in 0..8 {
        let outcome = probe(evicting, &mut best)?;
        if outcome.0 >= 128 {
            break;
        }
        if enough(outcome) {
            too_many = Some(evicting);
            // Too many from the start: fewer nodes, until a launch evicts too few.
            if fewer.is_none() && evicting > 8 {
                evicting = (evicting / 4).max(8);
                continue;
            }
            break;
        }
        fewer = Some(evicting);
        if too_many.is_some() || evicting >= most {
            break;
        }
        // Where a launch showed some runs, at most 2.5 times as many nodes (runs grow
        // faster than B: on the H200, 31 000 nodes gave 26–39 runs, four times as many 86 %
        // of the loads missed), else four times as many.
        let factor = if outcome.0 >= 8 {
            (150.0 / outcome.0 as f64).clamp(1.5, 2.5)
        } else {
            4.0
        };
        evicting = ((f64::from(evicting) * factor) as u32).min(most);
    }
    // Where B went from too few evictions to misses everywhere in one fourfold step (sets
    // filled evenly overflow all at once), bisect the node count between the two.
    if let (Some(mut low), Some(mut high)) = (fewer, too_many) {
        for _ in 0..6 {
            if best.as_ref().is_some_and(|b| b.runs >= 128) || high <= low + 1 {
                break;
            }
            let middle =
                ((f64::from(low) * f64::from(high)).sqrt() as u32).clamp(low + 1, high - 1);
            let outcome = probe(middle, &mut best)?;
            if enough(outcome) && outcome.0 < 128 {
                high = middle;
            } else if outcome.0 < 128 {
                low = middle;
            }
        }
    }
    Ok(LineSearch {
        best: best.or(best_all),
        first_long_share: first_long_share.unwrap_or(0.0),
        seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain A sized from a capacity too large (half again the near partition, as a near
    /// edge read too high would make it) overflows by itself: the probe shrinks it until it
    /// fits and still reads the profile's line; without the shrinking the first launch's
    /// misses merge into long runs and no line agrees.
    #[test]
    fn an_a_that_overflows_by_itself_is_shrunk_until_it_fits() {
        let profile = crate::sim::SimProfile::bundled("h200").expect("bundled");
        let partition = profile.l2.partition_bytes();
        let mut gpu = crate::sim::SimBackend::new(profile.clone()).expect("sim");
        let mut time = Duration::ZERO;
        let (granularity, cold) =
            super::super::fetch::fetch_granularity(&mut gpu, 4096, &mut time).expect("cold");
        let granularity = granularity.expect("a fetch granularity");
        let threshold = super::super::fetch::line_threshold(&cold, Some(granularity));
        let line = l2_line(
            &mut gpu,
            partition * 3 / 2,
            granularity,
            threshold,
            &mut time,
        )
        .expect("launches")
        .expect("a line");
        assert_eq!(line.bytes, u64::from(profile.l2.line_bytes), "{line:?}");
        assert!(line.array_bytes < partition, "{}", line.array_bytes);
    }

    #[test]
    fn long_runs_count_to_the_end() {
        // Two isolated 128-byte lines (2 units), a 1 KiB run (16) and a run to the end (20).
        let mut v = vec![100u32; 64];
        for i in [3, 4, 10, 11] {
            v[i] = 500;
        }
        for x in &mut v[20..36] {
            *x = 500;
        }
        for x in &mut v[44..] {
            *x = 500;
        }
        assert_eq!(long_run_share(&v, 300.0, 16), 36.0 / 64.0);
        assert_eq!(long_run_share(&v[..40], 300.0, 16), 16.0 / 40.0);
        assert_eq!(long_run_share(&v[..12], 300.0, 2), 4.0 / 12.0);
    }

    #[test]
    fn the_line_is_the_largest_unit_runs_align_to() {
        // Absent 128-byte lines at 64-byte nodes: runs of 2 and 4 at even starts.
        let runs = [(0, 2), (4, 4), (10, 2), (14, 2), (20, 6)];
        assert_eq!(aligned_unit(&runs), (2, 1.0));
        // Four-node lines: every run starts and ends on a multiple of 4.
        let runs = [(0, 4), (8, 8), (20, 4), (28, 4)];
        assert_eq!(aligned_unit(&runs).0, 4);
        // One stray slow load in ten runs is tolerated; two in five are not.
        let mut runs: Vec<(usize, usize)> = (0..9).map(|i| (4 * i, 2)).collect();
        runs.push((41, 1));
        assert_eq!(aligned_unit(&runs), (2, 0.9));
        let runs = [(0, 2), (4, 2), (8, 2), (13, 1), (15, 1)];
        assert_eq!(aligned_unit(&runs).0, 1);
    }

    #[test]
    fn isolated_runs_of_one_line_outvote_pairs_of_lines() {
        // An H100's line probe (GPU-05420eb4, docs/evidence/2026-11-25-h100-l2-line-probes/)
        // in miniature: most evictions
        // take two neighbouring 128-byte lines (runs of 4 units of 64 B, aligned to 4),
        // 14 of 180 take one (runs of 2): the line is 2 units, not 4.
        let mut runs: Vec<(usize, usize)> = (0..166).map(|i| (8 * i, 4)).collect();
        runs.extend((0..14).map(|i| (2000 + 8 * i + 2, 2)));
        assert_eq!(aligned_unit(&runs).0, 4);
        let (unit, share) = line_unit(&runs);
        assert_eq!(unit, 2);
        assert_eq!(share, 1.0);
        // Pairs alone: nothing shows the smaller unit, the largest aligned unit stands.
        let pairs: Vec<(usize, usize)> = (0..100).map(|i| (8 * i, 4)).collect();
        assert_eq!(line_unit(&pairs).0, 4);
        // Short runs that stray slow loads explain (as many single units as runs of 2)
        // do not make a line.
        let mut noisy: Vec<(usize, usize)> = (0..200).map(|i| (8 * i, 4)).collect();
        noisy.extend((0..8).map(|i| (3000 + 8 * i, 2)));
        noisy.extend((0..8).map(|i| (4001 + 8 * i, 1)));
        assert_eq!(aligned_unit(&noisy).0, 4);
        assert_eq!(line_unit(&noisy).0, 4);
        // GPU-74b75669's line probe (docs/evidence/2026-11-25-h100-l2-line-probes/) in its
        // proportions: 228 pairs, 10 lone lines, nothing shorter.
        let mut few: Vec<(usize, usize)> = (0..228).map(|i| (8 * i, 4)).collect();
        few.extend((0..10).map(|i| (5000 + 8 * i + 2, 2)));
        few.extend((0..30).map(|i| (9000 + 64 * i, 16)));
        assert_eq!(line_unit(&few).0, 2);
    }
}
