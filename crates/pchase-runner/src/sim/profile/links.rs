//! A simulated GPU's links (`[links]` in a profile): its PCIe link as NVML would report it
//! and its active NVLinks.

use serde::{Deserialize, Serialize};

use super::profile_error;
use crate::error::RunnerError;

/// A simulated GPU's links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// The PCIe generation the link trained at.
    pub pcie_generation: u32,
    /// The PCIe width the link trained at, lanes.
    pub pcie_width: u32,
    /// The highest generation the GPU and its slot support.
    pub pcie_max_generation: u32,
    /// The widest link the GPU and its slot support, lanes.
    pub pcie_max_width: u32,
    /// Active NVLinks into the node's other GPUs of the same model (on a switched node, into
    /// the switches); a copy to or from a peer moves at the share of them that the fewer of
    /// the two GPUs has up.
    #[serde(default = "LinkSpec::all_nvlinks")]
    pub nvlink: u32,
}

impl LinkSpec {
    /// NVLink 4's 18 links of an H100 or H200 SXM.
    pub const NVLINKS: u32 = 18;

    fn all_nvlinks() -> u32 {
        Self::NVLINKS
    }

    /// Checks that every number is positive, the trained link no wider or faster than its
    /// maximum and the NVLinks no more than NVML counts.
    pub(crate) fn validate(&self) -> Result<(), RunnerError> {
        let fields = [
            ("pcie_generation", self.pcie_generation),
            ("pcie_width", self.pcie_width),
            ("pcie_max_generation", self.pcie_max_generation),
            ("pcie_max_width", self.pcie_max_width),
        ];
        if let Some((name, _)) = fields.iter().find(|(_, v)| *v == 0) {
            return Err(profile_error(format!("links.{name}: must be at least 1")));
        }
        if self.pcie_generation > self.pcie_max_generation || self.pcie_width > self.pcie_max_width
        {
            return Err(profile_error(format!(
                "links: the link (Gen{} x{}) cannot exceed its maximum (Gen{} x{})",
                self.pcie_generation,
                self.pcie_width,
                self.pcie_max_generation,
                self.pcie_max_width
            )));
        }
        if self.nvlink > Self::NVLINKS {
            return Err(profile_error(format!(
                "links.nvlink: {} is more than the {} links NVML knows",
                self.nvlink,
                Self::NVLINKS
            )));
        }
        Ok(())
    }
}
