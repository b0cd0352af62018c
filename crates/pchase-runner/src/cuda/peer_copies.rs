//! Moving bytes between a node's GPUs through CUDA (`crate::peer`'s requests): copy-engine
//! copies, several at once, and one GPU's SMs reading or writing another's memory.
//!
//! Copies are `cuMemcpyPeerAsync`, each transfer on a stream of its own created in the
//! context of the GPU whose copy engine moves it (the destination's to pull, the source's
//! to push: the driver runs a copy on the engines of its stream's device), with its own
//! events. The transfers are enqueued in turns, each round's copies of every transfer
//! before the next round's, switching the current context per transfer, so that all
//! streams start within one round's enqueueing; one untimed round first, then the timed
//! ones back to back, and one wait per stream at the end. Each GPU keeps its copy buffers
//! between requests (the `k`-th use of a GPU in a request takes its `k`-th buffer), filled
//! with a non-zero byte once, freed with its backend.
//!
//! The SMs run the device-memory bandwidth benchmark's kernels (`bandwidth.rs`) in the
//! reader's context over a buffer the owner keeps, through the pointer unified addressing
//! makes valid in the reader's context once peer access is enabled.

use std::time::Duration;

use super::{
    bandwidth::ensure,
    driver::check,
    ffi::{ContextHandle, CuResult, DevicePtr, StreamHandle},
    handles::{DeviceBuffer, Event, Stream},
    peer::CudaNode,
};
use crate::{
    bandwidth::{check_bandwidth, BandwidthRequest, BandwidthRun},
    error::RunnerError,
    peer::{check_peer_bandwidth, PeerBackend, PeerCopiesRequest},
};

// Raw forwarders of cuda-shim (see `super::ffi`): plain integers in and out.
extern "C" {
    #[link_name = "cuda_shim_raw_cuMemcpyPeerAsync"]
    fn cuMemcpyPeerAsync(
        dst: DevicePtr,
        dst_context: ContextHandle,
        src: DevicePtr,
        src_context: ContextHandle,
        bytes: usize,
        stream: StreamHandle,
    ) -> CuResult;
}

/// One GPU's buffers of the copies between GPUs and of the SM launches of its peers over
/// its memory, kept between requests.
#[derive(Debug, Default)]
pub(super) struct PeerBuffers {
    /// The copies' buffers, by their place in a request.
    copies: Vec<Option<DeviceBuffer<u32>>>,
    /// What the peers' SMs read and write.
    sm: Option<DeviceBuffer<u32>>,
}

/// One transfer: its stream and events on its engine's context, and both ends.
#[derive(Debug)]
struct Lane {
    engine: u32,
    stream: Stream,
    /// The start, the untimed round's end, then each timed round's end.
    events: Vec<Event>,
    src: DevicePtr,
    src_context: ContextHandle,
    dst: DevicePtr,
    dst_context: ContextHandle,
}

impl CudaNode {
    /// The copy-engine copies of `request` ([`PeerBackend::peer_copies`]).
    pub(super) fn run_copies(
        &mut self,
        request: &PeerCopiesRequest,
    ) -> Result<Vec<Vec<Duration>>, RunnerError> {
        request.check(self.gpus())?;
        usize::try_from(request.bytes)
            .map_err(|_| RunnerError::InvalidRequest(format!("{} B", request.bytes)))?;
        for t in &request.transfers {
            self.enable(t.engine, t.peer())?;
        }
        let mut lanes = Vec::with_capacity(request.transfers.len());
        let timed = self
            .open_lanes(request, &mut lanes)
            .and_then(|()| self.time_lanes(request, &lanes));
        self.release(lanes);
        timed
    }

    /// A stream and events per transfer, on its engine, and its ends' buffers.
    fn open_lanes(
        &mut self,
        request: &PeerCopiesRequest,
        lanes: &mut Vec<Lane>,
    ) -> Result<(), RunnerError> {
        let mut taken = vec![0usize; self.members.len()];
        let mut end = |node: &mut CudaNode, position: u32| -> Result<DevicePtr, RunnerError> {
            let slot = taken[position as usize];
            taken[position as usize] += 1;
            let pool = &mut node.enter(position)?.backend.peer.copies;
            if pool.len() <= slot {
                pool.resize_with(slot + 1, || None);
            }
            ensure(&mut pool[slot], request.bytes)
        };
        for t in &request.transfers {
            let src = end(self, t.src)?;
            let dst = end(self, t.dst)?;
            let (src_context, dst_context) = (self.context(t.src)?, self.context(t.dst)?);
            self.enter(t.engine)?;
            let stream = Stream::new()?;
            let events = (0..request.repeats + 2)
                .map(|_| Event::new())
                .collect::<Result<Vec<_>, _>>()?;
            lanes.push(Lane {
                engine: t.engine,
                stream,
                events,
                src,
                src_context,
                dst,
                dst_context,
            });
        }
        Ok(())
    }

    /// Enqueues every round of every lane in turns, waits, and reads each timed round.
    fn time_lanes(
        &mut self,
        request: &PeerCopiesRequest,
        lanes: &[Lane],
    ) -> Result<Vec<Vec<Duration>>, RunnerError> {
        let bytes = request.bytes as usize;
        for round in 0..=request.repeats as usize {
            for lane in lanes {
                self.enter(lane.engine)?;
                if round == 0 {
                    lane.events[0].record(&lane.stream)?;
                }
                for _ in 0..request.copies_per_timing {
                    // SAFETY: both ranges are live allocations of at least `bytes` in their
                    // contexts, kept by their GPUs' pools until the lanes' streams have
                    // finished (`release` waits for them).
                    check("cuMemcpyPeerAsync", unsafe {
                        cuMemcpyPeerAsync(
                            lane.dst,
                            lane.dst_context,
                            lane.src,
                            lane.src_context,
                            bytes,
                            lane.stream.handle(),
                        )
                    })?;
                }
                lane.events[round + 1].record(&lane.stream)?;
            }
        }
        for lane in lanes {
            self.enter(lane.engine)?;
            lane.stream
                .synchronize("cuStreamSynchronize (peer copies)")?;
        }
        lanes
            .iter()
            .map(|lane| {
                lane.events[1..]
                    .windows(2)
                    .map(|pair| pair[1].elapsed_since(&pair[0]))
                    .collect()
            })
            .collect()
    }

    /// Waits for each lane's stream and lets it go in its engine's context.
    fn release(&mut self, lanes: Vec<Lane>) {
        for lane in lanes {
            if self.enter(lane.engine).is_ok() {
                if let Err(e) = lane.stream.synchronize("cuStreamSynchronize (peer copies)") {
                    log::debug!("releasing a peer copy's stream: {e}");
                }
            }
            drop(lane);
        }
    }

    /// `from`'s SMs over `to`'s memory ([`PeerBackend::peer_bandwidth`]).
    pub(super) fn run_peer_bandwidth(
        &mut self,
        from: u32,
        to: u32,
        request: &BandwidthRequest,
    ) -> Result<BandwidthRun, RunnerError> {
        check_peer_bandwidth(request)?;
        if from == to {
            return Err(RunnerError::InvalidRequest(format!(
                "an SM request over a link joins two GPUs; {from} → {to} is one"
            )));
        }
        check_bandwidth(request, self.info(from)?)?;
        self.enable(from, to)?;
        let owner = self.enter(to)?;
        let pointer = ensure(&mut owner.backend.peer.sm, request.region_bytes)?;
        self.enter(from)?
            .backend
            .run_bandwidth_peer(request, pointer)
    }
}
