//! Several GPUs of one node through CUDA: peer access, a chase by one GPU over a chain in
//! another's memory, and peer copies (`crate::peer`).
//!
//! Each GPU is a [`CudaBackend`] with its own context, handed to the node floating (current
//! on no thread: [`CudaBackend::into_floating`]), so that a backend made and used on
//! another thread (a GPU measured on a thread of its own) serves the links without a
//! second context; the node switches the current
//! context (`cuCtxSetCurrent`) before each step: the owner builds the chain (and flushes
//! its L2) with its own init kernel, then the reader, with peer access to the owner's
//! context enabled, runs the fine-grained `.cg` chase kernel on the owner's pointer
//! (unified addressing makes it valid in the reader's context). Copies are
//! `cuMemcpyPeerAsync` on the reader's stream, timed with its events. On two NVLinked
//! H100s: `docs/evidence/2026-11-25-h100x2-node/`.

use std::{
    os::raw::{c_int, c_uint},
    ptr,
    time::Duration,
};

use super::{
    device::checked_device,
    driver::check,
    errors,
    ffi::{self, ContextHandle, CuResult, DevicePtr, StreamHandle},
    handles::{DeviceBuffer, Event},
    CudaBackend,
};
use crate::{
    backend::Backend,
    device::DeviceInfo,
    error::RunnerError,
    peer::{PeerAccess, PeerBackend, PeerChaseRequest, PeerCopyRequest},
};

/// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`.
const P2P_PERFORMANCE_RANK: c_int = 0x01;
/// `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`.
const PEER_ACCESS_ALREADY_ENABLED: CuResult = 704;

// Raw forwarders of cuda-shim (see `super::ffi`): plain integers in and out.
extern "C" {
    #[link_name = "cuda_shim_raw_cuDeviceCanAccessPeer"]
    fn cuDeviceCanAccessPeer(can_access: *mut c_int, device: c_int, peer: c_int) -> CuResult;
    #[link_name = "cuda_shim_raw_cuDeviceGetP2PAttribute"]
    fn cuDeviceGetP2PAttribute(
        value: *mut c_int,
        attribute: c_int,
        src: c_int,
        dst: c_int,
    ) -> CuResult;
    #[link_name = "cuda_shim_raw_cuCtxEnablePeerAccess"]
    fn cuCtxEnablePeerAccess(peer: ContextHandle, flags: c_uint) -> CuResult;
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

/// A [`CudaBackend`] whose context is current on no thread, so that it may move to
/// another thread: there [`CudaNode::from_backends`] makes it current again before each
/// use, and dropping it makes it current before its buffers and modules go.
#[derive(Debug)]
pub struct FloatingBackend {
    backend: CudaBackend,
}

// SAFETY: a backend is driver handles (context, stream, events, modules, device and pinned
// memory), valid on every thread of the process, and plain host data; what ties it to a
// thread is only its context being current there. A floating backend's context is current
// on none, and whoever receives it makes it current before any call on it
// (`CudaNode::enter`; `CudaBackend`'s `Drop`). The driver allows a context to be made
// current on any thread (`cuCtxPopCurrent`, `cuCtxPushCurrent`, `cuCtxSetCurrent`).
unsafe impl Send for FloatingBackend {}

impl CudaBackend {
    /// Hands the backend over to another thread: waits for its work, which also proves
    /// the context usable (a kernel that faulted leaves it in an error that every later
    /// call returns), and takes its context off the calling thread (where
    /// [`CudaBackend::new`] made it current); the calling thread's other contexts stay as
    /// they were.
    ///
    /// # Errors
    /// The context's error (the backend is then released here).
    pub fn into_floating(self) -> Result<FloatingBackend, RunnerError> {
        let context = self.context.handle();
        let mut current: ContextHandle = ptr::null_mut();
        // SAFETY: valid out-pointer.
        check("cuCtxGetCurrent", unsafe {
            ffi::cuCtxGetCurrent(&mut current)
        })?;
        if current != context {
            // SAFETY: a live context; popped again below.
            check("cuCtxPushCurrent", unsafe {
                ffi::cuCtxPushCurrent(context)
            })?;
        }
        // SAFETY: no pointers; on the context just made current.
        check("cuCtxSynchronize", unsafe { ffi::cuCtxSynchronize() })?;
        let mut popped: ContextHandle = ptr::null_mut();
        // SAFETY: valid out-pointer; the context on top is this backend's.
        check("cuCtxPopCurrent", unsafe {
            ffi::cuCtxPopCurrent(&mut popped)
        })?;
        Ok(FloatingBackend { backend: self })
    }
}

/// One GPU of the node.
#[derive(Debug)]
struct Member {
    backend: CudaBackend,
    context: ContextHandle,
    device: c_int,
    /// Its SM clock (MHz) and clock-read overhead, measured when it first reads a peer:
    /// one 20 ms measurement per reader, not one per link.
    clock: Option<(f64, u32)>,
}

/// GPUs of one node (positions in the order of the ordinals or backends given).
///
/// Dropped, each backend makes its own context current before it goes, so that the
/// thread that drops the node needs none current.
#[derive(Debug)]
pub struct CudaNode {
    members: Vec<Member>,
}

impl CudaNode {
    /// Opens a context on each of `ordinals` (CUDA device indices), one after another.
    ///
    /// # Errors
    /// As [`CudaBackend::new`] for any of them.
    pub fn new(ordinals: &[u32]) -> Result<CudaNode, RunnerError> {
        let started = std::time::Instant::now();
        let backends = ordinals
            .iter()
            .map(|&ordinal| CudaBackend::new(ordinal)?.into_floating())
            .collect::<Result<Vec<_>, _>>()?;
        log::debug!(
            "the links' contexts on {} GPU(s) created in {:.1} ms",
            backends.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
        Self::from_backends(backends)
    }

    /// A node of backends made already, each on whatever thread (position `i` is
    /// `backends[i]`): no context is created.
    ///
    /// # Errors
    /// A backend's device that the driver no longer lists.
    pub fn from_backends(backends: Vec<FloatingBackend>) -> Result<CudaNode, RunnerError> {
        let members = backends
            .into_iter()
            .map(|floating| {
                let backend = floating.backend;
                Ok(Member {
                    context: backend.context.handle(),
                    device: checked_device(backend.device().ordinal)?,
                    backend,
                    clock: None,
                })
            })
            .collect::<Result<Vec<_>, RunnerError>>()?;
        Ok(CudaNode { members })
    }

    /// Makes `position`'s context current and returns it.
    fn enter(&mut self, position: u32) -> Result<&mut Member, RunnerError> {
        let count = self.members.len() as u32;
        let member =
            self.members
                .get_mut(position as usize)
                .ok_or(RunnerError::BadDeviceIndex {
                    index: position,
                    count,
                })?;
        // SAFETY: a live context of this node.
        check("cuCtxSetCurrent", unsafe {
            ffi::cuCtxSetCurrent(member.context)
        })?;
        Ok(member)
    }

    fn context(&self, position: u32) -> Result<ContextHandle, RunnerError> {
        self.members
            .get(position as usize)
            .map(|m| m.context)
            .ok_or(RunnerError::BadDeviceIndex {
                index: position,
                count: self.members.len() as u32,
            })
    }

    /// Lets `from`'s context read `to`'s memory.
    fn enable(&mut self, from: u32, to: u32) -> Result<(), RunnerError> {
        let peer = self.context(to)?;
        self.enter(from)?;
        // SAFETY: two live contexts; flags must be 0.
        match unsafe { cuCtxEnablePeerAccess(peer, 0) } {
            ffi::SUCCESS | PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            code => Err(RunnerError::Cuda {
                call: "cuCtxEnablePeerAccess",
                message: errors::describe(code),
            }),
        }
    }
}

impl PeerBackend for CudaNode {
    fn gpus(&self) -> u32 {
        self.members.len() as u32
    }

    fn info(&self, position: u32) -> Result<&DeviceInfo, RunnerError> {
        self.members
            .get(position as usize)
            .map(|m| m.backend.device())
            .ok_or(RunnerError::BadDeviceIndex {
                index: position,
                count: self.members.len() as u32,
            })
    }

    fn access(&mut self, from: u32, to: u32) -> Result<PeerAccess, RunnerError> {
        let a = self.enter(from)?.device;
        let b = self.enter(to)?.device;
        let mut can = 0;
        // SAFETY: valid out-pointer and device handles.
        check("cuDeviceCanAccessPeer", unsafe {
            cuDeviceCanAccessPeer(&mut can, a, b)
        })?;
        let mut rank = 0;
        // SAFETY: valid out-pointer and device handles; an unsupported attribute is a code.
        let rank = (unsafe { cuDeviceGetP2PAttribute(&mut rank, P2P_PERFORMANCE_RANK, a, b) }
            == ffi::SUCCESS)
            .then_some(rank);
        Ok(PeerAccess {
            can_access: can != 0,
            performance_rank: rank,
            nvlink_links: None,
        })
    }

    fn peer_chase(
        &mut self,
        from: u32,
        to: u32,
        request: &PeerChaseRequest,
    ) -> Result<Vec<u32>, RunnerError> {
        if request.steps == 0 {
            return Err(RunnerError::InvalidRequest(
                "a chase needs at least one timed step".into(),
            ));
        }
        self.enable(from, to)?;
        let nodes = u32::try_from(request.chain.nodes())
            .map_err(|_| RunnerError::InvalidRequest("a chain has more than 2^32 nodes".into()))?;
        let stride_elems = request.chain.stride / 4;
        // The owner builds the chain in its memory and, if asked, flushes its L2.
        let owner = self.enter(to)?;
        let chain = DeviceBuffer::<u32>::uninitialized(request.chain.elements() as usize)?;
        owner
            .backend
            .init_chains_at(chain.device_ptr(), 0, &[nodes], stride_elems, 1)?;
        if request.flush_owner_l2 {
            owner.backend.flush_l2()?;
        }
        // The reader chases it.
        let latencies = self.enter(from)?.backend.warp_chase_at(
            request.chain,
            chain.device_ptr(),
            request.warmup_steps,
            request.steps,
            &format!("peer chase {from} → {to}"),
        )?;
        self.enter(to)?;
        drop(chain);
        Ok(latencies)
    }

    fn peer_copy(
        &mut self,
        from: u32,
        to: u32,
        request: &PeerCopyRequest,
    ) -> Result<Vec<Duration>, RunnerError> {
        let words = usize::try_from(request.bytes / 4)
            .ok()
            .filter(|&w| w > 0)
            .ok_or_else(|| RunnerError::InvalidRequest(format!("a copy of {} B", request.bytes)))?;
        let bytes = words * 4;
        self.enable(from, to)?;
        let (from_context, to_context) = (self.context(from)?, self.context(to)?);
        self.enter(to)?;
        let source = DeviceBuffer::<u32>::zeroed(words)?;
        let reader = self.enter(from)?;
        let target = DeviceBuffer::<u32>::uninitialized(words)?;
        let stream = &reader.backend.stream;
        let copy = || {
            // SAFETY: both ranges are live allocations of `bytes` in their contexts.
            check("cuMemcpyPeerAsync", unsafe {
                cuMemcpyPeerAsync(
                    target.device_ptr(),
                    from_context,
                    source.device_ptr(),
                    to_context,
                    bytes,
                    stream.handle(),
                )
            })
        };
        copy()?;
        stream.synchronize("cuStreamSynchronize (peer copy)")?;
        let mut times = Vec::new();
        for _ in 0..request.repeats {
            let (start, stop) = (Event::new()?, Event::new()?);
            start.record(stream)?;
            copy()?;
            stop.record(stream)?;
            stream.synchronize("cuStreamSynchronize (peer copy)")?;
            times.push(stop.elapsed_since(&start)?);
        }
        drop(target);
        self.enter(to)?;
        drop(source);
        Ok(times)
    }

    fn clock(&mut self, position: u32) -> Result<(f64, u32), RunnerError> {
        let member = self.enter(position)?;
        if let Some(clock) = member.clock {
            return Ok(clock);
        }
        let clock = (
            member.backend.measure_sm_clock_mhz()?,
            member.backend.clock_overhead(256)?,
        );
        member.clock = Some(clock);
        Ok(clock)
    }
}
