//! The TLBs of the L2 path (`ld.global.cg`) and the L1 path (`ld.global.ca`): the
//! translation levels a chase sees, their entries, the span one entry maps and the miss
//! cost, each in three allocations of the walked memory ([`crate::walk`]): one plain
//! `cuMemAlloc`, separately mapped 2 MiB chunks, and an aliased range of more virtual
//! addresses than the memory (a pool of chunks mapped over and over), where the levels
//! beyond the memory's reach show (the H100's third level needs 288 GiB).
//! [`crate::measure::tlb`] has the method. Deep: not in the default run.

use pchase_kernels::catalogue;
use topology::{ElementKind, Latency, Size, TlbLevel, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::LoadPath,
    error::RunnerError,
    measure::{
        tlb::{self, step_bytes, TlbLimits, TlbSearch, SKEW},
        Measurements, Session,
    },
    sim::SimProfile,
    walk::{WalkAllocation, WalkRegion, WalkRequest},
};

mod report;

/// The TLB benchmark.
pub(crate) struct Tlb {
    info: Info,
}

/// The TLBs.
pub(crate) static TLB: Tlb = Tlb {
    info: Info {
        name: "tlb",
        summary: "TLBs of the L2 (.cg) and L1 (.ca) paths over all of device memory (plain, in 2 MiB chunks) and over 496 GiB of aliased addresses: levels, entries, span per entry, miss cost (deep)",
        element: None,
        needs: &[],
        automatic: false,
        deep: true,
        kernels: || {
            PATHS
                .iter()
                .filter_map(|&p| catalogue::chase_lines(p).ok())
                .collect()
        },
    },
};

/// The paths searched: the L2 path first (its levels tell whether the L1 path's hits are
/// translated at all), then the L1 path.
const PATHS: [LoadPath; 2] = [LoadPath::GlobalCg, LoadPath::GlobalCa];

/// Timed loads of each walk (its 5th percentile decides).
const STEPS: u32 = 256;

/// The region the walks may use: all of device memory but a reserve (a sixteenth, at
/// least 4 GiB where the memory allows) for the driver, the context and the timing
/// buffers; whole GiB where it is larger than one.
pub(crate) fn region_bytes(total_memory: u64) -> u64 {
    let reserve = (total_memory / 16).max((4 << 30u64).min(total_memory / 2));
    let bytes = total_memory.saturating_sub(reserve);
    if bytes >= 1 << 30 {
        bytes & !((1u64 << 30) - 1)
    } else {
        bytes & !((2u64 << 20) - 1)
    }
}

/// The most nodes of a walk on `path`: half the L1's lines on the L1 path (where the L1
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

/// The walk backend, or why there is none.
fn walks<'a>(s: &'a mut Session<'_>) -> Result<&'a mut dyn crate::walk::WalkBackend, RunnerError> {
    s.backend
        .walks()
        .ok_or_else(|| RunnerError::InvalidRequest("this backend cannot run TLB walks".to_string()))
}

/// Searches the levels of `path` in `region`.
fn search_path(
    s: &mut Session<'_>,
    region: WalkRegion,
    path: LoadPath,
    gpu: &mut std::time::Duration,
) -> Result<TlbSearch, RunnerError> {
    let limits = TlbLimits {
        max_bytes: region.bytes,
        max_nodes: max_nodes(s, path),
    };
    let overhead = f64::from(s.results.clock_overhead.unwrap_or(0));
    let finding = tlb::search(limits, |nodes, stride, group| {
        let too_many = || RunnerError::InvalidRequest(format!("a walk of {nodes} nodes"));
        let nodes32 = u32::try_from(nodes).map_err(|_| too_many())?;
        let request = WalkRequest {
            path,
            nodes: nodes32,
            step_bytes: step_bytes(stride),
            group: u32::try_from(group).map_err(|_| too_many())?,
            warmup_steps: nodes32,
            steps: STEPS,
        };
        let run = walks(s)?.walk(&request)?;
        *gpu += run.gpu_time;
        let cycles: Vec<f64> = run
            .latencies
            .iter()
            .map(|&v| (f64::from(v) - overhead).max(0.0))
            .collect();
        // The curve, for -v: every walk's 5th percentile (the decision), median and 95th.
        if let Some(summary) = topology::LatencySummary::from_samples(&cycles) {
            let order = match group {
                1 => String::new(),
                g => format!(" in groups of {g}"),
            };
            log::info!(
                "tlb {path} {}: {nodes} nodes at stride {stride} B{order} (span {} B): p5 {:.1}, p50 {:.1}, p95 {:.1} cycles",
                region.allocation,
                request.span_bytes(),
                tlb::p5(&cycles),
                summary.p50.get(),
                summary.p95.get()
            );
        }
        Ok(cycles)
    })?;
    Ok(TlbSearch {
        path,
        region,
        finding,
    })
}

impl Benchmark for Tlb {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let memory = region_bytes(s.backend.device().total_memory_bytes);
        for allocation in WalkAllocation::ALL {
            let wanted = match allocation {
                WalkAllocation::Aliased => crate::walk::ALIASED_BYTES,
                _ => memory,
            };
            let step = format!("{} {allocation} region", self.info.name);
            let region = s.timed(&step, |s, _| walks(s)?.walk_region(allocation, wanted));
            let region = match region {
                Ok(region) => region,
                Err(e) => {
                    s.fail(ElementKind::L2, format!("{step}: {e}"));
                    continue;
                }
            };
            log::info!(
                "{step}: {} B{}{}",
                region.bytes,
                region
                    .chunk_bytes
                    .map(|c| format!(" in chunks of {c} B"))
                    .unwrap_or_default(),
                region
                    .backing_bytes
                    .map(|b| format!(" backed by {b} B"))
                    .unwrap_or_default()
            );
            for path in PATHS {
                let step = format!("{} {allocation} {path}", self.info.name);
                match s.timed(&step, |s, gpu| search_path(s, region, path, gpu)) {
                    Ok(search) => {
                        let f = &search.finding;
                        log::info!(
                            "{step}: levels (entries, span, reach, miss) {:?}, bound {:?} entries, {} walks",
                            f.levels
                                .iter()
                                .map(|l| (l.entries, l.entry_bytes, l.reach_bytes, l.miss_cycles))
                                .collect::<Vec<_>>(),
                            f.bound_pages,
                            f.probes
                        );
                        s.results.tlb.push(search);
                    }
                    Err(e) => s.fail(ElementKind::L2, format!("{step}: {e}")),
                }
            }
            // Timed: unmapping a chunked region costs the driver as much as mapping it.
            let step = format!("{} {allocation} release", self.info.name);
            if let Err(e) = s.timed(&step, |s, _| walks(s)?.release_walk_region()) {
                s.fail(ElementKind::L2, format!("{step}: {e}"));
            }
        }
    }

    fn expected_steps(
        &self,
        _: &crate::device::DeviceInfo,
        _: &super::super::MeasureOptions,
        _: &[&'static dyn Benchmark],
    ) -> u64 {
        // Per allocation: the region, each path's search, the release.
        (WalkAllocation::ALL.len() * (PATHS.len() + 2)) as u64
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        for search in &measured.tlb {
            report::levels(topo, search);
        }
        report::notes(topo, &measured.tlb, far_hit_p50(measured));
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        for allocation in WalkAllocation::ALL {
            for path in PATHS {
                let search = m
                    .tlb
                    .iter()
                    .find(|t| t.path == path && t.region.allocation == allocation)
                    .ok_or_else(|| format!("tlb {path} {allocation}: not measured"))?;
                check_search(profile, search)?;
            }
        }
        Ok(())
    }
}

/// The median of the L2's far-hit level, cycles, where the session measured the L2.
fn far_hit_p50(measured: &Measurements) -> Option<f64> {
    use crate::measure::l2::LevelKind;
    let l2 = measured.l2.as_ref()?;
    l2.levels
        .iter()
        .find(|l| l.kind == LevelKind::FarHit)
        .map(|l| l.distribution.p50)
}

/// How a search relates to the profile's `[tlb]`: every level whose overflow the region
/// could reach (entries + 1 of its spans) found with its entries, its entry span (the
/// page, or the larger span an entry maps) and its sets as the interleave — or, where no
/// larger stride could show the span, its reach within 1 % — and its miss cycles (±2), each confirmed by
/// its order test where one ran; no more levels than the profile has; no level where the
/// profile has none.
fn check_search(profile: &SimProfile, search: &TlbSearch) -> Result<(), String> {
    let (path, allocation, f) = (search.path, search.region.allocation, &search.finding);
    let what = format!("tlb {path} {allocation}");
    let Some(spec) = &profile.tlb else {
        return match f.levels.first() {
            None if f.bound_pages.is_some() => Ok(()),
            None => Err(format!("{what}: neither a level nor a bound")),
            Some(l) => Err(format!(
                "{what}: a level of {:?} entries where the profile has no TLB",
                l.entries
            )),
        };
    };
    if path == LoadPath::GlobalCa && !spec.sm_hits_translated {
        // The walks' lines stay in the L1, whose hits this profile does not translate.
        return match (f.levels.first(), f.bound_pages) {
            (None, Some(_)) => Ok(()),
            (Some(l), _) => Err(format!(
                "{what}: a level of {:?} entries although L1 hits are not translated",
                l.entries
            )),
            (None, None) => Err(format!("{what}: neither a level nor a bound")),
        };
    }
    let page = spec.page_for(allocation);
    for (i, level) in spec.levels.iter().enumerate() {
        let entries = u64::from(level.entries);
        let span = level.entry_span(page);
        let Some(found) = f.levels.get(i) else {
            // Beyond the region (or the walks' node limit): a bound is the answer.
            let reachable = (entries + 1) * tlb::step_bytes(span) <= search.region.bytes;
            if reachable && f.bound_pages.is_none_or(|b| b > entries) {
                return Err(format!(
                    "{what} level {} ({entries} entries of {span} B) not found; bound {:?} nodes",
                    i + 1,
                    f.bound_pages
                ));
            }
            break;
        };
        if found.entries.is_none() {
            // The span not determined (no larger stride reached the overflow): the reach,
            // the walk's bytes, must still be the level's within 1 %.
            let truth = entries * span;
            if found.reach_bytes.abs_diff(truth) > truth / 100 {
                return Err(format!(
                    "{what} level {}: reach {} B with the span not determined, truth {truth} B",
                    i + 1,
                    found.reach_bytes
                ));
            }
        } else if found.entries != Some(entries) {
            return Err(format!(
                "{what} level {}: {:?} entries, truth {entries}",
                i + 1,
                found.entries
            ));
        } else if found.entry_bytes != Some(span) {
            return Err(format!(
                "{what} level {}: entry span {:?} B, truth {span} B",
                i + 1,
                found.entry_bytes
            ));
        } else if found.interleave != sets(level) {
            return Err(format!(
                "{what} level {}: interleave {}, truth {} sets",
                i + 1,
                found.interleave,
                sets(level)
            ));
        }
        if (found.miss_cycles - f64::from(level.miss_cycles)).abs() > 2.0 {
            return Err(format!(
                "{what} level {}: miss {} cycles, truth {}",
                i + 1,
                found.miss_cycles,
                level.miss_cycles
            ));
        }
        if let Some(check) = found.order_check.filter(|c| !c.confirms()) {
            return Err(format!(
                "{what} level {}: kept against its order test {check:?}",
                i + 1
            ));
        }
    }
    if f.levels.len() > spec.levels.len() {
        return Err(format!(
            "{what}: {} levels, the profile has {}",
            f.levels.len(),
            spec.levels.len()
        ));
    }
    Ok(())
}

/// The sets of a simulated level (consecutive entry spans go to consecutive sets): the
/// interleave its walks must find.
fn sets(level: &crate::sim::TlbLevelSpec) -> u64 {
    match level.associativity {
        crate::sim::Associativity::Ways(ways) => u64::from(level.entries / ways),
        crate::sim::Associativity::Full => 1,
        crate::sim::Associativity::Sets(sets) => u64::from(sets),
    }
}

/// The levels of one search as the topology's [`TlbLevel`]s.
fn tlb_levels(search: &TlbSearch) -> impl Iterator<Item = TlbLevel> + '_ {
    use topology::{Bytes, Provenance};
    let f = &search.finding;
    f.levels.iter().enumerate().map(move |(i, level)| TlbLevel {
        level: u8::try_from(i + 1).unwrap_or(u8::MAX),
        coverage: Some(match level.entries {
            Some(_) => Size::exact(Bytes(level.reach_bytes), Provenance::Benchmark),
            // Without an entry's span the reach is the walk's bytes, an upper estimate.
            None => Size::at_most(Bytes(level.reach_bytes), Provenance::Benchmark),
        }),
        // The walks measure the span one entry maps (coverage / entries), which is more
        // than a page where an entry holds several (the H100's): not the page size.
        page_size: None,
        miss_latency: level.miss.map(Latency::measured),
        path: Some(search.path.name().to_owned()),
        entries: level.entries,
        allocation: Some(search.region.allocation.name().to_owned()),
        interleave: (level.interleave > 1).then_some(level.interleave),
    })
}
