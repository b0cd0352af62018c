//! The links between a node's measured GPUs, after the GPUs themselves: every ordered
//! pair (reader, owner), measured by `pchase_runner::peer::measure_link` on the simulated
//! node or on CUDA, with the NVLink count from NVML for real GPUs.
//!
//! A link's measurement touches two GPUs, so it holds both GPUs' locks (taken in index
//! order, so that two memtopos cannot each hold one and wait for the other); a GPU that
//! another memtopo holds for all of `--wait` leaves the links unmeasured, with a note.

use pchase_runner::peer::{measure_link, PeerBackend, PeerOptions, SimNode};
use topology::{fleet::Node, RunRecord};

use super::Measured;
use crate::{error::CliError, guard, plan::GuardPolicy, simulate::load_profile};

/// Measures every ordered pair of `gpus` into `node.links`; what fails is a note.
pub(super) fn measure(policy: &GuardPolicy, gpus: &[Measured], node: &mut Node) {
    let started = std::time::Instant::now();
    let mut record = RunRecord::default();
    let mut locks = Vec::new();
    for gpu in gpus {
        match guard::lock_gpu(policy, Some(&gpu.uuid), &mut record) {
            Ok(lock) => locks.push(lock),
            Err(e) => {
                node.notes.push(format!("links not measured: {e}"));
                return;
            }
        }
    }
    let backend: Result<Box<dyn PeerBackend>, CliError> = if gpus.iter().all(|g| g.spec.is_some()) {
        gpus.iter()
            .map(|g| load_profile(g.spec.as_deref().unwrap_or_default()))
            .collect::<Result<Vec<_>, _>>()
            .and_then(SimNode::new)
            .map(|n| Box::new(n) as Box<dyn PeerBackend>)
            .map_err(CliError::from)
    } else {
        cuda_node(gpus)
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
    if gpus.iter().all(|g| g.spec.is_some()) {
        node.notes.push(
            "simulated node: the links are the simulator's model (NVLink between GPUs of one \
             model, PCIe otherwise), not measurements"
                .into(),
        );
    }
    drop(locks);
}

#[cfg(feature = "cuda")]
fn cuda_node(gpus: &[Measured]) -> Result<Box<dyn PeerBackend>, CliError> {
    let ordinals: Vec<u32> = gpus.iter().map(|g| g.index).collect();
    Ok(Box::new(pchase_runner::cuda::CudaNode::new(&ordinals)?))
}

#[cfg(not(feature = "cuda"))]
fn cuda_node(_gpus: &[Measured]) -> Result<Box<dyn PeerBackend>, CliError> {
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
