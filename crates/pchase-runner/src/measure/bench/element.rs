//! An element's part of the topology as the cache and memory benchmarks measure it: its
//! sizes (with the carveout table and its checks for the L1), lines, latency, latency
//! levels and failures, and whether the L1 caches global loads.

use topology::{
    Bytes, CarveoutL1Size, CarveoutRole, ChangePointEvidence, Conditions, ElementKind, Latency,
    Note, NoteSeverity, Provenance, QuantityKind, Size, Topology,
};

use crate::{
    backend::Carveout,
    measure::{
        carveout::Role, ElementResult, LineFinding, Measurements, SizeAtCarveout, SizeFinding,
    },
};

fn carveout_percent(carveout: Carveout) -> Option<u8> {
    match carveout {
        Carveout::Percent(p) => Some(p),
        Carveout::DriverDefault => None,
    }
}

fn size_of(finding: &SizeFinding, at: &SizeAtCarveout) -> Size {
    let remark = match (at.role, at.config_bytes) {
        (_, Some(config)) => format!(
            "the {} KiB shared-memory configuration, forced by {} B of dynamic shared memory per block at carveout 0 %",
            config / 1024,
            at.reserved_shared_bytes
        ),
        (Role::DriverDefault, None) => {
            "carveout left to the driver, no shared memory".to_string()
        }
        (_, None) => "carveout 0 %, no shared memory".to_string(),
    };
    let conditions = Conditions {
        shared_memory_carveout_percent: carveout_percent(at.carveout),
        remark: Some(remark),
        ..Conditions::default()
    };
    match finding {
        SizeFinding::Exact {
            bytes,
            resolution,
            decision,
        } => Size::measured(
            Bytes(*bytes),
            ChangePointEvidence {
                method: Some(
                    "geometric mapping + exact single change point (L2) + two-sample KS".into(),
                ),
                statistic: Some(decision.statistic),
                p_value: Some(decision.p_value),
                confidence: None,
                resolution: Some(Bytes(*resolution)),
            },
        )
        .with_conditions(conditions),
        SizeFinding::AtLeast { bytes, .. } => {
            Size::at_least(Bytes(*bytes), Provenance::Benchmark).with_conditions(conditions)
        }
    }
}

/// Writes one element's sizes (with the carveout table's rows and their checks where
/// `carveout_table`), lines, latency, latency levels and failures.
pub(crate) fn write_element(
    topo: &mut Topology,
    kind: ElementKind,
    result: &ElementResult,
    carveout_table: bool,
) {
    let note = |severity, quantity, message| Note {
        severity,
        element: Some(kind),
        quantity,
        message,
    };
    let mut notes: Vec<Note> = Vec::new();
    let entry = topo.element_mut(kind);
    if let Some(first) = result.sizes.first() {
        entry.set_size(size_of(&first.finding, first));
    }
    for s in &result.sizes {
        let size = size_of(&s.finding, s);
        if let SizeFinding::AtLeast { reason, .. } = &s.finding {
            notes.push(note(
                NoteSeverity::Warning,
                Some(QuantityKind::Size),
                format!("only a lower bound: {reason}"),
            ));
        }
        if !carveout_table || result.sizes.len() < 2 {
            continue;
        }
        let role = match s.role {
            Role::LargestL1 => CarveoutRole::LargestL1,
            Role::DriverDefault => CarveoutRole::DriverDefault,
            Role::Config => CarveoutRole::Configuration,
        };
        entry.set_size_at_carveout(CarveoutL1Size {
            carveout_percent: carveout_percent(s.carveout),
            shared_memory_bytes: s.config_bytes.map(Bytes),
            kernel_shared_bytes: Some(Bytes(u64::from(s.reserved_shared_bytes))),
            role: Some(role),
            l1_size: size,
        });
    }
    let configs = if carveout_table {
        result.config_rows()
    } else {
        Vec::new()
    };
    // Which configuration the driver's default is: the one whose L1 it equals (to 1 KiB).
    let default_l1 = result
        .sizes
        .iter()
        .find_map(|s| match (&s.role, &s.finding) {
            (Role::DriverDefault, SizeFinding::Exact { bytes, .. }) => Some(*bytes),
            _ => None,
        });
    if let Some(default_l1) = default_l1 {
        let same: Vec<u64> = configs
            .iter()
            .filter(|(_, l1)| l1.abs_diff(default_l1) <= 1024)
            .map(|(c, _)| c / 1024)
            .collect();
        if let [config] = same[..] {
            notes.push(note(
                NoteSeverity::Info,
                Some(QuantityKind::Size),
                format!(
                    "the driver's default for a kernel without shared memory is the {config} KiB configuration: its L1 ({:.2} KiB) equals that row's; the largest L1 any kernel gets is the first row's",
                    default_l1 as f64 / 1024.0
                ),
            ));
        }
    }
    // The proof from above: between neighbouring configurations the L1 shrinks by their
    // step, so each ran with the configuration its shared bytes forced.
    let checks = crate::measure::carveout::step_checks(&configs);
    if !checks.is_empty() {
        let bad: Vec<String> = checks
            .iter()
            .filter(|c| !c.agrees)
            .map(|c| {
                format!(
                    "{} → {} KiB: the L1 shrank by {:.2} KiB",
                    c.from_config / 1024,
                    c.to_config / 1024,
                    c.l1_shrank as f64 / 1024.0
                )
            })
            .collect();
        let store: Vec<String> = configs
            .iter()
            .map(|(c, l1)| format!("{:.2}", (c + l1) as f64 / 1024.0))
            .collect();
        if bad.is_empty() {
            notes.push(note(
                NoteSeverity::Info,
                Some(QuantityKind::Size),
                format!(
                    "every shared-memory configuration was in force as forced: between neighbours the L1 shrinks by their step; L1 + shared = {} KiB",
                    store.join(", ")
                ),
            ));
        } else {
            notes.push(note(
                NoteSeverity::Warning,
                Some(QuantityKind::Size),
                format!(
                    "a configuration may not have been the one forced: {} (L1 + shared = {} KiB)",
                    bad.join("; "),
                    store.join(", ")
                ),
            ));
        }
    }
    // The share of observations that agreed with the value is its confidence.
    let agreed = |line: &LineFinding, method: &str| {
        Size::exact(Bytes(line.bytes), Provenance::Benchmark).with_evidence(ChangePointEvidence {
            method: Some(method.into()),
            confidence: Some(line.agreement),
            ..ChangePointEvidence::default()
        })
    };
    if let Some(line) = &result.line {
        entry.set_fetch_granularity(agreed(
            line,
            "spacing of misses in a 4-byte-stride chase (confidence: share of spacings equal to it)",
        ));
    }
    if let Some(line) = &result.line_bytes {
        entry.set_line_size(agreed(
            line,
            "runs of misses after an eviction (confidence: share of runs of this length)",
        ));
    }
    if let Some(latency) = result.latency {
        entry.set_latency(Latency::measured(latency));
    }
    if result.latency_levels.len() > 1 {
        let levels: Vec<String> = result
            .latency_levels
            .iter()
            .map(|m| {
                format!(
                    "p50 {:.0} (p5 {:.0}, p95 {:.0}) cycles for {:.0} % of the loads",
                    m.distribution.p50,
                    m.distribution.p5,
                    m.distribution.p95,
                    100.0 * m.share
                )
            })
            .collect();
        notes.push(note(
            NoteSeverity::Info,
            Some(QuantityKind::Latency),
            format!(
                "the latency samples have {} levels: {}; the latency reported is the fastest (through the SM's own L2 partition, where the L2 has several)",
                levels.len(),
                levels.join("; ")
            ),
        ));
    }
    for failure in &result.failures {
        notes.push(note(NoteSeverity::NotMeasured, None, failure.clone()));
    }
    for n in notes {
        topo.add_note(n);
    }
}

/// The global-load caching decision, with a note where the L1 does not cache.
pub(crate) fn global_caching(measured: &Measurements, topo: &mut Topology) {
    if let Some(caches) = measured.l1_caches_global_loads {
        topo.element_mut(ElementKind::L1Data)
            .set_global_loads_cached(caches);
        if !caches {
            topo.add_note(Note {
                severity: NoteSeverity::Info,
                element: Some(ElementKind::L1Data),
                quantity: None,
                message: "the L1 does not cache global loads on this GPU (`ld.global.ca` loads take as long as L2 hits): it has no size on that path; texture and read-only loads are measured on their own".into(),
            });
        }
    }
}
