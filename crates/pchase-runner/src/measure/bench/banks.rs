//! Shared-memory bank conflicts: how long one warp's load from shared memory takes when its
//! 32 addresses are `s` bytes apart, for `s` from 4 to 512 bytes and for one word shared by
//! the whole warp; from these, the bank period (addresses this far apart fall into one bank)
//! and the cycles each further way of a conflict adds.
//!
//! The probe (`pchase_kernels::probes::SHARED_BANK_CONFLICTS`) lets thread `t` chase its
//! own word at `t × s` — each load's address the value of the one before — so every step is
//! one warp-wide load with that stride's conflicts, and the time per step is its latency.
//! With a period of `P` bytes, threads `s ≤ P` bytes apart meet `32 s / P` to a bank (at
//! least one), and `32` from `s = P` on; the benchmark fits `latency = conflict-free +
//! cost × (ways − 1)` for every power-of-two period and keeps the best. The fit's conflict-
//! free latency is checked against the warp's load of one word (a broadcast: one way, whatever
//! the period), and each thread's final word against its first (the chain was followed).
//!
//! This module is the whole benchmark: the launch, the analysis, the section it reports,
//! the simulated GPU's model ([`BankModel`], reading the profile's `[benchmarks.shared-banks]`)
//! and the check of the simulation against that truth.

use std::time::Duration;

use pchase_kernels::{probes, LoadPath};
use serde::Deserialize;
use topology::{Bytes, LatencySummary, Provenance, RowValue, Section, Size};

use super::{Benchmark, Info};
use crate::{
    backend::{ProbeArg, ProbeLaunch, ProbeModel, SimulatedGpu, SimulatedProbe},
    error::RunnerError,
    measure::{Measurements, Session},
    sim::SimProfile,
};

/// The shared-memory bank conflicts benchmark.
pub(crate) struct Banks {
    info: Info,
}

/// Shared-memory bank conflicts.
pub(crate) static SHARED_BANKS: Banks = Banks {
    info: Info {
        name: "shared-banks",
        summary: "shared-memory bank conflicts: one warp's load latency at strides of 4 to 512 bytes and on one word, the bank period and the cycles each further way adds",
        element: None,
        needs: &[],
        automatic: false,
        deep: false,
        kernels: || vec![&probes::SHARED_BANK_CONFLICTS],
    },
};

/// Threads of the probe: one warp.
const THREADS: u32 = 32;
/// Timed loads per thread and launch.
const LOADS: u32 = 2048;
/// Launches per stride; their median decides.
const LAUNCHES: usize = 3;
/// The strides, bytes: one word for the whole warp, then 4 B to 512 B, so that periods up
/// to 256 B (32 banks of 8 bytes) show their plateau.
const STRIDES: [u32; 9] = [0, 4, 8, 16, 32, 64, 128, 256, 512];

/// What the profile's `[benchmarks.shared-banks]` says of the simulated GPU.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Truth {
    /// Bytes after which addresses fall into the same bank again.
    period_bytes: u32,
    /// Cycles each further way of a conflict adds.
    cycles_per_way: f64,
    /// Cycles of a conflict-free load in the chain; the profile's shared-memory latency
    /// when absent.
    #[serde(default)]
    conflict_free_cycles: Option<f64>,
}

impl Truth {
    fn of(truth: &toml::Value) -> Result<Truth, RunnerError> {
        truth.clone().try_into().map_err(|e| {
            RunnerError::Profile(format!("benchmarks.{}: {e}", SHARED_BANKS.info.name))
        })
    }
}

/// The ways of a conflict when 32 threads load words `stride` bytes apart and banks repeat
/// every `period` bytes (one word for the whole warp is a broadcast: one way).
fn ways(stride: u32, period: u32) -> u32 {
    if stride == 0 {
        return 1;
    }
    (u64::from(THREADS) * u64::from(stride.min(period)) / u64::from(period.max(1))).clamp(1, 32)
        as u32
}

/// The simulated GPU's probe: every timed load costs the conflict-free latency plus the
/// cost of its further ways, plus the profile's noise; every chain returns to its word.
struct BankModel;

impl ProbeModel for BankModel {
    fn simulate(
        &self,
        gpu: &mut dyn SimulatedGpu,
        launch: &ProbeLaunch,
    ) -> Result<SimulatedProbe, RunnerError> {
        let name = SHARED_BANKS.info.name;
        let truth = gpu
            .truth(name)
            .ok_or_else(|| {
                RunnerError::Profile(format!(
                    "no model of the shared-memory banks (no [benchmarks.{name}] table)"
                ))
            })
            .and_then(Truth::of)?;
        let stride = launch.u32("stride_bytes")?;
        let loads = launch.u32("loads")?;
        let base = truth
            .conflict_free_cycles
            .unwrap_or_else(|| f64::from(gpu.hit_latency(LoadPath::Shared).unwrap_or_default()));
        let per_load =
            base + truth.cycles_per_way * f64::from(ways(stride, truth.period_bytes) - 1);
        let mut cycles = 0i64;
        for _ in 0..loads {
            cycles += per_load.round() as i64 + gpu.noise();
        }
        let cycles = u64::try_from(cycles.max(1)).unwrap_or(1);
        let mut out = vec![cycles as u32, (cycles >> 32) as u32];
        out.extend((0..launch.threads).map(|t| t * stride));
        Ok(SimulatedProbe {
            buffers: vec![out],
            cycles,
        })
    }
}

/// Cycles per timed load of each launch at `stride`.
fn measure_stride(
    s: &mut Session<'_>,
    stride: u32,
    gpu: &mut Duration,
) -> Result<Vec<f64>, RunnerError> {
    let launch = ProbeLaunch::new(&probes::SHARED_BANK_CONFLICTS, 1, THREADS)
        .shared((THREADS * stride).max(4))
        .arg("out", ProbeArg::Buffer(vec![0; 2 + THREADS as usize]))
        .arg("stride_bytes", ProbeArg::U32(stride))
        .arg("loads", ProbeArg::U32(LOADS));
    let mut costs = Vec::with_capacity(LAUNCHES);
    for _ in 0..LAUNCHES {
        let run = s.backend.probe(&launch, &BankModel)?;
        *gpu += run.gpu_time;
        let out = &run.buffers[0];
        let cycles = u64::from(out[0]) | (u64::from(out[1]) << 32);
        if let Some(t) = (0..THREADS).find(|&t| out[2 + t as usize] != t * stride) {
            return Err(RunnerError::WrongResult(format!(
                "shared-banks: thread {t} ended at byte {} instead of its word at {}",
                out[2 + t as usize],
                t * stride
            )));
        }
        costs.push(cycles as f64 / f64::from(LOADS));
    }
    Ok(costs)
}

/// The fit of `latency = conflict_free + cost × (ways − 1)` over the strides from 4 bytes on,
/// for a period.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fit {
    period: u32,
    conflict_free: f64,
    cost: f64,
    cost_error: f64,
    largest_residual: f64,
}

/// Least squares of the medians `(stride, cycles)` against the ways of `period`.
fn fit(medians: &[(u32, f64)], period: u32) -> Option<Fit> {
    let points: Vec<(f64, f64)> = medians
        .iter()
        .filter(|(stride, _)| *stride > 0)
        .map(|&(stride, c)| (f64::from(ways(stride, period) - 1), c))
        .collect();
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let cost = points
        .iter()
        .map(|p| (p.0 - mean_x) * (p.1 - mean_y))
        .sum::<f64>()
        / sxx;
    let conflict_free = mean_y - cost * mean_x;
    let residuals: Vec<f64> = points
        .iter()
        .map(|p| p.1 - conflict_free - cost * p.0)
        .collect();
    let sse: f64 = residuals.iter().map(|r| r * r).sum();
    let cost_error = (sse / (n - 2.0).max(1.0) / sxx).sqrt();
    Some(Fit {
        period,
        conflict_free,
        cost,
        cost_error,
        largest_residual: residuals.iter().fold(0.0, |m, r| f64::max(m, r.abs())),
    })
}

/// The section from every stride's launches: the best period's fit, checked.
fn analyse(costs: &[(u32, Vec<f64>)]) -> Result<Section, String> {
    let medians: Vec<(u32, f64)> = costs
        .iter()
        .map(|(stride, c)| {
            let mut c = c.clone();
            c.sort_by(f64::total_cmp);
            (*stride, c[c.len() / 2])
        })
        .collect();
    let largest = STRIDES[STRIDES.len() - 1];
    // Periods whose plateau the strides can show: up to half the largest stride.
    let best = (3..)
        .map(|shift| 1u32 << shift)
        .take_while(|&p| p <= largest / 2)
        .filter_map(|p| fit(&medians, p))
        .min_by(|a, b| a.largest_residual.total_cmp(&b.largest_residual))
        .ok_or("no stride pattern to fit")?;
    // One word for the whole warp is a broadcast, one way whatever the period: the fit's
    // conflict-free latency must be its latency.
    let broadcast = medians
        .iter()
        .find(|(stride, _)| *stride == 0)
        .map_or(f64::NAN, |m| m.1);
    if best.cost < 0.1 {
        return Err(format!(
            "no stride slowed the loads (cycles per load {}): no bank conflicts to measure",
            medians
                .iter()
                .map(|(s, c)| format!("{s} B: {c:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // A fit that misses the conflict-free load by more than a cycle, or any stride by more
    // than half a way's cost (and a cycle), explains the curve badly: say so, report
    // nothing.
    let tolerance = (best.cost / 2.0).max(1.0);
    let misses_broadcast = (best.conflict_free - broadcast).abs() > 1.0 || broadcast.is_nan();
    if misses_broadcast || best.largest_residual > tolerance {
        return Err(format!(
            "the latencies per stride ({}) fit no bank period: best {} B, conflict-free {:.1} against {:.1} cycles on one word, a residual of {:.1} cycles",
            medians
                .iter()
                .map(|(s, c)| format!("{s} B: {c:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            best.period,
            best.conflict_free,
            broadcast,
            best.largest_residual
        ));
    }
    let mut section = Section::new("Shared-memory bank conflicts").with_method(format!(
        "One warp of {THREADS} threads, each chasing its own word of shared memory, the words a stride apart; cycles per load of {LOADS} dependent loads, median of {LAUNCHES} launches. Ways follow from the bank period fitted to all strides: latency = conflict-free + cost × (ways − 1)."
    ));
    for (stride, c) in costs {
        let summary = LatencySummary::from_samples(c)
            .ok_or_else(|| format!("no launches at stride {stride}"))?;
        let (key, label) = if *stride == 0 {
            (
                "one_word".to_owned(),
                "the whole warp on one word".to_owned(),
            )
        } else {
            let ways = ways(*stride, best.period);
            (
                format!("stride_{stride}"),
                format!(
                    "threads {stride} B apart ({ways} way{})",
                    if ways == 1 { "" } else { "s" }
                ),
            )
        };
        section.push(&key, &label, RowValue::latency(summary));
    }
    section.push(
        "period",
        "bank period (addresses this far apart share a bank)",
        RowValue::size(Size::exact(
            Bytes(u64::from(best.period)),
            Provenance::Benchmark,
        )),
    );
    section.push(
        "banks",
        "banks of 4-byte words (period ÷ 4 B)",
        RowValue::count(best.period / 4, Provenance::Derived),
    );
    section.push(
        "cost_per_way",
        "each further way of a conflict",
        RowValue::Number(topology::Number {
            value: best.cost,
            unit: "cycles".into(),
            provenance: Provenance::Benchmark,
            standard_error: Some(best.cost_error),
        }),
    );
    Ok(section)
}

fn measure(s: &mut Session<'_>, gpu: &mut Duration) -> Result<Vec<(u32, Vec<f64>)>, RunnerError> {
    STRIDES
        .iter()
        .map(|&stride| Ok((stride, measure_stride(s, stride, gpu)?)))
        .collect()
}

impl Benchmark for Banks {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let name = self.info.name;
        let found = s
            .timed(name, measure)
            .map_err(|e| e.to_string())
            .and_then(|costs| analyse(&costs));
        if let Err(why) = &found {
            log::info!("{name}: {why}");
        }
        s.results.sections.insert(name, found);
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let name = self.info.name;
        let Some(truth) = profile.benchmarks.get(name) else {
            return match m.sections.get(name) {
                Some(Err(_)) => Ok(()),
                other => Err(format!("{name}: no truth in the profile, found {other:?}")),
            };
        };
        let truth = Truth::of(truth).map_err(|e| e.to_string())?;
        let section = m
            .section(name)
            .ok_or_else(|| format!("{name}: not measured ({:?})", m.sections.get(name)))?;
        let value = |key: &str| section.row(key).map(|r| &r.value);
        let period = match value("period") {
            Some(RowValue::Size(size)) => size.bound.exact().map(|b| b.0),
            _ => None,
        };
        let cost = value("cost_per_way").and_then(RowValue::as_number);
        let free = match value("one_word") {
            Some(RowValue::Latency(l)) => Some(l.p50.0),
            _ => None,
        };
        let truth_free = truth
            .conflict_free_cycles
            .unwrap_or(f64::from(profile.shared_memory.latency));
        let agrees = period == Some(u64::from(truth.period_bytes))
            && cost.is_some_and(|c| {
                (c - truth.cycles_per_way).abs() <= 0.05 * truth.cycles_per_way + 0.05
            })
            && free.is_some_and(|f| (f - truth_free).abs() <= 1.0);
        if agrees {
            Ok(())
        } else {
            Err(format!(
                "{name}: period {period:?} B, cost per way {cost:?}, conflict-free {free:?}; truth {} B, {}, {truth_free}",
                truth.period_bytes, truth.cycles_per_way
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ways_follow_the_period() {
        let ways: Vec<u32> = STRIDES.iter().map(|&s| ways(s, 128)).collect();
        assert_eq!(ways, [1, 1, 2, 4, 8, 16, 32, 32, 32]);
        assert_eq!(super::ways(8, 256), 1);
        assert_eq!(super::ways(512, 256), 32);
    }

    /// Launch costs as a GPU with `period` and `cost` would give them, with a little noise.
    fn costs(period: u32, free: f64, cost: f64) -> Vec<(u32, Vec<f64>)> {
        STRIDES
            .iter()
            .map(|&s| {
                let c = free + cost * f64::from(ways(s, period) - 1);
                (s, vec![c + 0.01, c, c - 0.02])
            })
            .collect()
    }

    #[test]
    fn the_fit_finds_period_and_cost() {
        for (period, cost) in [(128, 2.0), (64, 1.5), (32, 4.0), (256, 3.0)] {
            let section = analyse(&costs(period, 29.0, cost)).unwrap();
            let row = |k: &str| section.row(k).unwrap().value.clone();
            assert_eq!(
                row("period"),
                RowValue::size(Size::exact(Bytes(u64::from(period)), Provenance::Benchmark))
            );
            assert_eq!(
                row("banks"),
                RowValue::count(period / 4, Provenance::Derived)
            );
            let fitted = row("cost_per_way").as_number().unwrap();
            assert!((fitted - cost).abs() < 0.01, "{period}: {fitted}");
            assert_eq!(
                section
                    .row("stride_128")
                    .unwrap()
                    .label
                    .ends_with("(32 ways)"),
                period <= 128
            );
        }
    }

    #[test]
    fn a_curve_no_period_explains_is_refused() {
        let mut c = costs(128, 29.0, 2.0);
        // One stride far off the line.
        c[4].1 = vec![90.0; 3];
        let err = analyse(&c).unwrap_err();
        assert!(err.contains("fit no bank period"), "{err}");
    }
}
