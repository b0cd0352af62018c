//! The L2: its partitions as the SMs see them (map, sweep, levels), fetch granularity,
//! line and sector, and the near-partition hit latency.

use pchase_kernels::{catalogue, Granularity};
use topology::{ElementKind, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::LoadPath,
    measure::{l2, Measurements, Session},
    sim::{L2Interleave, SimProfile},
};

mod report;

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
            // The sector probe, and the line probe's block-filled variant.
            kernels.extend(catalogue::two_phase(LoadPath::GlobalCg, LoadPath::GlobalCg).ok());
            kernels.push(catalogue::two_phase_block());
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
            super::element::write_element(topo, ElementKind::L2, result, false);
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
        check_partitions(profile, l2)?;
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

/// The fitted bits against the profile's (where its homes are an XOR of bits).
pub(super) fn check_address_map(
    profile: &SimProfile,
    map: &crate::measure::l2::home::AddressMap,
) -> Result<(), String> {
    match profile.l2.home_bits() {
        // The simulator's noise misreads a few lines, as the GPU's does.
        Some(bits) if bits == map.bits.as_slice() && map.agreement >= 0.995 => Ok(()),
        Some(bits) => Err(format!(
            "L2 address map: bits {:?} reproducing {:.4} of the lines, truth {bits:?}",
            map.bits, map.agreement
        )),
        None => Err(format!(
            "L2 address map: bits {:?} found where the profile's homes are no XOR of bits",
            map.bits
        )),
    }
}

/// The partitions: where the map ran, the count is the profile's and so is
/// whether a partition keeps copies; with the balanced interleave, whose partitions and
/// sets fill evenly (and no copies), the near partition and the far side hold the
/// profile's bytes to 1 %.
fn check_partitions(profile: &SimProfile, l2: &l2::L2Findings) -> Result<(), String> {
    let truth = profile.l2.partitions;
    let Ok(map) = &l2.map else {
        return Ok(());
    };
    if map.count != truth {
        return Err(format!("L2 partitions: {}, truth {truth}", map.count));
    }
    let copies = (truth > 1).then_some(profile.l2.near_keeps_far_copies);
    if l2.keeps_copies != copies {
        return Err(format!(
            "L2 copies of far lines: {:?}, truth {copies:?}",
            l2.keeps_copies
        ));
    }
    // Capacities where the model fills partitions and sets evenly: the balanced
    // interleave without copies (with copies the near partition mixes its own lines, placed
    // by group, with copies placed by line, which fill its sets unevenly).
    if profile.l2.interleave != L2Interleave::Balanced || profile.l2.near_keeps_far_copies {
        return Ok(());
    }
    let each = profile.l2.partition_bytes();
    let close = |found: u64, truth: u64| found.abs_diff(truth) <= truth / 100;
    match l2.near_capacity {
        Some((near, true)) if close(near, each) => {}
        near => return Err(format!("L2 near partition {near:?}, truth {each} B")),
    }
    let far = each * u64::from(truth - 1);
    match (truth, l2.far_capacity_range) {
        (1, _) => Ok(()),
        (_, Some((low, high))) if close(low, far) || (low..=high).contains(&far) => Ok(()),
        (_, range) => Err(format!("L2 far side {range:?}, truth {far} B")),
    }
}
