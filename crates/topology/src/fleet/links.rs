//! The links between a node's GPUs: what one GPU sees of another ([`PeerLink`]), the
//! rates over a link against its peak ([`LinkRate`], [`BothWays`]), and every ordered pair
//! of the node copying at once ([`AllPairs`]).
//!
//! Rates in GB/s are 10⁹ bytes per second, the unit link peaks are stated in (NVLink 4:
//! 25 GB/s per link and direction); the older `copy_gib_per_s` stays in GiB/s. A fraction
//! of the peak is stored beside its rate, and validation checks that it is the rate over
//! the link's peak per direction ([`PeerLink::peak_gb_per_s`]; the sum of both directions
//! against twice it).
//!
//! ```
//! use topology::fleet::{LinkRate, PeerLink};
//! let mut link = PeerLink::new(0, 1);
//! link.peer_access = true;
//! link.copy_push = Some(LinkRate::new(405.0, "copy engine"));
//! link.set_peak(Some(450.0));
//! assert_eq!(link.copy_push.as_ref().unwrap().fraction_of_peak, Some(0.9));
//! assert!(link.violations("links[0]").is_empty());
//! link.copy_push.as_mut().unwrap().fraction_of_peak = Some(0.5);
//! assert_eq!(link.violations("links[0]")[0].path, "links[0].copy_push.fraction_of_peak");
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Violation;
use crate::quantity::Latency;

/// Bytes in a GiB, to set the GiB/s copy beside a peak in GB/s.
const GIB: f64 = 1_073_741_824.0;

/// The relative slack of a stored fraction or sum against the one computed from its parts
/// (JSON round trips keep 15 digits or more).
const SLACK: f64 = 1e-6;

/// What one GPU of a node sees of another: whether it may read the other's memory and
/// how fast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeerLink {
    /// The reading GPU's device index.
    pub from: u32,
    /// The GPU whose memory is read.
    pub to: u32,
    /// The reading GPU's UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_uuid: Option<String>,
    /// The other GPU's UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_uuid: Option<String>,
    /// Whether `from` can access `to`'s memory (`cuDeviceCanAccessPeer`).
    pub peer_access: bool,
    /// Active NVLink links between the two (NVML), where known; 0: connected otherwise
    /// (PCIe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_links: Option<u32>,
    /// The NVLink generation of the reader (fleet schema 1.3): from its architecture
    /// (compute capability), where it has NVLink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_generation: Option<u32>,
    /// The link's peak per direction, GB/s (fleet schema 1.3): NVLink links × the
    /// generation's rate per link and direction (NVLink 4: 25 GB/s); absent where the count
    /// or the generation is unknown, or the GPUs talk over PCIe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gb_per_s: Option<f64>,
    /// The driver's relative performance rank of the link (`CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_rank: Option<i32>,
    /// A load by `from` of `to`'s memory that `to`'s L2 holds (a warm chain), cycles of
    /// `from`'s SM clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_warm: Option<Latency>,
    /// A load by `from` of a line of `to`'s memory that no cache holds (`to`'s L2
    /// flushed first), cycles of `from`'s SM clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_cold: Option<Latency>,
    /// `from`'s SM clock that converts the latencies to nanoseconds, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    /// The bandwidth of a peer copy from `to`'s memory into `from`'s (`cuMemcpyPeerAsync`
    /// on `from`'s stream, one copy of `copy_bytes`), GiB/s: the median of the repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_gib_per_s: Option<f64>,
    /// Bytes per copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_bytes: Option<u64>,
    /// `copy_gib_per_s` over the peak (fleet schema 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_fraction_of_peak: Option<f64>,
    /// The copy engines of `from` pulling `to`'s memory into `from`'s, the copy split over
    /// the number of streams that moved it fastest (fleet schema 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_pull: Option<LinkRate>,
    /// The copy engines of `from` pushing `from`'s memory into `to`'s, tuned as the pull
    /// (fleet schema 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_push: Option<LinkRate>,
    /// The pull and the push at once, each on its own streams (fleet schema 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_both: Option<BothWays>,
    /// `from`'s SMs reading `to`'s memory with the streaming read kernel, the launch shape
    /// that read fastest (fleet schema 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_read: Option<LinkRate>,
    /// `from`'s SMs writing `to`'s memory with the streaming write kernel, tuned as the
    /// read (fleet schema 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_write: Option<LinkRate>,
    /// What could not be measured and why, or how it was measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A rate over a link (fleet schema 1.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LinkRate {
    /// GB/s (10⁹ bytes per second): the median of the timed repeats.
    pub gb_per_s: f64,
    /// `gb_per_s` over the link's peak per direction, where the peak is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction_of_peak: Option<f64>,
    /// How it was measured: the copy engine's streams and bytes, or the kernel's launch
    /// shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

impl LinkRate {
    /// A rate with its method and no fraction yet ([`PeerLink::set_peak`] sets it).
    pub fn new(gb_per_s: f64, method: impl Into<String>) -> Self {
        LinkRate {
            gb_per_s,
            fraction_of_peak: None,
            method: Some(method.into()),
        }
    }
}

/// Both directions of a link at once (fleet schema 1.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BothWays {
    /// `to`'s memory into `from`'s, while the push runs.
    pub pull: LinkRate,
    /// `from`'s memory into `to`'s, while the pull runs.
    pub push: LinkRate,
    /// The two together, GB/s.
    pub sum_gb_per_s: f64,
    /// The sum over twice the link's peak per direction, where the peak is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum_fraction_of_peak: Option<f64>,
}

impl BothWays {
    /// The pull and the push, their sum computed.
    pub fn new(pull: LinkRate, push: LinkRate) -> Self {
        BothWays {
            sum_gb_per_s: pull.gb_per_s + push.gb_per_s,
            pull,
            push,
            sum_fraction_of_peak: None,
        }
    }
}

/// Every ordered pair of a node's measured GPUs copying at the same time (fleet schema
/// 1.3): each pair `(from, to)` pulls `to`'s memory into `from`'s with `from`'s copy
/// engine, as [`PeerLink::copy_gib_per_s`] does alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AllPairs {
    /// Bytes of each copy.
    pub copy_bytes: u64,
    /// Each pair's rate while all copy.
    pub pairs: Vec<PairRate>,
    /// The pairs' rates together, GB/s.
    pub total_gb_per_s: f64,
    /// How it was measured, or what could not be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One pair of [`AllPairs`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PairRate {
    /// The GPU whose copy engine pulls (device index).
    pub from: u32,
    /// The GPU whose memory is read (device index).
    pub to: u32,
    /// GB/s: the median of the timed repeats.
    pub gb_per_s: f64,
    /// Over the peak per direction of the link `from → to`, where the node's links know it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction_of_peak: Option<f64>,
}

impl AllPairs {
    /// Sets each pair's fraction from the peak of its link among `links` (by device
    /// index); none where the link or its peak is unknown.
    pub fn set_peaks(&mut self, links: &[PeerLink]) {
        for pair in &mut self.pairs {
            let peak = peak_of(links, pair.from, pair.to);
            pair.fraction_of_peak = peak.map(|p| pair.gb_per_s / p);
        }
    }

    /// What is wrong with the record, its fields named under `path`: rates that are not
    /// positive, a total that is not the pairs' sum, a fraction that is not its rate over
    /// its link's peak (`links`), a pair of one GPU.
    pub fn violations(&self, path: &str, links: &[PeerLink]) -> Vec<Violation> {
        let mut out = Vec::new();
        for (i, pair) in self.pairs.iter().enumerate() {
            let at = format!("{path}.pairs[{i}]");
            if pair.from == pair.to {
                out.push(violation(&at, "a pair joins two GPUs"));
            }
            rate(&mut out, &format!("{at}.gb_per_s"), pair.gb_per_s);
            fraction(
                &mut out,
                &format!("{at}.fraction_of_peak"),
                pair.fraction_of_peak,
                pair.gb_per_s,
                peak_of(links, pair.from, pair.to),
            );
        }
        let at = format!("{path}.total_gb_per_s");
        rate(&mut out, &at, self.total_gb_per_s);
        let sum: f64 = self.pairs.iter().map(|p| p.gb_per_s).sum();
        if !close(self.total_gb_per_s, sum) {
            out.push(violation(&at, &format!("is not the pairs' sum, {sum}")));
        }
        if self.copy_bytes == 0 {
            out.push(violation(&format!("{path}.copy_bytes"), "must be positive"));
        }
        out
    }
}

/// The peak of the link `from → to` among `links`.
fn peak_of(links: &[PeerLink], from: u32, to: u32) -> Option<f64> {
    links
        .iter()
        .find(|l| l.from == from && l.to == to)
        .and_then(|l| l.peak_gb_per_s)
}

fn violation(path: &str, message: &str) -> Violation {
    Violation {
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

/// `a` and `b` equal but for rounding.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= SLACK * a.abs().max(b.abs()).max(1e-12)
}

/// A rate must be a positive finite number.
fn rate(out: &mut Vec<Violation>, path: &str, value: f64) {
    if !(value.is_finite() && value > 0.0) {
        out.push(violation(path, "must be a positive finite number"));
    }
}

/// A stored fraction must be `value / peak`, and only where the peak is known.
fn fraction(
    out: &mut Vec<Violation>,
    path: &str,
    stored: Option<f64>,
    value: f64,
    peak: Option<f64>,
) {
    match (stored, peak) {
        (None, _) => {}
        (Some(_), None) => out.push(violation(path, "a fraction of a peak that is not known")),
        (Some(f), Some(p)) if !close(f, value / p) => out.push(violation(
            path,
            &format!("must be the rate over the peak, {}", value / p),
        )),
        _ => {}
    }
}

impl PeerLink {
    /// A link from `from` to `to` with nothing known yet.
    pub fn new(from: u32, to: u32) -> Self {
        PeerLink {
            from,
            to,
            from_uuid: None,
            to_uuid: None,
            peer_access: false,
            nvlink_links: None,
            nvlink_generation: None,
            peak_gb_per_s: None,
            performance_rank: None,
            latency_warm: None,
            latency_cold: None,
            sm_clock_mhz: None,
            copy_gib_per_s: None,
            copy_bytes: None,
            copy_fraction_of_peak: None,
            copy_pull: None,
            copy_push: None,
            copy_both: None,
            sm_read: None,
            sm_write: None,
            notes: Vec::new(),
        }
    }

    /// The mean of a latency in nanoseconds at the link's clock.
    pub fn nanoseconds(&self, latency: Option<&Latency>) -> Option<f64> {
        Some(latency?.mean.0 / self.sm_clock_mhz? * 1e3)
    }

    /// The copy of `copy_gib_per_s` in GB/s.
    pub fn copy_gb_per_s(&self) -> Option<f64> {
        self.copy_gib_per_s.map(|g| g * GIB / 1e9)
    }

    /// The rates with a peak per direction of their own, by name, as the fleet compares
    /// them (`copy` in GB/s here).
    pub fn rates(&self) -> Vec<(&'static str, f64)> {
        let mut out = Vec::new();
        let mut put = |name, rate: Option<f64>| {
            if let Some(r) = rate {
                out.push((name, r));
            }
        };
        put("copy", self.copy_gb_per_s());
        put("copy_pull", self.copy_pull.as_ref().map(|r| r.gb_per_s));
        put("copy_push", self.copy_push.as_ref().map(|r| r.gb_per_s));
        put("copy_both", self.copy_both.as_ref().map(|b| b.sum_gb_per_s));
        put("sm_read", self.sm_read.as_ref().map(|r| r.gb_per_s));
        put("sm_write", self.sm_write.as_ref().map(|r| r.gb_per_s));
        out
    }

    /// Sets the link's peak per direction (GB/s; `None`: unknown) and every fraction of it.
    pub fn set_peak(&mut self, peak_gb_per_s: Option<f64>) {
        let peak = peak_gb_per_s.filter(|p| p.is_finite() && *p > 0.0);
        self.peak_gb_per_s = peak;
        let of = |value: f64, directions: f64| peak.map(|p| value / (p * directions));
        self.copy_fraction_of_peak = self.copy_gb_per_s().and_then(|c| of(c, 1.0));
        for rate in [
            &mut self.copy_pull,
            &mut self.copy_push,
            &mut self.sm_read,
            &mut self.sm_write,
        ]
        .into_iter()
        .flatten()
        {
            rate.fraction_of_peak = of(rate.gb_per_s, 1.0);
        }
        if let Some(both) = &mut self.copy_both {
            both.pull.fraction_of_peak = of(both.pull.gb_per_s, 1.0);
            both.push.fraction_of_peak = of(both.push.gb_per_s, 1.0);
            both.sum_fraction_of_peak = of(both.sum_gb_per_s, 2.0);
        }
    }

    /// What is wrong with the link, its fields named under `path`: a rate or peak that is
    /// not a positive finite number, a fraction that is not its rate over the peak (or
    /// with no peak), a sum of both directions that is not theirs.
    pub fn violations(&self, path: &str) -> Vec<Violation> {
        let mut out = Vec::new();
        let peak = self.peak_gb_per_s;
        if let Some(p) = peak {
            rate(&mut out, &format!("{path}.peak_gb_per_s"), p);
        }
        if let Some(copy) = self.copy_gib_per_s {
            rate(&mut out, &format!("{path}.copy_gib_per_s"), copy);
            fraction(
                &mut out,
                &format!("{path}.copy_fraction_of_peak"),
                self.copy_fraction_of_peak,
                copy * GIB / 1e9,
                peak,
            );
        } else if self.copy_fraction_of_peak.is_some() {
            out.push(violation(
                &format!("{path}.copy_fraction_of_peak"),
                "a fraction of a copy that is not there",
            ));
        }
        let mut one = |name: &str, r: &LinkRate, directions: f64| {
            rate(&mut out, &format!("{path}.{name}.gb_per_s"), r.gb_per_s);
            fraction(
                &mut out,
                &format!("{path}.{name}.fraction_of_peak"),
                r.fraction_of_peak,
                r.gb_per_s / directions,
                peak,
            );
        };
        for (name, r) in [
            ("copy_pull", &self.copy_pull),
            ("copy_push", &self.copy_push),
            ("sm_read", &self.sm_read),
            ("sm_write", &self.sm_write),
        ] {
            if let Some(r) = r {
                one(name, r, 1.0);
            }
        }
        if let Some(both) = &self.copy_both {
            one("copy_both.pull", &both.pull, 1.0);
            one("copy_both.push", &both.push, 1.0);
            let at = format!("{path}.copy_both.sum_gb_per_s");
            let sum = both.pull.gb_per_s + both.push.gb_per_s;
            if !close(both.sum_gb_per_s, sum) {
                out.push(violation(&at, &format!("is not pull + push, {sum}")));
            }
            fraction(
                &mut out,
                &format!("{path}.copy_both.sum_fraction_of_peak"),
                both.sum_fraction_of_peak,
                both.sum_gb_per_s / 2.0,
                peak,
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured() -> PeerLink {
        let mut link = PeerLink::new(0, 1);
        link.peer_access = true;
        link.nvlink_links = Some(18);
        link.copy_gib_per_s = Some(360.0);
        link.copy_bytes = Some(256 << 20);
        link.copy_pull = Some(LinkRate::new(400.0, "copy engine, 2 streams"));
        link.copy_push = Some(LinkRate::new(420.0, "copy engine, 1 stream"));
        link.copy_both = Some(BothWays::new(
            LinkRate::new(380.0, "copy engine"),
            LinkRate::new(390.0, "copy engine"),
        ));
        link.sm_read = Some(LinkRate::new(410.0, "read .cg 16 B ×4"));
        link.sm_write = Some(LinkRate::new(430.0, "write 16 B ×4"));
        link
    }

    #[test]
    fn the_peak_sets_every_fraction_and_unknown_clears_them() {
        let mut link = measured();
        link.set_peak(Some(450.0));
        let copy = link.copy_fraction_of_peak.unwrap();
        assert!((copy - 360.0 * GIB / 1e9 / 450.0).abs() < 1e-12, "{copy}");
        let both = link.copy_both.as_ref().unwrap();
        assert!((both.sum_gb_per_s - 770.0).abs() < 1e-9);
        assert!((both.sum_fraction_of_peak.unwrap() - 770.0 / 900.0).abs() < 1e-12);
        assert!(
            link.violations("l").is_empty(),
            "{:?}",
            link.violations("l")
        );
        let names: Vec<&str> = link.rates().iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "copy",
                "copy_pull",
                "copy_push",
                "copy_both",
                "sm_read",
                "sm_write"
            ]
        );
        link.set_peak(None);
        assert!(link.copy_fraction_of_peak.is_none());
        assert!(link.sm_write.as_ref().unwrap().fraction_of_peak.is_none());
        assert!(link.violations("l").is_empty());
        // A peak that is no rate is unknown.
        link.set_peak(Some(f64::NAN));
        assert_eq!(link.peak_gb_per_s, None);
    }

    #[test]
    fn wrong_fractions_sums_and_rates_are_named() {
        let mut link = measured();
        link.set_peak(Some(450.0));
        link.sm_read.as_mut().unwrap().fraction_of_peak = Some(0.5);
        link.copy_both.as_mut().unwrap().sum_gb_per_s = 700.0;
        link.copy_push.as_mut().unwrap().gb_per_s = -1.0;
        let paths: Vec<String> = link
            .violations("n.links[2]")
            .into_iter()
            .map(|v| v.path)
            .collect();
        assert!(
            paths.contains(&"n.links[2].sm_read.fraction_of_peak".to_owned()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"n.links[2].copy_both.sum_gb_per_s".to_owned()),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"n.links[2].copy_push.gb_per_s".to_owned()),
            "{paths:?}"
        );
        // A fraction without a peak.
        let mut link = measured();
        link.sm_write.as_mut().unwrap().fraction_of_peak = Some(0.9);
        let v = link.violations("l");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("not known"));
    }

    #[test]
    fn all_pairs_take_their_links_peaks_and_sum() {
        let mut a = measured();
        a.set_peak(Some(450.0));
        let mut b = PeerLink::new(1, 0);
        b.set_peak(None);
        let links = [a, b];
        let mut all = AllPairs {
            copy_bytes: 64 << 20,
            pairs: vec![
                PairRate {
                    from: 0,
                    to: 1,
                    gb_per_s: 300.0,
                    fraction_of_peak: None,
                },
                PairRate {
                    from: 1,
                    to: 0,
                    gb_per_s: 310.0,
                    fraction_of_peak: None,
                },
            ],
            total_gb_per_s: 610.0,
            notes: Vec::new(),
        };
        all.set_peaks(&links);
        assert_eq!(all.pairs[0].fraction_of_peak, Some(300.0 / 450.0));
        assert_eq!(all.pairs[1].fraction_of_peak, None, "1 → 0 has no peak");
        assert!(all.violations("a", &links).is_empty());
        all.total_gb_per_s = 900.0;
        all.pairs[1].fraction_of_peak = Some(0.7);
        all.pairs[0].to = 0;
        let paths: Vec<String> = all
            .violations("a", &links)
            .into_iter()
            .map(|v| v.path)
            .collect();
        assert_eq!(
            paths,
            [
                "a.pairs[0]",
                "a.pairs[0].fraction_of_peak",
                "a.pairs[1].fraction_of_peak",
                "a.total_gb_per_s"
            ]
        );
    }
}
