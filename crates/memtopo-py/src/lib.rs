//! Python bindings of memtopo's results (`import memtopo`): load a topology (JSON or TOML,
//! validated as the Rust crate validates it) into typed, read-only objects and into
//! pandas-friendly tables (lists of flat dicts), render it, and diff two results.
//!
//! Every function is a thin layer over the `topology` crate; `docs/python.md` documents
//! the Python API. A file that cannot be read raises the built-in `OSError` of its kind
//! (`FileNotFoundError`, `PermissionError`, …); a file that does not load raises
//! `memtopo.TopologyError` (a `ValueError`) with the crate's message, which names the file,
//! the line and the offending field.

#![deny(missing_docs)]

mod diff;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

create_exception!(
    memtopo,
    TopologyError,
    PyValueError,
    "A result file that does not load: bad syntax, a wrong schema version, or a value that fails validation."
);

fn error(e: impl std::fmt::Display) -> PyErr {
    TopologyError::new_err(e.to_string())
}

/// A load error as Python raises it: a file that cannot be read as the built-in `OSError`
/// of its kind (`FileNotFoundError`, `PermissionError`, `IsADirectoryError`, else
/// `OSError`) with `errno`, `strerror` and `filename` set; anything else `TopologyError`.
fn load_error(e: topology::Error) -> PyErr {
    use pyo3::exceptions::{
        PyFileNotFoundError, PyIsADirectoryError, PyOSError, PyPermissionError,
    };
    use std::io::ErrorKind;
    let topology::Error::Io { path, source } = e.without_file() else {
        return error(e);
    };
    let args = (
        source.raw_os_error().unwrap_or(0),
        source.to_string(),
        path.display().to_string(),
    );
    match source.kind() {
        ErrorKind::NotFound => PyFileNotFoundError::new_err(args),
        ErrorKind::PermissionDenied => PyPermissionError::new_err(args),
        ErrorKind::IsADirectory => PyIsADirectoryError::new_err(args),
        _ => PyOSError::new_err(args),
    }
}

/// A size in bytes with what is known about it.
#[pyclass(module = "memtopo", frozen, get_all)]
#[derive(Clone)]
struct Size {
    /// The size, or the lower end of a range, or the bound, in bytes.
    value: u64,
    /// `exact`, `at_least`, `at_most` or `between`.
    bound: String,
    /// The upper end of a `between` range, bytes.
    upper: Option<u64>,
    /// `api`, `benchmark` or `derived`.
    provenance: String,
    /// The change-point method, for benchmarked sizes.
    method: Option<String>,
    /// The test's p-value.
    p_value: Option<f64>,
    /// The test statistic.
    statistic: Option<f64>,
    /// The confidence.
    confidence: Option<f64>,
    /// As the reports print it, e.g. `≥ 64 KiB`.
    text: String,
}

#[pymethods]
impl Size {
    fn __repr__(&self) -> String {
        format!("Size({}, {})", self.text, self.provenance)
    }
}

impl From<&topology::Size> for Size {
    fn from(size: &topology::Size) -> Self {
        let (bound, upper) = match size.bound {
            topology::SizeBound::Exact(_) => ("exact", None),
            topology::SizeBound::AtLeast(_) => ("at_least", None),
            topology::SizeBound::AtMost(_) => ("at_most", None),
            topology::SizeBound::Between(_, high) => ("between", Some(high.0)),
        };
        let value = match size.bound {
            topology::SizeBound::AtMost(v) => v.0,
            other => other.lower().0,
        };
        let evidence = size.evidence.clone().unwrap_or_default();
        Size {
            value,
            bound: bound.to_owned(),
            upper,
            provenance: size.provenance.to_string(),
            method: evidence.method,
            p_value: evidence.p_value,
            statistic: evidence.statistic,
            confidence: evidence.confidence,
            text: size.to_string(),
        }
    }
}

/// A load latency: the distribution summary in cycles, and the median in ns where a
/// clock is known.
#[pyclass(module = "memtopo", frozen, get_all)]
#[derive(Clone)]
struct Latency {
    /// Mean, cycles.
    mean: f64,
    /// 25th percentile, cycles (absent before schema 1.4).
    p25: Option<f64>,
    /// Median, cycles.
    p50: f64,
    /// 75th percentile, cycles (absent before schema 1.4).
    p75: Option<f64>,
    /// 95th percentile, cycles.
    p95: f64,
    /// Standard deviation, cycles.
    stdev: f64,
    /// Samples summarised.
    samples: u32,
    /// `api`, `benchmark` or `derived`.
    provenance: String,
    /// The median in nanoseconds at the SM clock that applies.
    median_ns: Option<f64>,
}

#[pymethods]
impl Latency {
    /// The interquartile range p75 − p25, cycles; `None` without quartiles.
    fn iqr(&self) -> Option<f64> {
        Some(self.p75? - self.p25?)
    }

    fn __repr__(&self) -> String {
        format!(
            "Latency(median={}, samples={})",
            topology::render::median_iqr(&self.to_rust()),
            self.samples
        )
    }
}

impl Latency {
    fn new(topo: &topology::Topology, latency: &topology::Latency) -> Self {
        Latency {
            mean: latency.mean.0,
            p25: latency.p25.map(|c| c.0),
            p50: latency.p50.0,
            p75: latency.p75.map(|c| c.0),
            p95: latency.p95.0,
            stdev: latency.stdev.0,
            samples: latency.samples,
            provenance: latency.provenance.to_string(),
            median_ns: topo
                .clock_for(latency)
                .map(|clock| latency.p50.to_nanoseconds(clock).0),
        }
    }

    fn to_rust(&self) -> topology::Latency {
        topology::Latency::measured(topology::LatencySummary {
            mean: topology::Cycles(self.mean),
            p25: self.p25.map(topology::Cycles),
            p50: topology::Cycles(self.p50),
            p75: self.p75.map(topology::Cycles),
            p95: topology::Cycles(self.p95),
            stdev: topology::Cycles(self.stdev),
            samples: self.samples,
        })
    }
}

/// One memory element (L1 data, texture, …, device memory) and what was measured of it.
#[pyclass(module = "memtopo", frozen, get_all)]
#[derive(Clone)]
struct Element {
    /// The key in files, e.g. `constant_l15`.
    kind: String,
    /// The name people read, e.g. `Constant L1.5`.
    name: String,
    /// Its size.
    size: Option<Size>,
    /// Its line size.
    line_size: Option<Size>,
    /// What one miss brings.
    fetch_granularity: Option<Size>,
    /// The smallest part of a line kept valid on its own.
    sector_size: Option<Size>,
    /// Its load latency.
    latency: Option<Latency>,
    /// How many an SM has.
    count_per_sm: Option<u32>,
    /// The keys of the logical caches that are one physical cache with it.
    shared_with: Vec<String>,
}

#[pymethods]
impl Element {
    fn __repr__(&self) -> String {
        format!("Element({})", self.kind)
    }
}

/// A GPU's memory topology as memtopo measured it (read-only).
#[pyclass(module = "memtopo", frozen)]
struct Topology {
    inner: topology::Topology,
}

/// The JSON text of a serialisable value as Python objects (dicts, lists, numbers).
fn to_python<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(error)?;
    py.import("json")?.call_method1("loads", (text,))
}

#[pymethods]
impl Topology {
    /// The file format's version, e.g. `"1.7"`.
    #[getter]
    fn schema_version(&self) -> String {
        self.inner.schema_version.to_string()
    }

    /// The device as the driver reports it, as a dict.
    #[getter]
    fn device<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.device)
    }

    /// The run's conditions, as a dict.
    #[getter]
    fn conditions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.conditions)
    }

    /// The run record (GPU state, other processes, …) as a dict, or `None`.
    #[getter]
    fn run<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.run)
    }

    /// The notes (what was not measured and why, warnings), as dicts.
    #[getter]
    fn notes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.notes)
    }

    /// The elements that were measured, a dict by key (`l1_data`, `l2`, …), in hierarchy
    /// order.
    #[getter]
    fn elements<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (key, element) in self.element_list() {
            dict.set_item(key, element)?;
        }
        Ok(dict)
    }

    /// One flat dict per element (`pandas.DataFrame(topo.to_records())`): sizes in bytes
    /// with their bound, latency quartiles in cycles, the median in ns, count per SM.
    fn to_records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (key, element) in self.element_list() {
            let row = PyDict::new(py);
            row.set_item("element", key)?;
            row.set_item("name", &element.name)?;
            for (name, size) in [
                ("size", &element.size),
                ("line_size", &element.line_size),
                ("fetch_granularity", &element.fetch_granularity),
                ("sector_size", &element.sector_size),
            ] {
                row.set_item(format!("{name}_bytes"), size.as_ref().map(|s| s.value))?;
                row.set_item(
                    format!("{name}_bound"),
                    size.as_ref().map(|s| s.bound.clone()),
                )?;
            }
            latency_columns(&row, element.latency.as_ref())?;
            row.set_item("count_per_sm", element.count_per_sm)?;
            row.set_item("shared_with", element.shared_with.join(","))?;
            list.append(row)?;
        }
        Ok(list)
    }

    /// One flat dict per latency, the L2 partitions' included (`element` is `l2_near` /
    /// `l2_far` for them).
    fn latency_records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let topo = &self.inner;
        let list = PyList::empty(py);
        let add = |name: &str, latency: &topology::Latency| -> PyResult<()> {
            let row = PyDict::new(py);
            row.set_item("element", name)?;
            latency_columns(&row, Some(&Latency::new(topo, latency)))?;
            list.append(row)
        };
        for (kind, element) in topo.elements.iter() {
            if let Some(latency) = &element.latency {
                add(kind.key(), latency)?;
            }
            if let Some(p) = &element.partitions {
                if let Some(latency) = &p.near_latency {
                    add("l2_near", latency)?;
                }
                if let Some(latency) = &p.far_latency {
                    add("l2_far", latency)?;
                }
            }
        }
        Ok(list)
    }

    /// One flat dict per row of the L1's carveout table: the shared memory in force, the
    /// carveout asked for, the L1 measured beside it, and the row's role.
    fn carveout_records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let Some(l1) = self.inner.element(topology::ElementKind::L1Data) else {
            return Ok(list);
        };
        for entry in &l1.size_per_carveout {
            let row = PyDict::new(py);
            row.set_item(
                "shared_memory_bytes",
                entry.shared_memory_bytes.map(|b| b.0),
            )?;
            row.set_item("carveout_percent", entry.carveout_percent)?;
            row.set_item(
                "kernel_shared_bytes",
                entry.kernel_shared_bytes.map(|b| b.0),
            )?;
            let size = Size::from(&entry.l1_size);
            row.set_item("l1_bytes", size.value)?;
            row.set_item("l1_bound", size.bound)?;
            row.set_item("role", entry.role.map(|r| r.label().to_owned()))?;
            list.append(row)?;
        }
        Ok(list)
    }

    /// Every value of the result, one flat dict per value (`topology::quantities`):
    /// `path` (where: `l1_data`, `l2.partitions`, `device`, …), `quantity` (`size`,
    /// `latency`, `bandwidth.read`, …), `statistic` (`value`, `p50`, `mean`,
    /// `confidence`, …), `value` (a float), `unit` and `provenance`. The same rows as
    /// `memtopo render x.json -o x.csv`.
    fn to_rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for row in topology::quantities(&self.inner) {
            let dict = PyDict::new(py);
            dict.set_item("path", row.path)?;
            dict.set_item("quantity", row.quantity)?;
            dict.set_item("statistic", row.statistic)?;
            dict.set_item("value", row.value)?;
            dict.set_item("unit", row.unit)?;
            dict.set_item("provenance", row.provenance)?;
            list.append(dict)?;
        }
        Ok(list)
    }

    /// [`to_rows`](Self::to_rows) as a `pandas.DataFrame`, one row per value; raises
    /// `ImportError` where pandas is not installed (`pip install memtopo[pandas]`).
    fn to_dataframe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pandas = py.import("pandas").map_err(|e| {
            pyo3::exceptions::PyImportError::new_err(format!(
                "to_dataframe needs pandas (pip install pandas): {e}"
            ))
        })?;
        pandas.call_method1("DataFrame", (self.to_rows(py)?,))
    }

    /// The result as JSON text (validated, as the Rust crate writes it).
    fn to_json(&self) -> PyResult<String> {
        self.inner.to_json_string().map_err(error)
    }

    /// The result as TOML text.
    fn to_toml(&self) -> PyResult<String> {
        self.inner.to_toml_string().map_err(error)
    }

    /// The result as a nested dict (the JSON document's structure).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner)
    }

    /// A report: `table`, `markdown`, `svg` or `html` (the HTML without raw curves).
    fn render(&self, format: &str) -> PyResult<String> {
        use topology::render;
        Ok(match format {
            "table" => render::table(&self.inner),
            "markdown" | "md" => render::markdown(&self.inner),
            "svg" => render::svg(&self.inner),
            "html" => render::html(&self.inner, None),
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown format {other:?}: use table, markdown, svg or html"
                )))
            }
        })
    }

    fn __repr__(&self) -> String {
        let d = &self.inner.device;
        format!(
            "Topology({:?}, cc {}, {} SMs, schema {})",
            d.name, d.compute_capability, d.sm_count, self.inner.schema_version
        )
    }

    fn __str__(&self) -> String {
        topology::render::table(&self.inner)
    }

    fn __eq__(&self, other: &Topology) -> bool {
        self.inner == other.inner
    }
}

impl Topology {
    /// The measured elements, in hierarchy order.
    fn element_list(&self) -> Vec<(String, Element)> {
        let topo = &self.inner;
        topo.elements
            .iter()
            .map(|(kind, e)| {
                let element = Element {
                    kind: kind.key().to_owned(),
                    name: kind.display_name().to_owned(),
                    size: e.size.as_ref().map(Size::from),
                    line_size: e.line_size.as_ref().map(Size::from),
                    fetch_granularity: e.fetch_granularity.as_ref().map(Size::from),
                    sector_size: e.sector_size.as_ref().map(Size::from),
                    latency: e.latency.as_ref().map(|l| Latency::new(topo, l)),
                    count_per_sm: e.count_per_sm.map(|c| c.value),
                    shared_with: topo
                        .shared_with(kind)
                        .iter()
                        .map(|k| k.key().to_owned())
                        .collect(),
                };
                (kind.key().to_owned(), element)
            })
            .collect()
    }
}

fn latency_columns(row: &Bound<'_, PyDict>, latency: Option<&Latency>) -> PyResult<()> {
    let l = latency;
    row.set_item("latency_p50", l.map(|l| l.p50))?;
    row.set_item("latency_p25", l.and_then(|l| l.p25))?;
    row.set_item("latency_p75", l.and_then(|l| l.p75))?;
    row.set_item("latency_p95", l.map(|l| l.p95))?;
    row.set_item("latency_mean", l.map(|l| l.mean))?;
    row.set_item("latency_stdev", l.map(|l| l.stdev))?;
    row.set_item("latency_samples", l.map(|l| l.samples))?;
    row.set_item("latency_median_ns", l.and_then(|l| l.median_ns))?;
    Ok(())
}

/// Loads a `.json` or `.toml` result file.
#[pyfunction]
fn load(path: std::path::PathBuf) -> PyResult<Topology> {
    topology::Topology::load(path)
        .map(|inner| Topology { inner })
        .map_err(load_error)
}

/// Loads a result from text; `format` is `"json"` or `"toml"`.
#[pyfunction]
#[pyo3(signature = (text, format = "json"))]
fn loads(text: &str, format: &str) -> PyResult<Topology> {
    let inner = match format {
        "json" => topology::Topology::from_json_str(text),
        "toml" => topology::Topology::from_toml_str(text),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown format {other:?}: use json or toml"
            )))
        }
    };
    inner.map(|inner| Topology { inner }).map_err(error)
}

/// The JSON Schema of a result document (draft 2020-12), as a dict.
#[pyfunction]
fn json_schema<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?
        .call_method1("loads", (topology::schema::TOPOLOGY,))
}

/// The `memtopo` Python module.
#[pymodule]
#[pyo3(name = "memtopo")]
fn memtopo_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "SCHEMA_VERSION",
        topology::SchemaVersion::CURRENT.to_string(),
    )?;
    m.add("TopologyError", m.py().get_type::<TopologyError>())?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(loads, m)?)?;
    m.add_function(wrap_pyfunction!(diff::diff, m)?)?;
    m.add_function(wrap_pyfunction!(json_schema, m)?)?;
    m.add_class::<Topology>()?;
    m.add_class::<Element>()?;
    m.add_class::<Size>()?;
    m.add_class::<Latency>()?;
    m.add_class::<diff::Diff>()?;
    Ok(())
}
