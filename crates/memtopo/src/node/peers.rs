//! The links between a node's measured GPUs, after the GPUs themselves: every ordered
//! pair (reader, owner), measured by `pchase_runner::peer::measure_link` on the simulated
//! node or on CUDA, with the NVLink count from NVML for real GPUs.
//!
//! A link's measurement touches two GPUs, so the links hold every measured GPU's lock.
//! Each GPU's run hands its lock over to the links, and on CUDA its context too
//! ([`crate::handover`]): the links then neither wait for a lock nor create a context,
//! but for a GPU whose context could not be kept (its context alone is created again).
//! Where a GPU's run did not hand over (one of the run's GPUs had to wait for its lock,
//! which releases what was handed over), the links take every lock again, in index order
//! (so that two memtopos cannot each hold one and wait for the other), and create every
//! context; a GPU that another memtopo holds for all of `--wait` then leaves the links
//! unmeasured, with a note.

use std::time::Instant;

use pchase_runner::peer::{measure_link, PeerBackend, PeerOptions, SimNode};
use topology::{fleet::Node, RunRecord};

use super::Measured;
use crate::{
    error::CliError,
    guard,
    handover::{Context, Kept},
    lock::GpuLock,
    plan::GuardPolicy,
    simulate::load_profile,
};

/// Measures every ordered pair of `gpus` into `node.links`, on what their runs handed over
/// (`kept`); what fails is a note.
pub(super) fn measure(policy: &GuardPolicy, gpus: &[Measured], kept: Vec<Kept>, node: &mut Node) {
    let started = Instant::now();
    let (_locks, contexts): (Vec<Option<GpuLock>>, Vec<Option<Context>>) =
        match handed_over(gpus, kept) {
            Some(handed) => {
                log::debug!("the links hold the locks the GPUs' runs handed over");
                handed.into_iter().map(|k| (k.lock, k.context)).unzip()
            }
            None => {
                log::debug!("the links take the GPUs' locks again");
                let mut record = RunRecord::default();
                let mut locks = Vec::new();
                for gpu in gpus {
                    match guard::lock_gpu(policy, Some(&gpu.uuid), &mut record, || {}) {
                        Ok(lock) => locks.push(lock),
                        Err(e) => {
                            node.notes.push(format!("links not measured: {e}"));
                            return;
                        }
                    }
                }
                let contexts = gpus.iter().map(|_| None).collect();
                (locks, contexts)
            }
        };
    let simulated = gpus.iter().all(|g| g.spec.is_some());
    let backend: Result<Box<dyn PeerBackend>, CliError> = if simulated {
        gpus.iter()
            .map(|g| load_profile(g.spec.as_deref().unwrap_or_default()))
            .collect::<Result<Vec<_>, _>>()
            .and_then(SimNode::new)
            .map(|n| Box::new(n) as Box<dyn PeerBackend>)
            .map_err(CliError::from)
    } else {
        cuda_node(gpus, contexts)
    };
    let mut backend = match backend {
        Ok(backend) => backend,
        Err(e) => {
            node.notes.push(format!("links not measured: {e}"));
            return;
        }
    };
    let options = PeerOptions::default();
    for (a, from) in gpus.iter().enumerate() {
        for (b, to) in gpus.iter().enumerate() {
            if a == b {
                continue;
            }
            log::info!("measuring the link {} → {}", from.index, to.index);
            let mut link = measure_link(backend.as_mut(), a as u32, b as u32, &options);
            link.from = from.index;
            link.to = to.index;
            link.from_uuid = Some(from.uuid.clone());
            link.to_uuid = Some(to.uuid.clone());
            if link.nvlink_links.is_none() {
                nvlink(from, to, &mut link);
            }
            node.links.push(link);
        }
    }
    log::debug!(
        "{} link(s) measured in {:.1} ms",
        node.links.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    if simulated {
        node.notes.push(
            "simulated node: the links are the simulator's model (NVLink between GPUs of one \
             model, PCIe otherwise), not measurements"
                .into(),
        );
    }
    // The contexts go with the backend, then the locks.
    let releasing = Instant::now();
    drop(backend);
    if !simulated {
        log::debug!(
            "the links' contexts on {} GPU(s) released in {:.1} ms",
            gpus.len(),
            releasing.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// What every GPU of `gpus` handed over, in their order; `None` (all of it released) when
/// one of them did not.
fn handed_over<C>(gpus: &[Measured], mut kept: Vec<Kept<C>>) -> Option<Vec<Kept<C>>> {
    gpus.iter()
        .map(|gpu| {
            let at = kept.iter().position(|k| k.index == gpu.index)?;
            Some(kept.swap_remove(at))
        })
        .collect()
}

/// Each GPU's context for the links, in the order of `gpus`: the one its run handed over,
/// else one that `create` makes; and how many were made.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn contexts<C, E>(
    gpus: &[Measured],
    handed: Vec<Option<C>>,
    mut create: impl FnMut(&Measured) -> Result<C, E>,
) -> Result<(Vec<C>, usize), E> {
    let mut created = 0;
    let contexts = gpus
        .iter()
        .zip(handed)
        .map(|(gpu, context)| match context {
            Some(context) => Ok(context),
            None => {
                created += 1;
                create(gpu)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((contexts, created))
}

/// The node of `gpus` on CUDA, on the contexts their runs handed over, the others
/// created (one after another).
#[cfg(feature = "cuda")]
fn cuda_node(
    gpus: &[Measured],
    handed: Vec<Option<Context>>,
) -> Result<Box<dyn PeerBackend>, CliError> {
    use pchase_runner::cuda::{CudaBackend, CudaNode};
    let started = Instant::now();
    let (backends, created) = contexts(gpus, handed, |gpu| {
        CudaBackend::new(gpu.index).and_then(CudaBackend::into_floating)
    })?;
    let reused = backends.len() - created;
    if created == 0 {
        log::debug!("the links reuse the GPUs' contexts on {reused} GPU(s); none created");
    } else {
        log::debug!(
            "the links' contexts on {created} GPU(s) created in {:.1} ms ({reused} reused)",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(Box::new(CudaNode::from_backends(backends)?))
}

#[cfg(not(feature = "cuda"))]
fn cuda_node(
    _gpus: &[Measured],
    _handed: Vec<Option<Context>>,
) -> Result<Box<dyn PeerBackend>, CliError> {
    Err(CliError::Runner(pchase_runner::RunnerError::NoDriver(
        "memtopo was built without the `cuda` feature".into(),
    )))
}

/// The NVLink count from NVML, or a note why not.
#[cfg(feature = "cuda")]
fn nvlink(from: &Measured, to: &Measured, link: &mut topology::fleet::PeerLink) {
    let (Some(a), Some(b)) = (&from.pci_bus_id, &to.pci_bus_id) else {
        return;
    };
    match crate::nvlink::links_between(a, b) {
        Ok(n) => link.nvlink_links = Some(n),
        Err(e) => link.notes.push(format!("NVLink unknown: {e}")),
    }
}

#[cfg(not(feature = "cuda"))]
fn nvlink(_from: &Measured, _to: &Measured, _link: &mut topology::fleet::PeerLink) {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lock;

    fn gpu(index: u32) -> Measured {
        Measured {
            index,
            uuid: format!("GPU-{index}"),
            spec: None,
            pci_bus_id: None,
        }
    }

    #[test]
    fn the_links_create_a_context_only_where_none_was_handed_over() {
        let gpus = [gpu(0), gpu(2), gpu(5)];
        let mut made = Vec::new();
        let mut create = |g: &Measured| -> Result<u32, ()> {
            made.push(g.index);
            Ok(100 + g.index)
        };
        let (all, created) = contexts(&gpus, vec![Some(0), Some(2), Some(5)], &mut create).unwrap();
        assert_eq!((all, created), (vec![0, 2, 5], 0));
        let (some, created) = contexts(&gpus, vec![Some(0), None, Some(5)], &mut create).unwrap();
        assert_eq!((some, created), (vec![0, 102, 5], 1));
        assert_eq!(made, [2], "made for the GPU that handed none over, alone");
        // A context that cannot be made is the links' error.
        let failed = contexts(&gpus, vec![None, None, None], |_| Err::<u32, _>("no"));
        assert_eq!(failed, Err("no"));
    }

    #[test]
    fn the_links_take_every_gpus_hand_over_or_release_all_of_it() {
        let dir = std::env::temp_dir().join(format!("memtopo-peers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let kept = |index: u32| Kept {
            index,
            lock: Some(
                lock::acquire(&dir, &format!("GPU-{index}"), Duration::ZERO, |_| {}).unwrap(),
            ),
            context: Some(index),
        };
        let free = |index: u32| {
            lock::acquire(&dir, &format!("GPU-{index}"), Duration::ZERO, |_| {}).is_ok()
        };
        // In the GPUs' order, whatever the order the runs finished in; a GPU measured
        // but not among the links' (its thread stopped after handing over) is released.
        let handed = handed_over(&[gpu(0), gpu(2)], vec![kept(2), kept(7), kept(0)]).unwrap();
        let order: Vec<_> = handed.iter().map(|k| (k.index, k.context)).collect();
        assert_eq!(order, [(0, Some(0)), (2, Some(2))]);
        assert!(!free(0) && !free(2) && free(7));
        drop(handed);
        // One GPU handed nothing over: everything is released, so that the links can take
        // the locks in index order without holding one while they wait.
        assert!(handed_over(&[gpu(0), gpu(1), gpu(2)], vec![kept(0), kept(2)]).is_none());
        assert!(free(0) && free(2));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
