//! Sections: what a benchmark measured that has no dedicated field in the model, as a titled
//! list of quantities (schema 1.8).
//!
//! A section is the extension point of the model, in the way hwloc's generic object carries
//! per-type attributes: a benchmark writes rows of [`Size`]s, [`Latency`]s, [`Count`]s and
//! plain numbers with a unit, and every renderer, [`diff`](crate::diff) and
//! [`Topology::validate`] handles a row by the kind of its value. A new benchmark therefore
//! adds rows, not code, to this crate. Sections are keyed by the name of the benchmark that
//! wrote them (`Topology::sections`), and rows by a key that stays stable from run to run, so
//! that two results can be compared row by row.
//!
//! ```
//! use topology::*;
//! let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
//! let conflict_free = LatencySummary::from_samples(&[29.0, 29.0, 29.0]).unwrap();
//! topo.sections.insert(
//!     "bank-probe".into(),
//!     Section::new("Shared-memory bank conflicts")
//!         .with_row("conflict_free", "one way (no conflict)", RowValue::latency(conflict_free))
//!         .with_row("cost_per_way", "each further way", RowValue::number(2.0, "cycles", Provenance::Benchmark))
//!         .with_row("period", "bank period", RowValue::size(Size::exact(Bytes(128), Provenance::Benchmark))),
//! );
//! topo.validate()?;
//! assert!(render::table(&topo).contains("each further way"));
//! assert_eq!(topo.sections["bank-probe"].row("cost_per_way").unwrap().value.as_number(), Some(2.0));
//! # Ok::<(), topology::Error>(())
//! ```

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::{Count, Latency, LatencySummary, Provenance, Size};

/// The results of one benchmark that keeps no type of its own in the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Section {
    /// The heading every renderer gives it (`Shared-memory bank conflicts`).
    pub title: String,
    /// How the rows were measured, in a sentence or two for the reader; renderers print it
    /// under the heading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The quantities, in the order renderers list them.
    #[serde(default)]
    pub rows: Vec<SectionRow>,
}

/// One quantity of a [`Section`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SectionRow {
    /// The row's key within its section (`cost_per_way`), stable from run to run: `diff`
    /// matches rows by it. Lower case letters, digits and `_`.
    pub key: String,
    /// What the row is, for the reader (`each further way`).
    pub label: String,
    /// The value, by kind.
    #[serde(flatten)]
    pub value: RowValue,
}

/// The value of a [`SectionRow`]: one of the model's quantities, or a number with a unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RowValue {
    /// A size, exact or a bound, with its evidence.
    Size(Size),
    /// A latency distribution in cycles.
    Latency(Latency),
    /// A count.
    Count(Count),
    /// Any other number, with its unit.
    Number(Number),
}

/// A number with its unit and provenance: a [`RowValue`] that is neither a size, a latency
/// nor a count (`2.0 cycles` per way of a bank conflict, a ratio, a rate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Number {
    /// The value.
    pub value: f64,
    /// Its unit, as a reader writes it (`cycles`, `%`, `GB/s`); empty for a pure number.
    #[serde(default)]
    pub unit: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// Its standard error, where the value is an estimate; `diff` widens the comparison by
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standard_error: Option<f64>,
}

impl Section {
    /// An empty section titled `title`.
    pub fn new(title: impl Into<String>) -> Self {
        Section {
            title: title.into(),
            method: None,
            rows: Vec::new(),
        }
    }

    /// The section with `method` as its description of how it was measured.
    pub fn with_method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into());
        self
    }

    /// The section with one more row.
    pub fn with_row(mut self, key: &str, label: &str, value: RowValue) -> Self {
        self.push(key, label, value);
        self
    }

    /// Appends a row.
    pub fn push(&mut self, key: &str, label: &str, value: RowValue) {
        self.rows.push(SectionRow {
            key: key.to_owned(),
            label: label.to_owned(),
            value,
        });
    }

    /// The row with `key`, if present.
    pub fn row(&self, key: &str) -> Option<&SectionRow> {
        self.rows.iter().find(|r| r.key == key)
    }
}

impl RowValue {
    /// A measured latency distribution.
    pub fn latency(summary: LatencySummary) -> Self {
        RowValue::Latency(Latency::measured(summary))
    }

    /// A size.
    pub fn size(size: Size) -> Self {
        RowValue::Size(size)
    }

    /// A count.
    pub fn count(value: u32, provenance: Provenance) -> Self {
        RowValue::Count(Count::new(value, provenance))
    }

    /// A number with its unit.
    pub fn number(value: f64, unit: &str, provenance: Provenance) -> Self {
        RowValue::Number(Number {
            value,
            unit: unit.to_owned(),
            provenance,
            standard_error: None,
        })
    }

    /// The number of a [`RowValue::Number`], else `None`.
    pub fn as_number(&self) -> Option<f64> {
        match self {
            RowValue::Number(n) => Some(n.value),
            _ => None,
        }
    }

    /// Where the value came from.
    pub fn provenance(&self) -> Provenance {
        match self {
            RowValue::Size(s) => s.provenance,
            RowValue::Latency(l) => l.provenance,
            RowValue::Count(c) => c.provenance,
            RowValue::Number(n) => n.provenance,
        }
    }
}

impl fmt::Display for RowValue {
    /// The value as the text renderers print it: a size as sizes print, a latency as its
    /// median with the interquartile range, a count bare, a number with its unit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowValue::Size(s) => write!(f, "{s}"),
            RowValue::Latency(l) => write!(f, "{} cycles", crate::number::median_iqr(l)),
            RowValue::Count(c) => write!(f, "{}", c.value),
            RowValue::Number(n) => {
                let value = crate::number::number(n.value);
                if n.unit.is_empty() {
                    write!(f, "{value}")
                } else {
                    write!(f, "{value} {}", n.unit)
                }
            }
        }
    }
}
