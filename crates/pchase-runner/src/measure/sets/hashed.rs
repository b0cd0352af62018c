//! Step 3 of the search where the overflowing set's lines are irregularly spaced: a hashed
//! index, if the same chase names the same lines again.

use super::{missing_nodes, Search, SetMapping, SetProbe, CLASS_PASSES};
use crate::error::RunnerError;

/// The overflowing set's lines are irregularly spaced: a hashed index, if the same chase
/// names the same lines again (a set has fixed members).
pub(super) fn hashed<P: SetProbe>(
    s: &mut Search<'_, P>,
    capacity: u64,
    class: &[u64],
    every: bool,
) -> Result<(), RunnerError> {
    let again = missing_nodes(&s.chase(capacity + 1, 1, CLASS_PASSES)?);
    if again != class {
        s.note(format!(
            "the same chase of {} lines again: these nodes missed repeatedly: {again:?}",
            capacity + 1
        ));
        s.finding.undetermined = Some(format!(
            "the conflicts do not repeat: two chases of the same {} lines overflowed at {class:?} and at {again:?}, so no fixed set of lines conflicts (a replacement with randomness, or an index that depends on more than the address); ways, sets and mapping not determined",
            capacity + 1
        ));
        return Ok(());
    }
    let ways = class.len() as u64 - 1;
    if !every || capacity % ways != 0 {
        s.finding.mapping = Some(SetMapping::Hashed {
            block_per_line: false,
        });
        s.finding.undetermined = Some(format!(
            "irregularly spaced conflicts {class:?}; {}",
            if every {
                format!("{ways} ways do not divide the {capacity} lines kept")
            } else {
                "not every line of the set missed on every pass, so its size is not the ways"
                    .to_owned()
            }
        ));
        return Ok(());
    }
    let sets = capacity / ways;
    let block_per_line = class.iter().enumerate().all(|(i, &c)| c / sets == i as u64);
    let offsets: Vec<u64> = class.iter().map(|c| c % sets).collect();
    s.note(format!(
        "the set's lines are not evenly spaced: a hashed index; {}",
        if block_per_line {
            format!("one in each aligned block of {sets} lines, at offsets {offsets:?} (an XOR of the block number into the set bits has this shape)")
        } else {
            format!("offsets in blocks of {sets} lines {offsets:?}")
        }
    ));
    // A modulo index would put lines a power-of-two multiple of the sets apart into one set.
    let stride = sets.next_power_of_two();
    if (ways + 1) * stride <= s.limits.max_lines {
        let conflicts = s.overflows(ways + 1, stride)?;
        s.note(format!(
            "{} lines {stride} apart (one set under a modulo index) {}",
            ways + 1,
            if conflicts {
                "overflow"
            } else {
                "do not overflow"
            }
        ));
    }
    s.finding.ways = u32::try_from(ways).ok();
    s.finding.sets = u32::try_from(sets).ok();
    s.finding.mapping = Some(SetMapping::Hashed { block_per_line });
    Ok(())
}
