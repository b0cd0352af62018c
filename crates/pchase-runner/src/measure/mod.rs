//! The benchmarks of the thesis' chapter 4 and after, generic over [`Backend`]: whether
//! L1 caches global loads; size, fetch granularity and latency of the L1 data, texture,
//! read-only and constant caches; shared-memory latency; the L2's partitions and device-
//! memory latency. Each benchmark is declared once, in [`bench`](mod@bench)'s registry.
//!
//! A failing benchmark does not lose the others: each element's result is either a
//! measurement or the reason it is missing.

pub mod analysis;
pub mod bandwidth;
pub mod bench;
pub mod carveout;
pub mod cluster;
mod constant_l15;
pub mod copy;
mod fine;
pub mod hierarchy;
pub mod icache;
pub mod l2;
pub mod levels;
pub mod mlp;
pub mod probe;
pub mod report;
mod results;
pub mod search;
pub mod sentinel;
mod session;
pub mod sets;
pub mod stats;
pub mod tlb;

#[cfg(doc)]
use crate::backend::Backend;
use crate::backend::Carveout;
pub use bench::Selection;
pub use fine::{line_from_misses, line_from_misses_above};
pub use results::{Disturbance, ElementResult, LineFinding, Measurements, SizeAtCarveout, Timing};
pub use search::{RawCurve, SearchRange, SizeFinding};
pub use session::{Session, Step};
pub use topology::{ElementKind, LatencySummary};

/// Options of a measurement session.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureOptions {
    /// Which benchmarks to run ([`bench::plan`] adds what they need).
    pub only: Selection,
    /// Timed loads of the fine-grained latency and line benchmarks (each costs 8 bytes
    /// of shared memory).
    pub samples: u32,
    /// SMs each size of a size search runs on at once (its samples).
    pub replicas: u32,
    /// Timed whole passes over each chain in a size search.
    pub timed_passes: u32,
    /// Significance level of the change-point test.
    pub alpha: f64,
    /// Stride of the size searches, bytes (one node per sector).
    pub search_stride: u32,
    /// Measure the L1 at the driver's default and at every shared-memory configuration
    /// the architecture offers.
    pub carveout_table: bool,
    /// Read the sentinels ([`sentinel`]) before the first benchmark and after every one;
    /// a benchmark after which they moved is run again once, and what stays disturbed is
    /// listed in [`Measurements::disturbed`].
    pub watch: bool,
    /// The GPU's PCIe link as NVML reported it before the run, where it did: the host-link
    /// benchmark reports its rates against the link's peak (`crate::host::PcieLink`).
    pub pcie: Option<crate::host::PcieLink>,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            only: Selection::All,
            // 6 KiB of timings: with the 1 KiB the driver reserves per block this fits
            // the smallest non-zero carveout step, leaving the L1 its largest size.
            samples: 768,
            replicas: 8,
            timed_passes: 2,
            alpha: 0.01,
            search_stride: 32,
            carveout_table: true,
            watch: false,
            pcie: None,
        }
    }
}

/// Warps tried when counting a cache's copies per SM (thread 0 against warps 1..8).
pub const COPY_WARPS: u32 = 8;

/// A short label for a carveout.
pub fn carveout_label(carveout: Carveout) -> String {
    match carveout {
        Carveout::DriverDefault => "driver default".to_string(),
        Carveout::Percent(0) => "max L1".to_string(),
        Carveout::Percent(p) => format!("{p}% shared"),
    }
}
