//! Differences between two topologies that go beyond their uncertainty.
//!
//! Two GPUs of one node, or a GPU against its last result, never measure
//! identically; what matters is a change larger than the noise. The rules:
//!
//! - latencies differ when the means are further apart than
//!   [`DiffOptions::sigmas`] combined standard errors *and* than the quantity's
//!   relative tolerance of the larger mean: its measured run-to-run tolerance
//!   ([`crate::tolerance`]), never below [`DiffOptions::relative_tolerance`] (the second
//!   guard keeps huge sample counts from flagging a 0.1-cycle drift);
//! - bandwidths differ when they are further apart than the same relative tolerance
//!   of the larger (the L2's near-partition read moves by 12 % run to run, the device
//!   memory's read by 1.4 %: [`crate::tolerance::TOLERANCES`]);
//! - sizes from the API differ when they are not equal; benchmarked sizes are
//!   intervals (a bound is open on one side, the change-point resolution widens
//!   an exact value, [`DiffOptions::size_tolerance`] widens both) and differ
//!   when the intervals do not overlap;
//! - counts (copies per SM, L2 partitions) differ when they are further apart
//!   than [`DiffOptions::count_tolerance`] (default 0: any difference);
//! - a quantity present on one side only is a change, and so is any change of
//!   the device identity or the shared-cache groups;
//! - warnings and not-measured notes (severity, element, quantity and text)
//!   present on one side only are listed in [`TopologyDiff::notes`]: a warning or
//!   a failed benchmark that appears or disappears is a difference too. Info notes
//!   are context and quote measured numbers (every run's differ), so they are not
//!   compared;
//! - copies (schema 1.6): each path's latency per size by the latency rule, its
//!   bandwidth when it moved by more than 5 % (or the relative tolerance, if larger),
//!   and a path that became applicable or not;
//! - the benchmarks' sections (schema 1.8): each row by the rule of its kind, a number
//!   when it moved by more than [`DiffOptions::sigmas`] combined standard errors and the
//!   relative tolerance.
//!
//! ```
//! use topology::*;
//! let device = DeviceInfo::new("GPU", ComputeCapability::new(8, 0), 108);
//! let mut a = Topology::new(device.clone());
//! let mut b = Topology::new(device);
//! let lat = |mean: f64| Latency::measured(LatencySummary {
//!     mean: Cycles(mean), p25: None, p50: Cycles(mean), p75: None, p95: Cycles(mean + 2.0), stdev: Cycles(2.0), samples: 256,
//! });
//! a.element_mut(ElementKind::L2).set_latency(lat(220.0));
//! b.element_mut(ElementKind::L2).set_latency(lat(220.3)); // noise
//! assert!(diff::diff(&a, &b).is_empty());
//! b.element_mut(ElementKind::L2).set_latency(lat(260.0)); // a real change
//! let d = diff::diff(&a, &b);
//! assert_eq!(d.changes.len(), 1);
//! assert_eq!(d.changes[0].path, "elements.l2.latency");
//! ```

use std::fmt;

mod copies;
mod geometry;
mod icache;
mod sections;

use crate::model::{ElementKind, Note, NoteSeverity, Topology};
use crate::quantity::{Count, Latency, Provenance, Size, SizeBound};

/// How strict the comparison is, per kind of quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiffOptions {
    /// How many combined standard errors two latency means must be apart.
    pub sigmas: f64,
    /// The smallest relative change of a latency, clock or bandwidth that counts (0.02 =
    /// 2 %); a quantity whose measured run-to-run tolerance ([`crate::tolerance`]) is
    /// larger takes that one.
    pub relative_tolerance: f64,
    /// How far (relative) a benchmarked size's interval is widened on each side
    /// before two intervals are compared (0.02 = 2 %).
    pub size_tolerance: f64,
    /// The largest difference of two counts that is not a change (0: any).
    pub count_tolerance: u32,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            sigmas: 3.0,
            relative_tolerance: 0.02,
            size_tolerance: 0.02,
            count_tolerance: 0,
        }
    }
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The field, spelled as in the file formats (`elements.l1_data.size`).
    pub path: String,
    /// The value in the first topology (`-` when absent).
    pub before: String,
    /// The value in the second topology (`-` when absent).
    pub after: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} → {}", self.path, self.before, self.after)
    }
}

/// The changes from one topology to another.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopologyDiff {
    /// The changes beyond the uncertainty, in document order.
    pub changes: Vec<Change>,
    /// The run conditions that differ (`run.*`: GPU, driver, clocks, temperature,
    /// neighbours, host, version…). They explain changes but are not changes of the
    /// topology, so [`TopologyDiff::is_empty`] does not look at them.
    pub conditions: Vec<Change>,
    /// How many quantities differed but within their uncertainty.
    pub within_uncertainty: usize,
    /// The warnings and not-measured notes on one side only (`before` or `after`
    /// is `-` for the side that lacks it; the path is `notes`).
    pub notes: Vec<Change>,
}

impl TopologyDiff {
    /// Whether nothing changed beyond the uncertainty and no note appeared or
    /// disappeared.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.notes.is_empty()
    }
}

impl fmt::Display for TopologyDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.changes.is_empty() {
            writeln!(f, "no changes beyond the uncertainty")?;
        }
        for change in &self.changes {
            writeln!(f, "{change}")?;
        }
        if !self.notes.is_empty() {
            writeln!(f, "notes on one side only:")?;
            for change in &self.notes {
                writeln!(f, "  {} → {}", change.before, change.after)?;
            }
        }
        if !self.conditions.is_empty() {
            writeln!(f, "conditions that differ:")?;
            for change in &self.conditions {
                writeln!(f, "  {change}")?;
            }
        }
        if self.within_uncertainty > 0 {
            writeln!(
                f,
                "({} further difference(s) within the uncertainty)",
                self.within_uncertainty
            )?;
        }
        Ok(())
    }
}

struct Differ {
    options: DiffOptions,
    result: TopologyDiff,
}

fn show<T: fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

impl Differ {
    fn change(&mut self, path: String, before: String, after: String) {
        self.result.changes.push(Change {
            path,
            before,
            after,
        });
    }

    fn exact<T: PartialEq + fmt::Display>(&mut self, path: &str, a: Option<T>, b: Option<T>) {
        if a != b {
            self.change(path.to_owned(), show(a), show(b));
        }
    }

    fn latency(&mut self, path: String, a: Option<&Latency>, b: Option<&Latency>) {
        match (a, b) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                let delta = (a.mean.0 - b.mean.0).abs();
                if delta == 0.0 {
                    return;
                }
                let error = a
                    .summary()
                    .standard_error()
                    .hypot(b.summary().standard_error());
                let largest = a.mean.0.abs().max(b.mean.0.abs());
                let relative = crate::tolerance::relative(&path, self.options.relative_tolerance);
                if delta > self.options.sigmas * error && delta > relative * largest {
                    let show = |l: &Latency| format!("{:.1} ± {:.1} cycles", l.mean.0, l.stdev.0);
                    self.change(path, show(a), show(b));
                } else {
                    self.result.within_uncertainty += 1;
                }
            }
            (a, b) => {
                let show = |l: Option<&Latency>| show(l.map(|l| format!("{:.1} cycles", l.mean.0)));
                self.change(path, show(a), show(b));
            }
        }
    }

    /// The interval of sizes consistent with `size`, widened by its resolution
    /// and the relative tolerance.
    fn interval(&self, size: &Size) -> (f64, f64) {
        let resolution = size
            .evidence
            .as_ref()
            .and_then(|e| e.resolution)
            .map_or(0.0, |r| r.0 as f64);
        let tolerance = self.options.size_tolerance;
        let low = size.bound.lower().0 as f64 - resolution;
        let high = size
            .bound
            .upper()
            .map_or(f64::INFINITY, |h| h.0 as f64 + resolution);
        (low * (1.0 - tolerance), high * (1.0 + tolerance))
    }

    fn size(&mut self, path: String, a: Option<&Size>, b: Option<&Size>) {
        match (a, b) {
            (None, None) => {}
            (Some(a), Some(b)) => {
                if a.bound == b.bound {
                    return;
                }
                let both_api = a.provenance == Provenance::Api && b.provenance == Provenance::Api;
                let exact_pair = matches!(
                    (a.bound, b.bound),
                    (SizeBound::Exact(_), SizeBound::Exact(_))
                );
                let (a_low, a_high) = self.interval(a);
                let (b_low, b_high) = self.interval(b);
                let disjoint = a_high < b_low || b_high < a_low;
                if (both_api && exact_pair) || disjoint {
                    self.change(path, a.to_string(), b.to_string());
                } else {
                    self.result.within_uncertainty += 1;
                }
            }
            (a, b) => self.change(path, show(a), show(b)),
        }
    }

    fn count(&mut self, path: String, a: Option<Count>, b: Option<Count>) {
        match (a.map(|c| c.value), b.map(|c| c.value)) {
            (Some(x), Some(y)) if x != y && x.abs_diff(y) <= self.options.count_tolerance => {
                self.result.within_uncertainty += 1;
            }
            (x, y) => self.exact(&path, x, y),
        }
    }
}

/// The changes from `before` to `after` with the default options.
pub fn diff(before: &Topology, after: &Topology) -> TopologyDiff {
    diff_with(before, after, DiffOptions::default())
}

/// The changes from `before` to `after`.
pub fn diff_with(before: &Topology, after: &Topology, options: DiffOptions) -> TopologyDiff {
    let mut d = Differ {
        options,
        result: TopologyDiff::default(),
    };
    let (da, db) = (&before.device, &after.device);
    d.exact("device.name", Some(&da.name), Some(&db.name));
    d.exact(
        "device.compute_capability",
        Some(da.compute_capability),
        Some(db.compute_capability),
    );
    d.exact("device.sm_count", Some(da.sm_count), Some(db.sm_count));
    d.exact("device.memory_bytes", da.memory_bytes, db.memory_bytes);
    d.exact("device.l2_bytes", da.l2_bytes, db.l2_bytes);
    d.exact(
        "device.memory_bus_width_bits",
        da.memory_bus_width_bits,
        db.memory_bus_width_bits,
    );
    d.exact(
        "device.limits.shared_memory_per_sm_bytes",
        da.limits.shared_memory_per_sm_bytes,
        db.limits.shared_memory_per_sm_bytes,
    );

    for kind in ElementKind::ALL {
        let (ea, eb) = (before.element(kind), after.element(kind));
        if ea.is_none() && eb.is_none() {
            continue;
        }
        let base = format!("elements.{}", kind.key());
        let field = |name: &str| format!("{base}.{name}");
        d.size(
            field("size"),
            ea.and_then(|e| e.size.as_ref()),
            eb.and_then(|e| e.size.as_ref()),
        );
        d.size(
            field("line_size"),
            ea.and_then(|e| e.line_size.as_ref()),
            eb.and_then(|e| e.line_size.as_ref()),
        );
        d.size(
            field("fetch_granularity"),
            ea.and_then(|e| e.fetch_granularity.as_ref()),
            eb.and_then(|e| e.fetch_granularity.as_ref()),
        );
        d.size(
            field("sector_size"),
            ea.and_then(|e| e.sector_size.as_ref()),
            eb.and_then(|e| e.sector_size.as_ref()),
        );
        d.latency(
            field("latency"),
            ea.and_then(|e| e.latency.as_ref()),
            eb.and_then(|e| e.latency.as_ref()),
        );
        for (key, before, after) in crate::bandwidth::changes(
            &base,
            ea.and_then(|e| e.bandwidth.as_ref()),
            eb.and_then(|e| e.bandwidth.as_ref()),
            d.options.relative_tolerance,
        ) {
            d.change(field(&format!("bandwidth.{key}")), before, after);
        }
        d.count(
            field("count_per_sm"),
            ea.and_then(|e| e.count_per_sm),
            eb.and_then(|e| e.count_per_sm),
        );
        geometry::diff(
            &mut d,
            &field,
            geometry::geometry_of(ea),
            geometry::geometry_of(eb),
        );
        d.exact(
            &field("global_loads_cached"),
            ea.and_then(|e| e.global_loads_cached),
            eb.and_then(|e| e.global_loads_cached),
        );
        // Schema 1.5: a disturbed element on either side is a change, and its values
        // below are marked, never shown plain.
        let disturbed =
            |e: Option<&crate::Element>| e.and_then(|e| e.disturbed.as_ref().map(|_| true));
        d.exact(&field("disturbed"), disturbed(ea), disturbed(eb));
        let first = d.result.changes.len();
        let (pa, pb) = (
            ea.and_then(|e| e.partitions.as_ref()),
            eb.and_then(|e| e.partitions.as_ref()),
        );
        if pa.is_some() || pb.is_some() {
            d.count(
                field("partitions.count"),
                pa.and_then(|p| p.count),
                pb.and_then(|p| p.count),
            );
            d.size(
                field("partitions.size_each"),
                pa.and_then(|p| p.size_each.as_ref()),
                pb.and_then(|p| p.size_each.as_ref()),
            );
            d.latency(
                field("partitions.near_latency"),
                pa.and_then(|p| p.near_latency.as_ref()),
                pb.and_then(|p| p.near_latency.as_ref()),
            );
            d.latency(
                field("partitions.far_latency"),
                pa.and_then(|p| p.far_latency.as_ref()),
                pb.and_then(|p| p.far_latency.as_ref()),
            );
            d.size(
                field("partitions.far_size"),
                pa.and_then(|p| p.far_size.as_ref()),
                pb.and_then(|p| p.far_size.as_ref()),
            );
            d.exact(
                &field("partitions.near_keeps_far_copies"),
                pa.and_then(|p| p.near_keeps_far_copies),
                pb.and_then(|p| p.near_keeps_far_copies),
            );
            // The home function's bits (each page's own bit is the run's, not the GPU's).
            let bits = |p: Option<&crate::L2Partitions>| {
                p.and_then(|p| p.address_map.as_ref())
                    .map(|m| format!("{:?}", m.bits))
            };
            d.exact(&field("partitions.address_map.bits"), bits(pa), bits(pb));
            let ways = |p: Option<&crate::L2Partitions>| p.and_then(|p| p.ways.as_ref()?.ways);
            d.exact(&field("partitions.ways.ways"), ways(pa), ways(pb));
        }
        let mark = |value: &mut String, side: Option<&crate::Element>| {
            if side.is_some_and(|e| e.disturbed.is_some()) && value != "-" {
                value.push_str(&format!(" [{}]", crate::Element::DISTURBED_MARK));
            }
        };
        for change in &mut d.result.changes[first..] {
            mark(&mut change.before, ea);
            mark(&mut change.after, eb);
        }
    }

    let groups = |t: &Topology| {
        let mut groups: Vec<String> = t
            .shared_physical_caches
            .iter()
            .map(|g| {
                let mut keys: Vec<&str> = g.members.iter().map(|k| k.key()).collect();
                keys.sort_unstable();
                keys.join("+")
            })
            .collect();
        groups.sort();
        groups
    };
    let (ga, gb) = (groups(before), groups(after));
    if ga != gb {
        let show = |g: Vec<String>| {
            if g.is_empty() {
                "none".to_owned()
            } else {
                g.join(", ")
            }
        };
        d.change("shared_physical_caches".into(), show(ga), show(gb));
    }
    copies::diff(
        &mut d,
        before.copies_to_shared.as_ref(),
        after.copies_to_shared.as_ref(),
    );
    icache::diff(
        &mut d,
        &before.instruction_caches,
        &after.instruction_caches,
    );
    sections::diff(&mut d, &before.sections, &after.sections);
    d.result.conditions = condition_changes(before, after);
    d.result.notes = note_changes(before, after);
    d.result
}

/// A note in one line: `warning l2.size: text`.
fn note_line(note: &Note) -> String {
    let severity = match note.severity {
        NoteSeverity::Info => "info",
        NoteSeverity::Warning => "warning",
        NoteSeverity::NotMeasured => "not measured",
    };
    let about = match (note.element, note.quantity) {
        (Some(e), Some(q)) => format!(" {} ({q})", e.key()),
        (Some(e), None) => format!(" {}", e.key()),
        (None, Some(q)) => format!(" ({q})"),
        (None, None) => String::new(),
    };
    format!("{severity}{about}: {}", note.message)
}

/// The warnings and not-measured notes of each side that the other lacks (as
/// multisets: a note given twice on one side and once on the other is one
/// difference), `before`'s first. Info notes are not compared.
fn note_changes(before: &Topology, after: &Topology) -> Vec<Change> {
    let compared = |n: &&Note| n.severity != NoteSeverity::Info;
    let only = |ours: &[Note], theirs: &[Note]| {
        let mut left: Vec<&Note> = theirs.iter().filter(compared).collect();
        ours.iter()
            .filter(compared)
            .filter(|n| match left.iter().position(|m| m == n) {
                Some(i) => {
                    left.swap_remove(i);
                    false
                }
                None => true,
            })
            .map(note_line)
            .collect::<Vec<_>>()
    };
    let gone = only(&before.notes, &after.notes)
        .into_iter()
        .map(|line| Change {
            path: "notes".into(),
            before: line,
            after: "-".into(),
        });
    let new = only(&after.notes, &before.notes)
        .into_iter()
        .map(|line| Change {
            path: "notes".into(),
            before: "-".into(),
            after: line,
        });
    gone.chain(new).collect()
}

/// The run conditions that differ, field by field (`-` where one side lacks it).
fn condition_changes(before: &Topology, after: &Topology) -> Vec<Change> {
    let fields = |t: &Topology| t.run.as_ref().map(|r| r.fields()).unwrap_or_default();
    let (fa, fb) = (fields(before), fields(after));
    let mut names: Vec<&String> = fa.iter().chain(fb.iter()).map(|(k, _)| k).collect();
    names.dedup();
    let mut seen = std::collections::BTreeSet::new();
    names
        .into_iter()
        .filter(|name| seen.insert((*name).clone()))
        .filter_map(|name| {
            let value = |f: &[(String, String)]| {
                f.iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| "-".to_owned())
            };
            let (a, b) = (value(&fa), value(&fb));
            (a != b).then(|| Change {
                path: format!("run.{name}"),
                before: a,
                after: b,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
