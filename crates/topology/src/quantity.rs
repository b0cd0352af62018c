//! Quantities with their unit, provenance, uncertainty, bound and conditions.
//!
//! A number in a topology is never bare: a [`Size`] says whether it is exact or
//! only a bound, where it came from ([`Provenance`]) and how sure the change-point
//! test was ([`ChangePointEvidence`]); a [`Latency`] is a distribution summary in
//! cycles; both may carry the [`Conditions`] they were measured under when those
//! differ from the run's.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::{ByteUnit, Bytes, CycleUnit, Cycles, Megahertz, Nanoseconds};

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Reported by the driver or runtime API (e.g. `cudaGetDeviceProperties`).
    Api,
    /// Measured by a micro-benchmark.
    Benchmark,
    /// Computed from other values (e.g. a count from two sizes).
    Derived,
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Provenance::Api => "api",
            Provenance::Benchmark => "benchmark",
            Provenance::Derived => "derived",
        })
    }
}

/// What is known about a size: an exact value, or only a bound.
///
/// "The constant L1.5 cache holds at least 64 KiB" is an honest result when the
/// benchmark cannot allocate more; it is stored as [`SizeBound::AtLeast`], never
/// as a guessed exact value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizeBound {
    /// The size is this value (to the resolution of the search).
    Exact(Bytes),
    /// The size is at least this value.
    AtLeast(Bytes),
    /// The size is at most this value.
    AtMost(Bytes),
    /// The size lies in `[low, high]` (e.g. runs disagreed: "38–46 KiB").
    Between(Bytes, Bytes),
}

impl SizeBound {
    /// The smallest size consistent with what is known.
    pub fn lower(self) -> Bytes {
        match self {
            SizeBound::Exact(v) | SizeBound::AtLeast(v) => v,
            SizeBound::AtMost(_) => Bytes(0),
            SizeBound::Between(low, _) => low,
        }
    }

    /// The largest size consistent with what is known; `None` when unbounded.
    pub fn upper(self) -> Option<Bytes> {
        match self {
            SizeBound::Exact(v) | SizeBound::AtMost(v) => Some(v),
            SizeBound::AtLeast(_) => None,
            SizeBound::Between(_, high) => Some(high),
        }
    }

    /// The exact value, if the size is known exactly.
    pub fn exact(self) -> Option<Bytes> {
        match self {
            SizeBound::Exact(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for SizeBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeBound::Exact(v) => write!(f, "{v}"),
            SizeBound::AtLeast(v) => write!(f, "≥ {v}"),
            SizeBound::AtMost(v) => write!(f, "≤ {v}"),
            SizeBound::Between(low, high) => write!(f, "{low} – {high}"),
        }
    }
}

/// The evidence behind a size found as a change point in a latency curve.
///
/// All fields are optional because different detectors report different
/// statistics (a Kolmogorov–Smirnov test gives a statistic and a p-value, MT4G
/// reports a confidence).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ChangePointEvidence {
    /// The detector or test, e.g. `"pelt+ks2"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The test statistic (e.g. the two-sample KS distance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic: Option<f64>,
    /// The p-value of the test that the change point is real, in `[0, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// The confidence in the change point, in `[0, 1]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The step of the finest sweep around the change point: the size's resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Bytes>,
}

/// The conditions a value was measured under.
///
/// A topology holds the run's conditions; a quantity holds its own only where
/// they differ (e.g. the L1 size measured at a 0 % carveout). Lookups use
/// [`Conditions::overlay`] to combine the two.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Conditions {
    /// The shared-memory carveout in percent of the maximum (the L1 size depends on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_memory_carveout_percent: Option<u8>,
    /// The SM clock measured while benchmarking, in MHz; nanoseconds derive from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<Megahertz>,
    /// When the measurement ran, RFC 3339 (`2025-08-10T00:03:09Z`) or a date (`2025-08-10`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// The tool that produced the value, e.g. `"memtopo"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// Free text, e.g. "illustrative example, not a measurement".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remark: Option<String>,
}

impl Conditions {
    /// These conditions with every unset field taken from `base`.
    pub fn overlay(&self, base: &Conditions) -> Conditions {
        Conditions {
            shared_memory_carveout_percent: self
                .shared_memory_carveout_percent
                .or(base.shared_memory_carveout_percent),
            sm_clock_mhz: self.sm_clock_mhz.or(base.sm_clock_mhz),
            date: self.date.clone().or_else(|| base.date.clone()),
            tool: self.tool.clone().or_else(|| base.tool.clone()),
            tool_version: self
                .tool_version
                .clone()
                .or_else(|| base.tool_version.clone()),
            remark: self.remark.clone().or_else(|| base.remark.clone()),
        }
    }
}

/// How a [`SizeBound`] is written in files: `value` with `unit`, a `bound`
/// keyword and, for ranges, `upper`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "Size")]
struct SizeWire {
    /// The size, or the lower end of a range, or the bound.
    value: Bytes,
    /// Always `"B"`.
    unit: ByteUnit,
    /// `exact`, `at_least`, `at_most` or `between` (default `exact`).
    #[serde(default, skip_serializing_if = "BoundKind::is_exact")]
    bound: BoundKind,
    /// The upper end of a `between` range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upper: Option<Bytes>,
    /// Where the value came from.
    provenance: Provenance,
    /// The change-point evidence, for benchmarked sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    evidence: Option<ChangePointEvidence>,
    /// Conditions that differ from the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conditions: Option<Conditions>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum BoundKind {
    #[default]
    Exact,
    AtLeast,
    AtMost,
    Between,
}

impl BoundKind {
    fn is_exact(&self) -> bool {
        *self == BoundKind::Exact
    }
}

/// A size in bytes with its bound, provenance, evidence and conditions.
///
/// ```
/// use topology::{Bytes, Provenance, Size};
/// let l15 = Size::at_least(Bytes::kib(64), Provenance::Benchmark);
/// assert_eq!(l15.to_string(), "≥ 64 KiB");
/// assert_eq!(l15.bound.upper(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SizeWire", into = "SizeWire")]
pub struct Size {
    /// What is known about the size.
    pub bound: SizeBound,
    /// Where it came from.
    pub provenance: Provenance,
    /// The change-point evidence, for benchmarked sizes.
    pub evidence: Option<ChangePointEvidence>,
    /// Conditions that differ from the run's.
    pub conditions: Option<Conditions>,
}

impl Size {
    /// An exact size.
    pub fn exact(value: Bytes, provenance: Provenance) -> Self {
        Size {
            bound: SizeBound::Exact(value),
            provenance,
            evidence: None,
            conditions: None,
        }
    }

    /// A size reported by the API.
    pub fn api(value: Bytes) -> Self {
        Size::exact(value, Provenance::Api)
    }

    /// A size measured as a change point, with the evidence for it.
    pub fn measured(value: Bytes, evidence: ChangePointEvidence) -> Self {
        Size {
            bound: SizeBound::Exact(value),
            provenance: Provenance::Benchmark,
            evidence: Some(evidence),
            conditions: None,
        }
    }

    /// Only a lower bound is known ("≥ 64 KiB").
    pub fn at_least(value: Bytes, provenance: Provenance) -> Self {
        Size {
            bound: SizeBound::AtLeast(value),
            provenance,
            evidence: None,
            conditions: None,
        }
    }

    /// Only an upper bound is known.
    pub fn at_most(value: Bytes, provenance: Provenance) -> Self {
        Size {
            bound: SizeBound::AtMost(value),
            provenance,
            evidence: None,
            conditions: None,
        }
    }

    /// The size lies in `[low, high]`.
    pub fn between(low: Bytes, high: Bytes, provenance: Provenance) -> Self {
        Size {
            bound: SizeBound::Between(low, high),
            provenance,
            evidence: None,
            conditions: None,
        }
    }

    /// The size as the file writes it in `value`: the exact size, the bound of an
    /// `at_least` or `at_most`, the lower end of a `between` (which [`Size::upper`] closes).
    /// The same number JSON, CSV and Python show.
    ///
    /// ```
    /// use topology::{Bytes, Provenance, Size};
    /// assert_eq!(Size::at_most(Bytes(512), Provenance::Benchmark).value(), Bytes(512));
    /// assert_eq!(Size::between(Bytes(38), Bytes(46), Provenance::Benchmark).value(), Bytes(38));
    /// ```
    pub fn value(&self) -> Bytes {
        match self.bound {
            SizeBound::Exact(v)
            | SizeBound::AtLeast(v)
            | SizeBound::AtMost(v)
            | SizeBound::Between(v, _) => v,
        }
    }

    /// The upper end of a `between` range (the file's `upper`).
    pub fn upper(&self) -> Option<Bytes> {
        match self.bound {
            SizeBound::Between(_, high) => Some(high),
            _ => None,
        }
    }

    /// Whether the size is known exactly (no bound).
    pub fn is_exact(&self) -> bool {
        matches!(self.bound, SizeBound::Exact(_))
    }

    /// The exact size, where it is known exactly.
    pub fn exact_value(&self) -> Option<Bytes> {
        self.bound.exact()
    }

    /// The same size with its evidence set.
    pub fn with_evidence(mut self, evidence: ChangePointEvidence) -> Self {
        self.evidence = Some(evidence);
        self
    }

    /// The same size with measurement conditions that differ from the run's.
    pub fn with_conditions(mut self, conditions: Conditions) -> Self {
        self.conditions = Some(conditions);
        self
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.bound.fmt(f)
    }
}

impl TryFrom<SizeWire> for Size {
    type Error = String;

    fn try_from(wire: SizeWire) -> Result<Self, Self::Error> {
        let bound = match (wire.bound, wire.upper) {
            (BoundKind::Exact, None) => SizeBound::Exact(wire.value),
            (BoundKind::AtLeast, None) => SizeBound::AtLeast(wire.value),
            (BoundKind::AtMost, None) => SizeBound::AtMost(wire.value),
            (BoundKind::Between, Some(upper)) => SizeBound::Between(wire.value, upper),
            (BoundKind::Between, None) => {
                return Err("bound \"between\" needs the field `upper`".to_owned())
            }
            (_, Some(_)) => {
                return Err("the field `upper` is only allowed with bound \"between\"".to_owned())
            }
        };
        Ok(Size {
            bound,
            provenance: wire.provenance,
            evidence: wire.evidence,
            conditions: wire.conditions,
        })
    }
}

impl From<Size> for SizeWire {
    fn from(size: Size) -> Self {
        let (bound, value, upper) = match size.bound {
            SizeBound::Exact(v) => (BoundKind::Exact, v, None),
            SizeBound::AtLeast(v) => (BoundKind::AtLeast, v, None),
            SizeBound::AtMost(v) => (BoundKind::AtMost, v, None),
            SizeBound::Between(low, high) => (BoundKind::Between, low, Some(high)),
        };
        SizeWire {
            value,
            unit: ByteUnit,
            bound,
            upper,
            provenance: size.provenance,
            evidence: size.evidence,
            conditions: size.conditions,
        }
    }
}

impl JsonSchema for Size {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        SizeWire::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        SizeWire::json_schema(generator)
    }
}

/// A summary of a latency distribution, in cycles.
///
/// The quartiles are optional because results written before schema 1.4 lack them;
/// [`LatencySummary::from_samples`] always sets them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LatencySummary {
    /// The mean.
    pub mean: Cycles,
    /// The 25th percentile (first quartile).
    pub p25: Option<Cycles>,
    /// The median.
    pub p50: Cycles,
    /// The 75th percentile (third quartile).
    pub p75: Option<Cycles>,
    /// The 95th percentile.
    pub p95: Cycles,
    /// The standard deviation.
    pub stdev: Cycles,
    /// How many samples the summary is over.
    pub samples: u32,
}

impl LatencySummary {
    /// Summarises raw per-load latencies; `None` for an empty slice or a
    /// non-finite sample, so a broken measurement cannot become a number.
    ///
    /// Percentiles are nearest-rank; the standard deviation is the sample one
    /// (n − 1), zero for a single sample.
    ///
    /// ```
    /// use topology::LatencySummary;
    /// let s = LatencySummary::from_samples(&[30.0, 30.0, 31.0, 29.0]).unwrap();
    /// assert_eq!(s.mean.get(), 30.0);
    /// assert_eq!(s.samples, 4);
    /// ```
    pub fn from_samples(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let count = u32::try_from(samples.len()).ok()?;
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let variance = if samples.len() > 1 {
            samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            let index = ((q * n).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[index]
        };
        Some(LatencySummary {
            mean: Cycles(mean),
            p25: Some(Cycles(rank(0.25))),
            p50: Cycles(rank(0.50)),
            p75: Some(Cycles(rank(0.75))),
            p95: Cycles(rank(0.95)),
            stdev: Cycles(variance.sqrt()),
            samples: count,
        })
    }

    /// The interquartile range `p75 − p25`, where both quartiles are known.
    pub fn iqr(&self) -> Option<Cycles> {
        Some(Cycles(self.p75?.0 - self.p25?.0))
    }

    /// The standard error of the mean (stdev / √n).
    pub fn standard_error(&self) -> f64 {
        if self.samples == 0 {
            return f64::INFINITY;
        }
        self.stdev.0 / f64::from(self.samples).sqrt()
    }
}

/// A load latency: a distribution summary in cycles, with provenance and conditions.
///
/// Nanoseconds are not stored: they derive from the measured SM clock
/// ([`Latency::mean_ns`], [`crate::Topology::latency_ns`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Latency {
    /// Always `"cycles"`.
    pub unit: CycleUnit,
    /// The mean.
    pub mean: Cycles,
    /// The 25th percentile (schema 1.4; absent in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p25: Option<Cycles>,
    /// The median.
    pub p50: Cycles,
    /// The 75th percentile (schema 1.4; absent in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p75: Option<Cycles>,
    /// The 95th percentile.
    pub p95: Cycles,
    /// The standard deviation.
    pub stdev: Cycles,
    /// How many samples the summary is over.
    pub samples: u32,
    /// Where the value came from.
    pub provenance: Provenance,
    /// Conditions that differ from the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Conditions>,
}

impl Latency {
    /// A benchmarked latency from its summary.
    pub fn measured(summary: LatencySummary) -> Self {
        Latency {
            unit: CycleUnit,
            mean: summary.mean,
            p25: summary.p25,
            p50: summary.p50,
            p75: summary.p75,
            p95: summary.p95,
            stdev: summary.stdev,
            samples: summary.samples,
            provenance: Provenance::Benchmark,
            conditions: None,
        }
    }

    /// The distribution summary.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            mean: self.mean,
            p25: self.p25,
            p50: self.p50,
            p75: self.p75,
            p95: self.p95,
            stdev: self.stdev,
            samples: self.samples,
        }
    }

    /// The interquartile range `p75 − p25`, where both quartiles are known.
    pub fn iqr(&self) -> Option<Cycles> {
        self.summary().iqr()
    }

    /// The mean in nanoseconds at `clock`.
    pub fn mean_ns(&self, clock: Megahertz) -> Nanoseconds {
        self.mean.to_nanoseconds(clock)
    }

    /// The same latency with conditions that differ from the run's.
    pub fn with_conditions(mut self, conditions: Conditions) -> Self {
        self.conditions = Some(conditions);
        self
    }
}

/// A small count (e.g. caches per SM, L2 partitions) with its provenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Count {
    /// The count.
    pub value: u32,
    /// Where it came from.
    pub provenance: Provenance,
}

impl Count {
    /// A count with its provenance.
    pub fn new(value: u32, provenance: Provenance) -> Self {
        Count { value, provenance }
    }
}
