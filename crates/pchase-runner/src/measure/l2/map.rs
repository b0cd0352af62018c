//! The partition map: which SMs share which L2 partition, whether a partition keeps copies
//! of far lines, and the far level seen by a second, independent method.
//!
//! One launch ([`Backend::partition_map`]): SM 0 loads one small array per SM, then each SM
//! reads its own array cold, then again. A line is *near* for an SM when its cold load is
//! at the fastest level of all SMs' cold loads, *far* when slower. With copies, the
//! reference's partition holds every line, so the SMs that use it find (almost) none far;
//! every other SM finds far the lines homed outside its partition, 1 − 1/P of them with P
//! partitions, which gives P. With two partitions that splits the SMs; with more, the map
//! tells the reference's partition from the others only; without copies every SM finds
//! 1 − 1/P far and the map gives P but no grouping. The near/far *pattern* of lines cannot
//! group SMs: each SM reads its own array, and the partition hash of one array's lines is
//! not in general another's (an address hash of high bits can flip it). An SM off the reference's
//! partition that finds every line near on its second pass got copies of the far lines.

use std::time::Duration;

use super::home::{self, AddressMap, HomeSample, Prediction};
use crate::{
    backend::{Backend, PartitionMapRequest},
    error::RunnerError,
    measure::levels::{modes, Distribution, MIN_RATIO},
};

/// Lines of each SM's array (32 KiB at 128 B: 132 arrays fit any near partition).
pub const MAP_LINES: u32 = 256;

/// Far shares below this are none: the map saw one partition.
const NO_FAR: f64 = 0.05;

/// Which SM uses which partition, and what the map showed.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionMap {
    /// The SM that loaded every array first.
    pub reference_sm: u32,
    /// Per SM (`%smid`): 0 for the reference's partition, 1 for the other one where there
    /// are two; `None` where the SM took no part or the map cannot tell its partition.
    pub partition_of_sm: Vec<Option<u32>>,
    /// How many partitions an SM's loads meet, from the far share of the SMs off the
    /// reference's partition (1 − 1/P).
    pub count: u32,
    /// Per SM: the share of its lines that came back far on the cold pass.
    pub far_share: Vec<Option<f64>>,
    /// Whether SMs outside the reference's group found their far lines near on the second
    /// pass (copies); `None` with one group.
    pub keeps_copies: Option<bool>,
    /// Cold loads at the near level, all SMs (cycles, overhead subtracted).
    pub near: Distribution,
    /// Cold loads at the far level, all SMs; `None` with one level.
    pub far: Option<Distribution>,
    /// The latency between the two, cycles.
    pub threshold: Option<f64>,
    /// Device time of the launch.
    pub gpu_time: Duration,
    /// With two partitions: every line an SM off the reference's partition read cold, with
    /// `home` set where it came back far (homed in the reference's partition). Empty
    /// otherwise.
    pub homes: Vec<HomeSample>,
}

impl PartitionMap {
    /// The SMs of group `partition`.
    pub fn sms_of(&self, partition: u32) -> Vec<u32> {
        self.partition_of_sm
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == Some(partition))
            .map(|(sm, _)| sm as u32)
            .collect()
    }
}

/// The line of the map's arrays, bytes.
const MAP_LINE: u32 = 128;

/// Runs the map with `reference_sm` as the reference and reads it.
///
/// `Ok(Err(reason))` where the map cannot be read (too few SMs took part, no level).
pub fn partition_map<B: Backend + ?Sized>(
    backend: &mut B,
    reference_sm: u32,
    overhead: f64,
    gpu_time: &mut Duration,
) -> Result<Result<PartitionMap, String>, RunnerError> {
    let run = backend.partition_map(&PartitionMapRequest {
        reference_sm,
        lines_per_sm: MAP_LINES,
        line_bytes: MAP_LINE,
    })?;
    *gpu_time += run.gpu_time;
    let adjust = |v: &[u32]| -> Vec<f64> {
        v.iter()
            .map(|&c| (f64::from(c) - overhead).max(0.0))
            .collect()
    };
    let cold: Vec<Option<Vec<f64>>> = run
        .sms
        .iter()
        .map(|s| s.as_ref().map(|s| adjust(&s.cold)))
        .collect();
    let warm: Vec<Option<Vec<f64>>> = run
        .sms
        .iter()
        .map(|s| s.as_ref().map(|s| adjust(&s.warm)))
        .collect();
    let mut map = read_map(&cold, &warm, run.gpu_time);
    if let Ok(map) = map.as_mut() {
        map.reference_sm = reference_sm;
        if let (2, Some(threshold)) = (map.count, map.threshold) {
            for (sm, lines) in cold.iter().enumerate() {
                let (Some(1), Some(lines)) = (map.partition_of_sm[sm], lines) else {
                    continue;
                };
                let array = run.base_address + sm as u64 * run.array_stride;
                map.homes
                    .extend(lines.iter().enumerate().map(|(i, &cycles)| HomeSample {
                        address: array + i as u64 * u64::from(MAP_LINE),
                        home: cycles >= threshold,
                    }));
            }
        }
    }
    Ok(map)
}

/// The L2's address map, and how it predicted lines it never saw.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressFinding {
    /// The function fitted on the first map's lines (label 1: homed in its reference's
    /// partition).
    pub map: AddressMap,
    /// The reference of the second map (an SM of the other partition) and the second map's
    /// lines (read by the SMs of the first reference's partition, none of them fitted)
    /// against the function's prediction; `None` until the deep benchmark ran it.
    pub prediction: Option<(u32, Prediction)>,
}

/// Fits the home function on `first`'s lines.
///
/// `Err(reason)` where the map has not two groups or no function fits.
pub fn fit_address_map(first: &PartitionMap) -> Result<AddressFinding, String> {
    if first.count != 2 || first.homes.is_empty() {
        return Err(format!(
            "the partition map found {} partition(s) and no lines of the other",
            first.count
        ));
    }
    let map = home::fit(&first.homes, MAP_LINE, home::PAGE_BYTES)?;
    Ok(AddressFinding {
        map,
        prediction: None,
    })
}

/// Runs the map again with an SM of the other partition as the reference and predicts,
/// with `found`'s function, the lines its other side reads: those of the first reference's
/// partition's SMs, which the fit did not see.
///
/// `Ok(Err(reason))` where the second map cannot be read.
pub fn predict_address_map<B: Backend + ?Sized>(
    backend: &mut B,
    first: &PartitionMap,
    found: &AddressFinding,
    overhead: f64,
    gpu_time: &mut Duration,
) -> Result<Result<(u32, Prediction), String>, RunnerError> {
    let Some(&second_reference) = first.sms_of(1).first() else {
        return Ok(Err("the partition map found one group of SMs".into()));
    };
    let second = match partition_map(backend, second_reference, overhead, gpu_time)? {
        Ok(second) => second,
        Err(e) => return Ok(Err(format!("the second map: {e}"))),
    };
    if second.count != 2 || second.homes.is_empty() {
        return Ok(Err(format!(
            "the second map (reference SM {second_reference}) found {} group(s)",
            second.count
        )));
    }
    // Far for the second map's other side is homed in the second reference's partition,
    // not the first's.
    let fresh: Vec<HomeSample> = second
        .homes
        .iter()
        .map(|s| HomeSample {
            address: s.address,
            home: !s.home,
        })
        .collect();
    Ok(Ok((second_reference, home::predict(&found.map, &fresh))))
}

/// Reads a map from per-SM cold and warm per-line latencies (cycles, overhead subtracted).
pub fn read_map(
    cold: &[Option<Vec<f64>>],
    warm: &[Option<Vec<f64>>],
    gpu_time: Duration,
) -> Result<PartitionMap, String> {
    let taking_part = cold.iter().flatten().count();
    if taking_part < cold.len().div_ceil(2) || taking_part == 0 {
        return Err(format!(
            "only {taking_part} of {} SMs took part in the partition map",
            cold.len()
        ));
    }
    let pooled: Vec<f64> = cold.iter().flatten().flatten().copied().collect();
    let found: Vec<_> = modes(&pooled, 0.02)
        .into_iter()
        .filter(|m| !m.tail)
        .collect();
    let Some(near_mode) = found.first() else {
        return Err("no level in the partition map's loads".into());
    };
    // The far level: the next mode clearly above the near one (a partition hop costs far
    // more than the spread of one partition's slices).
    let far_mode = found
        .iter()
        .skip(1)
        .find(|m| m.distribution.p50 >= MIN_RATIO * near_mode.distribution.p50);
    let threshold = far_mode.map(|_| near_mode.upper);
    let far_share: Vec<Option<f64>> = cold
        .iter()
        .map(|c| {
            c.as_ref().map(|lines| {
                let far = lines
                    .iter()
                    .filter(|&&v| threshold.is_some_and(|t| v >= t))
                    .count();
                far as f64 / lines.len().max(1) as f64
            })
        })
        .collect();
    let highest = far_share.iter().flatten().copied().fold(0.0, f64::max);
    // SMs that find (almost) no line far share the reference's partition, which holds
    // copies of every line; the others see the lines homed outside their own partition
    // far: 1 − 1/P of them.
    let other_side = |share: f64| highest >= NO_FAR && share >= highest / 2.0;
    let others: Vec<f64> = far_share
        .iter()
        .flatten()
        .copied()
        .filter(|&s| other_side(s))
        .collect();
    let count = if others.is_empty() {
        1
    } else {
        let typical = super::super::stats::median(&others);
        (1.0 / (1.0 - typical).max(1e-3)).round().max(2.0) as u32
    };
    let reference_side = far_share
        .iter()
        .flatten()
        .any(|&s| highest >= NO_FAR && !other_side(s));
    let partition_of_sm: Vec<Option<u32>> = far_share
        .iter()
        .map(|share| {
            share.and_then(|s| match (count, other_side(s)) {
                (1, _) => Some(0),
                (_, false) => Some(0),
                // With two partitions, every SM off the reference's is on the other one;
                // with more, which one is not told by this map.
                (2, true) if reference_side => Some(1),
                _ => None,
            })
        })
        .collect();
    // Copies: SMs off the reference's partition that saw far lines cold find them near on
    // their second pass.
    let keeps_copies = (count > 1).then(|| {
        let mut seen_far = 0usize;
        let mut near_again = 0usize;
        for (sm, share) in far_share.iter().enumerate() {
            let (Some(share), Some(Some(c)), Some(Some(w))) = (share, cold.get(sm), warm.get(sm))
            else {
                continue;
            };
            if !other_side(*share) {
                continue;
            }
            for (cold_load, warm_load) in c.iter().zip(w) {
                if threshold.is_some_and(|t| *cold_load >= t) {
                    seen_far += 1;
                    if threshold.is_some_and(|t| *warm_load < t) {
                        near_again += 1;
                    }
                }
            }
        }
        seen_far > 0 && near_again as f64 >= 0.9 * seen_far as f64
    });
    let split = |far: bool| -> Vec<f64> {
        pooled
            .iter()
            .copied()
            .filter(|&v| {
                threshold.is_some_and(|t| (v >= t) == far) || (threshold.is_none() && !far)
            })
            .collect()
    };
    let near = Distribution::of(&split(false)).ok_or("no near loads in the partition map")?;
    Ok(PartitionMap {
        reference_sm: 0,
        count,
        partition_of_sm,
        far_share,
        keeps_copies,
        near,
        far: Distribution::of(&split(true)),
        threshold,
        gpu_time,
        homes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cold loads of `lines` lines, near (300) where `near(line)`, far (490) otherwise,
    /// with a small wobble.
    fn lines(near: impl Fn(usize) -> bool) -> Vec<f64> {
        (0..256)
            .map(|l| {
                let base = if near(l) { 300.0 } else { 490.0 };
                base + (l % 7) as f64
            })
            .collect()
    }

    #[test]
    fn two_partitions_with_copies_are_two_groups() {
        // SMs 0-3 and 8-11 are the reference's side; 4-7 the other: half their lines far.
        let home_near = |l: usize| l % 4 < 2;
        let cold: Vec<Option<Vec<f64>>> = (0..12)
            .map(|sm| {
                Some(if (4..8).contains(&sm) {
                    lines(home_near)
                } else {
                    lines(|_| true)
                })
            })
            .collect();
        let warm: Vec<Option<Vec<f64>>> = (0..12).map(|_| Some(lines(|_| true))).collect();
        let map = read_map(&cold, &warm, Duration::ZERO).unwrap();
        assert_eq!(map.count, 2);
        assert_eq!(map.sms_of(1), vec![4, 5, 6, 7]);
        assert_eq!(map.keeps_copies, Some(true));
        assert!((map.far.unwrap().p50 - 493.0).abs() < 4.0);
        assert_eq!(map.far_share[5], Some(0.5));
    }

    #[test]
    fn without_copies_the_map_counts_partitions_but_cannot_group() {
        // Every SM finds a third of the lines near: the third homed in its own partition.
        let cold: Vec<Option<Vec<f64>>> = (0..9)
            .map(|sm| Some(lines(move |l| l % 3 == sm % 3)))
            .collect();
        let warm = cold.clone();
        let map = read_map(&cold, &warm, Duration::ZERO).unwrap();
        assert_eq!(map.count, 3);
        assert!(map.partition_of_sm.iter().all(Option::is_none));
        assert_eq!(map.keeps_copies, Some(false));
    }

    #[test]
    fn four_partitions_with_copies_tell_the_reference_side_only() {
        let cold: Vec<Option<Vec<f64>>> = (0..8)
            .map(|sm| {
                Some(if sm < 2 {
                    lines(|_| true)
                } else {
                    lines(|l| l % 4 == 0)
                })
            })
            .collect();
        let warm: Vec<Option<Vec<f64>>> = (0..8).map(|_| Some(lines(|_| true))).collect();
        let map = read_map(&cold, &warm, Duration::ZERO).unwrap();
        assert_eq!(map.count, 4);
        assert_eq!(map.sms_of(0), vec![0, 1]);
        assert!(map.partition_of_sm[2..].iter().all(Option::is_none));
        assert_eq!(map.keeps_copies, Some(true));
    }

    #[test]
    fn one_partition_is_one_group_and_too_few_smss_is_an_answer_not_a_map() {
        let cold: Vec<Option<Vec<f64>>> = (0..4).map(|_| Some(lines(|_| true))).collect();
        let map = read_map(&cold, &cold, Duration::ZERO).unwrap();
        assert_eq!((map.count, map.keeps_copies, map.far), (1, None, None));
        let lost: Vec<Option<Vec<f64>>> = vec![None, None, None, Some(lines(|_| true))];
        assert!(read_map(&lost, &lost, Duration::ZERO).is_err());
    }
}
