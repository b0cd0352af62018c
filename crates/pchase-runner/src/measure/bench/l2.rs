//! The L2: its partitions as the SMs see them (map, sweep, levels), fetch granularity,
//! line and sector, and the near-partition hit latency.

use pchase_kernels::{catalogue, Granularity};
use topology::{ElementKind, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::LoadPath,
    measure::{l2, report, Measurements, Session},
    sim::SimProfile,
};

/// The L2 benchmark.
pub(crate) struct L2 {
    info: Info,
}

/// The L2 cache.
pub(crate) static L2: L2 = L2 {
    info: Info {
        name: "l2",
        summary: "L2 cache: near and far partition latencies and capacities from per-load levels, SM partition map, fetch granularity, line, sector",
        element: Some(ElementKind::L2),
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || {
            let mut kernels = vec![
                catalogue::l2_partition_map(),
                catalogue::chase_pinned_global_cg(),
                catalogue::chase(LoadPath::GlobalCg, Granularity::Fine),
                catalogue::chase(LoadPath::GlobalCg, Granularity::Coarse),
            ];
            // The line and sector probes.
            kernels.extend(catalogue::two_phase(LoadPath::GlobalCg, LoadPath::GlobalCg).ok());
            kernels
        },
    },
};

impl Benchmark for L2 {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let element = ElementKind::L2;
        let step = format!("{} latency", self.info.name);
        // The element's latency is the near partition's; the partitions, their latencies
        // and capacities go to `Measurements::l2`.
        let result = s.timed(&step, |s, gpu| {
            let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
            let found = l2::measure_l2(s.backend, overhead, s.options.samples, gpu)?;
            let near = found.near;
            s.results.curves.push(found.curve.clone());
            s.results.l2 = Some(found);
            Ok(near)
        });
        match result {
            Ok(latency) => s.element_mut(element).latency = Some(latency),
            Err(e) => s.fail(element, format!("{step}: {e}")),
        }
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        if let Some(result) = measured.element(ElementKind::L2) {
            report::write_element(topo, ElementKind::L2, result, false);
        }
        if let Some(found) = measured.l2.as_ref() {
            report::l2_findings(topo, found);
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let l2 = m.l2.as_ref().ok_or("L2 not measured")?;
        let sector = u64::from(profile.l2.sector());
        if l2.fetch_granularity != Some(sector) {
            return Err(format!(
                "L2 fetch granularity {:?}, truth {sector}",
                l2.fetch_granularity
            ));
        }
        match &l2.line {
            Ok(line) if line.bytes == u64::from(profile.l2.line_bytes) => {}
            Ok(line) => {
                return Err(format!(
                    "L2 line {} B ({} runs, agreement {:.2}), truth {}",
                    line.bytes, line.runs, line.agreement, profile.l2.line_bytes
                ))
            }
            Err(why) => return Err(format!("no L2 line: {why}")),
        }
        match &l2.sector {
            Ok(found) if found.bytes == sector => Ok(()),
            Ok(found) => Err(format!(
                "L2 sector {} B ({:?}), truth {sector}",
                found.bytes, found.medians
            )),
            Err(why) => Err(format!("no L2 sector: {why}")),
        }
    }
}
