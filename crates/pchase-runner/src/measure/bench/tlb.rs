//! The TLBs of the L1 path (`ld.global.ca`) and the L2 path (`ld.global.cg`): the
//! translation levels a chase sees, their reach and miss cost, and the page size of the
//! driver's allocations ([`crate::measure::tlb`] has the method). Deep: not in the default
//! run.

use std::time::Duration;

use pchase_kernels::{catalogue, Granularity};
use topology::{
    Bytes, ElementKind, Latency, Note, NoteSeverity, Provenance, Size, TlbLevel, Topology,
};

use super::{Benchmark, Info};
use crate::{
    backend::{Carveout, ChainSpec, LoadPath},
    error::RunnerError,
    measure::{
        tlb::{self, step_bytes, TlbFinding, TlbLimits, SKEW},
        Measurements, Session,
    },
    sim::SimProfile,
};

/// The TLB benchmark.
pub(crate) struct Tlb {
    info: Info,
}

/// The TLBs.
pub(crate) static TLB: Tlb = Tlb {
    info: Info {
        name: "tlb",
        summary:
            "TLBs of the L1 (.ca) and L2 (.cg) paths: levels, reach, page size, miss cost (deep)",
        element: None,
        needs: &[],
        automatic: false,
        deep: true,
        kernels: || {
            PATHS
                .iter()
                .map(|&p| catalogue::chase(p, Granularity::Fine))
                .collect()
        },
    },
};

/// The paths searched: the L1 path and the L2 path.
const PATHS: [LoadPath; 2] = [LoadPath::GlobalCa, LoadPath::GlobalCg];

/// Timed loads of each chase (its 5th percentile decides).
const STEPS: u32 = 256;

/// The largest chain: a quarter of the device memory, at most 16 GiB less one 64 MiB
/// (32-bit element indices).
fn max_bytes(total_memory: u64) -> u64 {
    (total_memory / 4).min((16 << 30) - (64 << 20))
}

/// The most nodes of a chase on `path`: half the L1's lines on the L1 path (where the L1
/// caches global loads; its measured size, else 64 KiB), a quarter of the L2's lines on the
/// L2 path, so that the data's own misses never rise like a translation level.
fn max_nodes(s: &Session<'_>, path: LoadPath) -> u64 {
    let line = u64::from(SKEW);
    let l1_path = path == LoadPath::GlobalCa && s.results.l1_caches_global_loads != Some(false);
    if l1_path {
        let l1 = s.exact_size(ElementKind::L1Data).unwrap_or(64 << 10);
        l1 / 2 / line
    } else {
        s.backend.device().l2_bytes / 4 / line
    }
}

/// Searches the levels of `path`.
fn search_path(
    s: &mut Session<'_>,
    path: LoadPath,
    gpu: &mut Duration,
) -> Result<TlbFinding, RunnerError> {
    let limits = TlbLimits {
        max_bytes: max_bytes(s.backend.device().total_memory_bytes),
        max_nodes: max_nodes(s, path),
    };
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    tlb::search(limits, |nodes, stride| {
        let step = step_bytes(stride);
        let step32 = u32::try_from(step)
            .map_err(|_| RunnerError::InvalidRequest(format!("a {step} B stride")))?;
        let chain = ChainSpec::new(nodes * step, step32)?;
        let warmup = u32::try_from(nodes).map_err(|_| {
            RunnerError::InvalidRequest(format!("{nodes} nodes exceed one warm-up pass"))
        })?;
        let samples =
            s.fine_samples_with(path, chain, STEPS, Carveout::Percent(0), warmup, false, gpu)?;
        let cycles: Vec<f64> = samples
            .iter()
            .map(|&v| (f64::from(v) - overhead).max(0.0))
            .collect();
        // The curve, for -v: every walk's 5th percentile (the decision), median and 95th.
        if let Some(summary) = topology::LatencySummary::from_samples(&cycles) {
            log::info!(
                "tlb {path}: {nodes} nodes at stride {stride} B: p5 {:.1}, p50 {:.1}, p95 {:.1} cycles",
                tlb::p5(&cycles),
                summary.p50.get(),
                summary.p95.get()
            );
        }
        Ok(cycles)
    })
}

impl Benchmark for Tlb {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        for path in PATHS {
            let step = format!("{} {path}", self.info.name);
            match s.timed(&step, |s, gpu| search_path(s, path, gpu)) {
                Ok(finding) => {
                    log::info!(
                        "{step}: page {:?}, levels {:?}, bound {:?} pages, {} chases",
                        finding.page_bytes,
                        finding
                            .levels
                            .iter()
                            .map(|l| (l.entries, l.reach_bytes, l.miss_cycles))
                            .collect::<Vec<_>>(),
                        finding.bound_pages,
                        finding.probes
                    );
                    s.results.tlb.push((path, finding));
                }
                Err(e) => s.fail(ElementKind::L2, format!("{step}: {e}")),
            }
        }
    }

    fn expected_steps(
        &self,
        _: &crate::device::DeviceInfo,
        _: &super::super::MeasureOptions,
        _: &[&'static dyn Benchmark],
    ) -> u64 {
        PATHS.len() as u64
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        for (path, finding) in &measured.tlb {
            report_path(topo, *path, finding);
        }
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        for path in PATHS {
            let finding = m
                .tlb
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, f)| f)
                .ok_or_else(|| format!("tlb {path}: not measured"))?;
            check_path(profile, path, finding)?;
        }
        Ok(())
    }
}

/// How `finding` relates to the profile's `[tlb]`: every level within the reach tried
/// found with its entries and miss cycles (±2), the page size where a level was found,
/// and no level where the profile has none.
fn check_path(profile: &SimProfile, path: LoadPath, f: &TlbFinding) -> Result<(), String> {
    let Some(spec) = &profile.tlb else {
        return match f.levels.first() {
            None if f.bound_pages.is_some() => Ok(()),
            None => Err(format!("tlb {path}: neither a level nor a bound")),
            Some(l) => Err(format!(
                "tlb {path}: a level of {:?} entries where the profile has no TLB",
                l.entries
            )),
        };
    };
    for (i, level) in spec.levels.iter().enumerate() {
        let entries = u64::from(level.entries);
        match f.levels.get(i) {
            Some(found) => {
                if found.entries != Some(entries) {
                    return Err(format!(
                        "tlb {path} level {}: {:?} entries, truth {entries}",
                        i + 1,
                        found.entries
                    ));
                }
                if (found.miss_cycles - f64::from(level.miss_cycles)).abs() > 2.0 {
                    return Err(format!(
                        "tlb {path} level {}: miss {} cycles, truth {}",
                        i + 1,
                        found.miss_cycles,
                        level.miss_cycles
                    ));
                }
            }
            None if f.bound_pages.is_some_and(|b| b <= entries) => {}
            None => {
                return Err(format!(
                    "tlb {path} level {} ({entries} entries) not found; bound {:?} pages",
                    i + 1,
                    f.bound_pages
                ))
            }
        }
    }
    if f.levels.len() > spec.levels.len() {
        return Err(format!(
            "tlb {path}: {} levels, the profile has {}",
            f.levels.len(),
            spec.levels.len()
        ));
    }
    if !f.levels.is_empty() && f.page_bytes != Some(spec.page_bytes) {
        return Err(format!(
            "tlb {path}: page {:?} B, truth {} B",
            f.page_bytes, spec.page_bytes
        ));
    }
    Ok(())
}

/// The levels of `path` into the topology, and a bound where no further level was seen.
fn report_path(topo: &mut Topology, path: LoadPath, f: &TlbFinding) {
    let page = f
        .page_bytes
        .map(|p| Size::exact(Bytes(p), Provenance::Benchmark));
    for (i, level) in f.levels.iter().enumerate() {
        topo.tlb.push(TlbLevel {
            level: u8::try_from(i + 1).unwrap_or(u8::MAX),
            coverage: Some(match level.entries {
                Some(_) => Size::exact(Bytes(level.reach_bytes), Provenance::Benchmark),
                // Without a page size the reach is the walk's bytes, an upper estimate.
                None => Size::at_most(Bytes(level.reach_bytes), Provenance::Benchmark),
            }),
            page_size: page.clone(),
            miss_latency: level.miss.map(Latency::measured),
            path: Some(path.name().to_owned()),
            entries: level.entries,
        });
    }
    if let (Some(pages), Some(bytes)) = (f.bound_pages, f.bound_bytes) {
        let what = if f.levels.is_empty() {
            "no translation level overflowed".to_owned()
        } else {
            format!("no level after level {} overflowed", f.levels.len())
        };
        topo.notes.push(Note {
            severity: NoteSeverity::Info,
            element: None,
            quantity: None,
            message: format!(
                "TLB on the {path} path: {what} in walks up to {pages} pages over {}, the largest the memory and the data limits allowed",
                human(bytes)
            ),
        });
    }
    if !f.levels.is_empty() && f.page_bytes.is_none() {
        topo.notes.push(Note {
            severity: NoteSeverity::Warning,
            element: None,
            quantity: None,
            message: format!(
                "TLB on the {path} path: the page size is not determined (no candidate stride up to {} moved the first level's overflow); reaches are the walks' bytes",
                human(u64::from(tlb::STRIDES[tlb::STRIDES.len() - 1]))
            ),
        });
    }
}

/// Bytes in KiB, MiB or GiB.
fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    }
}
