//! One pointer-chase array, [`ChainSpec`]: what every chase request is built from, a single
//! GPU's ([`crate::backend`]), a cluster's ([`crate::cluster`]) or a peer's
//! ([`crate::peer`]).

use crate::error::RunnerError;

/// One pointer-chase array: a cyclic chain of `bytes / stride` nodes, `stride` bytes apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChainSpec {
    /// Bytes spanned by the chain. A multiple of `stride`.
    pub bytes: u64,
    /// Distance between consecutive nodes in bytes; a multiple of 4.
    pub stride: u32,
}

impl ChainSpec {
    /// A chain over `bytes` with nodes `stride` bytes apart.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] when the stride is not a positive multiple of 4,
    /// the size is not a positive multiple of the stride, or the chain has more than
    /// `u32::MAX` elements (indices are 32-bit).
    pub fn new(bytes: u64, stride: u32) -> Result<ChainSpec, RunnerError> {
        if stride == 0 || stride % 4 != 0 {
            return Err(RunnerError::InvalidRequest(format!(
                "stride {stride} B is not a positive multiple of 4 B"
            )));
        }
        if bytes == 0 || bytes % u64::from(stride) != 0 {
            return Err(RunnerError::InvalidRequest(format!(
                "array of {bytes} B is not a positive multiple of the {stride} B stride"
            )));
        }
        if bytes / 4 > u64::from(u32::MAX) {
            return Err(RunnerError::InvalidRequest(format!(
                "array of {bytes} B has more than 2^32 elements"
            )));
        }
        Ok(ChainSpec { bytes, stride })
    }

    /// Number of nodes (loads per pass over the chain).
    pub fn nodes(&self) -> u64 {
        self.bytes / u64::from(self.stride)
    }

    /// Number of 4-byte elements the chain spans.
    pub fn elements(&self) -> u64 {
        self.bytes / 4
    }
}
