//! The bandwidth kernels, each JIT-compiled as a module of its own the first time it is
//! needed, or ahead of time on background threads ([`CudaBackend::prepare_kernels`]).
//!
//! Without a warm JIT cache each bandwidth kernel costs the driver some 10–15 ms to
//! compile; the default run visits about 30 of them, and on an H200 its first run spent
//! about 370 ms of its bandwidth rows compiling (`docs/results/session10.md`, call 26,
//! run 1). Compiled on other threads while the chases run, they are ready when the rows
//! come; with a warm cache each load takes about 0.1 ms. One cell per kernel: the first
//! thread to ask compiles, any other asking meanwhile waits for that result.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, OnceLock,
    },
    thread::JoinHandle,
    time::Instant,
};

use pchase_kernels::{
    bandwidth::{self as kernels, BandwidthOp, ReadVariant},
    Kernel,
};

use super::{driver::LoadedModule, ffi::ContextHandle, CudaBackend, LoadedFunction};
use crate::error::RunnerError;

// Raw forwarder of cuda-shim (see `super::ffi`).
extern "C" {
    #[link_name = "cuda_shim_raw_cuCtxSetCurrent"]
    fn cuCtxSetCurrent(context: ContextHandle) -> u32;
}

/// Background threads at most.
const THREADS: usize = 3;

/// One cell per bandwidth kernel (in [`kernels::kernels`] order): `Some` once compiled,
/// `None` where a background compile failed (the caller compiles again for the error).
#[derive(Debug)]
struct Cells(Vec<OnceLock<Option<LoadedModule>>>);

/// The bandwidth kernels loaded or being loaded, and the threads loading them.
#[derive(Debug)]
pub(super) struct Precompiled {
    cells: Arc<Cells>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Default for Precompiled {
    fn default() -> Self {
        Precompiled {
            cells: Arc::new(Cells(kernels::kernels().map(|_| OnceLock::new()).collect())),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        }
    }
}

impl Drop for Precompiled {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                log::warn!("a background JIT thread panicked");
            }
        }
    }
}

/// A context handle sent to a background thread, which makes it current there.
struct SendContext(ContextHandle);
// SAFETY: a CUDA context may be made current on any thread; the backend joins the threads
// before it destroys the context (`Precompiled` drops before the context).
unsafe impl Send for SendContext {}

fn index_of(kernel: &'static Kernel) -> Option<usize> {
    kernels::kernels().position(|k| std::ptr::eq(k, kernel))
}

fn compile(kernel: &'static Kernel) -> Result<LoadedModule, RunnerError> {
    let ptx = kernels::kernel_ptx(kernel).ok_or_else(|| {
        RunnerError::InvalidRequest(format!("{} is not a bandwidth kernel", kernel.entry()))
    })?;
    let started = Instant::now();
    let module = LoadedModule::load(kernels::module().name(), &ptx)?;
    log::debug!(
        "JIT-compiled {} in {:.1} ms",
        kernel.entry(),
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(module)
}

/// The order a session is likely to need `wanted` in: the L2 flush's kernel first, then
/// each operation's kernels from the tuner's seed (16 B × 4) outwards, operations in the
/// order they first appear in `wanted`.
pub(super) fn likely_order(wanted: &[&'static Kernel]) -> Vec<&'static Kernel> {
    let flush = kernels::kernel(BandwidthOp::Read(ReadVariant::Cg), 16, 4);
    let mut ops: Vec<BandwidthOp> = Vec::new();
    for shape in wanted.iter().filter_map(|k| kernels::shape_of(k)) {
        if !ops.contains(&shape.op) {
            ops.push(shape.op);
        }
    }
    let distance = |k: &&'static Kernel| {
        let s = kernels::shape_of(k).expect("a bandwidth kernel");
        let log2 = |v: u32| i64::from(v.max(1).ilog2());
        (log2(s.vector_bytes) - 4).abs() + (log2(s.unroll) - 2).abs()
    };
    let mut order: Vec<&'static Kernel> = flush.into_iter().collect();
    for op in ops {
        let mut family: Vec<&'static Kernel> = wanted
            .iter()
            .copied()
            .filter(|k| kernels::shape_of(k).is_some_and(|s| s.op == op))
            .collect();
        family.sort_by_key(distance);
        for kernel in family {
            if !order.iter().any(|k| std::ptr::eq(*k, kernel)) {
                order.push(kernel);
            }
        }
    }
    order
}

impl CudaBackend {
    /// Starts compiling the bandwidth kernels among `wanted` on background threads, in
    /// [`likely_order`]; a no-op after the first call. `MEMTOPO_PRECOMPILE=0` turns it off
    /// (to compare).
    pub(super) fn prepare_kernels(&mut self, wanted: &[&'static Kernel]) {
        let state = &mut self.bandwidth.precompiled;
        if !state.threads.is_empty() || std::env::var("MEMTOPO_PRECOMPILE").as_deref() == Ok("0") {
            return;
        }
        let order: Vec<usize> = likely_order(wanted)
            .into_iter()
            .filter_map(index_of)
            .collect();
        if order.is_empty() {
            return;
        }
        let order = Arc::new(order);
        let next = Arc::new(AtomicUsize::new(0));
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .clamp(1, THREADS);
        for _ in 0..threads {
            let (cells, stop, order, next) = (
                Arc::clone(&state.cells),
                Arc::clone(&state.stop),
                Arc::clone(&order),
                Arc::clone(&next),
            );
            let context = SendContext(self._context.handle());
            let spawned = std::thread::Builder::new()
                .name("memtopo-jit".into())
                .spawn(move || {
                    let context = context;
                    // SAFETY: a live context (joined before it is destroyed).
                    if unsafe { cuCtxSetCurrent(context.0) } != 0 {
                        return;
                    }
                    let all: Vec<&'static Kernel> = kernels::kernels().collect();
                    while !stop.load(Ordering::Relaxed) {
                        let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        cells.0[i].get_or_init(|| compile(all[i]).ok());
                    }
                });
            match spawned {
                Ok(handle) => state.threads.push(handle),
                Err(e) => log::debug!("no background JIT thread: {e}"),
            }
        }
    }

    /// The function of bandwidth kernel `kernel`: compiled by a background thread, or here
    /// the first time it is asked for (waiting for a background compile under way).
    pub(super) fn bandwidth_function(
        &mut self,
        kernel: &'static Kernel,
    ) -> Result<LoadedFunction, RunnerError> {
        self.check_kernel(kernel)?;
        let index = index_of(kernel).ok_or_else(|| {
            RunnerError::InvalidRequest(format!("{} is not a bandwidth kernel", kernel.entry()))
        })?;
        let mut error = None;
        let cell = &self.bandwidth.precompiled.cells.0[index];
        let module = cell.get_or_init(|| match compile(kernel) {
            Ok(module) => Some(module),
            Err(e) => {
                error = Some(e);
                None
            }
        });
        match (module, error) {
            (Some(module), _) => module.function(kernel),
            (None, Some(e)) => Err(e),
            // A background compile failed: compile again for its error.
            (None, None) => Err(compile(kernel)
                .err()
                .unwrap_or_else(|| RunnerError::ModuleLoad {
                    module: kernels::module().name(),
                    reason: format!("{} failed to compile once", kernel.entry()),
                    log: String::new(),
                })),
        }
    }

    /// Names of the bandwidth kernels loaded so far (each a module of its own).
    pub fn loaded_bandwidth_kernels(&self) -> Vec<&'static str> {
        kernels::kernels()
            .zip(&self.bandwidth.precompiled.cells.0)
            .filter(|(_, cell)| cell.get().is_some_and(Option::is_some))
            .map(|(k, _)| k.entry())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flush_comes_first_then_each_operation_from_the_seed_outwards() {
        let wanted: Vec<&'static Kernel> = kernels::kernels()
            .filter(|k| {
                kernels::shape_of(k).is_some_and(|s| {
                    matches!(
                        s.op,
                        BandwidthOp::Write | BandwidthOp::Read(ReadVariant::Ca)
                    )
                })
            })
            .collect();
        let order = likely_order(&wanted);
        let names: Vec<&str> = order.iter().map(|k| k.entry()).collect();
        assert_eq!(names[0], "bw_read_cg_v16_u4");
        // The loads come first among the kernels asked for, so first here too: the seed,
        // then its three neighbours, then the writes from their seed.
        assert_eq!(names[1], "bw_read_ca_v16_u4");
        assert_eq!(order.len(), wanted.len() + 1);
        let neighbours = ["bw_read_ca_v8_u4", "bw_read_ca_v16_u8", "bw_read_ca_v16_u2"];
        assert!(
            names[2..5].iter().all(|n| neighbours.contains(n)),
            "{names:?}"
        );
        let write = names.iter().position(|n| *n == "bw_write_v16_u4").unwrap();
        assert!(names[1..write].iter().all(|n| n.starts_with("bw_read_ca_")));
        assert!(names[write..].iter().all(|n| n.starts_with("bw_write_")));
        // Every kernel once.
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }
}
