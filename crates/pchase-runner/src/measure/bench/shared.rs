//! Shared memory: the latency of a load from the block's own shared memory.

use std::time::Duration;

use pchase_kernels::{catalogue, Granularity};
use topology::{ElementKind, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::{Carveout, ChainSpec, LoadPath},
    error::RunnerError,
    measure::{LatencySummary, Measurements, Session},
    sim::SimProfile,
};

/// The shared-memory latency benchmark.
pub(crate) struct Shared {
    info: Info,
}

/// Shared memory.
pub(crate) static SHARED: Shared = Shared {
    info: Info {
        name: "shared",
        summary: "shared memory: load latency (its size per SM comes from the API)",
        element: Some(ElementKind::SharedMemory),
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || vec![catalogue::chase(LoadPath::Shared, Granularity::Fine)],
    },
};

/// Shared-memory latency over a 1 KiB chain, with as many samples as the block's shared
/// memory holds next to it.
fn latency(s: &mut Session<'_>, gpu: &mut Duration) -> Result<LatencySummary, RunnerError> {
    let chain = ChainSpec::new(1024, 32)?;
    let room = s
        .backend
        .device()
        .shared_per_block_optin_bytes
        .saturating_sub(chain.bytes)
        / 8;
    let steps = s
        .options
        .samples
        .min(u32::try_from(room).unwrap_or(u32::MAX));
    if steps < 32 {
        return Err(RunnerError::InvalidRequest(format!(
            "a block's shared memory holds only {room} timing samples next to the chain"
        )));
    }
    let samples = s.fine_samples(LoadPath::Shared, chain, steps, Carveout::Percent(0), gpu)?;
    s.latency_summary(&samples)
}

impl Benchmark for Shared {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let element = ElementKind::SharedMemory;
        let step = format!("{} latency", self.info.name);
        match s.timed(&step, latency) {
            Ok(latency) => s.element_mut(element).latency = Some(latency),
            Err(e) => s.fail(element, format!("{step}: {e}")),
        }
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        if let Some(result) = measured.element(ElementKind::SharedMemory) {
            super::element::write_element(topo, ElementKind::SharedMemory, result, false);
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let shared = m
            .element(ElementKind::SharedMemory)
            .and_then(|r| r.latency)
            .ok_or_else(|| {
                format!(
                    "shared latency not measured: {:?}",
                    m.element(ElementKind::SharedMemory)
                )
            })?;
        let truth = f64::from(profile.shared_memory.latency);
        if (shared.p50.0 - truth).abs() > 2.0 {
            return Err(format!(
                "shared latency {} cycles, truth {truth}",
                shared.p50.0
            ));
        }
        Ok(())
    }
}
