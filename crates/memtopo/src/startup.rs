//! A real GPU's run up to its first benchmark: the driver and the device's identity, the
//! lock, NVML, the busy check and the context with its modules, in the order `crate::guard`
//! keeps, overlapped where that order allows.
//!
//! - Where NVML named the GPU before the driver started (`visible::foreknown`: the GPU the
//!   driver is narrowed to, or the only GPU it lists), its UUID is the lock's key and
//!   NVML's handle: the driver starts on a thread of its own (`cuInit`, some 100 ms on an
//!   H200) while this one locks the GPU and looks at it. `cuInit` creates no context, so
//!   the looks see no more of this run than they did after it. The device the driver then
//!   shows must be the GPU NVML named; its errors come first, as when it started first.
//!   Elsewhere the driver starts first, and its identity names the GPU.
//! - The context is made during the busy check's wait for a utilisation tail to fall
//!   (`guard::check_busy_while`), else after the check.

use std::{
    panic,
    thread::{self, ScopedJoinHandle},
    time::Instant,
};

use pchase_runner::{
    cuda::{identify, CudaBackend, DeviceIdentity},
    RunnerError,
};
use topology::RunRecord;

use crate::{
    conditions::{Observation, StateSource},
    error::CliError,
    guard,
    handover::{self, Slot},
    lock::GpuLock,
    nvml::Nvml,
    plan::GuardPolicy,
    visible::{self, Narrowed},
};

/// A real GPU, ready to measure.
pub struct Opened {
    /// Its context, with the modules loaded, current on this thread.
    pub backend: CudaBackend,
    /// Its lock, if one could be made.
    pub lock: Option<GpuLock>,
    /// NVML on the GPU, if it loaded.
    pub nvml: Option<Nvml>,
    /// The GPU's state before measuring, if it could be read.
    pub before: Option<Observation>,
}

/// The driver's part: started on another thread, or done.
enum Driver<'scope> {
    /// Started beside the lock for the GPU NVML named.
    Started(
        ScopedJoinHandle<'scope, Result<DeviceIdentity, RunnerError>>,
        &'static Narrowed,
    ),
    /// Started first: its identity named the GPU.
    Identified(DeviceIdentity),
}

impl Driver<'_> {
    /// The device's identity, once the driver has started: the GPU NVML named, or an error.
    fn identity(self) -> Result<DeviceIdentity, CliError> {
        match self {
            Driver::Identified(identity) => Ok(identity),
            Driver::Started(thread, named) => {
                let identity = thread.join().unwrap_or_else(|p| panic::resume_unwind(p))?;
                named
                    .check_foreknown(identity.uuid.as_deref())
                    .map_err(CliError::Internal)?;
                Ok(identity)
            }
        }
    }
}

/// Checks the driver's device against a narrowing and records who it is.
fn accept(ordinal: u32, identity: &DeviceIdentity, record: &mut RunRecord) -> Result<(), CliError> {
    if let Some(narrowed) = visible::narrowed().filter(|n| n.index == ordinal) {
        narrowed
            .check(identity.uuid.as_deref())
            .map_err(CliError::Internal)?;
    }
    record.gpu_uuid = identity.uuid.clone();
    record.pci_bus_id = identity.pci_bus_id.clone();
    record.cuda_driver_version = identity.cuda_driver_version;
    Ok(())
}

/// A `GPU-…` UUID as the driver's identity spells it (lower-case hexadecimal), so that the
/// lock's key is the same file whichever of NVML and the driver named the GPU.
fn as_cuda_spells(uuid: &str) -> String {
    match uuid.get(..4) {
        Some(prefix) if prefix.eq_ignore_ascii_case("GPU-") => {
            format!("GPU-{}", uuid[4..].to_ascii_lowercase())
        }
        _ => uuid.to_string(),
    }
}

/// NVML on the GPU of `uuid` or `pci_bus_id`, or `None` with the reason recorded.
fn open_nvml(uuid: Option<&str>, pci_bus_id: Option<&str>, record: &mut RunRecord) -> Option<Nvml> {
    match Nvml::open(uuid, pci_bus_id) {
        Ok(nvml) => Some(nvml),
        Err(reason) => {
            log::warn!(
                "NVML unavailable ({reason}): other processes on the GPU and its clocks are not checked"
            );
            record.state_unavailable = Some(format!("NVML unavailable: {reason}"));
            None
        }
    }
}

/// Identifies GPU `ordinal` (CUDA's `cuda_ordinal`), locks it, reads its state, refuses it
/// when busy, and creates its context; logs each phase's end at `-vv`, from `started`.
pub fn open(
    policy: &GuardPolicy,
    ordinal: u32,
    cuda_ordinal: u32,
    record: &mut RunRecord,
    slot: Option<Slot<'_>>,
    started: Instant,
) -> Result<Opened, CliError> {
    let phase = move |name: &str| {
        log::debug!(
            "host phase: {name} done at {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    };
    let foreknown = visible::foreknown(ordinal);
    thread::scope(|scope| {
        let driver = match foreknown {
            Some(named) => {
                log::debug!(
                    "the driver starts beside the lock and the busy check: NVML named GPU \
                     {ordinal} {} before it",
                    named.uuid
                );
                let driver = scope.spawn(move || {
                    let identity = identify(cuda_ordinal);
                    phase("driver and device identity, beside the lock");
                    identity
                });
                Driver::Started(driver, named)
            }
            None => {
                let identity = identify(cuda_ordinal)?;
                phase("driver and device identity");
                accept(ordinal, &identity, record)?;
                Driver::Identified(identity)
            }
        };
        let (uuid, pci_bus_id) = match &driver {
            Driver::Identified(identity) => (identity.uuid.clone(), identity.pci_bus_id.clone()),
            Driver::Started(_, named) => (Some(as_cuda_spells(&named.uuid)), None),
        };
        let key = uuid.as_deref().or(pci_bus_id.as_deref());
        let lock = match guard::lock_gpu(policy, key, record, || handover::before_waiting(slot)) {
            Ok(lock) => lock,
            // The driver's error, if it has one, first.
            Err(e) => return Err(driver.identity().err().unwrap_or(e)),
        };
        let mut nvml = open_nvml(uuid.as_deref(), pci_bus_id.as_deref(), record);
        phase("lock and NVML");
        // The driver's identity, once the context is due (while the busy check waits, or
        // after it).
        let mut driver = Some(driver);
        let mut identified = None;
        let source = nvml.as_mut().map(|n| n as &mut (dyn StateSource + Send));
        let checked = guard::check_busy_while(policy, source, record, || {
            let identity = driver.take().map(Driver::identity)?;
            let made = identity.is_ok().then(|| CudaBackend::new(cuda_ordinal));
            identified = Some(identity);
            made
        });
        let identity = match identified {
            Some(identity) => identity,
            None => driver.map_or_else(
                || Err(CliError::Internal("the driver's identity was lost".into())),
                Driver::identity,
            ),
        }?;
        let (before, prepared) = checked?;
        phase("busy check");
        if foreknown.is_some() {
            accept(ordinal, &identity, record)?;
        }
        let backend = match prepared.flatten() {
            Some(made) => made?,
            None => CudaBackend::new(cuda_ordinal)?,
        };
        phase("context and modules");
        Ok(Opened {
            backend,
            lock,
            nvml,
            before,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_nvml_gives_locks_the_file_the_driver_names() {
        // As the driver's identity spells it (`format_uuid`: lower-case hexadecimal).
        let driver = "GPU-8d3e1a52-0b7c-4f10-9e61-0011223344ff";
        assert_eq!(as_cuda_spells(&driver.to_ascii_uppercase()), driver);
        assert_eq!(as_cuda_spells(driver), driver);
        assert_eq!(as_cuda_spells("MIG-ABC"), "MIG-ABC");
    }
}
