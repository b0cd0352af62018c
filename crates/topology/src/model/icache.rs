//! Instruction caches (schema 1.6): the levels an SM's instruction fetch meets,
//! from one warp's loop over straight-line code of growing size.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::Size;
use crate::units::Bytes;

/// One level of instruction fetch: the code sizes one warp's loop runs at one cost.
///
/// ```
/// use topology::{Bytes, InstructionCacheLevel, Provenance, Size};
/// let l0 = InstructionCacheLevel {
///     level: 1,
///     size: Some(Size::exact(Bytes::kib(32), Provenance::Benchmark)),
///     cycles_per_instruction: 1.02,
///     tried_up_to: None,
/// };
/// assert_eq!(l0.describe(), "level 1: 32 KiB, 1.02 cycles/instruction");
/// let beyond = InstructionCacheLevel { level: 3, size: None, cycles_per_instruction: 6.5, tried_up_to: Some(Bytes::kib(1024)) };
/// assert_eq!(beyond.describe(), "level 3: beyond every cache found (code up to 1 MiB tried), 6.5 cycles/instruction");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstructionCacheLevel {
    /// The level, 1 for the nearest.
    pub level: u8,
    /// The code it holds: the first size of straight-line code (16-byte instructions,
    /// the loop's own few instructions not counted) that no longer ran at its cost.
    /// Absent for the last level, which serves whatever no cache found holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// Median cycles per instruction of one warp while its code fits this level and not
    /// the one before.
    pub cycles_per_instruction: f64,
    /// For the last level: the largest code tried, the bound of what a further cache
    /// could hold undetected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tried_up_to: Option<Bytes>,
}

impl InstructionCacheLevel {
    /// One line: the level, its size (or bound) and its cost.
    pub fn describe(&self) -> String {
        let cpi = if self.cycles_per_instruction >= 10.0 {
            format!("{:.1}", self.cycles_per_instruction)
        } else {
            format!("{:.2}", self.cycles_per_instruction)
        };
        let cpi = if cpi.contains('.') {
            cpi.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            cpi
        };
        let size = match (&self.size, self.tried_up_to) {
            (Some(size), _) => size.to_string(),
            (None, Some(tried)) => {
                format!("beyond every cache found (code up to {tried} tried)")
            }
            (None, None) => "beyond every cache found".to_owned(),
        };
        format!("level {}: {size}, {cpi} cycles/instruction", self.level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ComputeCapability, DeviceInfo, Topology};
    use crate::quantity::Provenance;

    fn level(level: u8, kib: Option<u64>, cpi: f64) -> InstructionCacheLevel {
        InstructionCacheLevel {
            level,
            size: kib.map(|k| Size::exact(Bytes::kib(k), Provenance::Benchmark)),
            cycles_per_instruction: cpi,
            tried_up_to: kib.is_none().then_some(Bytes::kib(1024)),
        }
    }

    fn gpu(levels: Vec<InstructionCacheLevel>) -> Topology {
        let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
        topo.instruction_caches = levels;
        topo
    }

    #[test]
    fn levels_are_validated_rendered_and_diffed() {
        let good = gpu(vec![
            level(1, Some(32), 1.0),
            level(2, Some(128), 2.2),
            level(3, None, 6.0),
        ]);
        good.validate().unwrap();
        let table = crate::render::table(&good);
        assert!(table.contains("level 2: 128 KiB, 2.2 cycles/instruction"));
        assert!(crate::render::markdown(&good).contains("## Instruction caches"));
        assert!(crate::render::svg(&good).contains("i-fetch 3"));
        assert!(crate::render::html(&good, None).contains("<h2>Instruction caches</h2>"));
        let round: Topology = serde_json::from_str(&serde_json::to_string(&good).unwrap()).unwrap();
        assert_eq!(round, good);
        for bad in [
            // A missing size before the last level, a cost that falls, a size that shrinks,
            // a level out of order, a cost that is not positive.
            vec![level(1, None, 1.0), level(2, Some(128), 2.0)],
            vec![level(1, Some(32), 2.0), level(2, Some(128), 1.0)],
            vec![level(1, Some(128), 1.0), level(2, Some(32), 2.0)],
            vec![level(2, Some(32), 1.0)],
            vec![level(1, Some(32), 0.0)],
        ] {
            assert!(gpu(bad.clone()).validate().is_err(), "{bad:?}");
        }
        let mut moved = good.clone();
        moved.instruction_caches[1].size =
            Some(Size::exact(Bytes::kib(192), Provenance::Benchmark));
        moved.instruction_caches[2].cycles_per_instruction = 6.05;
        let d = crate::diff::diff(&good, &moved);
        let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["instruction_caches[1].size"]);
        let fewer = gpu(good.instruction_caches[..2].to_vec());
        assert!(!crate::diff::diff(&good, &fewer).is_empty());
    }
}
