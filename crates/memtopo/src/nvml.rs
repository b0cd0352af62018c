//! The GPU's state through NVML, loaded at run time (`libnvidia-ml.so.1`), so that memtopo
//! still starts where NVML is missing: then [`Nvml::open`] fails with a reason that the
//! run records as "NVML unavailable".
//!
//! The CUDA device is found in NVML by its UUID (under MIG, the instance's), else by its
//! PCI bus id, never by index: `CUDA_VISIBLE_DEVICES` renumbers CUDA devices, and NVML
//! and CUDA may order them differently.

use std::{ffi::OsStr, sync::OnceLock};

use nvml_wrapper::{
    enum_wrappers::device::{Clock, ComputeMode, TemperatureSensor},
    enums::device::{SampleValue, UsedGpuMemory},
    struct_wrappers::device::ProcessInfo,
    structs::device::FieldId,
    sys_exports::field_id::{
        NVML_FI_DEV_MEMORY_TEMP, NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_PENDING,
        NVML_FI_DEV_REMAPPED_UNC,
    },
    Device,
};
use topology::{GpuProcess, GpuState};

use crate::conditions::{Observation, StateSource};

/// The library names tried, in order: the driver installs the versioned name; the plain
/// one exists only with development packages.
const LIBRARIES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// An NVML session on one GPU.
#[derive(Debug)]
pub struct Nvml {
    nvml: &'static nvml_wrapper::Nvml,
    /// How the device was found again at each observation.
    key: DeviceKey,
}

#[derive(Debug, Clone)]
enum DeviceKey {
    Uuid(String),
    PciBusId(String),
}

impl Nvml {
    /// Loads NVML and finds the CUDA device `uuid` (`GPU-…`) or `pci_bus_id`.
    pub fn open(uuid: Option<&str>, pci_bus_id: Option<&str>) -> Result<Nvml, String> {
        let nvml = load()?;
        let mut tried = Vec::new();
        let mut keys = Vec::new();
        if let Some(uuid) = uuid {
            keys.push(DeviceKey::Uuid(uuid.to_string()));
            // The CUDA UUID's bytes do not say whether they name a MIG instance.
            if let Some(rest) = uuid.strip_prefix("GPU-") {
                keys.push(DeviceKey::Uuid(format!("MIG-{rest}")));
            }
        }
        if let Some(bus) = pci_bus_id {
            keys.push(DeviceKey::PciBusId(bus.to_string()));
        }
        for key in keys {
            match find(nvml, &key) {
                Ok(_) => return Ok(Nvml { nvml, key }),
                Err(e) => tried.push(e),
            }
        }
        Err(if tried.is_empty() {
            "the CUDA device has neither a UUID nor a PCI bus id to find it by".to_string()
        } else {
            format!("the CUDA device is not in NVML: {}", tried.join("; "))
        })
    }
}

/// NVML, loaded and initialised once for the process from the first of [`LIBRARIES`] that
/// loads, and shared by every caller: the driver narrowing before the run, each GPU's
/// session (one per thread in a node run; NVML is thread-safe) and every link's NVLink
/// count. An initialisation costs milliseconds to tens of them; a handle dropped between
/// callers would shut NVML down and make the next one pay again.
pub fn load() -> Result<&'static nvml_wrapper::Nvml, String> {
    static NVML: OnceLock<Result<nvml_wrapper::Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        let mut failures = Vec::new();
        for name in LIBRARIES {
            match nvml_wrapper::Nvml::builder()
                .lib_path(OsStr::new(name))
                .init()
            {
                Ok(nvml) => return Ok(nvml),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
        Err(failures.join("; "))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// What NVML says of one GPU: enough to decide which GPU a single run may narrow the
/// driver to.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The model's name.
    pub name: String,
    /// Its UUID.
    pub uuid: String,
    /// MIG mode is on.
    pub mig: bool,
}

/// Every GPU NVML lists, in its order (the PCI bus order `nvidia-smi -L` shows). NVML
/// does not read `CUDA_VISIBLE_DEVICES`.
pub fn list() -> Result<Vec<Listed>, String> {
    let nvml = load()?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML device count: {e}"))?;
    (0..count)
        .map(|index| {
            let device = nvml
                .device_by_index(index)
                .map_err(|e| format!("NVML device {index}: {e}"))?;
            Ok(Listed {
                name: device
                    .name()
                    .map_err(|e| format!("NVML device {index}: {e}"))?,
                uuid: device
                    .uuid()
                    .map_err(|e| format!("NVML device {index}: {e}"))?,
                // GPUs without MIG say "not supported".
                mig: device.mig_mode().is_ok_and(|m| m.current != 0),
            })
        })
        .collect()
}

fn find<'n>(nvml: &'n nvml_wrapper::Nvml, key: &DeviceKey) -> Result<Device<'n>, String> {
    match key {
        DeviceKey::Uuid(uuid) => nvml
            .device_by_uuid(uuid.as_str())
            .map_err(|e| format!("UUID {uuid}: {e}")),
        DeviceKey::PciBusId(bus) => nvml
            .device_by_pci_bus_id(bus.as_str())
            .map_err(|e| format!("PCI bus id {bus}: {e}")),
    }
}

/// A value NVML may refuse (unsupported on this GPU, no permission): `None`, logged.
fn read<T, E: std::fmt::Display>(what: &str, result: Result<T, E>) -> Option<T> {
    result.map_err(|e| log::debug!("NVML: {what}: {e}")).ok()
}

/// The device memory's temperature, its remapped rows (correctable, uncorrectable) and
/// whether a remapping is pending, from NVML's field values: each `None` where the GPU or
/// driver does not report it.
fn memory_fields(device: &Device<'_>) -> (Option<u32>, Option<[u64; 2]>, Option<bool>) {
    let ids = [
        NVML_FI_DEV_MEMORY_TEMP,
        NVML_FI_DEV_REMAPPED_COR,
        NVML_FI_DEV_REMAPPED_UNC,
        NVML_FI_DEV_REMAPPED_PENDING,
    ]
    .map(FieldId);
    let Some(samples) = read("field values", device.field_values_for(&ids)) else {
        return (None, None, None);
    };
    let value = |i: usize| -> Option<u64> {
        let sample = read(
            "field value",
            samples.get(i)?.as_ref().map_err(ToString::to_string),
        )?;
        match read(
            "field value",
            sample.value.as_ref().map_err(ToString::to_string),
        )? {
            SampleValue::U32(v) => Some(u64::from(*v)),
            SampleValue::U64(v) => Some(*v),
            SampleValue::I64(v) => u64::try_from(*v).ok(),
            SampleValue::F64(v) => (v.is_finite() && *v >= 0.0).then_some(v.round() as u64),
        }
    };
    let temperature = value(0)
        .and_then(|t| u32::try_from(t).ok())
        .filter(|&t| t > 0);
    let rows = value(1).zip(value(2)).map(|(c, u)| [c, u]);
    (temperature, rows, value(3).map(|p| p != 0))
}

fn compute_mode(mode: ComputeMode) -> &'static str {
    match mode {
        ComputeMode::Default => "default",
        ComputeMode::ExclusiveThread => "exclusive_thread",
        ComputeMode::ExclusiveProcess => "exclusive_process",
        ComputeMode::Prohibited => "prohibited",
    }
}

fn processes(nvml: &nvml_wrapper::Nvml, list: Vec<ProcessInfo>, kind: &str) -> Vec<GpuProcess> {
    list.into_iter()
        .map(|p| GpuProcess {
            pid: p.pid,
            name: nvml.sys_process_name(p.pid, 256).ok(),
            kind: kind.to_string(),
            used_memory_bytes: match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            },
        })
        .collect()
}

impl StateSource for Nvml {
    fn observe(&mut self) -> Result<Observation, String> {
        let device = find(self.nvml, &self.key)?;
        let throttle = read("throttle reasons", device.current_throttle_reasons());
        let state = GpuState {
            sm_clock_mhz: read("SM clock", device.clock_info(Clock::SM)),
            memory_clock_mhz: read("memory clock", device.clock_info(Clock::Memory)),
            max_sm_clock_mhz: read("max SM clock", device.max_clock_info(Clock::SM)),
            throttle_reasons: throttle
                .map(|reasons| {
                    reasons
                        .iter_names()
                        .map(|(name, _)| name.to_ascii_lowercase())
                        .filter(|name| name != "none")
                        .collect()
                })
                .unwrap_or_default(),
            temperature_c: read("temperature", device.temperature(TemperatureSensor::Gpu)),
            // Looked at once before and once after the run: `add_memory_conditions`.
            memory_temperature_c: None,
            remapped_rows: None,
            row_remap_pending: None,
            power_w: read("power", device.power_usage()).map(|mw| f64::from(mw) / 1000.0),
            power_limit_w: read("power limit", device.enforced_power_limit())
                .map(|mw| f64::from(mw) / 1000.0),
            ecc_enabled: read("ECC", device.is_ecc_enabled()).map(|e| e.currently_enabled),
            persistence_mode: read("persistence mode", device.is_in_persistent_mode()),
            compute_mode: read("compute mode", device.compute_mode())
                .map(|m| compute_mode(m).to_string()),
            mig_enabled: read("MIG mode", device.mig_mode()).map(|m| m.current != 0),
            utilization_percent: read("utilization", device.utilization_rates()).map(|u| u.gpu),
            memory_used_bytes: read("memory", device.memory_info()).map(|m| m.used),
            // nvmlDeviceGetCurrPcieLinkGeneration/Width and nvmlDeviceGetMaxPcieLink…: the
            // maxima are what the GPU and its slot both support. A GPU on NVLink-C2C
            // (Grace Hopper) has none: NotSupported, left absent.
            pcie_generation: read("PCIe generation", device.current_pcie_link_gen()),
            pcie_width: read("PCIe width", device.current_pcie_link_width()),
            pcie_max_generation: read("max PCIe generation", device.max_pcie_link_gen()),
            pcie_max_width: read("max PCIe width", device.max_pcie_link_width()),
        };
        let mut others = Vec::new();
        match device.running_compute_processes() {
            Ok(list) => others.extend(processes(self.nvml, list, "compute")),
            Err(e) => return Err(format!("cannot list the GPU's compute processes: {e}")),
        }
        if let Some(list) = read("graphics processes", device.running_graphics_processes()) {
            others.extend(processes(self.nvml, list, "graphics"));
        }
        Ok(Observation {
            state,
            processes: others,
            driver_version: read("driver version", self.nvml.sys_driver_version()),
            settles: true,
        })
    }

    fn add_memory_conditions(&mut self, state: &mut GpuState) {
        let started = std::time::Instant::now();
        let device = match find(self.nvml, &self.key) {
            Ok(device) => device,
            Err(e) => return log::debug!("NVML: memory conditions: {e}"),
        };
        (
            state.memory_temperature_c,
            state.remapped_rows,
            state.row_remap_pending,
        ) = memory_fields(&device);
        log::debug!(
            "NVML: memory conditions read in {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}
