//! The GPU's link to its host: copies between host and device memory by the copy engines,
//! copies by the SMs through mapped pinned host memory, and one load's round trip over the
//! link; the requests a [`HostBackend`] answers and the PCIe link's peak.
//!
//! A copy-engine request ([`HostCopyRequest`]) moves `bytes` between host memory (pinned,
//! or pageable through the driver's staging) and device memory, in one direction or in
//! both at once on two streams, timing each copy with events. An SM request
//! ([`HostSmRequest`]) runs a streaming bandwidth kernel whose source or destination is
//! pinned host memory mapped into the device's address space. A chase
//! ([`HostChaseRequest`]) is one thread following a pointer chain laid out in mapped host
//! memory, with the L2 flushed first, so that every timed load crosses the link.
//!
//! ```
//! use pchase_runner::host::{HostCopyRequest, HostDirection, HostMemory, PcieLink};
//! let request = HostCopyRequest {
//!     memory: HostMemory::Pinned,
//!     directions: vec![HostDirection::HostToDevice, HostDirection::DeviceToHost],
//!     bytes: 16 << 20,
//!     repeats: 5,
//! };
//! request.check()?;
//! // PCIe Gen5 x16: 32 GT/s per lane, 128b/130b encoding.
//! let link = PcieLink { generation: 5, width: 16, max_generation: 5, max_width: 16 };
//! let peak = link.peak_gb_per_s().unwrap();
//! assert!((peak - 63.015).abs() < 0.001);
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

use std::{fmt, time::Duration};

use crate::{bandwidth::BandwidthShape, error::RunnerError};

/// The largest buffer of one host request: what the benchmark pins stays small.
pub const MAX_HOST_BYTES: u64 = 1 << 30;

/// The most timed repeats of one host request.
pub const MAX_HOST_REPEATS: u32 = 64;

/// Which way a copy moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostDirection {
    /// Host memory into device memory (`cuMemcpyHtoDAsync`).
    HostToDevice,
    /// Device memory into host memory (`cuMemcpyDtoHAsync`).
    DeviceToHost,
}

impl fmt::Display for HostDirection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostDirection::HostToDevice => "host to device",
            HostDirection::DeviceToHost => "device to host",
        })
    }
}

/// What host memory a copy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostMemory {
    /// Page-locked (`cuMemHostAlloc`): the copy engine reads or writes it directly.
    Pinned,
    /// Ordinary allocated memory: the driver stages it through pinned buffers of its own.
    Pageable,
}

/// Copies by the copy engines, each direction on its own stream; with two directions, both
/// run at once and each is timed by its own stream's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCopyRequest {
    /// Host memory of the copies.
    pub memory: HostMemory,
    /// One direction, or both (distinct) at once.
    pub directions: Vec<HostDirection>,
    /// Bytes per copy and direction: a positive multiple of 4 KiB, at most
    /// [`MAX_HOST_BYTES`].
    pub bytes: u64,
    /// Timed copies per direction (one untimed copy of each goes first).
    pub repeats: u32,
}

/// Checks a buffer size and a repeat count.
fn check_size(what: &str, bytes: u64, repeats: u32) -> Result<(), RunnerError> {
    if bytes == 0 || bytes % 4096 != 0 || bytes > MAX_HOST_BYTES {
        return Err(RunnerError::InvalidRequest(format!(
            "{what} of {bytes} B: a positive multiple of 4 KiB up to {MAX_HOST_BYTES} B"
        )));
    }
    if repeats == 0 || repeats > MAX_HOST_REPEATS {
        return Err(RunnerError::InvalidRequest(format!(
            "{what}: {repeats} timed repeats, 1 to {MAX_HOST_REPEATS}"
        )));
    }
    Ok(())
}

impl HostCopyRequest {
    /// Checks what every backend requires.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] naming what is wrong.
    pub fn check(&self) -> Result<(), RunnerError> {
        check_size("a host copy", self.bytes, self.repeats)?;
        let distinct = match self.directions.as_slice() {
            [_] => true,
            [a, b] => a != b,
            _ => false,
        };
        if !distinct {
            return Err(RunnerError::InvalidRequest(format!(
                "a host copy runs one direction or both, not {:?}",
                self.directions
            )));
        }
        Ok(())
    }
}

/// The time of every timed copy, per direction in request order.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCopyRun {
    /// Per direction of the request: its copies' times.
    pub times: Vec<(HostDirection, Vec<Duration>)>,
}

/// A streaming kernel over mapped pinned host memory: a read kernel whose source is host
/// memory (traffic host to device), or a write kernel whose destination is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSmRequest {
    /// The kernel and its grid: a grid-stride read or write of `pchase_kernels::bandwidth`.
    pub shape: BandwidthShape,
    /// Bytes of mapped host memory the grid walks: a power of two from 4 KiB, at most
    /// [`MAX_HOST_BYTES`].
    pub bytes: u64,
    /// Passes of the grid over its chunk per launch.
    pub iterations: u32,
    /// Timed launches, each after an L2 flush (none untimed: the L2 may keep lines of host
    /// memory).
    pub repeats: u32,
}

impl HostSmRequest {
    /// The direction of its traffic over the link.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a kernel that neither reads nor writes.
    pub fn direction(&self) -> Result<HostDirection, RunnerError> {
        match self.shape.op {
            crate::bandwidth::BandwidthOp::Read(_) => Ok(HostDirection::HostToDevice),
            crate::bandwidth::BandwidthOp::Write => Ok(HostDirection::DeviceToHost),
            op => Err(RunnerError::InvalidRequest(format!(
                "an SM copy over the host link reads or writes, not {op}"
            ))),
        }
    }

    /// The bandwidth request it launches: a grid stride over the mapped buffer.
    pub fn bandwidth_request(&self) -> crate::bandwidth::BandwidthRequest {
        crate::bandwidth::BandwidthRequest {
            shape: self.shape,
            layout: crate::bandwidth::RegionLayout::GridStride,
            region_bytes: self.bytes,
            iterations: self.iterations,
            repetitions: self.repeats,
            // The backend runs host-memory requests without an untimed launch anyway.
            warm_up: false,
        }
    }

    /// Bytes one launch moves over the link.
    pub fn bytes_per_launch(&self, sm_count: u32) -> u64 {
        u64::from(self.shape.blocks(sm_count))
            * self.shape.block_iteration_bytes()
            * u64::from(self.iterations)
    }

    /// Checks what every backend requires.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] naming what is wrong.
    pub fn check(&self) -> Result<(), RunnerError> {
        self.direction()?;
        self.shape.kernel()?;
        check_size("an SM copy over the host link", self.bytes, self.repeats)?;
        if !self.bytes.is_power_of_two() || self.iterations == 0 {
            return Err(RunnerError::InvalidRequest(format!(
                "an SM copy over {} B of host memory, {} iterations: a power of two and at least one",
                self.bytes, self.iterations
            )));
        }
        Ok(())
    }
}

/// The time of every timed launch of a [`HostSmRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct HostSmRun {
    /// Each timed launch.
    pub elapsed: Vec<Duration>,
    /// Bytes each launch moved over the link.
    pub bytes_per_launch: u64,
}

/// One thread's fine-grained chase over a chain in mapped pinned host memory, nodes
/// `stride` bytes apart, the L2 flushed first; no warm-up, so that each timed load reads a
/// line the GPU has not seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostChaseRequest {
    /// Bytes between nodes: a multiple of 128 (one line each).
    pub stride: u32,
    /// Timed loads; the chain has one node more.
    pub steps: u32,
}

impl HostChaseRequest {
    /// The chain: `steps + 1` nodes `stride` apart.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a stride that is not a multiple of 128, no
    /// steps, or a chain over [`MAX_HOST_BYTES`].
    pub fn chain(&self) -> Result<crate::chain::ChainSpec, RunnerError> {
        let bytes = (u64::from(self.steps) + 1) * u64::from(self.stride);
        if self.stride == 0 || self.stride % 128 != 0 || self.steps == 0 || bytes > MAX_HOST_BYTES {
            return Err(RunnerError::InvalidRequest(format!(
                "a host chase of {} steps {} B apart: a positive multiple of 128 B, at least one step, at most {MAX_HOST_BYTES} B",
                self.steps, self.stride
            )));
        }
        crate::chain::ChainSpec::new(bytes, self.stride)
    }
}

/// A GPU whose link to its host can be measured.
pub trait HostBackend {
    /// Copies by the copy engines ([`HostCopyRequest`]).
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a bad request; a driver failure.
    fn host_copy(&mut self, request: &HostCopyRequest) -> Result<HostCopyRun, RunnerError>;

    /// A streaming kernel over mapped pinned host memory ([`HostSmRequest`]).
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a bad request; [`RunnerError::Unsupported`]
    /// where the device cannot map host memory; a launch failure.
    fn host_sm_copy(&mut self, request: &HostSmRequest) -> Result<HostSmRun, RunnerError>;

    /// The latency of each timed load of a chase over mapped pinned host memory, raw
    /// cycles of the SM clock (with the clock overhead); the backend checks that the chase
    /// followed the chain.
    ///
    /// # Errors
    /// As [`HostBackend::host_sm_copy`].
    fn host_chase(&mut self, request: &HostChaseRequest) -> Result<Vec<u32>, RunnerError>;
}

/// A PCIe link as NVML reports it: the generation and width it trained at, and the highest
/// the GPU and its slot support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieLink {
    /// The generation the link runs at now (an idle GPU may lower it).
    pub generation: u32,
    /// The lanes the link trained at.
    pub width: u32,
    /// The highest generation of the GPU and its slot.
    pub max_generation: u32,
    /// The widest link of the GPU and its slot.
    pub max_width: u32,
}

/// Payload bytes per second and lane of a PCIe generation, GB/s: the transfer rate times
/// its line encoding (8b/10b for generations 1 and 2, 128b/130b for 3 to 5); `None` for a
/// generation this table does not know (PCIe 6's FLIT mode counts differently).
pub fn pcie_lane_gb_per_s(generation: u32) -> Option<f64> {
    let (gigatransfers, efficiency) = match generation {
        1 => (2.5, 0.8),
        2 => (5.0, 0.8),
        3 => (8.0, 128.0 / 130.0),
        4 => (16.0, 128.0 / 130.0),
        5 => (32.0, 128.0 / 130.0),
        _ => return None,
    };
    Some(gigatransfers * efficiency / 8.0)
}

impl PcieLink {
    /// The link's peak per direction, GB/s: the highest generation it supports at the width
    /// it trained at (the generation drops while the GPU idles, the width does not). `None`
    /// for an unknown generation or no lanes.
    pub fn peak_gb_per_s(&self) -> Option<f64> {
        let generation = self.max_generation.max(self.generation);
        (self.width > 0).then_some(())?;
        pcie_lane_gb_per_s(generation).map(|lane| lane * f64::from(self.width))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bandwidth::{BandwidthOp, ReadVariant};

    fn sm(op: BandwidthOp) -> HostSmRequest {
        HostSmRequest {
            shape: BandwidthShape {
                op,
                vector_bytes: 16,
                unroll: 4,
                blocks_per_sm: 2,
                threads: 1024,
            },
            bytes: 16 << 20,
            iterations: 2,
            repeats: 3,
        }
    }

    #[test]
    fn peaks_follow_generation_and_width() {
        let link = |generation, width| PcieLink {
            generation,
            width,
            max_generation: generation,
            max_width: 16,
        };
        let gen4 = link(4, 16).peak_gb_per_s().unwrap();
        let gen5 = link(5, 16).peak_gb_per_s().unwrap();
        assert!((gen5 - 2.0 * gen4).abs() < 1e-9);
        assert!((gen5 - 63.015).abs() < 1e-3, "{gen5}");
        assert!((link(3, 8).peak_gb_per_s().unwrap() - 7.877).abs() < 1e-3);
        assert!((link(2, 16).peak_gb_per_s().unwrap() - 8.0).abs() < 1e-9);
        // An idle Gen5 link at Gen1 still has the Gen5 peak; a narrower one has less.
        let idle = PcieLink {
            generation: 1,
            width: 16,
            max_generation: 5,
            max_width: 16,
        };
        assert_eq!(idle.peak_gb_per_s(), Some(gen5));
        assert_eq!(link(5, 8).peak_gb_per_s(), Some(gen5 / 2.0));
        assert_eq!(link(6, 16).peak_gb_per_s(), None);
        assert_eq!(link(5, 0).peak_gb_per_s(), None);
    }

    #[test]
    fn bad_requests_are_typed_errors() {
        let copy = |directions: Vec<HostDirection>, bytes, repeats| HostCopyRequest {
            memory: HostMemory::Pinned,
            directions,
            bytes,
            repeats,
        };
        let h2d = HostDirection::HostToDevice;
        let d2h = HostDirection::DeviceToHost;
        assert!(copy(vec![h2d], 1 << 20, 3).check().is_ok());
        assert!(copy(vec![h2d, d2h], 1 << 20, 3).check().is_ok());
        for bad in [
            copy(vec![], 1 << 20, 3),
            copy(vec![h2d, h2d], 1 << 20, 3),
            copy(vec![h2d], 1000, 3),
            copy(vec![h2d], 0, 3),
            copy(vec![h2d], 2 << 30, 3),
            copy(vec![h2d], 1 << 20, 0),
            copy(vec![h2d], 1 << 20, 65),
        ] {
            assert!(
                matches!(bad.check(), Err(RunnerError::InvalidRequest(_))),
                "{bad:?}"
            );
        }
        assert!(sm(BandwidthOp::Read(ReadVariant::Cg)).check().is_ok());
        assert_eq!(
            sm(BandwidthOp::Write).direction().unwrap(),
            HostDirection::DeviceToHost
        );
        assert!(sm(BandwidthOp::Copy).check().is_err());
        let mut odd = sm(BandwidthOp::Write);
        odd.bytes = 3 << 20;
        assert!(matches!(odd.check(), Err(RunnerError::InvalidRequest(_))));
        let chase = |stride, steps| HostChaseRequest { stride, steps }.chain();
        assert_eq!(chase(256, 255).unwrap().nodes(), 256);
        assert!(chase(100, 10).is_err());
        assert!(chase(256, 0).is_err());
    }

    #[test]
    fn an_sm_launch_moves_its_shape_times_its_iterations() {
        // 132 SMs × 2 blocks × 1024 threads × 4 accesses of 16 B, twice.
        assert_eq!(
            sm(BandwidthOp::Write).bytes_per_launch(132),
            264 * 1024 * 64 * 2
        );
    }
}
