//! Instruction caches: the levels an SM's instruction fetch meets (`[icache]` in a profile).
//!
//! A loop over `c` bytes of straight-line code (plus the loop's own `loop_bytes`) runs
//! from the first level that holds all of it, at that level's cycles per instruction;
//! code no level holds runs at `beyond_cycles_per_instruction` (the L2's fetch). A loop is
//! a cyclic walk, so an LRU cache that cannot hold all of it misses on every line: the
//! step at each capacity is sharp, as in the data caches. Each timed iteration adds the
//! profile's jitter (and, rarely, its outlier) to the total.

use serde::{Deserialize, Serialize};

use crate::error::RunnerError;
use crate::icache::{InstructionFetchRequest, InstructionFetchRun};

use super::SimBackend;

/// Cycles per instruction of a profile without `[icache]`: every loop runs alike.
const UNCACHED_CYCLES_PER_INSTRUCTION: f64 = 1.0;

impl SimBackend {
    /// The instruction-fetch request on the model: the loop's cost per instruction from
    /// `[icache]`, times the instructions of the timed iterations, plus each iteration's
    /// noise. Kepler and Maxwell (before compute capability 7.0) cannot run the kernel.
    pub(super) fn run_instruction_fetch(
        &mut self,
        request: &InstructionFetchRequest,
    ) -> Result<InstructionFetchRun, RunnerError> {
        request.check()?;
        let kernel = pchase_kernels::icache::kernel();
        self.profile.device.check_kernel(kernel)?;
        self.kernels_used.insert(kernel.entry());
        self.count_launch();
        let cpi = self
            .profile
            .icache
            .as_ref()
            .map_or(UNCACHED_CYCLES_PER_INSTRUCTION, |spec| {
                spec.cycles_per_instruction(request.code_bytes())
            });
        let instructions = request.instructions_per_iteration() as f64;
        let noise = self.profile.noise;
        let jitter = self.jitter;
        let mut cycles = 0i64;
        for _ in 0..request.iterations {
            cycles += (cpi * instructions).round() as i64
                + Self::noise(
                    &mut self.rng,
                    jitter.as_ref(),
                    noise.outlier_probability,
                    noise.outlier_extra_cycles,
                );
        }
        let cycles = u64::try_from(cycles.max(1)).unwrap_or(1);
        let seconds = cycles as f64 / (self.profile.clock.sm_mhz * 1e6);
        Ok(InstructionFetchRun {
            cycles,
            gpu_time: std::time::Duration::from_secs_f64(seconds),
        })
    }
}

/// One instruction-cache level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IcacheLevelSpec {
    /// Bytes of code it holds.
    pub bytes: u64,
    /// Cycles per instruction of one warp whose loop fits this level but not the one
    /// before.
    pub cycles_per_instruction: f64,
}

/// The instruction caches (`[icache]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IcacheSpec {
    /// The levels, nearest (smallest) first.
    pub levels: Vec<IcacheLevelSpec>,
    /// Cycles per instruction of code no level holds.
    pub beyond_cycles_per_instruction: f64,
    /// Bytes of the loop's own instructions (the clock read, the indirect branch, the
    /// counter), part of what the caches must hold.
    #[serde(default = "default_loop_bytes")]
    pub loop_bytes: u64,
}

fn default_loop_bytes() -> u64 {
    // About a dozen instructions of 16 bytes.
    192
}

impl IcacheSpec {
    /// Checks the levels; `Err` names the field.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] for no level, sizes not strictly growing, a cost that is
    /// not positive and finite, or costs that do not grow with the level.
    pub fn validate(&self) -> Result<(), RunnerError> {
        if self.levels.is_empty() {
            return Err(RunnerError::Profile(
                "icache.levels: at least one level".into(),
            ));
        }
        let mut before: Option<&IcacheLevelSpec> = None;
        for (i, level) in self.levels.iter().enumerate() {
            let cost = level.cycles_per_instruction;
            if !(cost.is_finite() && cost > 0.0) {
                return Err(RunnerError::Profile(format!(
                    "icache.levels[{i}].cycles_per_instruction: must be positive, is {cost}"
                )));
            }
            if level.bytes <= self.loop_bytes {
                return Err(RunnerError::Profile(format!(
                    "icache.levels[{i}].bytes: {} does not hold the loop's {} bytes",
                    level.bytes, self.loop_bytes
                )));
            }
            if let Some(b) = before {
                if level.bytes <= b.bytes || cost <= b.cycles_per_instruction {
                    return Err(RunnerError::Profile(format!(
                        "icache.levels[{i}]: sizes and costs must grow from level to level"
                    )));
                }
            }
            before = Some(level);
        }
        let beyond = self.beyond_cycles_per_instruction;
        if !(beyond.is_finite() && before.is_some_and(|b| beyond > b.cycles_per_instruction)) {
            return Err(RunnerError::Profile(format!(
                "icache.beyond_cycles_per_instruction: {beyond} must exceed the last level's"
            )));
        }
        Ok(())
    }

    /// Cycles per instruction of a loop over `code_bytes` of straight-line code.
    pub fn cycles_per_instruction(&self, code_bytes: u64) -> f64 {
        let footprint = code_bytes + self.loop_bytes;
        self.levels
            .iter()
            .find(|level| footprint <= level.bytes)
            .map_or(self.beyond_cycles_per_instruction, |level| {
                level.cycles_per_instruction
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_level_that_holds_the_loop_sets_the_cost() {
        let spec = IcacheSpec {
            levels: vec![
                IcacheLevelSpec {
                    bytes: 16 << 10,
                    cycles_per_instruction: 1.0,
                },
                IcacheLevelSpec {
                    bytes: 128 << 10,
                    cycles_per_instruction: 2.0,
                },
            ],
            beyond_cycles_per_instruction: 5.0,
            loop_bytes: 192,
        };
        spec.validate().unwrap();
        assert_eq!(spec.cycles_per_instruction((16 << 10) - 512), 1.0);
        // The loop's own bytes tip a code of exactly the capacity over.
        assert_eq!(spec.cycles_per_instruction(16 << 10), 2.0);
        assert_eq!(spec.cycles_per_instruction(1 << 20), 5.0);
        let mut shrinking = spec.clone();
        shrinking.levels[1].bytes = 8 << 10;
        assert!(shrinking.validate().is_err());
        let mut flat = spec.clone();
        flat.beyond_cycles_per_instruction = 2.0;
        assert!(flat.validate().is_err());
        let mut none = spec;
        none.levels.clear();
        assert!(none.validate().is_err());
    }
}
