//! The checks every backend applies to a request before running it, so that the CUDA
//! backend and the simulator refuse the same malformed requests with the same errors.

use super::*;

/// Checks what every backend requires of a [`PartitionMapRequest`]: a reference SM below
/// `sm_count`, at least 16 lines per SM, a line of at least 32 bytes and a multiple of 4,
/// and arrays that fit 32-bit indices.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_partition_map(
    request: &PartitionMapRequest,
    sm_count: u32,
) -> Result<(), RunnerError> {
    let bad = |why: String| Err(RunnerError::InvalidRequest(why));
    if request.reference_sm >= sm_count {
        return bad(format!(
            "reference SM {} does not exist: the device has {sm_count}",
            request.reference_sm
        ));
    }
    if request.lines_per_sm < 16 || request.lines_per_sm > 1 << 16 {
        return bad(format!(
            "{} lines per SM: between 16 and 65536",
            request.lines_per_sm
        ));
    }
    if request.line_bytes < 32 || request.line_bytes % 4 != 0 || request.line_bytes > 4096 {
        return bad(format!(
            "a {} B line: a multiple of 4 between 32 and 4096",
            request.line_bytes
        ));
    }
    let elements =
        u64::from(sm_count) * u64::from(request.lines_per_sm) * u64::from(request.line_bytes / 4);
    if elements > u64::from(u32::MAX) {
        return bad(format!("{elements} elements do not fit 32-bit indices"));
    }
    Ok(())
}

/// Checks what every backend requires of a [`PinnedRequest`]: one chain per SM, at least
/// one slot and one timed step, distinct SMs below `sm_count`, one stride.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_pinned(request: &PinnedRequest, sm_count: u32) -> Result<(), RunnerError> {
    let bad = |why: String| Err(RunnerError::InvalidRequest(why));
    if request.sms.is_empty() || request.sms.len() != request.chains.len() {
        return bad(format!(
            "a pinned chase needs one chain per SM and at least one SM: {} SMs, {} chains",
            request.sms.len(),
            request.chains.len()
        ));
    }
    if request.steps == 0 {
        return bad("a pinned chase needs at least one timed step".into());
    }
    if !(1..=32).contains(&request.warps) {
        return bad(format!("{} warps per slot: 1 to 32", request.warps));
    }
    if request.sample_steps > PINNED_MAX_SAMPLES {
        return bad(format!(
            "{} sampled loads: at most {PINNED_MAX_SAMPLES}",
            request.sample_steps
        ));
    }
    request.kernel()?;
    if request.chains_per_warp > 1 && request.sample_steps > 0 {
        return bad("sampled loads need one chase per warp".into());
    }
    if request.chases_per_slot() > 1
        && request
            .chains
            .windows(2)
            .any(|pair| pair[0].nodes() != pair[1].nodes())
    {
        return bad("with several warps, every slot's chain must have the same length".into());
    }
    if let Some(short) = request
        .chains
        .iter()
        .find(|c| c.nodes() < request.chases_per_slot())
    {
        return bad(format!(
            "a chain of {} nodes cannot give each of {} chases its own start",
            short.nodes(),
            request.chases_per_slot()
        ));
    }
    for (k, &sm) in request.sms.iter().enumerate() {
        if sm >= sm_count {
            return bad(format!("SM {sm} does not exist: the device has {sm_count}"));
        }
        if request.sms[..k].contains(&sm) {
            return bad(format!("SM {sm} is asked for twice"));
        }
    }
    if request
        .chains
        .windows(2)
        .any(|pair| pair[0].stride != pair[1].stride)
    {
        return bad("all chains of one launch must share one stride".into());
    }
    Ok(())
}

/// Checks what every backend requires of a [`ChaseRequest`]'s `written_bytes`: a multiple
/// of 4, at most the stride, with `flush_l2`, on a global path (the others copy the chain
/// elsewhere before the chase).
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_written(request: &ChaseRequest) -> Result<(), RunnerError> {
    let written = request.written_bytes;
    if written == 0 {
        return Ok(());
    }
    let stride = request.chains.iter().map(|c| c.stride).min().unwrap_or(0);
    let why = if written % 4 != 0 || written > stride {
        format!("{written} written bytes per node: a multiple of 4 up to the {stride} B stride")
    } else if !request.flush_l2 {
        "written bytes per node need flush_l2 (they are written after the flush)".into()
    } else if !matches!(
        request.path,
        LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc
    ) {
        format!(
            "written bytes per node need a global path, not {}",
            request.path
        )
    } else {
        return Ok(());
    };
    Err(RunnerError::InvalidRequest(why))
}

/// Checks what every backend requires of a [`TwoPhaseRequest`]: at least one block and one
/// timed step, enough threads for both phases and no more than a block may have, and paths
/// that have a two-phase kernel (the SM caches' paths).
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_two_phase(
    request: &TwoPhaseRequest,
    max_threads_per_block: u32,
) -> Result<(), RunnerError> {
    let bad = |why: String| Err(RunnerError::InvalidRequest(why));
    if request.blocks == 0 || request.timed_steps == 0 {
        return bad("a two-phase probe needs at least one block and one timed step".into());
    }
    let needed = request.fill.thread.max(request.evict.thread) + 1;
    if request.threads < needed || request.threads > max_threads_per_block {
        return bad(format!(
            "{} threads per block: the phases need at least {needed}, a block may have {max_threads_per_block}",
            request.threads
        ));
    }
    for phase in [request.fill, request.evict] {
        if !matches!(
            phase.path,
            LoadPath::GlobalCa
                | LoadPath::GlobalCg
                | LoadPath::GlobalNc
                | LoadPath::Texture
                | LoadPath::Constant
        ) {
            return bad(format!(
                "the two-phase probe is for caches of global data; {} is not one of their paths",
                phase.path
            ));
        }
    }
    if request.block_fill {
        let whole = |p: &crate::backend::Phase| u64::from(p.steps) == p.chain.nodes();
        if request.blocks != 1
            || request.fill.path != LoadPath::GlobalCg
            || request.evict.path != LoadPath::GlobalCg
            || !whole(&request.fill)
            || !whole(&request.evict)
        {
            return bad(
                "a block-filled two-phase probe is one block, both phases .cg, each one whole pass over its chain"
                    .into(),
            );
        }
    }
    Ok(())
}

/// The largest span of a [`ListChaseRequest`] (its lines from the smallest to the largest), 1 GiB.
pub const LIST_CHASE_MAX_SPAN: u64 = 1 << 30;

/// Checks a [`ListChaseRequest`]: a global path, a line of whole words, at least two
/// distinct lines within 1 GiB, and at least one timed load.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_list_chase(request: &ListChaseRequest) -> Result<(), RunnerError> {
    let bad = |why: String| Err(RunnerError::InvalidRequest(why));
    if !matches!(
        request.path,
        LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc
    ) {
        return bad(format!(
            "a list chase runs on global loads, not {}",
            request.path
        ));
    }
    if request.line_bytes < 4 || request.line_bytes % 4 != 0 {
        return bad(format!("a line of {} B", request.line_bytes));
    }
    if request.lines.len() < 2 || request.steps == 0 {
        return bad("a list chase needs two lines and one timed load".into());
    }
    let mut sorted = request.lines.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return bad("a list chase's lines must be distinct".into());
    }
    let span =
        (sorted[sorted.len() - 1] - sorted[0] + 1).saturating_mul(u64::from(request.line_bytes));
    if span > LIST_CHASE_MAX_SPAN {
        return bad(format!("a list chase spanning {span} B"));
    }
    Ok(())
}
