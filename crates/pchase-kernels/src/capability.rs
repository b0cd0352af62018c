//! Compute capabilities and PTX ISA versions, the two version axes a PTX module depends on.

use std::fmt;

/// An NVIDIA compute capability such as 9.0 (Hopper) or 5.0 (Maxwell).
///
/// Ordering is the natural one (major first, then minor), so "supported" is `device >= required`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// Major revision (5 = Maxwell, 7 = Volta/Turing, 8 = Ampere/Ada, 9 = Hopper).
    pub major: u32,
    /// Minor revision.
    pub minor: u32,
}

impl ComputeCapability {
    /// Maxwell, the oldest architecture the `pchase` module targets.
    pub const SM_50: Self = Self::new(5, 0);
    /// Volta.
    pub const SM_70: Self = Self::new(7, 0);
    /// Ampere (A100).
    pub const SM_80: Self = Self::new(8, 0);
    /// Hopper, the first architecture with thread-block clusters.
    pub const SM_90: Self = Self::new(9, 0);

    /// A compute capability from its two numbers, as `cuDeviceGetAttribute` reports them.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    /// The `ptxas`/`.target` spelling, e.g. `sm_90`.
    ///
    /// ```
    /// use pchase_kernels::ComputeCapability;
    /// assert_eq!(ComputeCapability::new(8, 6).sm_name(), "sm_86");
    /// ```
    pub fn sm_name(self) -> String {
        format!("sm_{}{}", self.major, self.minor)
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A PTX ISA version (the `.version` directive of a module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PtxIsaVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl PtxIsaVersion {
    /// A PTX ISA version from its two numbers.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for PtxIsaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}
