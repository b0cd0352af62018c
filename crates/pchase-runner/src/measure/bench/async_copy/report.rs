//! The copy benchmark's part of the topology (schema 1.6): the section `copies_to_shared`,
//! a note per path the device lacks, and a warning per failure.

use pchase_kernels::copy::CopyPath;
use topology::{
    Bytes, CopiesToShared, CopyAtSize, CopyLaunch, CopyNotApplicable, CopyPathKind, CopyPathResult,
    Cycles, Latency, Note, NoteSeverity, Topology,
};

use crate::measure::Measurements;

/// The topology's name of a copy path.
pub(crate) fn kind(path: CopyPath) -> CopyPathKind {
    match path {
        CopyPath::Plain16 => CopyPathKind::PlainV16,
        CopyPath::AsyncCa4 => CopyPathKind::CpAsyncCa4,
        CopyPath::AsyncCa8 => CopyPathKind::CpAsyncCa8,
        CopyPath::AsyncCa16 => CopyPathKind::CpAsyncCa16,
        CopyPath::AsyncCg16 => CopyPathKind::CpAsyncCg16,
        CopyPath::Bulk => CopyPathKind::Bulk,
        CopyPath::BulkTensor2d => CopyPathKind::BulkTensor2d,
    }
}

/// Writes the section, the notes and the warnings.
pub(crate) fn write(m: &Measurements, topo: &mut Topology) {
    let found = &m.copies_to_shared;
    for (_, reason) in &found.not_applicable {
        if !topo.notes.iter().any(|n| &n.message == reason) {
            topo.add_note(Note {
                severity: NoteSeverity::Info,
                element: None,
                quantity: None,
                message: reason.clone(),
            });
        }
    }
    for failure in &found.failures {
        topo.warn(None, failure.clone());
    }
    if found.paths.is_empty() && found.not_applicable.is_empty() {
        return;
    }
    topo.copies_to_shared = Some(CopiesToShared {
        source: (!found.paths.is_empty()).then(|| {
            "the L2: a latency's source (at least 1 MiB) and a bandwidth's (half the L2) are read once in untimed rounds first".to_owned()
        }),
        paths: found
            .paths
            .iter()
            .map(|p| CopyPathResult {
                path: kind(p.path),
                sizes: p
                    .sizes
                    .iter()
                    .map(|s| CopyAtSize {
                        bytes: Bytes(u64::from(s.bytes)),
                        tile: s.tile.map(|(w, h)| [w, h]),
                        latency: s.latency.map(Latency::measured),
                        latency_p5: s.latency_p5.map(Cycles),
                        bytes_per_clock_per_sm: s.bytes_per_sm_cycle,
                        gigabytes_per_second: s.gigabytes_per_second,
                        launch: s.launch.map(|(blocks, threads, depth)| CopyLaunch {
                            blocks_per_sm: blocks,
                            threads_per_block: threads,
                            copies_in_flight: depth,
                        }),
                    })
                    .collect(),
            })
            .collect(),
        not_applicable: found
            .not_applicable
            .iter()
            .map(|(path, reason)| CopyNotApplicable {
                path: kind(*path),
                reason: reason.clone(),
            })
            .collect(),
    });
}
