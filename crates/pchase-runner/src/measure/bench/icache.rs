//! The instruction caches: cycles per instruction of one warp's loop over straight-line
//! code of growing size, and the levels in that curve ([`crate::measure::icache`] has the
//! method, `pchase_kernels::icache` the kernel). Deep: not in the default run.

use std::time::Duration;

use pchase_kernels::icache as kernel;
use topology::{
    Bytes, ChangePointEvidence, InstructionCacheLevel, Note, NoteSeverity, Size, Topology,
};

use super::{Benchmark, Info};
use crate::{
    error::RunnerError,
    icache::InstructionFetchRequest,
    measure::{
        icache::{search, IcacheFinding},
        Measurements, Session,
    },
    sim::SimProfile,
};

/// The instruction-cache benchmark.
pub(crate) struct Icache {
    info: Info,
}

/// The instruction caches.
pub(crate) static ICACHE: Icache = Icache {
    info: Info {
        name: "icache",
        summary: "instruction caches: levels, sizes and cycles per instruction from one warp's loop over 1 KiB to 1 MiB of straight-line code (deep)",
        element: None,
        needs: &[],
        automatic: false,
        deep: true,
        kernels: || vec![kernel::kernel()],
    },
};

/// Segments of the module: 2048 × 512 B = 1 MiB of multiply-adds, well beyond the 128 KiB
/// of the largest instruction cache published (Volta's L1, Jia et al. 2018); the size whose
/// cubins memtopo embeds.
pub const MODULE_SEGMENTS: u32 = kernel::BENCHMARK_SEGMENTS;
/// Multiply-adds one launch runs at least (timed iterations × code).
const TARGET_INSTRUCTIONS: u64 = 1 << 18;
/// Launches per code size (their median decides).
const LAUNCHES: usize = 3;

/// Timed iterations for `segments` segments: at least two, and enough for
/// [`TARGET_INSTRUCTIONS`].
fn iterations(segments: u32) -> u32 {
    let per_iteration = kernel::code_bytes(segments) / u64::from(kernel::SASS_INSTRUCTION_BYTES);
    u32::try_from(TARGET_INSTRUCTIONS.div_ceil(per_iteration.max(1)))
        .unwrap_or(u32::MAX)
        .max(2)
}

fn measure(s: &mut Session<'_>, gpu: &mut Duration) -> Result<IcacheFinding, RunnerError> {
    search(MODULE_SEGMENTS, |segments| {
        let request = InstructionFetchRequest::new(
            MODULE_SEGMENTS,
            MODULE_SEGMENTS - segments,
            1,
            iterations(segments),
        )?;
        let mut costs = Vec::with_capacity(LAUNCHES);
        for _ in 0..LAUNCHES {
            let run = s.backend.instruction_fetch(&request)?;
            *gpu += run.gpu_time;
            costs.push(run.cycles_per_instruction(&request));
        }
        log::info!(
            "icache: {:>5} KiB of code ({segments} segments × {} iterations): {} cycles/instruction",
            request.code_bytes() as f64 / 1024.0,
            request.iterations,
            costs
                .iter()
                .map(|c| format!("{c:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        Ok(costs)
    })
}

impl Benchmark for Icache {
    fn info(&self) -> &Info {
        &self.info
    }

    fn run(&self, s: &mut Session<'_>) {
        let cc = s.backend.device().compute_capability;
        if kernel::kernel().check_supported(cc.into()).is_err() {
            s.results.icache_failure = Some(format!(
                "instruction caches not measured: the kernel counts Volta's 16-byte instructions and needs compute capability {}, the device has {cc}",
                kernel::kernel().min_capability()
            ));
            return;
        }
        let step = self.info.name.to_owned();
        match s.timed(&step, measure) {
            Ok(f) => {
                for (i, level) in f.levels.iter().enumerate() {
                    log::info!(
                        "icache level {}: {:.3} cycles/instruction over {}–{} KiB, size {}",
                        i + 1,
                        level.cycles_per_instruction,
                        level.code_range.0 >> 10,
                        level.code_range.1 >> 10,
                        level.size_bytes.map_or_else(
                            || "beyond".to_owned(),
                            |b| format!("{} KiB", b as f64 / 1024.0)
                        )
                    );
                }
                s.results.icache = Some(f);
            }
            Err(e) => {
                log::info!("{step}: {e}");
                s.results.icache_failure = Some(format!("{step}: {e}"));
            }
        }
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        if let Some(why) = &measured.icache_failure {
            topo.notes.push(Note {
                severity: NoteSeverity::Warning,
                element: None,
                quantity: None,
                message: why.clone(),
            });
        }
        let Some(f) = &measured.icache else {
            return;
        };
        let resolution = Bytes(kernel::code_bytes(1));
        let last = f.levels.len();
        for (i, level) in f.levels.iter().enumerate() {
            topo.instruction_caches.push(InstructionCacheLevel {
                level: u8::try_from(i + 1).unwrap_or(u8::MAX),
                size: level.size_bytes.map(|bytes| {
                    Size::measured(
                        Bytes(bytes),
                        ChangePointEvidence {
                            method: Some("pelt+bisection".into()),
                            statistic: level.step_ratio,
                            resolution: Some(resolution),
                            ..ChangePointEvidence::default()
                        },
                    )
                }),
                cycles_per_instruction: level.cycles_per_instruction,
                tried_up_to: (i + 1 == last).then_some(Bytes(f.max_code_bytes)),
            });
        }
        topo.notes.push(Note {
            severity: NoteSeverity::Info,
            element: None,
            quantity: None,
            message: format!(
                "instruction caches: one warp looped over 1 KiB to {} KiB of straight-line fma.rn.f32 (16-byte SASS instructions by construction), {} code sizes; a level's size is the first code size that no longer ran at its cost (512-byte resolution; the loop's own dozen instructions ride on top)",
                f.max_code_bytes >> 10,
                f.probes
            ),
        });
    }

    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let cc = profile.device.compute_capability;
        if kernel::kernel().check_supported(cc.into()).is_err() {
            return match (&m.icache, &m.icache_failure) {
                (None, Some(_)) => Ok(()),
                _ => Err(format!(
                    "icache on compute capability {cc}: expected a reason and no result"
                )),
            };
        }
        let f = m
            .icache
            .as_ref()
            .ok_or_else(|| format!("icache: not measured ({:?})", m.icache_failure))?;
        let max = kernel::code_bytes(MODULE_SEGMENTS);
        let segment = kernel::code_bytes(1);
        // The truth: each level that fails within the module, at the first whole segment
        // whose code and loop overflow it; then the cost beyond.
        let (mut truth, beyond): (Vec<(u64, f64)>, f64) = match &profile.icache {
            Some(spec) => (
                spec.levels
                    .iter()
                    .map(|l| {
                        let first =
                            (l.bytes.saturating_sub(spec.loop_bytes) / segment + 1) * segment;
                        (first, l.cycles_per_instruction)
                    })
                    .collect(),
                spec.beyond_cycles_per_instruction,
            ),
            None => (Vec::new(), 1.0),
        };
        let last_cost = truth
            .iter()
            .find(|(first, _)| *first > max)
            .map_or(beyond, |(_, c)| *c);
        truth.retain(|(first, _)| *first <= max);
        let found: Vec<(Option<u64>, f64)> = f
            .levels
            .iter()
            .map(|l| (l.size_bytes, l.cycles_per_instruction))
            .collect();
        let mut expected: Vec<(Option<u64>, f64)> =
            truth.iter().map(|&(b, c)| (Some(b), c)).collect();
        expected.push((None, last_cost));
        let matches = found.len() == expected.len()
            && found
                .iter()
                .zip(&expected)
                .all(|((fs, fc), (es, ec))| fs == es && (fc - ec).abs() <= 0.02 * ec);
        if matches && f.max_code_bytes == max {
            Ok(())
        } else {
            Err(format!(
                "icache: levels (size, cycles/instruction) {found:?}, truth {expected:?}"
            ))
        }
    }
}
