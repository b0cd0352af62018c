//! The invariants of a topology that types alone cannot keep.
//!
//! Each check pushes a [`Violation`] with the dotted path of the field, in the
//! same spelling as the file formats, so an error points at the line to fix.

use crate::error::Violation;
use crate::model::{Element, ElementKind, Topology};
use crate::version::SchemaVersion;

mod l2;
mod quantity;
mod sections;

impl Topology {
    /// Checks every invariant of the model; the error lists each violation with
    /// the path of the field.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] with every violation.
    pub fn validate(&self) -> Result<(), crate::Error> {
        let violations = violations(self);
        if violations.is_empty() {
            Ok(())
        } else {
            Err(crate::Error::Invalid { violations })
        }
    }
}

/// The largest size any memory structure of a GPU can have, bytes (16 TiB: far above any
/// device memory; a larger value is a corrupted or invented number).
pub const MAX_BYTES: u64 = 1 << 44;
/// The largest latency a load can report, cycles (ten million: seconds at any clock).
pub const MAX_CYCLES: f64 = 1e7;
/// The largest copies per SM or partition count a GPU can have.
pub const MAX_COUNT: u32 = 1 << 16;
/// The largest SM clock, MHz.
pub const MAX_CLOCK_MHZ: f64 = 10_000.0;

struct Checker {
    violations: Vec<Violation>,
}

impl Checker {
    fn fail(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.violations.push(Violation {
            path: path.into(),
            message: message.into(),
        });
    }

    fn positive_finite(&mut self, path: String, value: f64) {
        if !(value.is_finite() && value > 0.0) {
            self.fail(
                path,
                format!("must be a positive finite number, found {value}"),
            );
        }
    }

    fn probability(&mut self, path: String, value: f64) {
        if !(0.0..=1.0).contains(&value) {
            self.fail(path, format!("must lie in [0, 1], found {value}"));
        }
    }

    fn element(&mut self, topology: &Topology, kind: ElementKind, element: &Element) {
        let base = format!("elements.{}", kind.key());
        let field = |name: &str| format!("{base}.{name}");
        if let Some(size) = &element.size {
            self.size(&field("size"), size);
        }
        if let Some(line) = &element.line_size {
            self.size(&field("line_size"), line);
            if let Some(size) = &element.size {
                self.fits(&field("line_size"), line, "line size", size, "cache size");
            }
        }
        if let Some(granularity) = &element.fetch_granularity {
            self.size(&field("fetch_granularity"), granularity);
            if let Some(line) = &element.line_size {
                self.fits(
                    &field("fetch_granularity"),
                    granularity,
                    "fetch granularity",
                    line,
                    "line size",
                );
            }
        }
        if let Some(sector) = &element.sector_size {
            self.size(&field("sector_size"), sector);
            if let Some(line) = &element.line_size {
                self.fits(
                    &field("sector_size"),
                    sector,
                    "sector size",
                    line,
                    "line size",
                );
            }
        }
        if let Some(latency) = &element.latency {
            self.latency(&field("latency"), latency);
        }
        if let Some(count) = &element.count_per_sm {
            if !kind.is_per_sm() {
                self.fail(
                    field("count_per_sm"),
                    format!("{kind} is not private to an SM"),
                );
            } else if count.value == 0 {
                self.fail(
                    field("count_per_sm"),
                    "an element that exists has at least one copy per SM",
                );
            } else if count.value > MAX_COUNT {
                self.fail(
                    field("count_per_sm"),
                    format!("{} copies per SM is beyond any GPU", count.value),
                );
            }
        }
        if let Some(next) = element.backed_by {
            if next == kind {
                self.fail(field("backed_by"), "an element cannot back itself");
            } else if topology.element(next).is_none() {
                self.fail(
                    field("backed_by"),
                    format!("names {}, which is not among the elements", next.key()),
                );
            }
        }
        if let Some(bandwidth) = &element.bandwidth {
            for (name, value) in bandwidth.iter() {
                for (path, message) in
                    crate::bandwidth::violations(&field(&format!("bandwidth.{name}")), value)
                {
                    self.fail(path, message);
                }
                if let Some(conditions) = &value.conditions {
                    self.conditions(&field(&format!("bandwidth.{name}.conditions")), conditions);
                }
            }
            if bandwidth.read_near_partition.is_some() && kind != ElementKind::L2 {
                self.fail(
                    field("bandwidth.read_near_partition"),
                    "only the L2 has partitions",
                );
            }
        }
        if let Some(geometry) = &element.geometry {
            for (name, count) in [
                ("associativity", geometry.associativity),
                ("sets", geometry.sets),
            ] {
                if count.is_some_and(|c| c.value == 0) {
                    self.fail(field(&format!("geometry.{name}")), "must be at least 1");
                }
            }
        }
        if element.global_loads_cached.is_some() && kind != ElementKind::L1Data {
            self.fail(
                field("global_loads_cached"),
                "only the L1 data cache caches global loads",
            );
        }
        if !element.size_per_carveout.is_empty() && kind != ElementKind::L1Data {
            self.fail(
                field("size_per_carveout"),
                "only the L1 data cache depends on the carveout",
            );
        }
        let mut seen = Vec::new();
        for (i, entry) in element.size_per_carveout.iter().enumerate() {
            let path = format!("{base}.size_per_carveout[{i}]");
            if let Some(percent) = entry.carveout_percent.filter(|&p| p > 100) {
                self.fail(
                    format!("{path}.carveout_percent"),
                    format!("must be at most 100, found {percent}"),
                );
            }
            let key = (
                entry.carveout_percent,
                entry.shared_memory_bytes,
                entry.role,
            );
            if seen.contains(&key) {
                self.fail(
                    format!("{path}.shared_memory_bytes"),
                    "this configuration appears twice".to_string(),
                );
            }
            seen.push(key);
            self.size(&format!("{path}.l1_size"), &entry.l1_size);
        }
        if let Some(geometry) = &element.geometry {
            self.geometry(&field("geometry"), kind, element, geometry);
        }
        if let Some(partitions) = &element.partitions {
            if kind != ElementKind::L2 {
                self.fail(field("partitions"), "only the L2 cache has partitions");
            }
            let path = field("partitions");
            let count = partitions.count.map_or(u32::MAX, |c| c.value);
            if let Some((sm, p)) = partitions
                .sm_partition
                .iter()
                .enumerate()
                .find_map(|(sm, p)| p.filter(|&p| p >= count).map(|p| (sm, p)))
            {
                self.fail(
                    format!("{path}.sm_partition[{sm}]"),
                    format!("partition {p} of {count}"),
                );
            }
            if partitions.count.is_some_and(|c| c.value > MAX_COUNT) {
                self.fail(format!("{path}.count"), "beyond any GPU's partition count");
            }
            if let Some(map) = &partitions.address_map {
                self.address_map(&format!("{path}.address_map"), map);
            }
            if let Some(ways) = &partitions.ways {
                self.l2_ways(&format!("{path}.ways"), ways);
            }
            if partitions.count.is_some_and(|c| c.value == 0) {
                self.fail(format!("{path}.count"), "must be at least 1");
            }
            if let Some(each) = &partitions.size_each {
                self.size(&format!("{path}.size_each"), each);
                let total = element
                    .size
                    .as_ref()
                    .and_then(|s| s.bound.upper())
                    .or(topology.device.l2_bytes);
                if let Some(total) = total {
                    let count = partitions.count.map_or(1, |c| u64::from(c.value));
                    let lower = each.bound.lower().0.saturating_mul(count);
                    if lower > total.0 {
                        self.fail(
                            format!("{path}.size_each"),
                            format!(
                                "{count} partition(s) of {} add up to more than the L2 total ({total})",
                                each.bound.lower()
                            ),
                        );
                    }
                }
            }
            if let Some(far) = &partitions.far_size {
                self.size(&format!("{path}.far_size"), far);
                let total = element
                    .size
                    .as_ref()
                    .and_then(|s| s.bound.upper())
                    .or(topology.device.l2_bytes);
                let near = partitions
                    .size_each
                    .as_ref()
                    .map_or(0, |each| each.bound.lower().0);
                if let Some(total) = total {
                    if far.bound.lower().0.saturating_add(near) > total.0 {
                        self.fail(
                            format!("{path}.far_size"),
                            format!(
                                "the far side ({}) and the near partition add up to more than the L2 total ({total})",
                                far.bound.lower()
                            ),
                        );
                    }
                }
            }
            if let Some(near) = &partitions.near_latency {
                self.latency(&format!("{path}.near_latency"), near);
            }
            if let Some(far) = &partitions.far_latency {
                self.latency(&format!("{path}.far_latency"), far);
            }
            if let (Some(near), Some(far)) = (&partitions.near_latency, &partitions.far_latency) {
                if near.mean.0 > far.mean.0 {
                    self.fail(
                        format!("{path}.far_latency.mean"),
                        format!(
                            "the far partition ({}) is faster than the near one ({})",
                            far.mean, near.mean
                        ),
                    );
                }
            }
        }
    }
}

impl Checker {
    /// Sets and ways are positive; where the mapping is not hashed, sets × ways × line is
    /// the capacity they were measured at (the geometry's, else the element's size; the
    /// L1's own size is at another configuration, so it needs the geometry's).
    fn geometry(
        &mut self,
        path: &str,
        kind: ElementKind,
        element: &Element,
        geometry: &crate::model::CacheGeometry,
    ) {
        for (name, count) in [
            ("sets", geometry.sets),
            ("associativity", geometry.associativity),
        ] {
            if count.is_some_and(|c| c.value == 0) {
                self.fail(format!("{path}.{name}"), "must be at least 1");
            }
        }
        if let Some(size) = &geometry.size {
            self.size(&format!("{path}.size"), size);
        }
        if let Some(line) = &geometry.line_size {
            self.size(&format!("{path}.line_size"), line);
        }
        if matches!(
            geometry.set_mapping,
            Some(crate::model::SetMapping::Hashed { .. })
        ) {
            return;
        }
        let exact = |s: Option<&crate::Size>| s.and_then(|s| s.bound.exact());
        let line = exact(geometry.line_size.as_ref()).or(exact(element.line_size.as_ref()));
        let size = exact(geometry.size.as_ref()).or(if kind == ElementKind::L1Data {
            None
        } else {
            exact(element.size.as_ref())
        });
        if let (Some(sets), Some(ways), Some(line), Some(size)) =
            (geometry.sets, geometry.associativity, line, size)
        {
            let product = u64::from(sets.value) * u64::from(ways.value) * line.0;
            if product != size.0 {
                self.fail(
                    format!("{path}.sets"),
                    format!(
                        "{} sets × {} ways × {} B = {product} B, not the {} B capacity (a hashed mapping is exempt)",
                        sets.value, ways.value, line.0, size.0
                    ),
                );
            }
        }
    }
}

fn looks_like_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 10
        && bytes[..10].iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// Every violation in `topology`, in document order.
pub(crate) fn violations(topology: &Topology) -> Vec<Violation> {
    let mut check = Checker {
        violations: Vec::new(),
    };
    if topology.schema_version.major != SchemaVersion::CURRENT.major {
        check.fail(
            "schema_version",
            format!(
                "major version {} is not {}",
                topology.schema_version.major,
                SchemaVersion::CURRENT.major
            ),
        );
    }
    if topology.schema_version.major == SchemaVersion::CURRENT.major
        && topology.schema_version > SchemaVersion::CURRENT
    {
        check.fail(
            "schema_version",
            format!(
                "{} is newer than {}, the newest this version knows",
                topology.schema_version,
                SchemaVersion::CURRENT
            ),
        );
    }
    if let Some(Err(message)) = topology.clusters.as_ref().map(|c| c.check()) {
        check.fail("clusters", message);
    }
    if let Some(copies) = &topology.copies_to_shared {
        if let Err(message) = copies.check() {
            check.fail("copies_to_shared", message);
        }
        for (i, path) in copies.paths.iter().enumerate() {
            for (j, size) in path.sizes.iter().enumerate() {
                if let Some(latency) = &size.latency {
                    check.latency(
                        &format!("copies_to_shared.paths[{i}].sizes[{j}].latency"),
                        latency,
                    );
                }
            }
        }
    }
    let device = &topology.device;
    if device.name.trim().is_empty() {
        check.fail("device.name", "must not be empty");
    }
    if device.sm_count == 0 {
        check.fail("device.sm_count", "a GPU has at least one SM");
    }
    for (name, clock) in [
        ("sm_clock_mhz", device.sm_clock_mhz),
        ("memory_clock_mhz", device.memory_clock_mhz),
    ] {
        if let Some(clock) = clock {
            check.positive_finite(format!("device.{name}"), clock.0);
        }
    }
    check.conditions("conditions", &topology.conditions);
    check.sections(&topology.sections);
    for (kind, element) in topology.elements.iter() {
        check.element(topology, kind, element);
    }
    check_backing_cycles(&mut check, topology);
    let mut grouped: Vec<ElementKind> = Vec::new();
    for (i, group) in topology.shared_physical_caches.iter().enumerate() {
        let path = format!("shared_physical_caches[{i}].members");
        if group.members.len() < 2 {
            check.fail(
                path.clone(),
                "a shared physical cache has at least two logical caches",
            );
        }
        for member in &group.members {
            if grouped.contains(member) {
                check.fail(
                    path.clone(),
                    format!("{} appears in more than one group", member.key()),
                );
            }
            grouped.push(*member);
            if !member.is_per_sm() {
                check.fail(
                    path.clone(),
                    format!("{} is not an SM-private cache", member.key()),
                );
            }
        }
    }
    for (i, level) in topology.tlb.iter().enumerate() {
        let path = format!("tlb[{i}]");
        if level.level == 0 {
            check.fail(format!("{path}.level"), "levels count from 1");
        }
        if level.entries == Some(0) {
            check.fail(format!("{path}.entries"), "a level holds at least one page");
        }
        if let Some(k) = level.interleave {
            if k < 2 || level.entries.is_some_and(|e| e % k != 0) {
                check.fail(
                    format!("{path}.interleave"),
                    format!("{k} groups: at least 2, dividing the entries"),
                );
            }
        }
        if let Some(coverage) = &level.coverage {
            check.size(&format!("{path}.coverage"), coverage);
            if let Some(page) = &level.page_size {
                check.fits(
                    &format!("{path}.page_size"),
                    page,
                    "page size",
                    coverage,
                    "coverage",
                );
            }
        }
        if let Some(page) = &level.page_size {
            check.size(&format!("{path}.page_size"), page);
        }
        if let Some(latency) = &level.miss_latency {
            check.latency(&format!("{path}.miss_latency"), latency);
        }
    }
    let mut before: Option<&crate::model::InstructionCacheLevel> = None;
    for (i, level) in topology.instruction_caches.iter().enumerate() {
        let path = format!("instruction_caches[{i}]");
        if usize::from(level.level) != i + 1 {
            check.fail(
                format!("{path}.level"),
                "levels count from 1, nearest first",
            );
        }
        let cpi = level.cycles_per_instruction;
        if !(cpi.is_finite() && cpi > 0.0) {
            check.fail(
                format!("{path}.cycles_per_instruction"),
                format!("must be positive and finite, found {cpi}"),
            );
        }
        if let Some(size) = &level.size {
            check.size(&format!("{path}.size"), size);
        }
        if let Some(b) = before {
            if b.size.is_none() {
                check.fail(path.clone(), "only the last level may lack a size");
            }
            if cpi <= b.cycles_per_instruction {
                check.fail(
                    format!("{path}.cycles_per_instruction"),
                    "a farther level costs more per instruction",
                );
            }
            if let (Some(near), Some(far)) = (&b.size, &level.size) {
                if far.bound.lower() <= near.bound.lower() {
                    check.fail(format!("{path}.size"), "a farther level holds more code");
                }
            }
        }
        before = Some(level);
    }
    for (i, note) in topology.notes.iter().enumerate() {
        if note.message.trim().is_empty() {
            check.fail(format!("notes[{i}].message"), "must not be empty");
        }
    }
    if let Some(run) = &topology.run {
        if run.date_utc.as_deref().is_some_and(|d| !looks_like_date(d)) {
            check.fail("run.date_utc", "must start with a date, YYYY-MM-DD");
        }
        if run.busy && run.busy_reasons.is_empty() {
            check.fail("run.busy_reasons", "a busy run says why it was busy");
        }
        for (side, state) in [("before", &run.before), ("after", &run.after)] {
            let Some(state) = state else { continue };
            for (name, value) in [
                ("power_w", state.power_w),
                ("power_limit_w", state.power_limit_w),
            ] {
                if let Some(value) = value {
                    if !value.is_finite() || value < 0.0 {
                        check.fail(
                            format!("run.{side}.{name}"),
                            "must be a finite, non-negative number",
                        );
                    }
                }
            }
        }
    }
    check.violations
}

fn check_backing_cycles(check: &mut Checker, topology: &Topology) {
    for (start, _) in topology.elements.iter() {
        let mut current = start;
        // A chain longer than the number of kinds must revisit one.
        for _ in 0..ElementKind::ALL.len() {
            match topology.element(current).and_then(|e| e.backed_by) {
                Some(next) if next == start => {
                    check.fail(
                        format!("elements.{}.backed_by", start.key()),
                        "the backing chain returns to this element",
                    );
                    break;
                }
                Some(next) => current = next,
                None => break,
            }
        }
    }
}
