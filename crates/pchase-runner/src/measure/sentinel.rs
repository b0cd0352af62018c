//! Watching for disturbances: cheap sentinels read before and after a run, and a second,
//! independent probe around every size the run found.
//!
//! A co-tenant that arrives mid-run (another job on a shared GPU, a power cap that pulls
//! the clock down) leaves a result that looks clean. Three sentinels, read before and
//! after measuring, catch what it changes:
//!
//! - the measured SM clock (a drop; a rise is a GPU leaving idle);
//! - the latency of an L1 hit (a 4 KiB `.ca` chain) and of an L2 hit (a 32 KiB `.cg`
//!   chain), each the mean of the middle 80 % of 256 loads: contention inflates them;
//! - and, after the run, every SM-cache size found exactly is probed again by whole-pass
//!   chases at 85 % of it (which must still hit, as fast as the sweep's plateau) and at
//!   130 % (which must miss): capacity taken by other work after the sweep shows as misses
//!   below the size.
//!
//! Each finding is a sentence for the run record; the caller marks the result and exits
//! nonzero. The sentinels are not a proof of a clean run: a co-tenant present and steady
//! for the whole run changes the sentinels and the sizes alike, which is why the GPU's
//! process list and utilisation are checked before measuring.
//!
//! ```
//! use pchase_runner::measure::sentinel::{compare, Reading};
//! let base = Reading { sm_clock_mhz: Some(1980.0), l1_hit_cycles: Some(33.0), l2_hit_cycles: Some(260.0) };
//! let same = Reading { sm_clock_mhz: Some(1978.0), l1_hit_cycles: Some(33.5), l2_hit_cycles: Some(262.0) };
//! assert!(compare(&base, &same).is_empty());
//! let slow = Reading { l2_hit_cycles: Some(340.0), ..same };
//! assert_eq!(compare(&base, &slow).len(), 1);
//! ```

use std::time::Duration;

use super::{bench, probe::SizeProbe, ElementKind, Measurements, SizeFinding};
use crate::{
    backend::{Backend, ChainSpec, ChaseRequest, LoadPath},
    error::RunnerError,
};

/// Relative change of the SM clock that counts as a disturbance.
const CLOCK_TOLERANCE: f64 = 0.03;
/// Relative and absolute (cycles) change of a hit latency that counts.
const LATENCY_TOLERANCE: (f64, f64) = (0.10, 2.0);

/// Timed loads of each hit-latency sentinel.
const HIT_LOADS: u32 = 256;

/// The L2-hit sentinel's chain: one 128-byte line per node, as many nodes as timed loads.
///
/// A chase warms up with one whole pass and then times its loads from the chain's first
/// node on, so the timed loads read the chain's first [`HIT_LOADS`] lines, each loaded
/// once before, whatever the chain's length: a longer chain only lengthens the warm-up.
/// At 512 KiB the warm-up was 4096 L2 hits of 280 to 460 cycles, 0.6 to 0.9 ms of every
/// reading on an H100 or H200; at 32 KiB it is 256 loads over the lines then timed.
const L2_HIT_CHAIN: (u64, u32) = (HIT_LOADS as u64 * 128, 128);

/// One reading of the sentinels; `None` where one could not be taken.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reading {
    /// The SM clock the backend measured, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// Cycles of an L1 hit, the trimmed mean of 256 loads (clock overhead included).
    pub l1_hit_cycles: Option<f64>,
    /// Cycles of an L2 hit, the trimmed mean of 256 loads (clock overhead included).
    pub l2_hit_cycles: Option<f64>,
}

fn hit_latency<B: Backend + ?Sized>(
    backend: &mut B,
    path: LoadPath,
    bytes: u64,
    stride: u32,
) -> Result<f64, RunnerError> {
    let run = backend.chase(&ChaseRequest::fine(
        path,
        ChainSpec::new(bytes, stride)?,
        HIT_LOADS,
    ))?;
    let mut samples: Vec<u32> = run
        .blocks
        .first()
        .map(|b| b.latencies.clone())
        .unwrap_or_default();
    if samples.is_empty() {
        return Err(RunnerError::WrongResult(
            "sentinel chase returned no samples".into(),
        ));
    }
    Ok(trimmed_mean(&mut samples))
}

/// The mean of the middle 80 % of `samples`. Not the median: on a GPU whose L2 has two
/// partitions without copies, about half of an L2 chain's lines are near and half far
/// for whichever SM runs it, and the median of such a mixture jumps between the two
/// levels from one reading to the next, while its trimmed mean stays put.
fn trimmed_mean(samples: &mut [u32]) -> f64 {
    samples.sort_unstable();
    let cut = samples.len() / 10;
    let middle = &samples[cut..samples.len() - cut];
    middle.iter().map(|&v| f64::from(v)).sum::<f64>() / middle.len().max(1) as f64
}

/// Reads the sentinels as a baseline: after a warm-up clock measurement (the first
/// launch after idle may run while the clock still rises), until two readings in a row
/// agree (at most four), so that a disturbance during the baseline itself does not make
/// every later reading look disturbed. A sentinel that fails is `None` (and logged).
///
/// The warm-up is a long clock measurement (15 ms at 2 GHz), unless a quick one finds the
/// clock within 3 % of the device's peak (`DeviceInfo::sm_clock_khz`) already: a GPU busy
/// until a moment ago, as in runs back to back, has no clock left to raise.
pub fn read<B: Backend + ?Sized>(backend: &mut B) -> Reading {
    if !clock_at_peak(backend) {
        let _ = backend.measure_sm_clock_mhz();
    }
    read_settled(backend)
}

/// Whether a quick clock reading is within `CLOCK_TOLERANCE` (3 %) of the device's peak SM
/// clock; `false` where either is unknown.
fn clock_at_peak<B: Backend + ?Sized>(backend: &mut B) -> bool {
    let Some(peak) = backend
        .device()
        .sm_clock_khz
        .map(|khz| f64::from(khz) / 1e3)
    else {
        return false;
    };
    match backend.quick_sm_clock_mhz() {
        Ok(now) => {
            let warm = now >= (1.0 - CLOCK_TOLERANCE) * peak;
            log::debug!(
                "sentinels: the SM clock reads {now:.0} MHz of its {peak:.0} MHz peak{}",
                if warm { "; no warm-up" } else { "" }
            );
            warm
        }
        Err(_) => false,
    }
}

/// Reads the sentinels as [`read`] does, without its warm-up: for a GPU that has just
/// been busy, whose clock is up (after a run, its last benchmarks and confirmations
/// ran right before). A warm-up there is a long clock measurement whose value is dropped.
pub fn read_settled<B: Backend + ?Sized>(backend: &mut B) -> Reading {
    let mut last = read_quick(backend);
    for _ in 0..3 {
        let next = read_quick(backend);
        let agree = compare(&last, &next).is_empty() && compare(&next, &last).is_empty();
        last = next;
        if agree {
            return last;
        }
    }
    log::warn!("the sentinels did not settle in four readings: the GPU may be busy");
    last
}

/// Reads the sentinels with one clock measurement (between benchmarks the GPU is busy,
/// so its clock is up already).
pub fn read_quick<B: Backend + ?Sized>(backend: &mut B) -> Reading {
    let keep = |what: &str, r: Result<f64, RunnerError>| {
        r.map_err(|e| log::warn!("sentinel {what}: {e}")).ok()
    };
    let sm_clock_mhz = backend.quick_sm_clock_mhz();
    let sm_clock_mhz = keep("SM clock", sm_clock_mhz);
    let l1 = hit_latency(backend, LoadPath::GlobalCa, 4096, 64);
    let l1_hit_cycles = keep("L1 hit", l1);
    let (bytes, stride) = L2_HIT_CHAIN;
    let l2 = hit_latency(backend, LoadPath::GlobalCg, bytes, stride);
    let l2_hit_cycles = keep("L2 hit", l2);
    Reading {
        sm_clock_mhz,
        l1_hit_cycles,
        l2_hit_cycles,
    }
}

/// What changed from `before` to `after` beyond the noise, one sentence each.
pub fn compare(before: &Reading, after: &Reading) -> Vec<String> {
    let mut found = Vec::new();
    if let (Some(a), Some(b)) = (before.sm_clock_mhz, after.sm_clock_mhz) {
        // Only a drop: a GPU coming out of idle may still be raising its clock at the
        // first reading.
        if b < (1.0 - CLOCK_TOLERANCE) * a {
            found.push(format!(
                "the measured SM clock dropped from {a:.0} MHz to {b:.0} MHz during the run"
            ));
        }
    }
    let (relative, absolute) = LATENCY_TOLERANCE;
    for (what, a, b) in [
        ("an L1 hit", before.l1_hit_cycles, after.l1_hit_cycles),
        ("an L2 hit", before.l2_hit_cycles, after.l2_hit_cycles),
    ] {
        if let (Some(a), Some(b)) = (a, b) {
            if (b - a).abs() > relative * a + absolute {
                found.push(format!(
                    "the latency of {what} moved from {a:.0} to {b:.0} cycles during the run"
                ));
            }
        }
    }
    found
}

/// The mean of a slice (0 when empty).
fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// Probes every SM-cache size the run found exactly, at 85 % and 130 % of it, with the
/// sweep's own settings; returns, per element whose size the probe does not confirm, the
/// element and one sentence.
pub fn confirm_sizes<B: Backend + ?Sized>(
    backend: &mut B,
    measured: &Measurements,
    search_stride: u32,
    replicas: u32,
) -> Vec<(ElementKind, String)> {
    let mut found = Vec::new();
    for (element, result) in &measured.elements {
        // The SM caches searched from the smallest size (the constant L1.5's search starts
        // past the constant L1: a probe below its knee would still be L1.5 hits).
        let Some(path) = result.path else { continue };
        if *element == ElementKind::ConstantL15 {
            continue;
        }
        let Some(name) = bench::for_element(*element).map(|b| b.info().name) else {
            continue;
        };
        let Some(first) = result.sizes.first() else {
            continue;
        };
        let SizeFinding::Exact { bytes, .. } = first.finding else {
            continue;
        };
        // The sweep's plateau: its smallest size, all hits.
        let label = format!("{name}-size-");
        let Some(plateau) = measured
            .curves
            .iter()
            .find(|c| c.name.starts_with(&label))
            .and_then(|c| c.points.first())
            .map(|p| mean(&p.values))
        else {
            continue;
        };
        let stride = u64::from(search_stride);
        let below = (bytes * 85 / 100) / stride * stride;
        let above = (bytes * 130 / 100).div_ceil(stride) * stride;
        if path == LoadPath::Constant && above > super::probe::CONSTANT_BANK_BYTES {
            continue;
        }
        let probe = SizeProbe {
            path,
            stride: search_stride,
            carveout: first.carveout,
            warmup_passes: 1,
            timed_passes: 2,
            replicas,
            reserve_shared_bytes: first.reserved_shared_bytes,
        };
        let mut gpu = Duration::ZERO;
        let samples = match probe.run(backend, &[below, above], &mut gpu) {
            Ok(s) => s,
            Err(e) => {
                found.push((
                    *element,
                    format!("{name} size: the confirming probe failed: {e}"),
                ));
                continue;
            }
        };
        let at = |b: u64| {
            samples
                .iter()
                .find(|s| s.bytes == b)
                .map(|s| mean(&s.values))
        };
        let (relative, absolute) = LATENCY_TOLERANCE;
        let limit = plateau * (1.0 + relative) + absolute;
        let finding = match (at(below), at(above)) {
            (Some(low), _) if low > limit => Some(format!(
                "{name} size {bytes} B not confirmed: {below} B now misses ({low:.1} cycles per load, the sweep's hits {plateau:.1})"
            )),
            (_, Some(high)) if high <= plateau + absolute => Some(format!(
                "{name} size {bytes} B not confirmed: {above} B still hits ({high:.1} cycles per load)"
            )),
            (None, _) | (_, None) => Some(format!("{name} size: the confirming probe lost a size")),
            _ => None,
        };
        found.extend(finding.map(|f| (*element, f)));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_far_mixture_reads_the_same_whichever_half_dominates_slightly() {
        // 129 near and 127 far loads, then the other way round: the median jumps from
        // one level to the other, the trimmed mean moves by a cycle.
        let mut a: Vec<u32> = [vec![260; 129], vec![400; 127]].concat();
        let mut b: Vec<u32> = [vec![260; 127], vec![400; 129]].concat();
        let (ta, tb) = (trimmed_mean(&mut a), trimmed_mean(&mut b));
        assert!((ta - tb).abs() < 3.0, "{ta} {tb}");
        assert_ne!(a[a.len() / 2], b[b.len() / 2], "the medians differ");
        let base = Reading {
            l2_hit_cycles: Some(ta),
            ..Reading::default()
        };
        let now = Reading {
            l2_hit_cycles: Some(tb),
            ..Reading::default()
        };
        assert!(compare(&base, &now).is_empty());
    }

    #[test]
    fn the_l2_reading_times_the_same_lines_as_a_longer_chain_would() {
        // The timed loads read the chain's first lines after one whole pass, however long
        // the chain: the simulated GPUs (an L2 of two partitions among them) read the same,
        // and far less than a chain that misses.
        for profile in ["volta", "h100", "h200"] {
            let mut backend =
                crate::sim::SimBackend::new(crate::sim::SimProfile::bundled(profile).unwrap())
                    .unwrap();
            let (bytes, stride) = L2_HIT_CHAIN;
            let short = hit_latency(&mut backend, LoadPath::GlobalCg, bytes, stride).unwrap();
            let long = hit_latency(&mut backend, LoadPath::GlobalCg, 512 * 1024, 128).unwrap();
            // Within the simulated L2's own scatter from one launch to the next.
            assert!(
                (short - long).abs() < 0.005 * long,
                "{profile}: {short} against {long}"
            );
            let memory = hit_latency(&mut backend, LoadPath::GlobalCg, 256 << 20, 128).unwrap();
            assert!(
                memory > 1.2 * short,
                "{profile}: {memory} against {short}: not L2 hits?"
            );
        }
    }

    #[test]
    fn outliers_do_not_move_the_reading() {
        let mut clean = vec![33u32; 256];
        let mut spiky = vec![33u32; 256];
        spiky[..10].iter_mut().for_each(|v| *v = 5000);
        assert_eq!(trimmed_mean(&mut clean), trimmed_mean(&mut spiky));
    }

    #[test]
    fn a_clock_rise_is_not_a_disturbance_but_a_drop_is() {
        let at = |mhz| Reading {
            sm_clock_mhz: Some(mhz),
            ..Reading::default()
        };
        assert!(compare(&at(1400.0), &at(1980.0)).is_empty());
        assert_eq!(compare(&at(1980.0), &at(1400.0)).len(), 1);
        assert!(compare(&at(1980.0), &at(1950.0)).is_empty(), "within 3 %");
    }
}
