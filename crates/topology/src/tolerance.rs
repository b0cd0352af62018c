//! How far a quantity may move between two runs of one GPU, and which way is worse: the
//! one table that `diff` and the fleet's flags both read.
//!
//! Each [`QuantityTolerance`] is measured: the largest relative range, (max − min) / max,
//! that the quantity showed over repeated runs of one GPU kept under `docs/evidence/`,
//! plus a quarter, rounded up to a whole percent (`scripts/run-to-run-spread.py` prints
//! the runs, the ranges and these numbers). A quantity that no repeated run shows, or
//! whose measured tolerance is below its kind's (`diff --latency-tolerance`, 2 %: the
//! tables quote latencies to the cycle), takes its kind's: [`relative`] is the larger of
//! the two. Where healthy GPUs of one model differ from each other by a stable amount
//! (each GPU the same in every run), [`QuantityTolerance::between_gpus`] says how much,
//! and a value worse than its peers by no more than that is a stable difference, not a
//! degradation (`docs/fleet.md`).
//!
//! ```
//! use topology::tolerance::{self, Worse};
//! // The near partition's read bandwidth of one H200 takes three values run to run.
//! assert_eq!(tolerance::relative("elements.l2.bandwidth.read_near_partition", 0.02), 0.35);
//! // A latency without a measured spread wider than its kind's takes the kind's.
//! assert_eq!(tolerance::relative("elements.l2.latency", 0.02), 0.02);
//! assert_eq!(tolerance::worse("elements.l2.latency"), Worse::Higher);
//! assert_eq!(tolerance::worse("elements.l2.line_size"), Worse::Neither);
//! ```

/// Which direction of a quantity is the bad one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    /// Higher is worse (a latency).
    Higher,
    /// Lower is worse (a bandwidth, a clock, a size, a count of SMs or links, a PCIe
    /// link's generation or width).
    Lower,
    /// Neither: the quantity describes the design, not its health (a line size, the
    /// number of L2 partitions).
    Neither,
}

/// One quantity's measured run-to-run tolerance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantityTolerance {
    /// The quantity's path, as [`crate::fleet::key_values`] and [`crate::diff`] name it.
    pub path: &'static str,
    /// The largest relative range seen over repeated runs of one GPU.
    pub measured_range: f64,
    /// The tolerance: the range plus a quarter, rounded up to a whole percent.
    pub run_to_run: f64,
    /// How much healthy GPUs of one model differ from each other, each the same in every
    /// run (relative, with the same margin); 0 where no such difference is known.
    pub between_gpus: f64,
    /// The repeated runs it comes from (folders under `docs/evidence/`).
    pub source: &'static str,
}

const DEFAULT_RUNS: &str =
    "2026-11-26-h100-default-runs (four runs of one H100), 2026-11-26-h200-default-runs \
     (four runs of one H200)";
const TWO_H100S: &str = "2026-11-25-h100x2-node (eight runs of each of two H100s)";
const MEMORY_RUNS: &str = "2026-11-26-h200x4-memory-bandwidth (three runs of each of four H200s), \
     2026-11-25-h100x2-node (eight runs of each of two H100s), 2026-11-26-h100-default-runs, \
     2026-11-26-h200-default-runs";

const HOST_LINK: &str =
    "2026-11-28-h100-h200-host-link (five calm runs of one H100 of a node of four, \
     alone or one GPU after another)";

const H200_NODES_OF_FOUR: &str = "2026-11-28-h200x4-node-links-at-once (six runs of each of \
     eight H200s on two nodes, GPUs at once and one after another)";

const H200_FAR_MODES: &str = "2026-11-28-h200x2-gpus-at-once (four runs of each of two H200s: \
     458-461 cycles, and 475-477 in one run of each), 2026-11-28-h200x4-node-links-at-once \
     (GPU-0673de5e: 461 cycles in five runs, 482 in one)";

const NODE_RUNS: &str =
    "2026-11-28-h100-nodes-gpus-at-once (six to twelve runs of each of ten H100s \
     on three nodes, GPUs at once and one after another)";

/// Quantities with a tolerance that a fleet does not compare between GPUs: they depend on
/// the host more than on the GPU (a pageable copy goes through the host's own memory
/// copies), so `diff` tolerates their run-to-run range but `merge` never flags them.
pub const HOST_DEPENDENT: &[&str] = &[
    "sections.host-link.pageable_d2h",
    "sections.host-link.pageable_h2d",
];

/// Every measured tolerance, by path (`scripts/run-to-run-spread.py` derives them).
pub const TOLERANCES: &[QuantityTolerance] = &[
    QuantityTolerance {
        path: "conditions.sm_clock_mhz",
        measured_range: 0.0081,
        run_to_run: 0.02,
        between_gpus: 0.0,
        source: NODE_RUNS,
    },
    QuantityTolerance {
        path: "elements.constant_l1.latency",
        measured_range: 0.0,
        run_to_run: 0.0,
        between_gpus: 0.0,
        source: DEFAULT_RUNS,
    },
    // 98 cycles on one H100 and 103 on the other in all eight runs of each: 5.1 %.
    QuantityTolerance {
        path: "elements.constant_l15.latency",
        measured_range: 0.0,
        run_to_run: 0.0,
        between_gpus: 0.07,
        source: TWO_H100S,
    },
    QuantityTolerance {
        path: "elements.device_memory.bandwidth.copy",
        measured_range: 0.0699,
        run_to_run: 0.09,
        between_gpus: 0.0,
        source: NODE_RUNS,
    },
    QuantityTolerance {
        path: "elements.device_memory.bandwidth.read",
        measured_range: 0.0142,
        run_to_run: 0.02,
        between_gpus: 0.0,
        source: MEMORY_RUNS,
    },
    QuantityTolerance {
        path: "elements.device_memory.bandwidth.write",
        measured_range: 0.0268,
        run_to_run: 0.04,
        between_gpus: 0.0,
        source: NODE_RUNS,
    },
    // Stable per GPU, 559-561 or 568-571 cycles on ten H100s (524-530 on eight H200s of
    // 2026-11-28-h200x4-node-links-at-once): the chases run on SM 124, whose place in its
    // GPC floor-sweeping decides. Between GPUs as run to run: the range plus a quarter.
    QuantityTolerance {
        path: "elements.device_memory.latency",
        measured_range: 0.0097,
        run_to_run: 0.02,
        between_gpus: 0.03,
        source: NODE_RUNS,
    },
    QuantityTolerance {
        path: "elements.l1_data.bandwidth.read",
        measured_range: 0.009,
        run_to_run: 0.02,
        between_gpus: 0.0,
        source: NODE_RUNS,
    },
    QuantityTolerance {
        path: "elements.l1_data.latency",
        measured_range: 0.0,
        run_to_run: 0.0,
        between_gpus: 0.0,
        source: DEFAULT_RUNS,
    },
    // One H100 of a healthy node read its L2 7-11 % below the median of its three peers in
    // all twelve runs (the others within 3 %): 11.4 % with the margin, 15 %.
    QuantityTolerance {
        path: "elements.l2.bandwidth.read",
        measured_range: 0.0701,
        run_to_run: 0.09,
        between_gpus: 0.15,
        source: NODE_RUNS,
    },
    // Multimodal on one H200: about 13,100-13,300, 14,400-14,900 and 16,900-17,200 GiB/s
    // from run to run, GPUs at once or one after another alike.
    QuantityTolerance {
        path: "elements.l2.bandwidth.read_near_partition",
        measured_range: 0.275,
        run_to_run: 0.35,
        between_gpus: 0.0,
        source: H200_NODES_OF_FOUR,
    },
    QuantityTolerance {
        path: "elements.l2.bandwidth.write",
        measured_range: 0.0138,
        run_to_run: 0.02,
        between_gpus: 0.0,
        source: "2026-11-26-h200-default-runs, 2026-11-25-h100x2-node",
    },
    // Stable per GPU, 278 or 283-288 cycles on ten H100s (280-285 on eight H200s): SM 124's
    // place, as above.
    QuantityTolerance {
        path: "elements.l2.latency",
        measured_range: 0.0043,
        run_to_run: 0.01,
        between_gpus: 0.05,
        source: NODE_RUNS,
    },
    // Stable per GPU, 457-467 cycles on ten H100s: SM 124's place, as above.
    QuantityTolerance {
        path: "elements.l2.partitions.far_latency",
        measured_range: 0.0456,
        run_to_run: 0.06,
        between_gpus: 0.03,
        source: H200_FAR_MODES,
    },
    QuantityTolerance {
        path: "elements.l2.partitions.near_latency",
        measured_range: 0.0042,
        run_to_run: 0.01,
        between_gpus: 0.0,
        source: NODE_RUNS,
    },
    QuantityTolerance {
        path: "elements.read_only.latency",
        measured_range: 0.0,
        run_to_run: 0.0,
        between_gpus: 0.0,
        source: DEFAULT_RUNS,
    },
    QuantityTolerance {
        path: "elements.shared_memory.bandwidth.read",
        measured_range: 0.0085,
        run_to_run: 0.02,
        between_gpus: 0.0,
        source: NODE_RUNS,
    },
    QuantityTolerance {
        path: "elements.shared_memory.latency",
        measured_range: 0.0,
        run_to_run: 0.0,
        between_gpus: 0.0,
        source: DEFAULT_RUNS,
    },
    QuantityTolerance {
        path: "elements.texture.latency",
        measured_range: 0.0,
        run_to_run: 0.0,
        between_gpus: 0.0,
        source: DEFAULT_RUNS,
    },
    // The host link's copies.
    QuantityTolerance {
        path: "sections.host-link.both_d2h",
        measured_range: 0.0015,
        run_to_run: 0.01,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.both_h2d",
        measured_range: 0.0634,
        run_to_run: 0.08,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.copy_d2h",
        measured_range: 0.0175,
        run_to_run: 0.03,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.copy_h2d",
        measured_range: 0.0684,
        run_to_run: 0.09,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.latency",
        measured_range: 0.1594,
        run_to_run: 0.2,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.latency_ns",
        measured_range: 0.1607,
        run_to_run: 0.21,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.pageable_d2h",
        measured_range: 0.4406,
        run_to_run: 0.56,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.pageable_h2d",
        measured_range: 0.4143,
        run_to_run: 0.52,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.sm_read",
        measured_range: 0.0264,
        run_to_run: 0.04,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
    QuantityTolerance {
        path: "sections.host-link.sm_write",
        measured_range: 0.0108,
        run_to_run: 0.02,
        between_gpus: 0.0,
        source: HOST_LINK,
    },
];

/// The measured tolerance of `path`, where the table has one. A row derived from another
/// has its tolerance: a share of the link's peak (`…_of_peak`) that of the rate it divides,
/// the sum of both directions at once that of the wider direction.
pub fn lookup(path: &str) -> Option<&'static QuantityTolerance> {
    let path = path.strip_suffix("_of_peak").unwrap_or(path);
    let path = match path {
        "sections.host-link.both_sum" => "sections.host-link.both_h2d",
        other => other,
    };
    TOLERANCES.iter().find(|t| t.path == path)
}

/// The relative tolerance of `path`: its measured one, never below `kind` (the kind's
/// tolerance, e.g. [`crate::diff::DiffOptions::relative_tolerance`]).
pub fn relative(path: &str, kind: f64) -> f64 {
    lookup(path).map_or(kind, |t| t.run_to_run.max(kind))
}

/// How much healthy GPUs of one model differ in `path` (relative; 0 when not known).
pub fn between_gpus(path: &str) -> f64 {
    lookup(path).map_or(0.0, |t| t.between_gpus)
}

/// Which direction of `path` is the bad one, by what the path names: latencies higher;
/// bandwidths, clocks, sizes of storage, SM and link counts and PCIe links lower; line,
/// fetch and sector sizes, copies per SM and the L2's partition geometry neither (they
/// describe the design: a GPU that shows another one is different, not slower); and
/// neither the host link's copy rates: on the lent four-H100 nodes one GPU in four of a
/// node run copied to and from the host at 40-80 % of its usual rate, a different GPU
/// each run, in runs one GPU after another too (`2026-11-28-h100-h200-host-link`): traffic
/// the host carries for others, not a sick link. The link's own health is its PCIe
/// generation and width (`pcie.*`), which are degraded when they train down.
///
/// The L2's near-partition read is informational too: on one GPU it moves between two
/// modes from run to run (12–13 % apart on H100s and H200s), and two GPUs of a node caught
/// in opposite modes differ by over 20 % (`2026-11-28-h200x2-gpus-at-once`); the whole-L2
/// read and write are the L2's bandwidth health.
pub fn worse(path: &str) -> Worse {
    if path.starts_with("sections.host-link.")
        || path == "elements.l2.bandwidth.read_near_partition"
    {
        return Worse::Neither;
    }
    let last = path.rsplit('.').next().unwrap_or(path);
    if last.ends_with("latency") {
        return Worse::Higher;
    }
    let design = [
        "line_size",
        "fetch_granularity",
        "sector_size",
        "count_per_sm",
        "count",
        "size_each",
        "far_size",
    ];
    if design.contains(&last) {
        return Worse::Neither;
    }
    Worse::Lower
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_unique_and_whole_percents() {
        for pair in TOLERANCES.windows(2) {
            assert!(
                pair[0].path < pair[1].path,
                "{} ≥ {}",
                pair[0].path,
                pair[1].path
            );
        }
        for t in TOLERANCES {
            let derived = (t.measured_range * 1.25 * 100.0 - 1e-9).ceil() / 100.0;
            assert!(
                (t.run_to_run - derived.max(0.0)).abs() < 1e-12,
                "{}: {} is not the range {} plus a quarter, rounded up",
                t.path,
                t.run_to_run,
                t.measured_range
            );
        }
    }

    #[test]
    fn directions_follow_the_paths() {
        assert_eq!(worse("elements.device_memory.latency"), Worse::Higher);
        assert_eq!(worse("elements.l2.partitions.far_latency"), Worse::Higher);
        assert_eq!(worse("elements.l2.bandwidth.read"), Worse::Lower);
        assert_eq!(worse("elements.l2.size"), Worse::Lower);
        assert_eq!(worse("device.sm_count"), Worse::Lower);
        assert_eq!(worse("pcie.width"), Worse::Lower);
        assert_eq!(
            worse("elements.l2.bandwidth.read_near_partition"),
            Worse::Neither
        );
        assert_eq!(worse("elements.l2.bandwidth.read"), Worse::Lower);
        assert_eq!(worse("links.nvlink_links"), Worse::Lower);
        // A slower host link's copies differ; its PCIe link trained down is what degrades.
        assert_eq!(worse("sections.host-link.copy_h2d"), Worse::Neither);
        assert_eq!(worse("sections.host-link.both_d2h"), Worse::Neither);
        assert_eq!(worse("pcie.width"), Worse::Lower);
        assert_eq!(
            worse("elements.l2.bandwidth.read_near_partition"),
            Worse::Neither
        );
        assert_eq!(worse("elements.l2.bandwidth.read"), Worse::Lower);
        assert_eq!(relative("sections.host-link.copy_h2d", 0.02), 0.09);
        // Derived rows move with what they derive from.
        assert_eq!(relative("sections.host-link.copy_h2d_of_peak", 0.02), 0.09);
        assert_eq!(relative("sections.host-link.both_sum", 0.02), 0.08);
        assert_eq!(relative("sections.host-link.both_sum_of_peak", 0.02), 0.08);
        assert_eq!(relative("sections.host-link.bogus_of_peak", 0.02), 0.02);
        assert_eq!(worse("elements.l2.partitions.count"), Worse::Neither);
        assert_eq!(worse("elements.l1_data.sector_size"), Worse::Neither);
    }
}
