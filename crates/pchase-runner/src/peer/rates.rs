//! A link's rates tuned to its peak: the copy engines of the reader pulling the other
//! GPU's memory, pushing its own, and both at once, each split over the number of streams
//! that moved it fastest; the reader's SMs reading and writing the other GPU's memory with
//! the streaming kernels of the device-memory bandwidth benchmark, each with the launch
//! shape that was fastest.
//!
//! The copies: one stream, then two; four only where two beat one (by the search's
//! [`MIN_GAIN`]). A split's rate is every stream's bytes over the slowest stream's time of
//! a round (the streams start together), the median of the rounds. Both ways at once run
//! the pull and the push together, each split as the wider of their best splits (so that
//! each way moves the same bytes), each direction rated so.
//!
//! The SMs: the coordinate search of the bandwidth benchmark ([`coordinate_search`]) over a
//! small space (16, 8 or 4 bytes a thread, unrolled 1–8 times, 1, 2 or 4 blocks per SM of
//! 256–1024 threads) from the host link's shape (16 B × 4, one block of 512 threads per SM:
//! far more bytes in flight than the link's bandwidth-delay product), with launches of some
//! [`TUNING_LAUNCH`] (about one pass over the region at NVLink 4's rate), then the best shape
//! timed again with launches of [`FINAL_LAUNCH`]: the median of those. The reader's L2 keeps
//! no line of a peer's memory (a warm peer load costs some 1,700 cycles on an H100, the
//! owner's L2 through the link, `docs/evidence/2026-11-25-h100x2-node/`), so every launch
//! crosses the link, and launches run back to back, as the device-memory benchmark's do.

use std::time::Duration;

use topology::fleet::{BothWays, LinkRate, PeerLink};

use super::{PeerBackend, PeerCopiesRequest, PeerOptions, PeerTransfer};
use crate::{
    bandwidth::{BandwidthOp, BandwidthRequest, BandwidthShape, ReadVariant, RegionLayout},
    device::DeviceInfo,
    error::RunnerError,
    measure::bandwidth::tuner::MIN_GAIN,
    measure::bandwidth::{coordinate_search, SearchSpace},
};

/// Device time each launch of the SMs' search aims at.
pub const TUNING_LAUNCH: Duration = Duration::from_micros(150);
/// Device time each launch of the final SM measurement aims at.
pub const FINAL_LAUNCH: Duration = Duration::from_micros(500);
/// Timed launches of each shape the search tries (after one untimed launch).
pub const TUNING_REPETITIONS: u32 = 2;
/// Timed launches of the best shape.
pub const FINAL_REPETITIONS: u32 = 5;
/// The rate launches are sized by before one is measured: NVLink 4's 18 links.
const SIZING_GB_PER_S: f64 = 450.0;

/// Which way the copy engines of the reader move bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Pull,
    Push,
}

impl Way {
    fn transfer(self, from: u32, to: u32) -> PeerTransfer {
        match self {
            Way::Pull => PeerTransfer::pull(from, to),
            Way::Push => PeerTransfer::push(from, to),
        }
    }
}

/// Per round, every stream's bytes over the slowest stream's time; `times[i][r]` is
/// stream `i`'s round `r`. The median of the rounds, GB/s.
fn split_rate(times: &[Vec<Duration>], bytes_per_stream: u64) -> Option<f64> {
    let rounds = times.iter().map(Vec::len).min()?;
    let streams = times.len() as f64;
    let mut rates: Vec<f64> = (0..rounds)
        .filter_map(|r| {
            let slowest = times.iter().map(|t| t[r]).max()?.as_secs_f64();
            (slowest > 0.0).then(|| streams * bytes_per_stream as f64 / slowest / 1e9)
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied()
}

/// The copy engine's transfers of `ways` at once, each `ways[k].1` streams splitting
/// `options.tuned_copy_bytes`; per way its rate (GB/s).
fn copy_rates(
    node: &mut dyn PeerBackend,
    from: u32,
    to: u32,
    ways: &[(Way, u32)],
    options: &PeerOptions,
) -> Result<Vec<f64>, RunnerError> {
    let bytes = (options.tuned_copy_bytes / u64::from(ways.iter().map(|w| w.1).max().unwrap_or(1)))
        .max(4096)
        / 4096
        * 4096;
    let mut transfers = Vec::new();
    for &(way, streams) in ways {
        transfers.extend((0..streams).map(|_| way.transfer(from, to)));
    }
    let request = PeerCopiesRequest {
        transfers,
        bytes,
        copies_per_timing: options.tuned_copies_per_timing,
        repeats: options.tuned_repeats,
    };
    let times = node.peer_copies(&request)?;
    let mut at = 0;
    let mut out = Vec::new();
    for &(way, streams) in ways {
        let own = times
            .get(at..at + streams as usize)
            .ok_or_else(|| RunnerError::WrongResult("a peer copy timed too few streams".into()))?;
        at += streams as usize;
        out.push(split_rate(own, request.bytes_per_timing()).ok_or_else(|| {
            RunnerError::WrongResult(format!("{way:?}: no timed round of the copy"))
        })?);
    }
    Ok(out)
}

/// The best split of one way: its streams and rate.
fn tune_copy(
    node: &mut dyn PeerBackend,
    from: u32,
    to: u32,
    way: Way,
    options: &PeerOptions,
) -> Result<(u32, f64), RunnerError> {
    let mut best = (1, copy_rates(node, from, to, &[(way, 1)], options)?[0]);
    for streams in [2, 4] {
        let rate = copy_rates(node, from, to, &[(way, streams)], options)?[0];
        if rate > best.1 * (1.0 + MIN_GAIN) {
            best = (streams, rate);
        } else {
            break;
        }
    }
    Ok(best)
}

fn copy_method(streams: u32, options: &PeerOptions) -> String {
    format!(
        "copy engine, {} MiB over {streams} stream(s), {} copies per timing, median of {}",
        options.tuned_copy_bytes >> 20,
        options.tuned_copies_per_timing,
        options.tuned_repeats
    )
}

/// The SMs' search space over a link: the host link's seed and its neighbours.
fn sm_space(op: BandwidthOp, device: &DeviceInfo) -> SearchSpace {
    let max_threads_per_sm = device
        .max_threads_per_sm
        .unwrap_or(device.max_threads_per_block);
    SearchSpace {
        ops: vec![op],
        vectors: vec![4, 8, 16],
        unrolls: vec![1, 2, 4, 8],
        threads: [256, 512, 1024]
            .into_iter()
            .filter(|&t| t <= device.max_threads_per_block && t % device.warp_size.max(1) == 0)
            .collect(),
        blocks_per_sm: vec![1, 2, 4],
        max_threads_per_sm,
    }
}

/// The request that times `shape` over `region` bytes for about `duration` at `gb_per_s`,
/// covering the region at least once.
fn sm_request(
    shape: BandwidthShape,
    region: u64,
    sm_count: u32,
    gb_per_s: f64,
    duration: Duration,
    repetitions: u32,
) -> BandwidthRequest {
    let per_iteration = (u64::from(shape.blocks(sm_count)) * shape.block_iteration_bytes()).max(1);
    let wanted = (gb_per_s * 1e9 * duration.as_secs_f64()) as u64;
    let iterations = wanted
        .div_ceil(per_iteration)
        .max(region.div_ceil(per_iteration));
    BandwidthRequest {
        shape,
        layout: RegionLayout::GridStride,
        region_bytes: region,
        iterations: u32::try_from(iterations.max(1)).unwrap_or(u32::MAX),
        repetitions,
    }
}

/// The SMs of `from` reading or writing `to`'s memory: the best shape's rate (GB/s, the
/// median of its final launches), the shape, and how many shapes the search tried.
fn sm_rate(
    node: &mut dyn PeerBackend,
    from: u32,
    to: u32,
    op: BandwidthOp,
    options: &PeerOptions,
) -> Result<(f64, BandwidthShape, usize), RunnerError> {
    let device = node.info(from)?.clone();
    let space = sm_space(op, &device);
    let seed = BandwidthShape {
        op,
        vector_bytes: 16,
        unroll: 4,
        blocks_per_sm: 1,
        threads: if space.threads.contains(&512) {
            512
        } else {
            space.threads.first().copied().unwrap_or(device.warp_size)
        },
    };
    let region = options.sm_region_bytes;
    let sms = device.sm_count;
    // Launches are sized by NVLink 4's peak until the seed is measured, then by the seed.
    let mut sizing = SIZING_GB_PER_S;
    let mut sized = false;
    let search = coordinate_search(&space, seed, options.sm_search_budget, |shape| {
        let request = sm_request(
            *shape,
            region,
            sms,
            sizing,
            TUNING_LAUNCH,
            TUNING_REPETITIONS,
        );
        let run = node.peer_bandwidth(from, to, &request)?;
        let best = run
            .best_bytes_per_second()
            .ok_or_else(|| RunnerError::WrongResult(format!("{shape}: not timed")))?;
        log::debug!("link {from} → {to}: {shape}: {:.1} GB/s", best / 1e9);
        if !sized {
            sizing = best / 1e9;
            sized = true;
        }
        Ok(best)
    })?;
    let request = sm_request(
        search.best,
        region,
        sms,
        search.value / 1e9,
        FINAL_LAUNCH,
        FINAL_REPETITIONS,
    );
    let run = node.peer_bandwidth(from, to, &request)?;
    let median = run
        .median_bytes_per_second()
        .ok_or_else(|| RunnerError::WrongResult("the final launches were not timed".into()))?;
    Ok((median / 1e9, search.best, search.evaluated.len()))
}

/// Measures the link's tuned rates into `link`, calling `mark` after each; what fails is a
/// note on the link.
pub(super) fn measure(
    node: &mut dyn PeerBackend,
    from: u32,
    to: u32,
    options: &PeerOptions,
    link: &mut PeerLink,
    mark: &mut dyn FnMut(&'static str),
) {
    let mut best = [None, None];
    for (i, way, name) in [(0, Way::Pull, "copy pull"), (1, Way::Push, "copy push")] {
        match tune_copy(node, from, to, way, options) {
            Ok((streams, rate)) => {
                best[i] = Some(streams);
                let rate = LinkRate::new(rate, copy_method(streams, options));
                match way {
                    Way::Pull => link.copy_pull = Some(rate),
                    Way::Push => link.copy_push = Some(rate),
                }
            }
            Err(e) => link.notes.push(format!("{name} failed: {e}")),
        }
        mark(name);
    }
    if let [Some(pull), Some(push)] = best {
        // One split for both ways, the wider of their best, so that each way moves the same
        // bytes and neither runs alone at the end.
        let streams = pull.max(push);
        let ways = [(Way::Pull, streams), (Way::Push, streams)];
        match copy_rates(node, from, to, &ways, options) {
            Ok(rates) => {
                let method = copy_method(streams, options);
                link.copy_both = Some(BothWays::new(
                    LinkRate::new(rates[0], method.clone()),
                    LinkRate::new(rates[1], method),
                ));
            }
            Err(e) => link.notes.push(format!("copy both ways failed: {e}")),
        }
        mark("copy both");
    }
    for (op, name) in [
        (BandwidthOp::Read(ReadVariant::Cg), "SM read"),
        (BandwidthOp::Write, "SM write"),
    ] {
        match sm_rate(node, from, to, op, options) {
            Ok((rate, shape, tried)) => {
                let method = format!(
                    "{shape}, the best of {tried} shape(s), median of {FINAL_REPETITIONS} launches over {} MiB",
                    options.sm_region_bytes >> 20
                );
                let rate = Some(LinkRate::new(rate, method));
                match op {
                    BandwidthOp::Write => link.sm_write = rate,
                    _ => link.sm_read = rate,
                }
            }
            Err(e) => link.notes.push(format!("{name} failed: {e}")),
        }
        mark(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_is_rated_by_its_slowest_stream_and_the_median_round() {
        let ms = |m: f64| Duration::from_secs_f64(m / 1e3);
        // Two streams of 100 MB per round: 200 MB over the slower one's 1, 2 and 0.5 ms.
        let times = vec![
            vec![ms(1.0), ms(1.5), ms(0.5)],
            vec![ms(0.8), ms(2.0), ms(0.4)],
        ];
        let rate = split_rate(&times, 100_000_000).unwrap();
        assert!((rate - 200.0).abs() < 1e-9, "{rate}");
        assert_eq!(split_rate(&[], 1), None);
        assert_eq!(split_rate(&[vec![Duration::ZERO]], 1), None);
    }

    #[test]
    fn sm_launches_cover_their_region_and_last_about_their_time() {
        let shape = BandwidthShape {
            op: BandwidthOp::Write,
            vector_bytes: 16,
            unroll: 4,
            blocks_per_sm: 1,
            threads: 512,
        };
        // 132 SMs × 512 threads × 64 B: 4.3 MB a pass; 64 MiB need 16 passes.
        let short = sm_request(shape, 64 << 20, 132, 450.0, Duration::from_micros(10), 2);
        assert_eq!(short.iterations, 16);
        // 500 µs at 450 GB/s: 225 MB, 53 passes (the last one partly).
        let long = sm_request(shape, 64 << 20, 132, 450.0, FINAL_LAUNCH, 5);
        assert_eq!(long.iterations, 53);
        assert_eq!(long.layout, RegionLayout::GridStride);
        super::super::check_peer_bandwidth(&long).unwrap();
    }

    #[test]
    fn the_search_space_holds_its_seed_on_every_bundled_gpu() {
        for name in crate::sim::SimProfile::bundled_names() {
            let profile = crate::sim::SimProfile::bundled(name).unwrap();
            for op in [BandwidthOp::Read(ReadVariant::Cg), BandwidthOp::Write] {
                let space = sm_space(op, &profile.device);
                let seed = BandwidthShape {
                    op,
                    vector_bytes: 16,
                    unroll: 4,
                    blocks_per_sm: 1,
                    threads: 512,
                };
                assert!(space.contains(&seed), "{name}: {op}");
                assert!(space.shapes().len() <= 108);
            }
        }
    }
}
