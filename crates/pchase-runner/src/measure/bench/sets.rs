//! Sets, ways, set mapping and replacement of the L1 data store, the constant L1 and the
//! constant L1.5 ([`crate::measure::sets`] has the method). Deep: not in the default run.

use std::time::Duration;

use pchase_kernels::{catalogue, Granularity};
use topology::{ElementKind, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::{Carveout, ChainSpec, ListChaseRequest, LoadPath, Phase, TwoPhaseRequest},
    error::RunnerError,
    measure::{
        sets::{self, CacheSets, Load, SetLimits, SetProbe},
        Measurements, Session,
    },
    sim::SimProfile,
};

mod check;
mod report;

/// The sets benchmark.
pub(crate) struct Sets {
    info: Info,
}

/// Sets, ways and replacement.
pub(crate) static SETS: Sets = Sets {
    info: Info {
        name: "sets",
        summary: "sets, ways, address-to-set mapping and replacement of the L1, constant L1 and L1.5 (deep)",
        element: None,
        needs: &[],
        automatic: false,
        deep: true,
        kernels: || {
            vec![
                catalogue::chase(LoadPath::GlobalCa, Granularity::Fine),
                catalogue::chase(LoadPath::GlobalCg, Granularity::Fine),
                catalogue::chase(LoadPath::Constant, Granularity::Fine),
                catalogue::two_phase(LoadPath::GlobalCa, LoadPath::GlobalCa).expect("catalogued"),
                catalogue::two_phase(LoadPath::Constant, LoadPath::Constant).expect("catalogued"),
            ]
        },
    },
};

/// Timed loads of every launch. Every launch of the benchmark, chase or two-phase, asks for
/// the same 8 × `STEPS` bytes of shared memory for its samples (30 KiB, which with a 1 KiB
/// reservation still fits a 32 KiB configuration), so the L1 keeps one size throughout.
pub const STEPS: u32 = 3840;

/// Replicas (blocks, one per SM) of a victim experiment.
const REPLICAS: u32 = 4;

/// Bytes the constant path can address (the module's constant bank).
const BANK: u64 = crate::measure::probe::CONSTANT_BANK_BYTES;

/// The chases of one cache through the session's backend.
struct FineProbe<'a, 's> {
    s: &'a mut Session<'s>,
    path: LoadPath,
    line: u64,
    threshold: f64,
    /// Loads faster than this were served by a cache in front (the constant L1 before the
    /// L1.5): they say nothing about this cache.
    front: f64,
    name: &'static str,
    gpu: &'a mut Duration,
}

/// `H` and `M` per load, for `-v`: the pattern each decision read.
fn pattern(loads: &[Load]) -> String {
    loads
        .iter()
        .take(256)
        .map(|&(_, miss)| match miss {
            Some(true) => 'M',
            Some(false) => 'H',
            None => 'f',
        })
        .collect()
}

impl FineProbe<'_, '_> {
    /// A raw latency as a hit, a miss, or a load served in front (`None`).
    fn classify(&self, cycles: u32) -> Option<bool> {
        let v = f64::from(cycles);
        (v >= self.front).then_some(v > self.threshold)
    }

    /// The chase over `lines`, warmed by two passes, with one launch's timed loads.
    fn list_request(&self, lines: &[u64]) -> Result<ListChaseRequest, RunnerError> {
        let n = lines.len();
        Ok(ListChaseRequest {
            path: self.path,
            line_bytes: u32::try_from(self.line)
                .map_err(|_| RunnerError::InvalidRequest(format!("{} B lines", self.line)))?,
            lines: lines.to_vec(),
            warmup_steps: u32::try_from(2 * n)
                .map_err(|_| RunnerError::InvalidRequest(format!("{n} lines")))?,
            steps: STEPS,
            carveout: Carveout::Percent(0),
        })
    }

    /// Launches' latencies of `request` (one launch's timed loads after another) as loads.
    fn classified(&self, request: &ListChaseRequest, latencies: &[u32]) -> Vec<Load> {
        latencies
            .iter()
            .enumerate()
            .map(|(k, &v)| {
                let k = k as u64 % u64::from(request.steps);
                (request.line_of_load(k), self.classify(v))
            })
            .collect()
    }

    /// For `-vv`: what one list chase missed.
    fn log_list(&self, n: usize, loads: &[Load]) {
        log::debug!(
            "sets {}: a list of {n} lines: {} of {} loads missed",
            self.name,
            misses(loads),
            loads.len()
        );
    }
}

/// The loads that missed.
fn misses(loads: &[Load]) -> usize {
    loads.iter().filter(|l| l.1 == Some(true)).count()
}

/// Launches of a list chase over `lines` lines for `passes` passes (one window of
/// [`STEPS`] timed loads each).
fn list_launches(lines: usize, passes: u32) -> u64 {
    (u64::from(passes) * lines as u64)
        .div_ceil(u64::from(STEPS))
        .max(1)
}

impl SetProbe for FineProbe<'_, '_> {
    fn chase(&mut self, nodes: u64, stride: u64, passes: u32) -> Result<Vec<Load>, RunnerError> {
        let step = u32::try_from(stride * self.line)
            .map_err(|_| RunnerError::InvalidRequest(format!("a {stride}-line stride")))?;
        let chain = ChainSpec::new(nodes * u64::from(step), step)?;
        let warmup = u32::try_from(2 * nodes)
            .map_err(|_| RunnerError::InvalidRequest(format!("{nodes} nodes")))?;
        let launches = (u64::from(passes) * nodes)
            .div_ceil(u64::from(STEPS))
            .max(1);
        let mut loads = Vec::new();
        for _ in 0..launches {
            let samples = self.s.fine_samples_with(
                self.path,
                chain,
                STEPS,
                Carveout::Percent(0),
                warmup,
                false,
                self.gpu,
            )?;
            loads.extend(
                samples
                    .iter()
                    .enumerate()
                    .map(|(j, &v)| ((u64::from(warmup) + j as u64) % nodes, self.classify(v))),
            );
        }
        let missing: Vec<u64> = {
            let mut m: Vec<u64> = loads
                .iter()
                .filter(|l| l.1 == Some(true))
                .map(|l| l.0)
                .collect();
            m.sort_unstable();
            m.dedup();
            m
        };
        log::info!(
            "sets {}: {nodes} nodes {stride} line(s) apart: {} of {} loads missed; nodes that missed {:?}; first loads {}",
            self.name,
            loads.iter().filter(|l| l.1 == Some(true)).count(),
            loads.len(),
            &missing[..missing.len().min(64)],
            pattern(&loads)
        );
        Ok(loads)
    }

    /// Global paths only: a list chase writes its chain from the host into global memory.
    fn can_chase_lines(&self) -> bool {
        matches!(
            self.path,
            LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc
        )
    }

    fn chase_lines(
        &mut self,
        lines: &[u64],
        passes: u32,
        enough: u32,
    ) -> Result<Vec<Load>, RunnerError> {
        let request = self.list_request(lines)?;
        let mut loads = Vec::new();
        let mut missed = 0;
        for _ in 0..list_launches(lines.len(), passes) {
            let run = self.s.backend.list_chase(&request)?;
            *self.gpu += run.gpu_time;
            let block = run
                .blocks
                .first()
                .ok_or_else(|| RunnerError::WrongResult("a list chase returned no block".into()))?;
            let more = self.classified(&request, &block.latencies);
            missed += misses(&more);
            loads.extend(more);
            // Every launch is the same chase: once the decision has its misses, the rest
            // cannot change it.
            if missed >= enough as usize {
                break;
            }
        }
        self.log_list(lines.len(), &loads);
        Ok(loads)
    }

    fn list_loads(&self, lines: u64, passes: u32) -> u64 {
        list_launches(lines as usize, passes) * u64::from(STEPS)
    }

    fn victims(
        &mut self,
        nodes: u64,
        fill: u64,
        block: u64,
    ) -> Result<Vec<Vec<Load>>, RunnerError> {
        let line = u32::try_from(self.line).unwrap_or(u32::MAX);
        let steps = |n: u64| {
            u32::try_from(n).map_err(|_| RunnerError::InvalidRequest(format!("{n} loads")))
        };
        let blocks = if self.path == LoadPath::Constant {
            let per_block = (nodes + block) * self.line + 256;
            u32::try_from((BANK / per_block).clamp(1, u64::from(REPLICAS))).unwrap_or(1)
        } else {
            REPLICAS.min(self.s.backend.device().sm_count.max(1))
        };
        let request = TwoPhaseRequest {
            fill: Phase {
                path: self.path,
                chain: ChainSpec::new(nodes * self.line, line)?,
                thread: 0,
                steps: steps(fill)?,
            },
            // Thread 1 is in thread 0's warp: where an SM has several copies of a cache,
            // one per warp group, both phases use the same copy.
            evict: Phase {
                path: self.path,
                chain: ChainSpec::new(block * self.line, line)?,
                thread: 1,
                steps: steps(block)?,
            },
            timed_steps: STEPS,
            blocks,
            threads: 32,
            carveout: Carveout::Percent(0),
            flush_l2: false,
            block_fill: false,
        };
        let run = self.s.backend.two_phase(&request)?;
        *self.gpu += run.gpu_time;
        let replicas: Vec<Vec<Load>> = run
            .blocks
            .iter()
            .map(|b| {
                b.latencies
                    .iter()
                    .enumerate()
                    .map(|(j, &v)| ((fill + j as u64) % nodes, self.classify(v)))
                    .collect()
            })
            .collect();
        for (i, loads) in replicas.iter().enumerate() {
            log::info!(
                "sets {}: victims, {nodes} lines filled by {fill} loads, {block} new lines; replica {i}: first loads {}",
                self.name,
                pattern(loads)
            );
        }
        Ok(replicas)
    }
}

/// The `q` quantile of fine-grained samples of `chain` (raw cycles, with the overhead).
fn quantile(
    s: &mut Session<'_>,
    path: LoadPath,
    chain: ChainSpec,
    q: f64,
    gpu: &mut Duration,
) -> Result<f64, RunnerError> {
    let warmup = 2 * u32::try_from(chain.nodes()).unwrap_or(0);
    let mut v = s.fine_samples_with(path, chain, 512, Carveout::Percent(0), warmup, false, gpu)?;
    v.sort_unstable();
    let i = ((v.len().max(1) - 1) as f64 * q) as usize;
    v.get(i)
        .map(|&c| f64::from(c))
        .ok_or_else(|| RunnerError::WrongResult("a chase returned no samples".into()))
}

/// The median of a chase's samples: one level.
fn median(
    s: &mut Session<'_>,
    path: LoadPath,
    chain: ChainSpec,
    gpu: &mut Duration,
) -> Result<f64, RunnerError> {
    quantile(s, path, chain, 0.5, gpu)
}

/// The fastest L2 hits (5th percentile of `.cg` loads over 256 lines of 64 KiB, which hold
/// lines of every partition): a miss of an SM cache is never clearly below them, while a
/// median could be a far partition's and make near hits look like hits.
fn l2_fast(s: &mut Session<'_>, gpu: &mut Duration) -> Result<f64, RunnerError> {
    quantile(
        s,
        LoadPath::GlobalCg,
        ChainSpec::new(64 << 10, 256)?,
        0.05,
        gpu,
    )
}

/// The caches measured: element, path, line, expected capacity (lines), the most lines a
/// chase may span.
fn targets(s: &Session<'_>) -> Vec<(ElementKind, LoadPath, u64, u64, u64)> {
    // The allocation line (what a tag covers, so what a set holds), else the fetch
    // granularity: with the H100's 32-byte fetch granularity as the unit, four nodes share
    // one line and the first overflow came at four times the lines (a deep run of session
    // 11 spent 61 s of GPU time reducing such a chase, and found no set).
    let line = |s: &Session<'_>, e: ElementKind, default: u64| {
        s.results
            .element(e)
            .and_then(|r| r.line_bytes.as_ref().or(r.line.as_ref()))
            .map_or(default, |l| l.bytes)
    };
    let mut out = Vec::new();
    let l1_line = line(s, ElementKind::L1Data, 128);
    let l1_hint = s
        .exact_size(ElementKind::L1Data)
        .unwrap_or(s.backend.device().shared_per_sm_bytes);
    out.push((
        ElementKind::L1Data,
        LoadPath::GlobalCa,
        l1_line,
        l1_hint / l1_line,
        4 * l1_hint.max(64 << 10) / l1_line,
    ));
    let c1_line = line(s, ElementKind::ConstantL1, 64);
    let c1 = s.exact_size(ElementKind::ConstantL1).unwrap_or(2048);
    out.push((
        ElementKind::ConstantL1,
        LoadPath::Constant,
        c1_line,
        c1 / c1_line,
        BANK / c1_line,
    ));
    let c15_line = line(s, ElementKind::ConstantL15, 256);
    let c15 = s.exact_size(ElementKind::ConstantL15).unwrap_or(32 << 10);
    out.push((
        ElementKind::ConstantL15,
        LoadPath::Constant,
        c15_line,
        c15 / c15_line,
        BANK / c15_line,
    ));
    out
}

/// Measures one cache.
fn measure(
    s: &mut Session<'_>,
    (element, path, line, hint, max_lines): (ElementKind, LoadPath, u64, u64, u64),
    gpu: &mut Duration,
) -> Result<CacheSets, RunnerError> {
    let line32 = u32::try_from(line).unwrap_or(u32::MAX);
    // The two levels: this cache's hits, and the next level's.
    // Loads below `front` were served by a cache in front of this one.
    let mut front = 0.0;
    let (hit, miss) = match element {
        ElementKind::ConstantL15 => {
            // Lines four constant-L1 lines apart over 8 KiB: every load misses a 2 KiB
            // constant L1 and hits the L1.5.
            let l15 = median(s, path, ChainSpec::new(8 << 10, 256)?, gpu)?;
            let l1 = median(s, path, ChainSpec::new(4 * 64, 64)?, gpu)?;
            front = (l1 + l15) / 2.0;
            (l15, l2_fast(s, gpu)?)
        }
        ElementKind::ConstantL1 => (
            median(s, path, ChainSpec::new(4 * line, line32)?, gpu)?,
            median(s, path, ChainSpec::new(8 << 10, 256)?, gpu)?,
        ),
        _ => (
            median(s, path, ChainSpec::new(4 * line, line32)?, gpu)?,
            l2_fast(s, gpu)?,
        ),
    };
    if miss - hit < (0.05 * miss).max(4.0) {
        return Err(RunnerError::WrongResult(format!(
            "hits ({hit} cycles) and misses ({miss} cycles) are not apart"
        )));
    }
    let bank = path == LoadPath::Constant;
    let limits = SetLimits {
        hint_lines: hint,
        max_lines,
        max_victim_lines: if bank { BANK / line - 4 } else { max_lines },
        window: u64::from(STEPS),
    };
    let mut probe = FineProbe {
        s,
        path,
        line,
        threshold: (hit + miss) / 2.0,
        front,
        name: element.key(),
        gpu,
    };
    let finding = sets::search(&mut probe, limits)?;
    Ok(CacheSets {
        element,
        path,
        line_bytes: line32,
        hit_cycles: hit,
        miss_cycles: miss,
        finding,
    })
}

impl Benchmark for Sets {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        if s.results.l1_caches_global_loads.is_none() {
            let mut gpu = Duration::ZERO;
            if let Ok((cached, ca, cg)) = s.global_caching(&mut gpu) {
                s.results.l1_caches_global_loads = Some(cached);
                s.results.ca_cg_medians = Some((ca, cg));
            }
        }
        for target in targets(s) {
            let element = target.0;
            if element == ElementKind::L1Data && s.results.l1_caches_global_loads != Some(true) {
                continue;
            }
            let step = format!("{} {element}", self.info.name);
            match s.timed(&step, |s, gpu| measure(s, target, gpu)) {
                Ok(found) => {
                    for line in &found.finding.evidence {
                        log::info!("{step}: {line}");
                    }
                    s.results.sets.push(found);
                }
                Err(e) => s.fail(element, format!("{step}: {e}")),
            }
        }
    }

    fn expected_steps(
        &self,
        _: &crate::device::DeviceInfo,
        _: &super::super::MeasureOptions,
        _: &[&'static dyn Benchmark],
    ) -> u64 {
        3
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        report::report(measured, topo);
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        check::check(profile, m)
    }
}
