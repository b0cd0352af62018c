//! Distributed shared memory: the latency of a load from another SM's shared
//! memory in the cluster, per cluster size the device allows and per rank addressed, and the
//! bandwidth of reading and writing it, beside the block's own shared memory.

use std::time::Duration;

use pchase_kernels::catalogue;
use topology::Topology;

use super::{
    gpc::{chase_chain, report as report_clusters},
    Benchmark, Info,
};
use crate::{
    cluster::{ClusterChaseRequest, ClusterStreamRequest, StreamMode},
    error::RunnerError,
    measure::{
        cluster::{latency_by_rank, median, DsmemAtSize},
        Measurements, Session,
    },
    sim::SimProfile,
};

/// The DSMEM benchmark.
pub(crate) struct Dsmem {
    info: Info,
}

/// Distributed shared memory.
pub(crate) static DSMEM: Dsmem = Dsmem {
    info: Info {
        name: "dsmem",
        summary: "distributed shared memory: latency per cluster size and addressed rank, read and write bandwidth per SM, own shared memory beside it; compute capability 9.0+",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || {
            vec![
                catalogue::dsmem_cluster_chase(),
                catalogue::dsmem_cluster_stream(),
            ]
        },
    },
};

/// Timed loads per chasing cluster.
const STEPS: u32 = 256;

/// Threads per block of the streams, bytes per pass and passes: 64 KiB eight times, so
/// that a block moves 512 KiB in its timed interval (some 16 000 cycles at 32 B/cycle).
const STREAM_THREADS: u32 = 512;
const STREAM_BYTES: u32 = 64 * 1024;
const STREAM_REPEATS: u32 = 8;

/// Median bytes per SM cycle over the blocks of one stream launch.
fn stream_rate(
    s: &mut Session<'_>,
    size: u32,
    clusters: u32,
    mode: StreamMode,
    gpu: &mut Duration,
) -> Result<Option<f64>, RunnerError> {
    let Some(backend) = s.backend.clusters() else {
        return Ok(None);
    };
    let request = ClusterStreamRequest {
        cluster_size: size,
        clusters,
        threads: STREAM_THREADS,
        bytes: STREAM_BYTES,
        repeats: STREAM_REPEATS,
        mode,
    };
    let run = backend.cluster_stream(&request)?;
    *gpu += run.gpu_time;
    let bytes = request.bytes_per_block() as f64;
    let mut rates: Vec<f64> = run
        .blocks
        .iter()
        .filter(|(_, cycles)| *cycles > 0)
        .map(|(_, cycles)| bytes / *cycles as f64)
        .collect();
    Ok(median(&mut rates))
}

/// Latency and bandwidth at every cluster size that can be resident.
fn measure(s: &mut Session<'_>, gpu: &mut Duration) -> Result<Vec<DsmemAtSize>, RunnerError> {
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    let chain = chase_chain()?;
    let needed = catalogue::dsmem_cluster_chase()
        .dynamic_shared_bytes(STEPS, chain.elements() as u32)
        .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
    let limits = match &s.results.clusters.limits {
        Some(limits) => limits.clone(),
        None => {
            let backend = s.backend.clusters().ok_or_else(|| {
                RunnerError::InvalidRequest("the backend offers no clusters".into())
            })?;
            backend.cluster_limits(needed.max(STREAM_BYTES))?
        }
    };
    let mut out = Vec::new();
    // Latency and bandwidth at the powers of two (the sizes kernels use); the GPC map uses
    // every size.
    for (size, clusters) in limits.active_clusters.clone() {
        if clusters == 0 || !size.is_power_of_two() {
            continue;
        }
        // Enough launches that every rank but 0 is read by some cluster.
        let mut chases = Vec::new();
        let mut offset = 0;
        loop {
            let backend = s.backend.clusters().ok_or_else(|| {
                RunnerError::InvalidRequest("the backend offers no clusters".into())
            })?;
            let run = backend.cluster_chase(&ClusterChaseRequest {
                cluster_size: size,
                clusters,
                chain,
                warmup_steps: 32,
                steps: STEPS,
                target_offset: offset,
            })?;
            *gpu += run.gpu_time;
            chases.extend(run.chases);
            offset += clusters;
            if size <= 1 || offset >= size - 1 {
                break;
            }
        }
        let samples: Vec<u32> = chases.iter().flat_map(|c| c.latencies.clone()).collect();
        let latency = s.latency_summary(&samples)?;
        let by_rank = latency_by_rank(&chases, overhead);
        let (read, write) = if size >= 2 {
            (
                stream_rate(s, size, clusters, StreamMode::RemoteRead, gpu)?,
                stream_rate(s, size, clusters, StreamMode::RemoteWrite, gpu)?,
            )
        } else {
            s.results.clusters.local_read_bytes_per_cycle =
                stream_rate(s, 1, clusters, StreamMode::LocalRead, gpu)?;
            (None, None)
        };
        out.push(DsmemAtSize {
            cluster_size: size,
            latency,
            by_rank,
            read_bytes_per_cycle: read,
            write_bytes_per_cycle: write,
        });
    }
    if s.results.clusters.limits.is_none() {
        s.results.clusters.limits = Some(limits);
    }
    Ok(out)
}

impl Benchmark for Dsmem {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        if report_clusters::not_applicable(s) {
            return;
        }
        let step = format!("{} latency and bandwidth", self.info.name);
        match s.timed(&step, measure) {
            Ok(found) => s.results.clusters.dsmem = found,
            Err(e) => s.results.clusters.failures.push(format!("{step}: {e}")),
        }
    }

    fn expected_steps(
        &self,
        device: &crate::device::DeviceInfo,
        _options: &crate::measure::MeasureOptions,
        _plan: &[&'static dyn Benchmark],
    ) -> u64 {
        report_clusters::expected_steps(device)
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        report_clusters::write_dsmem(measured, topo);
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let Some(spec) = &profile.clusters else {
            return report_clusters::check_not_applicable(m);
        };
        let found = &m.clusters.dsmem;
        let sizes: Vec<u32> = found.iter().map(|d| d.cluster_size).collect();
        let want: Vec<u32> = [1, 2, 4, 8, 16]
            .into_iter()
            .filter(|&s| spec.active_clusters(s) > 0)
            .collect();
        if sizes != want {
            return Err(format!(
                "DSMEM measured at cluster sizes {sizes:?}, the profile allows {want:?} ({:?})",
                m.clusters.failures
            ));
        }
        let close = |what: &str, got: f64, truth: f64, tolerance: f64| {
            if (got - truth).abs() > tolerance {
                Err(format!("{what}: {got}, truth {truth}"))
            } else {
                Ok(())
            }
        };
        for d in found {
            let truth = if d.cluster_size == 1 {
                spec.self_latency
            } else {
                spec.dsmem_latency
            };
            let what = format!("DSMEM latency at cluster size {}", d.cluster_size);
            close(&what, d.latency.p50.0, f64::from(truth), 2.0)?;
            let ranks: Vec<u32> = d.by_rank.iter().map(|(r, _)| *r).collect();
            let want_ranks: Vec<u32> = if d.cluster_size == 1 {
                vec![0]
            } else {
                (1..d.cluster_size).collect()
            };
            if ranks != want_ranks {
                return Err(format!(
                    "cluster size {}: ranks read {ranks:?}, expected {want_ranks:?}",
                    d.cluster_size
                ));
            }
            if d.cluster_size >= 2 {
                let rate = |r: Option<f64>| {
                    r.ok_or_else(|| format!("no bandwidth at size {}", d.cluster_size))
                };
                close(
                    "DSMEM read B/cycle",
                    rate(d.read_bytes_per_cycle)?,
                    spec.read_bytes_per_cycle,
                    0.05 * spec.read_bytes_per_cycle,
                )?;
                close(
                    "DSMEM write B/cycle",
                    rate(d.write_bytes_per_cycle)?,
                    spec.write_bytes_per_cycle,
                    0.05 * spec.write_bytes_per_cycle,
                )?;
            }
        }
        let local = m
            .clusters
            .local_read_bytes_per_cycle
            .ok_or("no local shared-memory bandwidth")?;
        close(
            "local read B/cycle",
            local,
            spec.local_bytes_per_cycle,
            0.05 * spec.local_bytes_per_cycle,
        )
    }
}
