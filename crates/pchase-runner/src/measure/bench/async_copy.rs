//! Copies from global to shared memory: the tensor memory accelerator's bulk
//! copies (`cp.async.bulk`, and its tensor-map form over 2-D tiles), `cp.async` (`.ca` at 4,
//! 8 and 16 bytes, `.cg` at 16) and the threads' plain loads and stores, each at every size
//! from one line to the largest copy a block's shared memory holds: the latency of one copy
//! in flight and the bandwidth with many. Deep: not in the default run. The plan is in
//! [`crate::measure::copy`].

use std::time::Duration;

use pchase_kernels::copy::{self, CopyPath};
use topology::Topology;

use super::{Benchmark, Info};
use crate::{
    copy::CopyRequest,
    device::DeviceInfo,
    error::RunnerError,
    measure::{
        copy::{
            bandwidth_request, bandwidth_shape, latency_request, linear_sizes, max_copy_bytes, p5,
            tiles, CopyAtSize, CopyPathFinding,
        },
        Measurements, Session,
    },
    sim::SimProfile,
};

mod report;

/// The copy benchmark.
pub(crate) struct AsyncCopy {
    info: Info,
}

/// Copies to shared memory.
pub(crate) static ASYNC_COPY: AsyncCopy = AsyncCopy {
    info: Info {
        name: "async-copy",
        summary: "copies from global to shared memory: TMA bulk (cp.async.bulk, 2-D tensor tiles), cp.async (.ca 4/8/16 B, .cg 16 B) and plain loads, latency and bandwidth from one line to a block's shared memory; compute capability 8.0+ (bulk 9.0+) (deep)",
        element: None,
        needs: &[],
        automatic: false,
        deep: true,
        kernels: || copy::kernels().collect(),
    },
};

/// The paths `device` has, and a "not applicable" sentence for each it lacks.
fn applicable(device: &DeviceInfo) -> (Vec<CopyPath>, Vec<(CopyPath, String)>) {
    let cc = pchase_kernels::ComputeCapability::from(device.compute_capability);
    let mut have = Vec::new();
    let mut lack = Vec::new();
    for path in CopyPath::ALL {
        if cc >= path.min_capability() {
            have.push(path);
        } else {
            let need = path.min_capability();
            let reason = if path.is_bulk() {
                format!("not applicable: the tensor memory accelerator's bulk copies (paths bulk, bulk_tensor_2d) need compute capability {need}, the device has {cc}")
            } else if path == CopyPath::Plain16 {
                format!("not applicable: the plain-load baseline (path plain_v16) is measured beside cp.async only, which needs compute capability {need}; the device has {cc}")
            } else {
                format!("not applicable: cp.async (paths cp_async_ca_4, _8, _16, cp_async_cg_16) needs compute capability {need}, the device has {cc}")
            };
            lack.push((path, reason));
        }
    }
    (have, lack)
}

/// The sizes of `path`: (bytes, tile).
fn sizes(path: CopyPath, device: &DeviceInfo) -> Vec<(u32, Option<(u32, u32)>)> {
    let max = max_copy_bytes(device.shared_per_block_optin_bytes);
    if path == CopyPath::BulkTensor2d {
        tiles(max)
            .into_iter()
            .map(|(w, h)| (w * h * 4, Some((w, h))))
            .collect()
    } else {
        linear_sizes(max).into_iter().map(|b| (b, None)).collect()
    }
}

fn run_copy(
    s: &mut Session<'_>,
    request: &CopyRequest,
    gpu: &mut Duration,
) -> Result<crate::copy::CopyRun, RunnerError> {
    let run = s.backend.copy(request)?;
    *gpu += run.gpu_time;
    Ok(run)
}

/// Latency and bandwidth of one size.
fn measure_size(
    s: &mut Session<'_>,
    path: CopyPath,
    (bytes, tile): (u32, Option<(u32, u32)>),
    gpu: &mut Duration,
) -> Result<CopyAtSize, RunnerError> {
    let latency = latency_request(path, bytes, tile);
    let run = run_copy(s, &latency, gpu)?;
    let samples: Vec<u32> = run.blocks.iter().flat_map(|b| b.rounds.clone()).collect();
    let summary = s.latency_summary(&samples)?;
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    let net: Vec<f64> = samples
        .iter()
        .map(|&v| (f64::from(v) - overhead).max(0.0))
        .collect();
    let device = s.backend.device().clone();
    let bandwidth = bandwidth_request(path, bytes, tile, &device);
    let run = run_copy(s, &bandwidth, gpu)?;
    let per_sm = run.bytes_per_sm_cycle(&bandwidth);
    let (blocks, depth) = bandwidth_shape(path, bytes, &device);
    let gbps = match (per_sm, s.results.sm_clock_mhz) {
        (Some(rate), Some(mhz)) => Some(rate * f64::from(device.sm_count) * mhz * 1e6 / 1e9),
        _ => None,
    };
    Ok(CopyAtSize {
        bytes,
        tile,
        latency: Some(summary),
        latency_p5: p5(&net),
        bytes_per_sm_cycle: per_sm,
        gigabytes_per_second: gbps,
        launch: Some((blocks, bandwidth.threads, depth)),
    })
}

/// Every size of every applicable path; a failed size is recorded and the path goes on.
fn measure(s: &mut Session<'_>, gpu: &mut Duration) -> Result<(), RunnerError> {
    let device = s.backend.device().clone();
    let (have, _) = applicable(&device);
    for path in have {
        let mut found = CopyPathFinding {
            path,
            sizes: Vec::new(),
        };
        for size in sizes(path, &device) {
            match measure_size(s, path, size, gpu) {
                Ok(at) => found.sizes.push(at),
                Err(e) => {
                    let failure = format!("async-copy {path} at {} B: {e}", size.0);
                    log::warn!("{failure}");
                    s.results.copies_to_shared.failures.push(failure);
                    // A path that cannot run at all (an old driver without the tensor
                    // map's encoder, a module that does not load) fails at every size.
                    if found.sizes.is_empty() {
                        break;
                    }
                }
            }
        }
        if !found.sizes.is_empty() {
            s.results.copies_to_shared.paths.push(found);
        }
    }
    Ok(())
}

impl Benchmark for AsyncCopy {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let (have, lack) = applicable(s.backend.device());
        s.results.copies_to_shared.not_applicable = lack;
        if have.is_empty() {
            return;
        }
        let step = format!("{} latency and bandwidth", self.info.name);
        if let Err(e) = s.timed(&step, measure) {
            s.results
                .copies_to_shared
                .failures
                .push(format!("{step}: {e}"));
        }
    }

    fn expected_steps(
        &self,
        device: &DeviceInfo,
        _options: &crate::measure::MeasureOptions,
        _plan: &[&'static dyn Benchmark],
    ) -> u64 {
        u64::from(!applicable(device).0.is_empty())
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        report::write(measured, topo);
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let found = &m.copies_to_shared;
        let (have, lack) = applicable(&profile.device);
        let missing: Vec<CopyPath> = lack
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| !found.not_applicable.iter().any(|(q, _)| q == p))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "paths {missing:?} are not recorded as not applicable"
            ));
        }
        if have.is_empty() {
            return Ok(());
        }
        let spec = profile
            .copies
            .as_ref()
            .ok_or("the profile has copy paths but no [copies]")?;
        let device = &profile.device;
        for path in have {
            let truth = spec
                .path(path)
                .ok_or_else(|| format!("the profile lacks copies.paths.{path}"))?;
            let result = found
                .path(path)
                .ok_or_else(|| format!("{path} was not measured ({:?})", found.failures))?;
            let want: Vec<u32> = sizes(path, device).iter().map(|(b, _)| *b).collect();
            let got: Vec<u32> = result.sizes.iter().map(|s| s.bytes).collect();
            if got != want {
                return Err(format!("{path}: sizes {got:?}, the plan has {want:?}"));
            }
            for at in &result.sizes {
                let latency = at.latency.ok_or_else(|| format!("{path}: no latency"))?;
                let expected = truth.round_cycles(at.bytes, 1, 1);
                if (latency.p50.0 - expected).abs() > (0.02 * expected).max(3.0) {
                    return Err(format!(
                        "{path} at {} B: latency p50 {}, truth {expected:.1}",
                        at.bytes, latency.p50.0
                    ));
                }
                let p5 = at.latency_p5.ok_or_else(|| format!("{path}: no p5"))?;
                if p5 > latency.p50.0 || latency.p50.0 > latency.p95.0 {
                    return Err(format!("{path} at {} B: p5 > p50 or p50 > p95", at.bytes));
                }
                let (blocks, depth) = bandwidth_shape(path, at.bytes, device);
                let rate = truth.sm_rate(at.bytes, depth, blocks);
                let got = at
                    .bytes_per_sm_cycle
                    .ok_or_else(|| format!("{path}: no bandwidth"))?;
                if (got - rate).abs() > 0.03 * rate {
                    return Err(format!(
                        "{path} at {} B: {got:.2} B/cycle/SM, truth {rate:.2}",
                        at.bytes
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ampere_has_cp_async_and_not_the_bulk_copies() {
        let mut device = SimProfile::bundled("h100").unwrap().device;
        device.compute_capability = crate::device::ComputeCapability { major: 8, minor: 0 };
        let (have, lack) = applicable(&device);
        assert_eq!(have.len(), 5);
        assert_eq!(
            lack.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            [CopyPath::Bulk, CopyPath::BulkTensor2d]
        );
        assert!(lack[0]
            .1
            .contains("need compute capability 9.0, the device has 8.0"));
        device.compute_capability = crate::device::ComputeCapability { major: 7, minor: 0 };
        assert!(applicable(&device).0.is_empty());
    }
}
