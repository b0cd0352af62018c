//! The simulated node's link ([`SimLink`]): its peak per direction and the shares of it
//! that each way of moving bytes reaches, with the fixed costs of a copy and a launch
//! (`sim.rs` applies them; `sharing.rs` shares the links between copies at once).

use std::time::Duration;

/// The fixed cost of one copy-engine copy.
pub(super) const COPY_SETUP: Duration = Duration::from_micros(8);
/// The fixed cost of one kernel launch.
pub(super) const LAUNCH_COST: Duration = Duration::from_micros(5);
/// A loaded round trip over the link: the bytes in flight an SM needs are this much of its
/// share of the link's rate.
pub(super) const LOADED_ROUND_TRIP_S: f64 = 2e-6;
/// The most of a port's peak that copies at once carry together.
pub(super) const PORT_CEILING: f64 = 0.97;

/// The modelled link between two simulated GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimLink {
    /// Whether the driver would allow peer access.
    pub access: bool,
    /// Active NVLink links (0: PCIe).
    pub nvlink_links: u32,
    /// What a load across the link adds, ns.
    pub extra_latency_ns: f64,
    /// The link's peak per direction, GB/s: what the shares below are of.
    pub peak_gb_per_s: f64,
    /// The share of the peak one stream of the reader's copy engine pulls alone.
    pub copy_pull: f64,
    /// The share of the peak one stream of the reader's copy engine pushes alone.
    pub copy_push: f64,
    /// The share of the peak the reader's SMs read with enough bytes in flight.
    pub sm_read: f64,
    /// The share of the peak the reader's SMs write with enough bytes in flight.
    pub sm_write: f64,
    /// The share of its rate a direction keeps while the pair's other direction is busy.
    pub both_ways: f64,
}

impl SimLink {
    /// An NVLink-like link: 18 NVLink 4 links (450 GB/s a direction), +600 ns a load; one
    /// stream pulls 360 GiB/s (86 % of the peak, the order of an H100 SXM's peer copy),
    /// pushes 90 %, the SMs read 93 % and write 95 %, each direction keeps 93 % with the
    /// other busy. A model, not a measurement.
    pub fn nvlink() -> SimLink {
        SimLink {
            access: true,
            nvlink_links: 18,
            extra_latency_ns: 600.0,
            peak_gb_per_s: 450.0,
            copy_pull: 360.0 * GIB / 1e9 / 450.0,
            copy_push: 0.90,
            sm_read: 0.93,
            sm_write: 0.95,
            both_ways: 0.93,
        }
    }

    /// A PCIe-like link: +1500 ns a load, PCIe 4.0 ×16's 31.5 GB/s a direction, one stream
    /// pulling 24 GiB/s.
    pub fn pcie() -> SimLink {
        SimLink {
            access: true,
            nvlink_links: 0,
            extra_latency_ns: 1500.0,
            peak_gb_per_s: 31.5,
            copy_pull: 24.0 * GIB / 1e9 / 31.5,
            copy_push: 0.85,
            sm_read: 0.80,
            sm_write: 0.85,
            both_ways: 0.90,
        }
    }

    /// What a copy engine's `streams` streams of one pair and direction move together
    /// alone: its one-stream share and 2 % more of the peak per doubling of the streams, at
    /// most 95 %, GB/s.
    pub(super) fn copy_rate(&self, pull: bool, streams: usize) -> f64 {
        let one = if pull { self.copy_pull } else { self.copy_push };
        let share = (one * (1.0 + 0.02 * (streams.max(1) as f64).log2())).min(0.95);
        self.peak_gb_per_s * share.max(one.min(0.95))
    }
}

/// Bytes in a GiB.
pub(super) const GIB: f64 = 1_073_741_824.0;
