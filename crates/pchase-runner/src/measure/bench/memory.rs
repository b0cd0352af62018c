//! Device memory: the latency of a load that misses the L2, with its levels where lines
//! homed in a far L2 partition come back slower.

use std::time::Duration;

use pchase_kernels::{catalogue, Granularity};
use topology::{ElementKind, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::{Carveout, ChainSpec, LoadPath},
    error::RunnerError,
    measure::{analysis, levels, LatencySummary, Measurements, Session},
    sim::SimProfile,
};

/// The device-memory latency benchmark.
pub(crate) struct Memory {
    info: Info,
}

/// Device memory.
pub(crate) static MEMORY: Memory = Memory {
    info: Info {
        name: "memory",
        summary:
            "device memory: load latency of L2 misses, with its levels (near and far L2 partition)",
        element: Some(ElementKind::DeviceMemory),
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || vec![catalogue::chase(LoadPath::GlobalCg, Granularity::Fine)],
    },
};

/// Device-memory latency: a chain evicted from the L2, timed without a warm-up.
///
/// Nodes are 2 KiB apart, so each load touches a new line of a new DRAM burst; the timed
/// loads span `samples × 2 KiB` (1.5 MiB by default), inside one 2 MiB page of the
/// driver's large-page allocations, so after the first load every translation hits the
/// TLB and the latency is that of the memory, not of a page walk.
fn latency(
    s: &mut Session<'_>,
    gpu: &mut Duration,
) -> Result<(LatencySummary, Vec<levels::Mode>), RunnerError> {
    let stride = 2048u32;
    let chain = ChainSpec::new(u64::from(s.options.samples + 1) * u64::from(stride), stride)?;
    let samples = s.fine_samples_with(
        LoadPath::GlobalCg,
        chain,
        s.options.samples,
        Carveout::Percent(0),
        0,
        true,
        gpu,
    )?;
    // Lines homed in another L2 partition reach memory through it and come back slower
    // (on Hopper by the far-hit penalty): the samples are a mixture, and the latency is
    // its fastest level, the others reported beside it.
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    let cycles: Vec<f64> = samples
        .iter()
        .map(|&v| (f64::from(v) - overhead).max(0.0))
        .collect();
    let found: Vec<levels::Mode> = analysis::analysing(|| levels::modes(&cycles, 0.05))
        .into_iter()
        .filter(|m| !m.tail)
        .collect();
    if found.len() < 2 {
        return Ok((s.latency_summary(&samples)?, Vec::new()));
    }
    let fastest: Vec<f64> = cycles
        .iter()
        .copied()
        .filter(|&v| v < found[0].upper)
        .collect();
    let summary = LatencySummary::from_samples(&fastest)
        .ok_or_else(|| RunnerError::WrongResult("no memory samples".into()))?;
    Ok((summary, found))
}

impl Benchmark for Memory {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let element = ElementKind::DeviceMemory;
        let step = format!("{} latency", self.info.name);
        match s.timed(&step, latency) {
            Ok((latency, found)) => {
                let result = s.element_mut(element);
                result.latency_levels = found;
                result.latency = Some(latency);
            }
            Err(e) => s.fail(element, format!("{step}: {e}")),
        }
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        if let Some(result) = measured.element(ElementKind::DeviceMemory) {
            super::element::write_element(topo, ElementKind::DeviceMemory, result, false);
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let memory = m
            .element(ElementKind::DeviceMemory)
            .and_then(|r| r.latency)
            .ok_or("memory latency not measured")?;
        let truth = f64::from(profile.memory.latency);
        if (memory.p50.0 - truth).abs() > 2.0 {
            return Err(format!(
                "memory latency {} cycles, truth {truth}",
                memory.p50.0
            ));
        }
        Ok(())
    }
}
