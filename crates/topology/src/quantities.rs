//! A topology as a flat table: one row per value, for spreadsheets (`memtopo render x.json
//! -o x.csv`), pandas (the Python package's `to_rows()`) and anything else that wants
//! columns rather than a tree.
//!
//! A row is one number and what it is: where in the topology (`path`, e.g. `l1_data` or
//! `l2.partitions`), which quantity (`size`, `latency`, `bandwidth.read`), which statistic
//! of it (`value`, `p50`, `mean`, `confidence`, `p_value`, …), its unit and where it came
//! from. Paths and quantity names are the JSON document's keys, so a row can be traced to
//! the field it came from.
//!
//! A benchmark's section ([`crate::Section`]) gives one row per statistic of each of its
//! rows, under the path `sections.<benchmark>` with the row's key as the quantity, so every
//! consumer of the table (CSV, Python) takes a new benchmark's values unchanged.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{ElementKind, Topology};
use crate::quantity::{Count, Latency, Provenance, Size, SizeBound};
use crate::section::RowValue;

/// One value of a topology with what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantityRow {
    /// Where in the topology: an element key (`l1_data`), a part of one
    /// (`l2.partitions`, `l1_data.carveout[2]`), `device`, `conditions`, `tlb[0]`, ….
    pub path: String,
    /// The quantity: the JSON key (`size`, `line_size`, `latency`, `bandwidth.read`).
    pub quantity: String,
    /// The statistic the value is: `value` for a single value, `at_least`/`at_most` for a
    /// bound, `lower`/`upper` for a range, `p25`/`p50`/`p75`/`p95`/`mean`/`stdev`/`samples`
    /// of a latency distribution, `confidence`/`p_value`/`statistic`/`resolution` of the
    /// evidence behind a size.
    pub statistic: String,
    /// The number.
    pub value: f64,
    /// Its unit: `B`, `cycles`, `ns`, `GiB/s`, `MHz`, `count`, `fraction`, `bit`.
    pub unit: String,
    /// Where the quantity came from: `api`, `benchmark` or `derived` (empty where the
    /// topology does not say).
    pub provenance: String,
}

impl QuantityRow {
    /// A row without provenance.
    pub fn new(
        path: impl Into<String>,
        quantity: impl Into<String>,
        statistic: impl Into<String>,
        value: f64,
        unit: impl Into<String>,
    ) -> Self {
        QuantityRow {
            path: path.into(),
            quantity: quantity.into(),
            statistic: statistic.into(),
            value,
            unit: unit.into(),
            provenance: String::new(),
        }
    }

    /// The same row with its provenance.
    pub fn with_provenance(mut self, provenance: Provenance) -> Self {
        self.provenance = provenance.to_string();
        self
    }

    /// The column names, in the order of [`QuantityRow::fields`].
    pub const COLUMNS: [&'static str; 6] = [
        "path",
        "quantity",
        "statistic",
        "value",
        "unit",
        "provenance",
    ];

    /// The row's fields as text, in the order of [`QuantityRow::COLUMNS`]; the value in
    /// Rust's shortest form that reads back to the same number.
    pub fn fields(&self) -> [String; 6] {
        [
            self.path.clone(),
            self.quantity.clone(),
            self.statistic.clone(),
            self.value.to_string(),
            self.unit.clone(),
            self.provenance.clone(),
        ]
    }
}

impl fmt::Display for QuantityRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} {} = {} {}",
            self.path, self.quantity, self.statistic, self.value, self.unit
        )
    }
}

/// Collects rows.
struct Rows(Vec<QuantityRow>);

impl Rows {
    fn push(&mut self, path: &str, quantity: &str, statistic: &str, value: f64, unit: &str) {
        self.0
            .push(QuantityRow::new(path, quantity, statistic, value, unit));
    }

    fn push_from(
        &mut self,
        path: &str,
        quantity: &str,
        statistic: &str,
        value: f64,
        unit: &str,
        provenance: Provenance,
    ) {
        self.0.push(
            QuantityRow::new(path, quantity, statistic, value, unit).with_provenance(provenance),
        );
    }

    fn size(&mut self, path: &str, quantity: &str, size: &Size) {
        let p = size.provenance;
        let bytes = |b: crate::Bytes| b.0 as f64;
        match size.bound {
            SizeBound::Exact(v) => self.push_from(path, quantity, "value", bytes(v), "B", p),
            SizeBound::AtLeast(v) => self.push_from(path, quantity, "at_least", bytes(v), "B", p),
            SizeBound::AtMost(v) => self.push_from(path, quantity, "at_most", bytes(v), "B", p),
            SizeBound::Between(low, high) => {
                self.push_from(path, quantity, "lower", bytes(low), "B", p);
                self.push_from(path, quantity, "upper", bytes(high), "B", p);
            }
        }
        if let Some(e) = &size.evidence {
            let stats = [
                ("confidence", e.confidence, "fraction"),
                ("p_value", e.p_value, "fraction"),
                ("statistic", e.statistic, ""),
                ("resolution", e.resolution.map(bytes), "B"),
            ];
            for (statistic, value, unit) in stats {
                if let Some(value) = value {
                    self.push_from(path, quantity, statistic, value, unit, p);
                }
            }
        }
    }

    fn latency(&mut self, topo: &Topology, path: &str, quantity: &str, latency: &Latency) {
        let p = latency.provenance;
        let stats = [
            ("mean", Some(latency.mean.0)),
            ("p25", latency.p25.map(|c| c.0)),
            ("p50", Some(latency.p50.0)),
            ("p75", latency.p75.map(|c| c.0)),
            ("p95", Some(latency.p95.0)),
            ("stdev", Some(latency.stdev.0)),
        ];
        for (statistic, value) in stats {
            if let Some(value) = value {
                self.push_from(path, quantity, statistic, value, "cycles", p);
            }
        }
        self.push_from(
            path,
            quantity,
            "samples",
            f64::from(latency.samples),
            "count",
            p,
        );
        if let Some(clock) = topo.clock_for(latency) {
            let ns = latency.p50.to_nanoseconds(clock).0;
            self.push_from(path, quantity, "p50", ns, "ns", crate::Provenance::Derived);
        }
    }

    fn count(&mut self, path: &str, quantity: &str, count: Count) {
        self.push_from(
            path,
            quantity,
            "value",
            f64::from(count.value),
            "count",
            count.provenance,
        );
    }
}

/// Every value of `topo`, one row each, from the device outwards to the SM's caches in
/// [`ElementKind::ALL`]'s order, then the TLB and instruction-cache levels.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// topo.element_mut(ElementKind::ConstantL15)
///     .set_size(Size::at_least(Bytes::kib(64), Provenance::Benchmark));
/// let rows = topology::quantities(&topo);
/// let l15 = rows.iter().find(|r| r.path == "constant_l15").unwrap();
/// assert_eq!((l15.quantity.as_str(), l15.statistic.as_str(), l15.value, l15.unit.as_str()),
///            ("size", "at_least", 65536.0, "B"));
/// assert!(rows.iter().any(|r| r.path == "device" && r.quantity == "sm_count" && r.value == 132.0));
/// ```
pub fn quantities(topo: &Topology) -> Vec<QuantityRow> {
    let mut rows = Rows(Vec::new());
    device_rows(topo, &mut rows);
    for (kind, element) in topo.elements.iter() {
        let path = kind.key();
        for (quantity, size) in [
            ("size", &element.size),
            ("line_size", &element.line_size),
            ("fetch_granularity", &element.fetch_granularity),
            ("sector_size", &element.sector_size),
        ] {
            if let Some(size) = size {
                rows.size(path, quantity, size);
            }
        }
        if let Some(latency) = &element.latency {
            rows.latency(topo, path, "latency", latency);
        }
        if let Some(count) = element.count_per_sm {
            rows.count(path, "count_per_sm", count);
        }
        if let Some(bandwidth) = &element.bandwidth {
            for (name, b) in bandwidth.iter() {
                let quantity = format!("bandwidth.{name}");
                rows.push_from(path, &quantity, "value", b.value, "GiB/s", b.provenance);
                if let Some(median) = b.median {
                    rows.push_from(path, &quantity, "median", median, "GiB/s", b.provenance);
                }
                if let Some(peak) = &b.peak {
                    rows.push(
                        path,
                        &quantity,
                        "fraction_of_peak",
                        peak.fraction,
                        "fraction",
                    );
                }
            }
        }
        if let Some(g) = &element.geometry {
            for (quantity, count) in [
                ("geometry.sets", g.sets),
                ("geometry.ways", g.associativity),
            ] {
                if let Some(count) = count {
                    rows.count(path, quantity, count);
                }
            }
        }
        for (i, entry) in element.size_per_carveout.iter().enumerate() {
            let row_path = format!("{path}.size_per_carveout[{i}]");
            if let Some(shared) = entry.shared_memory_bytes {
                rows.push_from(
                    &row_path,
                    "shared_memory",
                    "value",
                    shared.0 as f64,
                    "B",
                    Provenance::Api,
                );
            }
            if let Some(percent) = entry.carveout_percent {
                rows.push(
                    &row_path,
                    "carveout",
                    "value",
                    f64::from(percent),
                    "percent",
                );
            }
            rows.size(&row_path, "l1_size", &entry.l1_size);
        }
        if kind == ElementKind::L2 {
            if let Some(p) = &element.partitions {
                let path = "l2.partitions";
                if let Some(count) = p.count {
                    rows.count(path, "count", count);
                }
                for (quantity, size) in [("size_each", &p.size_each), ("far_size", &p.far_size)] {
                    if let Some(size) = size {
                        rows.size(path, quantity, size);
                    }
                }
                for (quantity, latency) in [
                    ("near_latency", &p.near_latency),
                    ("far_latency", &p.far_latency),
                ] {
                    if let Some(latency) = latency {
                        rows.latency(topo, path, quantity, latency);
                    }
                }
            }
        }
    }
    for (i, level) in topo.tlb.iter().enumerate() {
        let path = format!("tlb[{i}]");
        rows.push(&path, "level", "value", f64::from(level.level), "count");
        if let Some(coverage) = &level.coverage {
            rows.size(&path, "coverage", coverage);
        }
        if let Some(entries) = level.entries {
            rows.push(&path, "entries", "value", entries as f64, "count");
        }
        if let Some(latency) = &level.miss_latency {
            rows.latency(topo, &path, "miss_latency", latency);
        }
    }
    for (i, level) in topo.instruction_caches.iter().enumerate() {
        let path = format!("instruction_caches[{i}]");
        if let Some(size) = &level.size {
            rows.size(&path, "size", size);
        }
        rows.push_from(
            &path,
            "cycles_per_instruction",
            "value",
            level.cycles_per_instruction,
            "cycles",
            Provenance::Benchmark,
        );
    }
    // The benchmarks' sections: each row by its kind, under `sections.<name>`.
    for (name, section) in &topo.sections {
        let path = format!("sections.{name}");
        for row in &section.rows {
            match &row.value {
                RowValue::Size(size) => rows.size(&path, &row.key, size),
                RowValue::Latency(latency) => rows.latency(topo, &path, &row.key, latency),
                RowValue::Count(count) => rows.count(&path, &row.key, *count),
                RowValue::Number(n) => {
                    rows.push_from(&path, &row.key, "value", n.value, &n.unit, n.provenance);
                    if let Some(error) = n.standard_error {
                        rows.push_from(
                            &path,
                            &row.key,
                            "standard_error",
                            error,
                            &n.unit,
                            n.provenance,
                        );
                    }
                }
            }
        }
    }
    rows.0
}

fn device_rows(topo: &Topology, rows: &mut Rows) {
    let d = &topo.device;
    let api = Provenance::Api;
    rows.push_from(
        "device",
        "sm_count",
        "value",
        f64::from(d.sm_count),
        "count",
        api,
    );
    let optional = [
        ("sm_clock_mhz", d.sm_clock_mhz.map(|m| m.0), "MHz"),
        ("memory_clock_mhz", d.memory_clock_mhz.map(|m| m.0), "MHz"),
        ("memory_bytes", d.memory_bytes.map(|b| b.0 as f64), "B"),
        (
            "memory_bus_width_bits",
            d.memory_bus_width_bits.map(f64::from),
            "bit",
        ),
        ("l2_bytes", d.l2_bytes.map(|b| b.0 as f64), "B"),
        (
            "limits.shared_memory_per_sm_bytes",
            d.limits.shared_memory_per_sm_bytes.map(|b| b.0 as f64),
            "B",
        ),
        (
            "limits.shared_memory_per_block_optin_bytes",
            d.limits
                .shared_memory_per_block_optin_bytes
                .map(|b| b.0 as f64),
            "B",
        ),
    ];
    for (quantity, value, unit) in optional {
        if let Some(value) = value {
            rows.push_from("device", quantity, "value", value, unit, api);
        }
    }
    if let Some(clock) = topo.conditions.sm_clock_mhz {
        rows.push_from(
            "conditions",
            "sm_clock_mhz",
            "value",
            clock.0,
            "MHz",
            Provenance::Benchmark,
        );
    }
}

/// The rows as CSV (RFC 4180: a header line, fields quoted where they hold a comma, quote
/// or line break, CRLF line ends): what `memtopo render x.json -o x.csv` writes.
///
/// ```
/// use topology::*;
/// let topo = Topology::new(DeviceInfo::new("GPU, simulated", ComputeCapability::new(9, 0), 132));
/// let text = quantities_csv(&quantities(&topo));
/// assert!(text.starts_with("path,quantity,statistic,value,unit,provenance\r\n"));
/// assert!(text.contains("device,sm_count,value,132,count,api\r\n"));
/// ```
pub fn quantities_csv(rows: &[QuantityRow]) -> String {
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    // Writing into memory cannot fail.
    writer
        .write_record(QuantityRow::COLUMNS)
        .expect("writing CSV into memory cannot fail");
    for row in rows {
        writer
            .write_record(row.fields())
            .expect("writing CSV into memory cannot fail");
    }
    let bytes = writer
        .into_inner()
        .expect("flushing CSV into memory cannot fail");
    String::from_utf8(bytes).expect("the rows are UTF-8 text")
}
