//! What a node is asked to move between its GPUs, and the peak a link can move.
//!
//! A [`PeerCopiesRequest`] is copy-engine copies that run at once, each
//! [`PeerTransfer`] on a stream of its own on the GPU whose copy engine moves it (the
//! destination pulls, or the source pushes), each timed by its own stream's events. One
//! transfer is a single copy; a transfer and its reverse are both directions at once; a
//! copy split over several streams is several transfers of one pair; every ordered pair of
//! a node is the all-pairs copy. An SM request is a [`crate::bandwidth::BandwidthRequest`]
//! whose reads or writes go to the other GPU's memory ([`check_peer_bandwidth`]).
//!
//! The peak of a link is its NVLink count times the rate of one link in one direction of
//! its generation ([`NvlinkGeneration`]), known from the GPU's architecture.
//!
//! ```
//! use pchase_runner::peer::{NvlinkGeneration, PeerCopiesRequest, PeerTransfer};
//! use pchase_runner::ComputeCapability;
//! let h100 = NvlinkGeneration::of(ComputeCapability { major: 9, minor: 0 }).unwrap();
//! assert_eq!((h100.generation, h100.gb_per_s_per_link), (4, 25.0));
//! assert_eq!(h100.peak_gb_per_s(18), Some(450.0));
//! // GPU 0 pulls GPU 1's memory while pushing its own: both directions at once.
//! let both = PeerCopiesRequest {
//!     transfers: vec![PeerTransfer::pull(0, 1), PeerTransfer::push(0, 1)],
//!     bytes: 64 << 20,
//!     copies_per_timing: 2,
//!     repeats: 3,
//! };
//! both.check(2)?;
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

use crate::{
    bandwidth::{BandwidthOp, BandwidthRequest, RegionLayout},
    device::ComputeCapability,
    error::RunnerError,
};

/// The largest copy of one transfer.
pub const MAX_PEER_COPY_BYTES: u64 = 1 << 30;

/// The most timed repeats of one request.
pub const MAX_PEER_REPEATS: u32 = 64;

/// The most copies between a transfer's two events.
pub const MAX_COPIES_PER_TIMING: u32 = 16;

/// One copy-engine copy of a [`PeerCopiesRequest`]: bytes from `src`'s memory into `dst`'s,
/// issued on a stream of `engine`, one of the two (GPU positions of the node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerTransfer {
    /// The GPU whose memory is read.
    pub src: u32,
    /// The GPU whose memory is written.
    pub dst: u32,
    /// The GPU whose stream, and so whose copy engine, moves the bytes.
    pub engine: u32,
}

impl PeerTransfer {
    /// `reader` pulls `owner`'s memory into its own (the peer copy of a link
    /// `reader → owner`).
    pub fn pull(reader: u32, owner: u32) -> Self {
        PeerTransfer {
            src: owner,
            dst: reader,
            engine: reader,
        }
    }

    /// `reader` pushes its own memory into `owner`'s.
    pub fn push(reader: u32, owner: u32) -> Self {
        PeerTransfer {
            src: reader,
            dst: owner,
            engine: reader,
        }
    }

    /// The GPU at the other end from the engine (the one whose memory the engine reaches
    /// over the link).
    pub fn peer(&self) -> u32 {
        if self.engine == self.src {
            self.dst
        } else {
            self.src
        }
    }
}

/// Copy-engine copies that run at once, each transfer on a stream of its own, enqueued in
/// turns (every transfer's first copy, then every transfer's second, …) so that they start
/// within the enqueueing of one round. Each transfer copies `copies_per_timing` times
/// untimed first (so that every stream is busy before any is timed), then `repeats` times
/// `copies_per_timing` copies, each group timed by two events of its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCopiesRequest {
    /// The copies; at least one.
    pub transfers: Vec<PeerTransfer>,
    /// Bytes of each copy: a positive multiple of 4 KiB, at most [`MAX_PEER_COPY_BYTES`].
    pub bytes: u64,
    /// Copies back to back between two events: 1 to [`MAX_COPIES_PER_TIMING`].
    pub copies_per_timing: u32,
    /// Timed groups per transfer: 1 to [`MAX_PEER_REPEATS`].
    pub repeats: u32,
}

impl PeerCopiesRequest {
    /// Checks the request against a node of `gpus` GPUs.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] naming what is wrong: no transfer, a transfer within
    /// one GPU, an engine that is neither end, a GPU the node does not have, a bad size or
    /// count.
    pub fn check(&self, gpus: u32) -> Result<(), RunnerError> {
        let bad = |why: String| Err(RunnerError::InvalidRequest(why));
        if self.transfers.is_empty() {
            return bad("a peer copy of no transfer".into());
        }
        for t in &self.transfers {
            if t.src == t.dst {
                return bad(format!("a peer copy within GPU {}", t.src));
            }
            if t.engine != t.src && t.engine != t.dst {
                return bad(format!(
                    "GPU {} cannot move a copy from GPU {} to GPU {}",
                    t.engine, t.src, t.dst
                ));
            }
            if t.src >= gpus || t.dst >= gpus {
                return Err(RunnerError::BadDeviceIndex {
                    index: t.src.max(t.dst),
                    count: gpus,
                });
            }
        }
        if self.bytes == 0 || self.bytes % 4096 != 0 || self.bytes > MAX_PEER_COPY_BYTES {
            return bad(format!(
                "a peer copy of {} B: a positive multiple of 4 KiB up to {MAX_PEER_COPY_BYTES} B",
                self.bytes
            ));
        }
        if !(1..=MAX_COPIES_PER_TIMING).contains(&self.copies_per_timing)
            || !(1..=MAX_PEER_REPEATS).contains(&self.repeats)
        {
            return bad(format!(
                "{} copies per timing and {} repeats: 1 to {MAX_COPIES_PER_TIMING} and 1 to {MAX_PEER_REPEATS}",
                self.copies_per_timing, self.repeats
            ));
        }
        Ok(())
    }

    /// Bytes each timed group of one transfer moves.
    pub fn bytes_per_timing(&self) -> u64 {
        self.bytes * u64::from(self.copies_per_timing)
    }
}

/// Checks what an SM request over a link needs beyond what
/// [`crate::bandwidth::check_bandwidth`] checks on the reader: a read or a write (a copy
/// would move bytes both ways) walking one region in a grid stride.
///
/// # Errors
/// [`RunnerError::InvalidRequest`] naming what is wrong.
pub fn check_peer_bandwidth(request: &BandwidthRequest) -> Result<(), RunnerError> {
    match (request.shape.op, request.layout) {
        (BandwidthOp::Read(_) | BandwidthOp::Write, RegionLayout::GridStride) => Ok(()),
        (op, layout) => Err(RunnerError::InvalidRequest(format!(
            "an SM request over a link reads or writes the other GPU's memory in a grid \
             stride, not {op} in {layout:?}"
        ))),
    }
}

/// An NVLink generation and the rate of one of its links in one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NvlinkGeneration {
    /// 1 (Pascal) to 5 (Blackwell).
    pub generation: u32,
    /// GB/s per link and direction.
    pub gb_per_s_per_link: f64,
}

impl NvlinkGeneration {
    /// The generation of a GPU's NVLink by its architecture, where it has one: 1 on the
    /// P100 (20 GB/s per link and direction), 2 on Volta and Turing and 3 on the A100 and
    /// 4 on Hopper (25 GB/s), 3 on the other Ampere GPUs with NVLink bridges (A40, A6000,
    /// RTX 3090: 14.0625 GB/s, 112.5 GB/s both ways over four links), 5 on Blackwell
    /// data-centre GPUs (50 GB/s); `None` otherwise. NVIDIA's architecture white papers and
    /// data sheets state these rates; NVML's own version number is not used, its encoding
    /// having changed between drivers.
    pub fn of(cc: ComputeCapability) -> Option<NvlinkGeneration> {
        let (generation, gb_per_s_per_link) = match (cc.major, cc.minor) {
            (6, 0) => (1, 20.0),
            (7, 0 | 2 | 5) => (2, 25.0),
            (8, 0) => (3, 25.0),
            (8, 6) => (3, 14.0625),
            (9, 0) => (4, 25.0),
            (10, 0 | 3) => (5, 50.0),
            _ => return None,
        };
        Some(NvlinkGeneration {
            generation,
            gb_per_s_per_link,
        })
    }

    /// The peak per direction of `links` links; `None` for none (PCIe).
    pub fn peak_gb_per_s(&self, links: u32) -> Option<f64> {
        (links > 0).then(|| f64::from(links) * self.gb_per_s_per_link)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bandwidth::{BandwidthShape, ReadVariant};

    fn copies(transfers: Vec<PeerTransfer>, bytes: u64) -> PeerCopiesRequest {
        PeerCopiesRequest {
            transfers,
            bytes,
            copies_per_timing: 2,
            repeats: 3,
        }
    }

    #[test]
    fn bad_copies_are_typed_errors() {
        let pull = PeerTransfer::pull(0, 1);
        assert_eq!((pull.src, pull.dst, pull.engine, pull.peer()), (1, 0, 0, 1));
        let push = PeerTransfer::push(0, 1);
        assert_eq!((push.src, push.dst, push.engine, push.peer()), (0, 1, 0, 1));
        assert!(copies(vec![pull, push], 64 << 20).check(2).is_ok());
        assert_eq!(copies(vec![pull], 64 << 20).bytes_per_timing(), 128 << 20);
        let stranger = PeerTransfer {
            src: 0,
            dst: 1,
            engine: 2,
        };
        for bad in [
            copies(vec![], 64 << 20),
            copies(vec![PeerTransfer::pull(1, 1)], 64 << 20),
            copies(vec![stranger], 64 << 20),
            copies(vec![pull], 1000),
            copies(vec![pull], 0),
            copies(vec![pull], 2 << 30),
            PeerCopiesRequest {
                repeats: 0,
                ..copies(vec![pull], 1 << 20)
            },
            PeerCopiesRequest {
                copies_per_timing: 17,
                ..copies(vec![pull], 1 << 20)
            },
        ] {
            assert!(
                matches!(bad.check(3), Err(RunnerError::InvalidRequest(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            copies(vec![PeerTransfer::pull(0, 4)], 1 << 20).check(2),
            Err(RunnerError::BadDeviceIndex { index: 4, count: 2 })
        ));
    }

    #[test]
    fn sm_requests_over_a_link_read_or_write_in_a_grid_stride() {
        let request = |op, layout| BandwidthRequest {
            shape: BandwidthShape {
                op,
                vector_bytes: 16,
                unroll: 4,
                blocks_per_sm: 2,
                threads: 512,
            },
            layout,
            region_bytes: 64 << 20,
            iterations: 4,
            repetitions: 3,
        };
        let cg = BandwidthOp::Read(ReadVariant::Cg);
        assert!(check_peer_bandwidth(&request(cg, RegionLayout::GridStride)).is_ok());
        assert!(
            check_peer_bandwidth(&request(BandwidthOp::Write, RegionLayout::GridStride)).is_ok()
        );
        assert!(
            check_peer_bandwidth(&request(BandwidthOp::Copy, RegionLayout::GridStride)).is_err()
        );
        assert!(check_peer_bandwidth(&request(cg, RegionLayout::PerBlock)).is_err());
    }

    #[test]
    fn peaks_follow_the_generation_and_the_link_count() {
        let cc = |major, minor| ComputeCapability { major, minor };
        let of = |major, minor| NvlinkGeneration::of(cc(major, minor));
        assert_eq!(of(9, 0).unwrap().peak_gb_per_s(18), Some(450.0));
        assert_eq!(of(8, 0).unwrap().peak_gb_per_s(12), Some(300.0));
        assert_eq!(of(7, 0).unwrap().peak_gb_per_s(6), Some(150.0));
        assert_eq!(of(6, 0).unwrap().peak_gb_per_s(4), Some(80.0));
        assert_eq!(of(10, 0).unwrap().peak_gb_per_s(18), Some(900.0));
        assert_eq!(of(8, 6).unwrap().peak_gb_per_s(4), Some(56.25));
        assert_eq!(of(9, 0).unwrap().peak_gb_per_s(0), None, "PCIe");
        assert!(of(8, 9).is_none() && of(12, 0).is_none(), "no NVLink");
    }
}
