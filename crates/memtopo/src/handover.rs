//! What the GPUs of a node run hand over to its links: each GPU's lock and, on CUDA, its
//! backend (its context, with the modules loaded), so that the links create no second
//! context on every GPU and no other memtopo takes a GPU between its run and its links.
//!
//! The lock goes with the context. A context kept alive after its GPU's run needs the lock
//! still held: a second memtopo must wait on the lock rather than find this one on the
//! GPU as a co-tenant and refuse it as busy (`crate::guard`). Holding a finished GPU's lock
//! while another GPU of the same run waits for its lock could deadlock two node runs that
//! share GPUs (each holding what the other waits for), so the first GPU of the run that
//! has to wait for its lock closes the hand-over: what was handed over is released, what
//! comes later is released at once, and the links take their locks in index order and
//! create their contexts, as they would with nothing handed over. A run thus never waits
//! for a lock while it holds one it does not need.

use std::sync::{Mutex, PoisonError};

use crate::lock::GpuLock;

/// What a GPU's run hands over besides its lock: its backend, current on no thread.
#[cfg(feature = "cuda")]
pub type Context = pchase_runner::cuda::FloatingBackend;

/// What a GPU's run hands over besides its lock: nothing, without CUDA.
#[cfg(not(feature = "cuda"))]
pub type Context = std::convert::Infallible;

/// One GPU's run, handed over.
#[derive(Debug)]
pub struct Kept<C = Context> {
    /// The GPU's index in the node.
    pub index: u32,
    /// Its lock, as its run held it (`None`: measured without one).
    pub lock: Option<GpuLock>,
    /// Its context (`None`: a simulated GPU, or one whose context could not be kept).
    pub context: Option<C>,
}

/// The GPUs' runs hand over here; the links take what they handed over.
#[derive(Debug)]
pub struct Handover<C = Context> {
    state: Mutex<State<C>>,
}

#[derive(Debug)]
struct State<C> {
    /// Whether it still keeps what it is handed.
    open: bool,
    kept: Vec<Kept<C>>,
}

impl<C> Default for Handover<C> {
    fn default() -> Self {
        Handover {
            state: Mutex::new(State {
                open: true,
                kept: Vec::new(),
            }),
        }
    }
}

impl<C> Handover<C> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<C>> {
        // What a panicking thread left is still a list of locks and contexts.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether what a GPU's run hands over now is kept.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn is_open(&self) -> bool {
        self.state().open
    }

    /// Keeps `kept` for the links; when closed, releases it (its lock and its context)
    /// and returns false.
    pub fn keep(&self, kept: Kept<C>) -> bool {
        let mut state = self.state();
        if state.open {
            state.kept.push(kept);
            true
        } else {
            drop(state);
            drop(kept);
            false
        }
    }

    /// Releases what was handed over and keeps nothing more: a GPU of the run is about to
    /// wait for its lock.
    pub fn close(&self) {
        let released = {
            let mut state = self.state();
            state.open = false;
            std::mem::take(&mut state.kept)
        };
        if !released.is_empty() {
            log::debug!(
                "a GPU waits for its lock: the {} GPU(s) done release theirs and their \
                 contexts; the links take them again",
                released.len()
            );
        }
    }

    /// Everything handed over, for the links; keeps nothing more.
    pub fn take(&self) -> Vec<Kept<C>> {
        let mut state = self.state();
        state.open = false;
        std::mem::take(&mut state.kept)
    }
}

/// Where one GPU's run hands over: the node's hand-over, under the GPU's index.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    /// The node's hand-over.
    pub handover: &'a Handover,
    /// The GPU's index in the node.
    pub index: u32,
}

impl Slot<'_> {
    /// Hands the GPU's lock and context over; false when they were released instead.
    pub fn keep(self, lock: Option<GpuLock>, context: Option<Context>) -> bool {
        self.handover.keep(Kept {
            index: self.index,
            lock,
            context,
        })
    }
}

/// Closes `slot`'s hand-over, if any: called before the GPU waits for its lock.
pub fn before_waiting(slot: Option<Slot<'_>>) {
    if let Some(slot) = slot {
        slot.handover.close();
    }
}

#[cfg(test)]
mod tests {
    use std::{path::PathBuf, time::Duration};

    use super::*;
    use crate::lock;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memtopo-handover-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn locked(dir: &std::path::Path, key: &str) -> Option<GpuLock> {
        Some(lock::acquire(dir, key, Duration::ZERO, |_| {}).unwrap())
    }

    fn free(dir: &std::path::Path, key: &str) -> bool {
        lock::acquire(dir, key, Duration::ZERO, |_| {}).is_ok()
    }

    #[test]
    fn what_is_handed_over_stays_locked_until_taken_or_released() {
        let dir = scratch("keep");
        let handover: Handover<u32> = Handover::default();
        assert!(handover.keep(Kept {
            index: 0,
            lock: locked(&dir, "GPU-0"),
            context: Some(10),
        }));
        assert!(!free(&dir, "GPU-0"), "kept: still locked");
        let taken = handover.take();
        assert_eq!(taken.len(), 1);
        assert_eq!((taken[0].index, taken[0].context), (0, Some(10)));
        // Taken, the hand-over keeps nothing more: what comes later is released.
        assert!(!handover.is_open());
        assert!(!handover.keep(Kept {
            index: 1,
            lock: locked(&dir, "GPU-1"),
            context: Some(11),
        }));
        assert!(free(&dir, "GPU-1"));
        drop(taken);
        assert!(free(&dir, "GPU-0"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_gpu_waiting_for_its_lock_releases_the_locks_of_the_gpus_done() {
        // Another memtopo holds GPU-1; this run's GPU 0 is done and handed over.
        let dir = scratch("wait");
        let other = locked(&dir, "GPU-1");
        let handover: Handover<u32> = Handover::default();
        assert!(handover.keep(Kept {
            index: 0,
            lock: locked(&dir, "GPU-0"),
            context: None,
        }));
        // GPU 1 of this run has to wait: before it does, GPU 0's lock is released, so the
        // other memtopo, were it waiting for GPU 0, can go on.
        let mut held_while_waiting = None;
        let second = lock::acquire(&dir, "GPU-1", Duration::from_millis(200), |_| {
            handover.close();
            held_while_waiting = Some(!free(&dir, "GPU-0"));
        });
        assert!(matches!(second, Err(lock::LockError::Busy(_))));
        assert_eq!(held_while_waiting, Some(false), "released before waiting");
        assert!(handover.take().is_empty());
        drop(other);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
