//! `memtopo.diff` and its result, `memtopo.Diff`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::Topology;

/// What differs between two results beyond their uncertainty.
#[pyclass(module = "memtopo", frozen, get_all)]
pub(crate) struct Diff {
    /// Each difference: a dict with `path`, `before`, `after`.
    changes: Vec<(String, String, String)>,
    /// Run conditions that differ (not counted as differences).
    conditions: Vec<(String, String, String)>,
    /// How many compared values differed only within their uncertainty.
    within_uncertainty: usize,
    text: String,
}

#[pymethods]
impl Diff {
    /// Whether the two results agree within their uncertainty.
    fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The differences as flat dicts (`pandas.DataFrame(d.to_records())`), conditions
    /// marked by `kind`.
    fn to_records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (kind, rows) in [
            ("difference", &self.changes),
            ("condition", &self.conditions),
        ] {
            for (path, before, after) in rows {
                let row = PyDict::new(py);
                row.set_item("kind", kind)?;
                row.set_item("path", path)?;
                row.set_item("before", before)?;
                row.set_item("after", after)?;
                list.append(row)?;
            }
        }
        Ok(list)
    }

    fn __bool__(&self) -> bool {
        !self.changes.is_empty()
    }

    fn __len__(&self) -> usize {
        self.changes.len()
    }

    fn __str__(&self) -> String {
        self.text.clone()
    }
}

/// Compares two results (`topology::diff`): latencies further apart than `sigmas`
/// combined standard errors and `relative_tolerance` of the larger; sizes whose
/// intervals do not overlap; presence, identity and sharing changes.
#[pyfunction]
#[pyo3(signature = (before, after, sigmas = 3.0, relative_tolerance = 0.02))]
pub(crate) fn diff(
    before: &Topology,
    after: &Topology,
    sigmas: f64,
    relative_tolerance: f64,
) -> PyResult<Diff> {
    let valid = |v: f64| v.is_finite() && v >= 0.0;
    if !(valid(sigmas) && valid(relative_tolerance)) {
        return Err(PyValueError::new_err(
            "sigmas and relative_tolerance must be finite and ≥ 0",
        ));
    }
    let options = topology::diff::DiffOptions {
        sigmas,
        relative_tolerance,
        ..topology::diff::DiffOptions::default()
    };
    let d = topology::diff::diff_with(&before.inner, &after.inner, options);
    let rows = |changes: &[topology::diff::Change]| {
        changes
            .iter()
            .map(|c| (c.path.clone(), c.before.clone(), c.after.clone()))
            .collect()
    };
    Ok(Diff {
        changes: rows(&d.changes),
        conditions: rows(&d.conditions),
        within_uncertainty: d.within_uncertainty,
        text: d.to_string(),
    })
}
