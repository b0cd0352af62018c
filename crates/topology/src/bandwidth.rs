//! Bandwidths: what an element moves per second, with the launch that reached it and the
//! theoretical peak it compares with (schema 1.5 adds all but the value).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::{Conditions, Provenance};
use crate::units::{Bytes, GibPerSecondUnit};

/// Bytes in a GiB, for conversions from bytes per second.
const GIB: f64 = (1u64 << 30) as f64;

/// A bandwidth in GiB/s.
///
/// ```
/// use topology::{Bandwidth, BandwidthPeak, Provenance};
/// let read = Bandwidth::from_bytes_per_second(3.116e12, Provenance::Benchmark)
///     .with_peak(BandwidthPeak::from_bytes_per_second(3.3523e12, "memory clock × bus width × 2 (API)"));
/// assert!((read.value - 2902.0).abs() < 1.0);
/// assert!((read.peak.as_ref().unwrap().fraction - 0.9295).abs() < 1e-3);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Bandwidth {
    /// The bandwidth: the best of the timed repetitions of the best launch found.
    pub value: f64,
    /// Always `"GiB/s"`.
    pub unit: GibPerSecondUnit,
    /// Where it came from.
    pub provenance: Provenance,
    /// Conditions that differ from the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Conditions>,
    /// The same bandwidth in bytes per SM clock per SM, where that is the natural unit (the
    /// L1, shared memory), at the SM clock of the run's conditions (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_clock_per_sm: Option<f64>,
    /// The median of the timed repetitions of the best launch, GiB/s (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    /// Timed repetitions of the best launch (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<u32>,
    /// The bytes the launch's data spans (per buffer; all blocks' regions together where
    /// each block reads its own) (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_set: Option<Bytes>,
    /// The launch that reached the value (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<BandwidthLaunch>,
    /// The theoretical peak, where one exists, and the share of it reached (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<BandwidthPeak>,
}

impl Bandwidth {
    /// A bandwidth in GiB/s.
    pub fn gib_per_second(value: f64, provenance: Provenance) -> Self {
        Bandwidth {
            value,
            unit: GibPerSecondUnit,
            provenance,
            conditions: None,
            bytes_per_clock_per_sm: None,
            median: None,
            repetitions: None,
            working_set: None,
            launch: None,
            peak: None,
        }
    }

    /// A bandwidth from bytes per second.
    pub fn from_bytes_per_second(bytes_per_second: f64, provenance: Provenance) -> Self {
        Self::gib_per_second(bytes_per_second / GIB, provenance)
    }

    /// The value in bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.value * GIB
    }

    /// The same bandwidth with `peak`, its fraction computed from the value.
    pub fn with_peak(mut self, mut peak: BandwidthPeak) -> Self {
        peak.fraction = self.value / peak.value;
        self.peak = Some(peak);
        self
    }

    /// The same bandwidth with the launch that reached it.
    pub fn with_launch(mut self, launch: BandwidthLaunch) -> Self {
        self.launch = Some(launch);
        self
    }

    /// The same bandwidth with conditions that differ from the run's.
    pub fn with_conditions(mut self, conditions: Conditions) -> Self {
        self.conditions = Some(conditions);
        self
    }
}

/// A theoretical peak bandwidth and the share of it a measurement reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BandwidthPeak {
    /// The peak, GiB/s.
    pub value: f64,
    /// Always `"GiB/s"`.
    pub unit: GibPerSecondUnit,
    /// The peak in bytes per clock per SM, where it is stated so (128 for the L1 and shared
    /// memory from Volta on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_clock_per_sm: Option<f64>,
    /// How the peak is computed, e.g. `memory clock × bus width × 2 (API)`.
    pub basis: String,
    /// The measured value over the peak.
    pub fraction: f64,
}

impl BandwidthPeak {
    /// A peak from bytes per second, with its basis; the fraction is set by
    /// [`Bandwidth::with_peak`].
    pub fn from_bytes_per_second(bytes_per_second: f64, basis: impl Into<String>) -> Self {
        BandwidthPeak {
            value: bytes_per_second / GIB,
            unit: GibPerSecondUnit,
            bytes_per_clock_per_sm: None,
            basis: basis.into(),
            fraction: 0.0,
        }
    }
}

/// The launch shape that reached a bandwidth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BandwidthLaunch {
    /// Blocks per SM (the grid is this times the SM count).
    pub blocks_per_sm: u32,
    /// Threads per block.
    pub threads_per_block: u32,
    /// Bytes each thread moves per access (4, 8 or 16).
    pub vector_bytes: u32,
    /// Independent accesses each thread has in flight per iteration.
    pub unroll: u32,
    /// The PTX instruction that moved the data, e.g. `ld.global.cg`.
    pub instruction: String,
}

impl std::fmt::Display for BandwidthLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} × {} B, unroll {}, {} block(s)/SM × {} threads",
            self.instruction,
            self.vector_bytes,
            self.unroll,
            self.blocks_per_sm,
            self.threads_per_block
        )
    }
}

/// Read, write and copy bandwidth of an element.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Bandwidths {
    /// Read bandwidth (the L2: data spread over the whole L2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Bandwidth>,
    /// Write bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Bandwidth>,
    /// Copy bandwidth: bytes read plus bytes written per second (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<Bandwidth>,
    /// The L2 only: reads of data small enough to stay in the near partition (schema 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_near_partition: Option<Bandwidth>,
}

impl Bandwidths {
    /// Every present bandwidth with its key (`read`, `write`, `copy`,
    /// `read_near_partition`).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Bandwidth)> + '_ {
        [
            ("read", &self.read),
            ("read_near_partition", &self.read_near_partition),
            ("write", &self.write),
            ("copy", &self.copy),
        ]
        .into_iter()
        .filter_map(|(key, b)| b.as_ref().map(|b| (key, b)))
    }
}

/// The bandwidths of the element at `base` (`elements.l2`) that differ between `a` and `b`
/// beyond their tolerance ([`crate::tolerance::relative`] of the bandwidth's path, never
/// below `kind`, the relative tolerance of the kind) or are on one side only:
/// `(key, before, after)`. The launch shapes are not compared (the search may settle on
/// another shape of the same bandwidth).
pub(crate) fn changes(
    base: &str,
    a: Option<&Bandwidths>,
    b: Option<&Bandwidths>,
    kind: f64,
) -> Vec<(&'static str, String, String)> {
    let empty = Bandwidths::default();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    let show =
        |v: Option<&Bandwidth>| v.map_or("-".to_owned(), |v| format!("{:.1} GiB/s", v.value));
    let mut out = Vec::new();
    for (key, before, after) in [
        ("read", &a.read, &b.read),
        (
            "read_near_partition",
            &a.read_near_partition,
            &b.read_near_partition,
        ),
        ("write", &a.write, &b.write),
        ("copy", &a.copy, &b.copy),
    ] {
        let differs = match (before, after) {
            (None, None) => false,
            (Some(x), Some(y)) => {
                let tolerance =
                    crate::tolerance::relative(&format!("{base}.bandwidth.{key}"), kind);
                (x.value - y.value).abs() > tolerance * x.value.abs().max(y.value.abs())
            }
            _ => true,
        };
        if differs {
            out.push((key, show(before.as_ref()), show(after.as_ref())));
        }
    }
    out
}

/// What is wrong with `bandwidth` (at `path`): `(field path, message)` pairs.
pub(crate) fn violations(path: &str, bandwidth: &Bandwidth) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut positive = |field: &str, value: Option<f64>| {
        if let Some(v) = value {
            if !(v.is_finite() && v > 0.0) {
                out.push((
                    format!("{path}.{field}"),
                    format!("must be a positive number, found {v}"),
                ));
            }
        }
    };
    positive("value", Some(bandwidth.value));
    positive("bytes_per_clock_per_sm", bandwidth.bytes_per_clock_per_sm);
    positive("median", bandwidth.median);
    if let Some(peak) = &bandwidth.peak {
        positive("peak.value", Some(peak.value));
        positive("peak.bytes_per_clock_per_sm", peak.bytes_per_clock_per_sm);
        positive("peak.fraction", Some(peak.fraction));
        let expected = bandwidth.value / peak.value;
        if peak.value > 0.0 && (peak.fraction - expected).abs() > 1e-6 * expected.max(1.0) {
            out.push((
                format!("{path}.peak.fraction"),
                format!("{} is not value / peak ({expected})", peak.fraction),
            ));
        }
    }
    if let Some(median) = bandwidth.median {
        // The value is the best repetition: no repetition's median beats it.
        if median > bandwidth.value * (1.0 + 1e-9) {
            out.push((
                format!("{path}.median"),
                format!("{median} exceeds the best value {}", bandwidth.value),
            ));
        }
    }
    if bandwidth.repetitions == Some(0) {
        out.push((format!("{path}.repetitions"), "must be at least 1".into()));
    }
    if let Some(launch) = &bandwidth.launch {
        for (field, value) in [
            ("blocks_per_sm", launch.blocks_per_sm),
            ("threads_per_block", launch.threads_per_block),
            ("unroll", launch.unroll),
        ] {
            if value == 0 {
                out.push((
                    format!("{path}.launch.{field}"),
                    "must be at least 1".into(),
                ));
            }
        }
        if !matches!(launch.vector_bytes, 1 | 2 | 4 | 8 | 16 | 32) {
            out.push((
                format!("{path}.launch.vector_bytes"),
                format!("{} is not a power of two up to 32", launch.vector_bytes),
            ));
        }
        if launch.instruction.trim().is_empty() {
            out.push((
                format!("{path}.launch.instruction"),
                "must name the instruction".into(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(gib: f64) -> Bandwidths {
        Bandwidths {
            read: Some(Bandwidth::gib_per_second(gib, Provenance::Benchmark)),
            ..Bandwidths::default()
        }
    }

    #[test]
    fn bandwidths_change_beyond_their_tolerance_or_when_one_side_lacks_them() {
        // The L2's read moves by up to 9 % run to run, the device memory's by 2 %.
        let l2 = "elements.l2";
        assert!(changes(l2, Some(&read(1000.0)), Some(&read(1080.0)), 0.02).is_empty());
        let moved = changes(l2, Some(&read(1000.0)), Some(&read(1100.0)), 0.02);
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].0, "read");
        let memory = "elements.device_memory";
        assert_eq!(
            changes(memory, Some(&read(1000.0)), Some(&read(1040.0)), 0.02).len(),
            1
        );
        // The kind's tolerance is a floor.
        assert!(changes(memory, Some(&read(1000.0)), Some(&read(1040.0)), 0.1).is_empty());
        assert_eq!(changes(l2, None, Some(&read(1.0)), 0.02)[0].1, "-");
        assert!(changes(l2, None, None, 0.02).is_empty());
    }

    #[test]
    fn validation_names_the_bad_fields() {
        let mut b = Bandwidth::gib_per_second(100.0, Provenance::Benchmark)
            .with_peak(BandwidthPeak::from_bytes_per_second(200.0 * GIB, "test"));
        assert!(violations("x", &b).is_empty());
        assert!((b.peak.as_ref().unwrap().fraction - 0.5).abs() < 1e-12);
        b.median = Some(120.0);
        b.repetitions = Some(0);
        if let Some(p) = b.peak.as_mut() {
            p.fraction = 0.9;
        }
        let paths: Vec<String> = violations("x", &b).into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["x.peak.fraction", "x.median", "x.repetitions"]);
        b.value = f64::NAN;
        assert!(violations("x", &b).iter().any(|(p, _)| p == "x.value"));
    }
}
