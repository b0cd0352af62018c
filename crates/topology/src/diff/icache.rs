//! The instruction-fetch levels in a diff (schema 1.6), by position: sizes as sizes, costs
//! within the relative tolerance.

use crate::model::InstructionCacheLevel;

use super::{show, Differ};

pub(super) fn diff(
    d: &mut Differ,
    before: &[InstructionCacheLevel],
    after: &[InstructionCacheLevel],
) {
    let levels = before.len().max(after.len());
    for i in 0..levels {
        let (a, b) = (before.get(i), after.get(i));
        let path = format!("instruction_caches[{i}]");
        d.size(
            format!("{path}.size"),
            a.and_then(|l| l.size.as_ref()),
            b.and_then(|l| l.size.as_ref()),
        );
        let cost = |l: Option<&InstructionCacheLevel>| l.map(|l| l.cycles_per_instruction);
        match (cost(a), cost(b)) {
            (x, y) if x == y => {}
            (Some(x), Some(y))
                if (x - y).abs() <= d.options.relative_tolerance * x.abs().max(y.abs()) =>
            {
                d.result.within_uncertainty += 1;
            }
            (x, y) => {
                let show = |c: Option<f64>| show(c.map(|c| format!("{c:.3} cycles/instruction")));
                d.change(format!("{path}.cycles_per_instruction"), show(x), show(y));
            }
        }
    }
}
