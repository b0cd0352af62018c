//! How many active NVLink links join two GPUs, from NVML: each link's remote end is a
//! PCI bus id; a remote end that is no GPU is an NVSwitch and counts for every GPU behind
//! it, so on a switched node the count is the reading GPU's links into the fabric.
//! (nvml-wrapper 0.13's `remote_device_type` cannot be used: it returns the value it
//! started with, not the driver's answer.)

use nvml_wrapper::error::NvmlError;

/// NVML's `NVML_NVLINK_MAX_LINKS` (18 on Hopper).
const MAX_LINKS: u32 = 18;

/// `0000:41:00.0` and `00000000:41:00.0` are one bus: the domain as a number, the rest
/// in lower case.
fn same_bus(a: &str, b: &str) -> bool {
    let key = |id: &str| {
        let id = id.trim().to_ascii_lowercase();
        match id.split_once(':') {
            Some((domain, rest)) => (u32::from_str_radix(domain, 16).ok(), rest.to_owned()),
            None => (None, id),
        }
    };
    key(a) == key(b)
}

/// The PCI bus ids of every GPU NVML sees.
fn gpu_buses(nvml: &nvml_wrapper::Nvml) -> Vec<String> {
    let count = nvml.device_count().unwrap_or(0);
    (0..count)
        .filter_map(|i| nvml.device_by_index(i).ok()?.pci_info().ok())
        .map(|pci| pci.bus_id)
        .collect()
}

/// Active NVLink links from the GPU on bus `from` to the GPU on bus `to` (or to a switch,
/// which reaches every GPU). `Ok(0)`: none (the GPUs talk over PCIe).
pub fn links_between(from: &str, to: &str) -> Result<u32, String> {
    let nvml = crate::nvml::load()?;
    let device = nvml
        .device_by_pci_bus_id(from)
        .map_err(|e| format!("PCI bus id {from}: {e}"))?;
    let gpus = gpu_buses(nvml);
    let mut count = 0;
    for index in 0..MAX_LINKS {
        let link = device.link_wrapper_for(index);
        match link.is_active() {
            Ok(true) => {}
            Ok(false) | Err(NvmlError::InvalidArg) | Err(NvmlError::NotSupported) => continue,
            Err(e) => return Err(format!("NVLink {index}: {e}")),
        }
        // A remote end that is no GPU is an NVSwitch, which reaches every GPU.
        let reaches = link.remote_pci_info().is_ok_and(|remote| {
            same_bus(&remote.bus_id, to) || !gpus.iter().any(|g| same_bus(g, &remote.bus_id))
        });
        count += u32::from(reaches);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    #[test]
    fn bus_ids_compare_by_value() {
        assert!(super::same_bus("0000:41:00.0", "00000000:41:00.0"));
        assert!(super::same_bus("0000:4A:00.0", "00000000:4a:00.0"));
        assert!(!super::same_bus("0000:41:00.0", "0000:42:00.0"));
    }
}
