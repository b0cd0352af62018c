//! On a machine of two GPUs or more: backends made and used on threads of their own, as a
//! node run's GPUs are measured, then handed to one node on another thread
//! (`CudaBackend::into_floating`, `CudaNode::from_backends`), measure the links between
//! them. Otherwise it says that it skipped.

#![cfg(feature = "cuda")]

use std::{io::Write, thread};

use pchase_runner::{
    cuda::{CudaBackend, CudaNode, FloatingBackend},
    peer::{measure_link, PeerBackend, PeerOptions},
    Backend, RunnerError,
};

/// Says on the process's stderr, past libtest's capture, that `test` skipped and why.
fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

#[test]
fn backends_made_on_their_own_threads_measure_the_links_from_another() {
    let test = "backends_made_on_their_own_threads_measure_the_links_from_another";
    let _turn = crate::gpu::turn();
    match CudaBackend::device_count() {
        Ok(n) if n >= 2 => {}
        Ok(n) => return skip(test, &format!("needs two GPUs, the driver lists {n}")),
        Err(e @ (RunnerError::NoDevice | RunnerError::NoDriver(_))) => {
            return skip(test, &format!("no GPU ({e})"))
        }
        Err(e) => panic!("{test}: the driver is there but counting its GPUs failed: {e}"),
    }
    let floating: Vec<FloatingBackend> = thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|ordinal| {
                scope.spawn(move || {
                    let mut backend = CudaBackend::new(ordinal)?;
                    // Used on its own thread first, as a GPU's run uses it.
                    backend.clock_overhead(64)?;
                    backend.free_memory();
                    backend.into_floating()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a backend's thread panicked"))
            .collect::<Result<_, _>>()
    })
    .unwrap_or_else(|e| panic!("{test}: a backend on its own thread: {e}"));
    let mut node = CudaNode::from_backends(floating).unwrap();
    assert_eq!(node.gpus(), 2);
    for (from, to) in [(0, 1), (1, 0)] {
        let link = measure_link(&mut node, from, to, &PeerOptions::default());
        if link.peer_access {
            // Every step ran in the right context on this thread: the reader's chase over
            // the owner's chain, the owner's flush, the copy on the reader's stream.
            assert!(
                link.latency_warm.is_some()
                    && link.latency_cold.is_some()
                    && link.copy_gib_per_s.is_some(),
                "{from} → {to}: {:?}",
                link.notes
            );
        } else {
            assert!(
                link.notes.iter().any(|n| n.contains("denies")),
                "{from} → {to}: {:?}",
                link.notes
            );
        }
    }
    drop(node);
    // A floating backend goes in its own context on a thread where none is current.
    let spare = thread::spawn(|| CudaBackend::new(1).and_then(CudaBackend::into_floating))
        .join()
        .expect("the spare backend's thread panicked")
        .unwrap();
    drop(spare);
    // And the thread that dropped the node and the spare still makes and uses a backend.
    let mut again = CudaBackend::new(0).unwrap();
    again.clock_overhead(64).unwrap();
}
