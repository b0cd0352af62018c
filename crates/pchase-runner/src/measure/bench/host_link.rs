//! The GPU's link to its host: the bandwidth of copies between host and device memory by
//! the copy engines (pinned host memory one direction at a time and both at once, pageable
//! host memory), of the SMs reading and writing mapped pinned host memory, and the round
//! trip of one load over the link; each rate beside the PCIe link's peak where NVML reported
//! the link ([`crate::host::PcieLink`], `MeasureOptions::pcie`).
//!
//! The requests are [`crate::host`]'s; the backend answers them through
//! [`crate::backend::Backend::host`] (the CUDA backend with `cuMemHostAlloc`,
//! `cuMemcpyHtoDAsync`/`cuMemcpyDtoHAsync` and the bandwidth and chase kernels of the
//! catalogue over mapped host memory; the simulator from the profile's `[host_link]`).

use std::time::Duration;

use pchase_kernels::{bandwidth as kernels, catalogue, Granularity, LoadPath};
use topology::{LatencySummary, Number, Provenance, RowValue, Section};

use super::{Benchmark, Info};
use crate::{
    bandwidth::{BandwidthOp, BandwidthShape, ReadVariant},
    error::RunnerError,
    host::{HostChaseRequest, HostCopyRequest, HostDirection, HostMemory, HostSmRequest, PcieLink},
    measure::{Measurements, Session},
    sim::SimProfile,
};

/// Held while a GPU of this process measures its host link.
static HOST_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The host-link benchmark.
pub(crate) struct HostLink {
    info: Info,
}

/// The shape of the SM copies: 16-byte accesses, four in flight per thread, one block of
/// 512 threads per SM: some 4 MB in flight on an H100, far more than the link's
/// bandwidth-delay product (some 100 KB at 55 GB/s and 2 µs), and a grid small enough that
/// several passes fit the mapped buffer without reading a byte twice.
fn sm_shape(op: BandwidthOp) -> BandwidthShape {
    BandwidthShape {
        op,
        vector_bytes: 16,
        unroll: 4,
        blocks_per_sm: 1,
        threads: 512,
    }
}

/// Passes of the SM copies' grid per launch: as many as the mapped buffer holds, so that no
/// launch reads or writes a byte twice (the L2 may keep lines of host memory), at least one.
fn sm_iterations(sm_count: u32) -> u32 {
    let pass = u64::from(sm_shape(READ).blocks(sm_count)) * sm_shape(READ).block_iteration_bytes();
    u32::try_from(COPY_BYTES / pass.max(1))
        .unwrap_or(u32::MAX)
        .max(1)
}

const READ: BandwidthOp = BandwidthOp::Read(ReadVariant::Cg);
const WRITE: BandwidthOp = BandwidthOp::Write;

/// The host link.
pub(crate) static HOST_LINK: HostLink = HostLink {
    info: Info {
        name: "host-link",
        summary: "the host link: copy-engine bandwidth host to device, device to host and both at once (pinned and pageable host memory), SM reads and writes of mapped host memory, one load's round trip, each against the PCIe link's peak",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || {
            let mut k: Vec<_> = [READ, WRITE]
                .iter()
                .filter_map(|&op| kernels::kernel(op, 16, 4))
                .collect();
            k.push(catalogue::chase(LoadPath::GlobalCg, Granularity::Fine));
            k
        },
    },
};

/// Bytes of each copy and of the mapped buffer the SM copies walk (pinned once per buffer).
const COPY_BYTES: u64 = 16 << 20;
/// Timed copies of pinned memory, per direction.
const COPY_REPEATS: u32 = 5;
/// Timed copies of pageable memory, per direction.
const PAGEABLE_REPEATS: u32 = 3;
/// Timed launches of each SM copy.
const SM_REPEATS: u32 = 3;
/// The chase: nodes a few lines apart, one timed load per node.
const CHASE: HostChaseRequest = HostChaseRequest {
    stride: 256,
    steps: 256,
};

/// A rate's median over its repeats, GB/s, with the standard error of their mean.
fn rate(bytes: u64, times: &[Duration]) -> Option<Number> {
    let mut rates: Vec<f64> = times
        .iter()
        .filter(|t| !t.is_zero())
        .map(|t| bytes as f64 / t.as_secs_f64() / 1e9)
        .collect();
    if rates.is_empty() {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let variance = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    Some(Number {
        value: rates[rates.len() / 2],
        unit: "GB/s".into(),
        provenance: Provenance::Benchmark,
        standard_error: Some((variance / n).sqrt()),
    })
}

/// A derived number.
fn derived(value: f64, unit: &str) -> RowValue {
    RowValue::number(value, unit, Provenance::Derived)
}

/// What the benchmark measured, before it becomes rows.
#[derive(Debug, Default)]
struct Found {
    /// `(key, label, rate)` in report order.
    rates: Vec<(&'static str, &'static str, Number)>,
    /// The chase's latencies, cycles without the clock overhead.
    latency: Option<LatencySummary>,
    /// What could not be measured.
    missing: Vec<String>,
}

impl Found {
    fn value(&self, key: &str) -> Option<f64> {
        self.rates.iter().find(|r| r.0 == key).map(|r| r.2.value)
    }
}

/// One copy-engine request: host memory, directions, timed repeats, and each direction's
/// row key and label (in direction order; unused ones empty).
type CopyCase = (
    HostMemory,
    Vec<HostDirection>,
    u32,
    [(&'static str, &'static str); 2],
);

fn measure(s: &mut Session<'_>, gpu: &mut Duration) -> Result<Found, RunnerError> {
    let sm_count = s.backend.device().sm_count;
    let host = s.backend.host().ok_or_else(|| RunnerError::Unsupported {
        kernel: "host-link",
        needed: "a backend with a host link".into(),
        found: "none".into(),
    })?;
    let mut found = Found::default();
    let h2d = HostDirection::HostToDevice;
    let d2h = HostDirection::DeviceToHost;
    let copies: [CopyCase; 5] = [
        (
            HostMemory::Pinned,
            vec![h2d],
            COPY_REPEATS,
            [
                ("copy_h2d", "copy engine, pinned, host to device"),
                ("", ""),
            ],
        ),
        (
            HostMemory::Pinned,
            vec![d2h],
            COPY_REPEATS,
            [
                ("copy_d2h", "copy engine, pinned, device to host"),
                ("", ""),
            ],
        ),
        (
            HostMemory::Pinned,
            vec![h2d, d2h],
            COPY_REPEATS,
            [
                ("both_h2d", "both at once: host to device"),
                ("both_d2h", "both at once: device to host"),
            ],
        ),
        (
            HostMemory::Pageable,
            vec![h2d],
            PAGEABLE_REPEATS,
            [
                ("pageable_h2d", "copy engine, pageable, host to device"),
                ("", ""),
            ],
        ),
        (
            HostMemory::Pageable,
            vec![d2h],
            PAGEABLE_REPEATS,
            [
                ("pageable_d2h", "copy engine, pageable, device to host"),
                ("", ""),
            ],
        ),
    ];
    for (memory, directions, repeats, names) in copies {
        let request = HostCopyRequest {
            memory,
            directions,
            bytes: COPY_BYTES,
            repeats,
        };
        match host.host_copy(&request) {
            Ok(run) => {
                for ((_, times), (key, label)) in run.times.iter().zip(names) {
                    *gpu += times.iter().sum::<Duration>();
                    match rate(request.bytes, times) {
                        Some(r) => found.rates.push((key, label, r)),
                        None => found.missing.push(format!("{label}: no timing")),
                    }
                }
            }
            Err(e) => found.missing.push(format!("{}: {e}", names[0].1)),
        }
    }
    for (op, key, label) in [
        (READ, "sm_read", "SMs reading mapped pinned host memory"),
        (WRITE, "sm_write", "SMs writing mapped pinned host memory"),
    ] {
        let request = HostSmRequest {
            shape: sm_shape(op),
            bytes: COPY_BYTES,
            iterations: sm_iterations(sm_count),
            repeats: SM_REPEATS,
        };
        match host.host_sm_copy(&request) {
            Ok(run) => {
                *gpu += run.elapsed.iter().sum::<Duration>();
                match rate(run.bytes_per_launch, &run.elapsed) {
                    Some(r) => found.rates.push((key, label, r)),
                    None => found.missing.push(format!("{label}: no timing")),
                }
            }
            Err(e) => found.missing.push(format!("{label}: {e}")),
        }
    }
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    let host = s
        .backend
        .host()
        .ok_or_else(|| RunnerError::InvalidRequest("the backend's host link went away".into()))?;
    match host.host_chase(&CHASE) {
        Ok(samples) => {
            let cycles: Vec<f64> = samples
                .iter()
                .map(|&v| (f64::from(v) - overhead).max(0.0))
                .collect();
            found.latency = LatencySummary::from_samples(&cycles);
        }
        Err(e) => found
            .missing
            .push(format!("the chase over mapped host memory: {e}")),
    }
    if found.rates.is_empty() && found.latency.is_none() {
        return Err(RunnerError::WrongResult(format!(
            "nothing measured: {}",
            found.missing.join("; ")
        )));
    }
    Ok(found)
}

/// The section: every rate, the latency, and each rate against the link's peak.
fn section(found: &Found, pcie: Option<PcieLink>, sm_clock_mhz: Option<f64>) -> Section {
    let peak = pcie.and_then(|l| l.peak_gb_per_s().map(|p| (l, p)));
    let peak_text = match peak {
        Some((l, p)) => format!(
            "The peak is PCIe Gen{} x{} as NVML reported the link before the run: {p:.1} GB/s per direction (transfer rate × lanes × line encoding).",
            l.max_generation.max(l.generation),
            l.width
        ),
        None => match pcie {
            Some(l) => format!(
                "The link's peak is unknown: NVML reported PCIe Gen{} x{}, a generation without a known rate.",
                l.max_generation.max(l.generation),
                l.width
            ),
            None => "The link's peak is unknown: NVML did not report the PCIe link.".into(),
        },
    };
    let mut section = Section::new("Host link").with_method(format!(
        "Copies of {} MiB between host and device memory by the copy engines (cuMemcpyHtoDAsync, cuMemcpyDtoHAsync; both directions at once on two streams, each timed by its own events), median of {COPY_REPEATS} ({PAGEABLE_REPEATS} for pageable memory); SM copies: a grid of 16-byte loads or stores, one block of 512 threads per SM, over {} MiB of mapped pinned host memory, no byte twice in a launch, each launch after an L2 flush, median of {SM_REPEATS}; latency: one thread chasing {} nodes {} B apart in mapped pinned host memory after an L2 flush. GB/s are 10⁹ bytes per second. {peak_text}",
        COPY_BYTES >> 20,
        COPY_BYTES >> 20,
        CHASE.steps,
        CHASE.stride
    ));
    // A rate above the link's peak did not cross the link (a cache served it): no row.
    let mut above = Vec::new();
    for (key, label, number) in &found.rates {
        match peak {
            Some((_, p)) if number.value > p * 1.02 => {
                above.push(format!("{label}: {:.1} GB/s", number.value));
            }
            _ => section.push(key, label, RowValue::Number(number.clone())),
        }
    }
    if !above.is_empty() {
        let method = section.method.take().unwrap_or_default();
        section.method = Some(format!(
            "{method} Above the link's peak, so not reported: {}.",
            above.join("; ")
        ));
    }
    if let (Some(h2d), Some(d2h)) = (found.value("both_h2d"), found.value("both_d2h")) {
        section.push(
            "both_sum",
            "both at once: the two directions together",
            derived(h2d + d2h, "GB/s"),
        );
    }
    if let Some(latency) = &found.latency {
        section.push(
            "latency",
            "one load's round trip over the link",
            RowValue::latency(*latency),
        );
        if let Some(mhz) = sm_clock_mhz.filter(|m| *m > 0.0) {
            section.push(
                "latency_ns",
                "one load's round trip over the link (at the measured SM clock)",
                derived(latency.p50.0 / mhz * 1000.0, "ns"),
            );
        }
    }
    if let Some((_, peak)) = peak {
        section.push(
            "peak",
            "the PCIe link's peak per direction",
            derived(peak, "GB/s"),
        );
        let shares = [
            ("copy_h2d", 1.0),
            ("copy_d2h", 1.0),
            ("both_sum", 2.0),
            ("sm_read", 1.0),
            ("sm_write", 1.0),
        ];
        for (key, directions) in shares {
            let Some(row) = section.row(key) else {
                continue;
            };
            let Some(value) = row.value.as_number() else {
                continue;
            };
            let label = format!(
                "{}, against the peak{}",
                row.label,
                if directions > 1.0 {
                    " of both directions"
                } else {
                    ""
                }
            );
            section.push(
                &format!("{key}_of_peak"),
                &label,
                derived(100.0 * value / (peak * directions), "%"),
            );
        }
    }
    section
}

impl Benchmark for HostLink {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let name = self.info.name;
        // One GPU of a node at a time: the GPUs' links meet in the host (its root complex
        // and memory), and on a node of four H200s measured at once the copies both ways
        // at once read 33-44 GB/s against 50-51 one GPU at a time.
        let _turn = HOST_TURN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = s.timed(name, measure).map_err(|e| e.to_string());
        let pcie = s.options.pcie;
        let mhz = s.results.sm_clock_mhz;
        let result = found.map(|found| {
            for why in &found.missing {
                log::warn!("{name}: {why}");
            }
            section(&found, pcie, mhz)
        });
        if let Err(why) = &result {
            log::info!("{name}: {why}");
        }
        s.results.sections.insert(name, result);
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let name = self.info.name;
        let Some(truth) = profile.host_link else {
            return match m.sections.get(name) {
                Some(Err(_)) => Ok(()),
                other => Err(format!(
                    "{name}: no [host_link] in the profile, found {other:?}"
                )),
            };
        };
        let section = m
            .section(name)
            .ok_or_else(|| format!("{name}: not measured ({:?})", m.sections.get(name)))?;
        let pairs = [
            ("copy_h2d", truth.copy_h2d_gb_per_s),
            ("copy_d2h", truth.copy_d2h_gb_per_s),
            ("both_h2d", truth.both_h2d_gb_per_s),
            ("both_d2h", truth.both_d2h_gb_per_s),
            ("pageable_h2d", truth.pageable_h2d_gb_per_s),
            ("pageable_d2h", truth.pageable_d2h_gb_per_s),
            ("sm_read", truth.sm_read_gb_per_s),
            ("sm_write", truth.sm_write_gb_per_s),
        ];
        // The SM copies need the bandwidth kernels' compute capability.
        let cc = profile.device.compute_capability;
        let runs =
            |op| kernels::kernel(op, 16, 4).is_some_and(|k| k.check_supported(cc.into()).is_ok());
        let mut wrong = Vec::new();
        for (key, want) in pairs {
            let runnable = match key {
                "sm_read" => runs(READ),
                "sm_write" => runs(WRITE),
                _ => true,
            };
            if !runnable {
                if section.row(key).is_some() {
                    wrong.push(format!("{key} measured where its kernel cannot run"));
                }
                continue;
            }
            let got = section.row(key).and_then(|r| r.value.as_number());
            if !got.is_some_and(|g| (g - want).abs() <= 0.01 * want) {
                wrong.push(format!("{key} {got:?} GB/s against {want}"));
            }
        }
        let ns = section.row("latency_ns").and_then(|r| r.value.as_number());
        if !ns.is_some_and(|ns| (ns - truth.latency_ns).abs() <= 0.02 * truth.latency_ns + 2.0) {
            wrong.push(format!("latency {ns:?} ns against {}", truth.latency_ns));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("{name}: {}", wrong.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found() -> Found {
        let number = |value| Number {
            value,
            unit: "GB/s".into(),
            provenance: Provenance::Benchmark,
            standard_error: None,
        };
        Found {
            rates: vec![
                ("copy_h2d", "h2d", number(55.0)),
                ("copy_d2h", "d2h", number(50.0)),
                ("both_h2d", "both h2d", number(45.0)),
                ("both_d2h", "both d2h", number(40.0)),
            ],
            latency: LatencySummary::from_samples(&[1980.0, 2000.0, 2020.0]),
            missing: vec![],
        }
    }

    #[test]
    fn no_sm_launch_touches_a_byte_twice() {
        for sms in [3, 80, 132, 148, 4096] {
            let pass = u64::from(sms) * 512 * 64;
            let iterations = u64::from(sm_iterations(sms));
            assert!(iterations >= 1);
            assert!(iterations * pass <= COPY_BYTES || iterations == 1, "{sms}");
            assert!(
                (iterations + 1) * pass > COPY_BYTES,
                "{sms}: room for one more pass"
            );
        }
        assert_eq!(sm_iterations(132), 3);
    }

    #[test]
    fn rates_are_medians_in_decimal_gigabytes() {
        let ms = |m: f64| Duration::from_secs_f64(m / 1e3);
        let r = rate(50_000_000, &[ms(1.0), ms(2.0), ms(1.25)]).unwrap();
        assert!((r.value - 40.0).abs() < 1e-9, "{}", r.value);
        assert_eq!(r.unit, "GB/s");
        assert!(r.standard_error.unwrap() > 0.0);
        assert_eq!(rate(1, &[Duration::ZERO]), None);
    }

    #[test]
    fn rates_are_reported_against_the_links_peak() {
        let gen5 = PcieLink {
            generation: 5,
            width: 16,
            max_generation: 5,
            max_width: 16,
        };
        let s = section(&found(), Some(gen5), Some(2000.0));
        let value = |k: &str| s.row(k).and_then(|r| r.value.as_number()).unwrap();
        let peak = value("peak");
        assert!((peak - 63.015).abs() < 1e-3);
        assert!((value("copy_h2d_of_peak") - 100.0 * 55.0 / peak).abs() < 1e-9);
        assert!((value("both_sum") - 85.0).abs() < 1e-9);
        assert!((value("both_sum_of_peak") - 100.0 * 85.0 / (2.0 * peak)).abs() < 1e-9);
        // 2000 cycles at 2000 MHz: one microsecond.
        assert!((value("latency_ns") - 1000.0).abs() < 1e-9);
        assert!(s.method.as_deref().unwrap().contains("PCIe Gen5 x16"));
        // The SM copies were not measured: no share of them.
        assert!(s.row("sm_read_of_peak").is_none());
    }

    #[test]
    fn a_rate_above_the_peak_is_not_reported() {
        let gen4 = PcieLink {
            generation: 4,
            width: 16,
            max_generation: 4,
            max_width: 16,
        };
        // 55 GB/s cannot cross a Gen4 x16 link (31.5 GB/s).
        let s = section(&found(), Some(gen4), None);
        assert!(s.row("copy_h2d").is_none());
        assert!(s.row("copy_h2d_of_peak").is_none());
        let method = s.method.as_deref().unwrap();
        assert!(method.contains("Above the link's peak"), "{method}");
        assert!(method.contains("h2d: 55.0 GB/s"), "{method}");
    }

    #[test]
    fn without_nvml_the_peak_is_unknown() {
        let s = section(&found(), None, None);
        assert!(s.row("peak").is_none());
        assert!(s.row("copy_h2d_of_peak").is_none());
        assert!(s.row("latency_ns").is_none());
        assert!(s.row("latency").is_some());
        assert!(s
            .method
            .as_deref()
            .unwrap()
            .contains("The link's peak is unknown"));
        let gen6 = PcieLink {
            generation: 6,
            width: 16,
            max_generation: 6,
            max_width: 16,
        };
        let s = section(&found(), Some(gen6), None);
        assert!(s.row("peak").is_none());
        assert!(s.method.as_deref().unwrap().contains("Gen6 x16"));
    }
}
