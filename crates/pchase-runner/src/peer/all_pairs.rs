//! Every ordered pair of a node's GPUs copying at once: each GPU's copy engine pulls every
//! other GPU's memory into its own, all on streams of their own, enqueued in turns, one
//! untimed group of copies first so that every stream is busy before any is timed
//! ([`PeerCopiesRequest`]). Each pair's rate is the median of its timed groups; the node's
//! total is their sum. Measured once per node run, after the single links; with two GPUs it
//! is both directions of their link at once, each by its own GPU's engine.

use topology::fleet::{AllPairs, PairRate};

use super::{PeerBackend, PeerCopiesRequest, PeerOptions, PeerTransfer};
use crate::error::RunnerError;

/// Copies between every ordered pair of the node's GPUs at once; the pairs and notes name
/// each GPU by `indices[position]` (its device index; a position without one by itself).
/// Pairs whose peer access the driver denies are left out, with a note. The caller sets the
/// pairs' peaks from the node's links ([`AllPairs::set_peaks`]).
///
/// # Errors
/// [`RunnerError::InvalidRequest`] where no pair may copy; the backend's error where the
/// copy fails.
///
/// ```
/// use pchase_runner::{peer, sim::SimProfile};
/// let h100 = SimProfile::bundled("h100")?;
/// let mut node = peer::SimNode::new(vec![h100.clone(), h100.clone(), h100])?;
/// let all = peer::measure_all_pairs(&mut node, &[0, 1, 2], &peer::PeerOptions::default())?;
/// assert_eq!(all.pairs.len(), 6);
/// let sum: f64 = all.pairs.iter().map(|p| p.gb_per_s).sum();
/// assert!((all.total_gb_per_s - sum).abs() < 1e-6);
/// # Ok::<(), pchase_runner::RunnerError>(())
/// ```
pub fn measure_all_pairs(
    node: &mut dyn PeerBackend,
    indices: &[u32],
    options: &PeerOptions,
) -> Result<AllPairs, RunnerError> {
    let gpus = node.gpus();
    let name = |position: u32| indices.get(position as usize).copied().unwrap_or(position);
    let mut notes = Vec::new();
    let mut transfers = Vec::new();
    for from in 0..gpus {
        for to in (0..gpus).filter(|&to| to != from) {
            match node.access(from, to) {
                Ok(access) if access.can_access => transfers.push(PeerTransfer::pull(from, to)),
                Ok(_) => notes.push(format!(
                    "{} → {} left out: the driver denies peer access",
                    name(from),
                    name(to)
                )),
                Err(e) => notes.push(format!("{} → {} left out: {e}", name(from), name(to))),
            }
        }
    }
    if transfers.is_empty() {
        return Err(RunnerError::InvalidRequest(format!(
            "no pair of the node may copy: {}",
            if notes.is_empty() {
                format!("{gpus} GPU(s)")
            } else {
                notes.join("; ")
            }
        )));
    }
    let request = PeerCopiesRequest {
        transfers,
        bytes: options.tuned_copy_bytes,
        copies_per_timing: options.tuned_copies_per_timing,
        repeats: options.tuned_repeats,
    };
    let started = std::time::Instant::now();
    let times = node.peer_copies(&request)?;
    log::debug!(
        "{} pair(s) copied at once in {:.1} ms",
        request.transfers.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let pairs = request
        .transfers
        .iter()
        .zip(&times)
        .map(|(t, times)| {
            let mut rates: Vec<f64> = times
                .iter()
                .filter(|d| !d.is_zero())
                .map(|d| request.bytes_per_timing() as f64 / d.as_secs_f64() / 1e9)
                .collect();
            rates.sort_by(f64::total_cmp);
            let (from, to) = (name(t.dst), name(t.src));
            let rate = rates
                .get(rates.len() / 2)
                .copied()
                .ok_or_else(|| RunnerError::WrongResult(format!("{from} → {to}: no timed copy")))?;
            Ok(PairRate {
                from,
                to,
                gb_per_s: rate,
                fraction_of_peak: None,
            })
        })
        .collect::<Result<Vec<_>, RunnerError>>()?;
    Ok(AllPairs {
        copy_bytes: request.bytes,
        total_gb_per_s: pairs.iter().map(|p| p.gb_per_s).sum(),
        pairs,
        notes,
    })
}
