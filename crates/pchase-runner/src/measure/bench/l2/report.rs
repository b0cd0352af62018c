//! The L2's part of the topology: partition fields, the level and map notes, and the far
//! side checked against the L2's size.

use topology::{
    Bytes, ChangePointEvidence, Conditions, Count, ElementKind, Latency, Note, NoteSeverity,
    Provenance, QuantityKind, Size, Topology,
};

use crate::measure::l2::{L2Findings, LevelKind};

/// The L2's partitions, levels and map: the model's partition fields, and notes with what
/// the model has no field for yet (every level's distribution and shares, the SM map).
/// Writes the L2 findings: partitions, fetch granularity, line and sector.
pub(crate) fn l2_findings(topo: &mut Topology, l2: &L2Findings) {
    l2_partitions(topo, l2);
    if let Some(bytes) = l2.fetch_granularity {
        topo.element_mut(ElementKind::L2)
            .set_fetch_granularity(Size::exact(Bytes(bytes), Provenance::Benchmark));
    }
    type Setter = fn(&mut topology::Element, Size) -> &mut topology::Element;
    // The line's statistic: the share of miss runs aligned to it (the sector has none).
    let line = |line: &crate::measure::l2::L2Line| {
        Size::exact(Bytes(line.bytes), Provenance::Benchmark).with_evidence(ChangePointEvidence {
            method: Some("eviction probe (confidence: share of miss runs aligned to it)".into()),
            confidence: Some(line.agreement),
            ..ChangePointEvidence::default()
        })
    };
    let found: [(Result<Size, &String>, QuantityKind, Setter); 2] = [
        (
            l2.line.as_ref().map(line),
            QuantityKind::LineSize,
            topology::Element::set_line_size,
        ),
        (
            l2.sector
                .as_ref()
                .map(|s| Size::exact(Bytes(s.bytes), Provenance::Benchmark)),
            QuantityKind::SectorSize,
            topology::Element::set_sector_size,
        ),
    ];
    for (result, quantity, set) in found {
        match result {
            Ok(size) => {
                set(topo.element_mut(ElementKind::L2), size);
            }
            Err(why) => topo.add_note(Note {
                severity: NoteSeverity::NotMeasured,
                element: Some(ElementKind::L2),
                quantity: Some(quantity),
                message: format!("L2 {quantity} not measured: {why}"),
            }),
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

/// A note on the L2's partitions.
fn note(topo: &mut Topology, severity: NoteSeverity, message: String) {
    topo.add_note(Note {
        severity,
        element: Some(ElementKind::L2),
        quantity: Some(QuantityKind::Partitions),
        message,
    });
}

fn l2_partitions(topo: &mut Topology, l2: &L2Findings) {
    let levels: Vec<String> = l2
        .levels
        .iter()
        .map(|level| {
            let d = &level.distribution;
            let mut text = format!(
                "{} p50 {:.0} (p5 {:.0}, p95 {:.0}) cycles, at most {:.0} % of the loads",
                level.kind.name(),
                d.p50,
                d.p5,
                d.p95,
                100.0 * level.peak_share()
            );
            if !level.sub_levels.is_empty() {
                let subs: Vec<String> = level
                    .sub_levels
                    .iter()
                    .map(|s| format!("{:.0} ({:.0} %)", s.p50, 100.0 * s.share))
                    .collect();
                text.push_str(&format!(" with sub-levels {}", subs.join(", ")));
            }
            text
        })
        .collect();
    note(
        topo,
        NoteSeverity::Info,
        format!(
            "levels SM {} meets on the L2 path: {}",
            crate::measure::l2::SWEEP_SM,
            levels.join("; ")
        ),
    );
    match &l2.map {
        Ok(map) => {
            let mut groups = vec![format!(
                "the reference's partition: SMs {:?}",
                map.sms_of(0)
            )];
            let other = map.sms_of(1);
            if !other.is_empty() {
                groups.push(format!("the other partition: SMs {other:?}"));
            }
            let unknown = map
                .partition_of_sm
                .iter()
                .enumerate()
                .filter(|(sm, p)| p.is_none() && map.far_share[*sm].is_some())
                .count();
            if unknown > 0 {
                groups.push(format!(
                    "{unknown} SM(s) on a partition this map does not tell apart"
                ));
            }
            note(
                topo,
                NoteSeverity::Info,
                format!(
                    "partition map ({} partition(s), reference SM {}; {}): {}",
                    map.count,
                    map.reference_sm,
                    match map.keeps_copies {
                        Some(true) => "a partition keeps copies of far lines its SMs read",
                        Some(false) => "no partition keeps copies of far lines",
                        None => "one partition",
                    },
                    groups.join("; ")
                ),
            );
        }
        Err(why) => note(
            topo,
            NoteSeverity::NotMeasured,
            format!("partition map not measured: {why}"),
        ),
    }
    if let Some(check) = l2.far_check {
        let (severity, verdict) = if check.agrees {
            (NoteSeverity::Info, "agree")
        } else {
            (NoteSeverity::Warning, "DISAGREE")
        };
        note(
            topo,
            severity,
            format!(
                "far level checked by a second method: far minus near {:.0} cycles in the sweep, {} in the partition map: the two {verdict}",
                check.sweep_penalty,
                check
                    .map_penalty
                    .map_or("none".to_owned(), |p| format!("{p:.0} cycles"))
            ),
        );
    }
    if let (Some((onset, end)), Some(middle)) = (l2.near_transition, l2.near_edge) {
        note(
            topo,
            NoteSeverity::Info,
            format!(
                "near partition overflow in SM {}'s array: near hits keep their full share up to {:.2} MiB, fall to half at {:.2} MiB (the capacity reported) and below a tenth by {:.2} MiB",
                crate::measure::l2::SWEEP_SM,
                mib(onset),
                mib(middle),
                mib(end)
            ),
        );
    }
    if !l2.edge_mismatches.is_empty() {
        let sizes: Vec<String> = l2
            .edge_mismatches
            .iter()
            .map(|u| format!("{:.2} MiB ({})", mib(u.bytes), u.reason))
            .collect();
        note(
            topo,
            NoteSeverity::Info,
            format!(
                "at the capacity edges the 32-warp timed pass and the samples right after it differ (there the mixture's shares change from pass to pass; the levels are those of the samples): {}",
                sizes.join("; ")
            ),
        );
    }
    for unexplained in &l2.unexplained {
        let at = if unexplained.bytes > 0 {
            format!(" at {:.2} MiB", mib(unexplained.bytes))
        } else {
            String::new()
        };
        note(
            topo,
            NoteSeverity::Warning,
            format!("unexplained L2 curve feature{at}: {}", unexplained.reason),
        );
    }
    let total = topo.device.l2_bytes.map(|b| b.0);
    let near_size = near_partition_size(topo, l2, total);
    let partitions = topo.element_mut(ElementKind::L2).partitions_mut();
    // The partitions' latencies are the levels', taken with 32 warps of SM 0 chasing.
    let loaded = || Conditions {
        remark: Some(format!(
            "{} warps of SM {} chasing at once (the element's latency: one warp alone)",
            crate::measure::l2::SWEEP_WARPS,
            crate::measure::l2::SWEEP_SM
        )),
        ..Conditions::default()
    };
    partitions.near_latency = l2
        .level(LevelKind::NearHit)
        .and_then(|near| crate::measure::l2::summary(&near.distribution).ok())
        .map(|s| Latency::measured(s).with_conditions(loaded()));
    partitions.far_latency = l2
        .level(LevelKind::FarHit)
        .and_then(|far| crate::measure::l2::summary(&far.distribution).ok())
        .map(|s| Latency::measured(s).with_conditions(loaded()));
    // The count only from the map's direct measurement (the far share 1 − 1/P), never
    // from the number of latency levels: a far level says there is more than one
    // partition, not how many.
    partitions.count = l2
        .map
        .as_ref()
        .ok()
        .map(|map| Count::new(map.count, Provenance::Benchmark));
    let size = |(bytes, measured_here): (u64, bool)| {
        Size::exact(
            Bytes(bytes),
            if measured_here {
                Provenance::Benchmark
            } else {
                Provenance::Derived
            },
        )
    };
    partitions.size_each = near_size;
    let far_size = match (l2.far_capacity, l2.far_capacity_range) {
        (Some((_, true)), Some((low, high))) => Some(Size::between(
            Bytes(low),
            Bytes(high),
            Provenance::Benchmark,
        )),
        (far, _) => far.map(size),
    };
    // A far side that does not fit beside the near partition in the L2 is no capacity:
    // kept out of the model, with the numbers in a warning.
    let near_bytes = partitions
        .size_each
        .as_ref()
        .map_or(0, |each| each.bound.lower().0);
    partitions.near_keeps_far_copies = l2.keeps_copies;
    if let Ok(map) = &l2.map {
        partitions.sm_partition = map.partition_of_sm.clone();
        partitions.map_reference_sm = Some(map.reference_sm);
    }
    match &l2.address {
        Some(Ok(found)) => {
            partitions.address_map = Some(topology::L2AddressMap {
                bits: found.map.bits.clone(),
                page_bytes: Bytes(found.map.page_bytes),
                fitted_lines: found.map.fitted as u64,
                fit_agreement: found.map.agreement,
                predicted_lines: found.prediction.map(|(_, p)| p.lines as u64),
                predicted_right: found.prediction.map(|(_, p)| p.correct as u64),
                second_reference_sm: found.prediction.map(|(sm, _)| sm),
                pages_learnt: found.prediction.map(|(_, p)| p.pages_learnt as u64),
            });
        }
        Some(Err(why)) => partitions.address_map_not_determined = Some(why.clone()),
        None => {}
    }
    partitions_far_size_checked(topo, far_size, near_bytes, total);
}

/// The near partition's size: between what SM 0's array kept (the near capacity: near hits
/// at half their share) and an equal share of the L2 (its total over the map's P), the
/// share alone where the capacity reached it. One SM's array is not the partition: which
/// sets its lines fill depends on the pages a run gets, and on an H200 near
/// hits fell to half at 28.4 MiB in half the runs and at 32.8 MiB in the others, beyond the
/// 30 MiB two equal partitions hold (the far side held 30–31.4 MiB in both).
fn near_partition_size(topo: &mut Topology, l2: &L2Findings, total: Option<u64>) -> Option<Size> {
    let (bytes, measured) = l2.near_capacity?;
    let provenance = if measured {
        Provenance::Benchmark
    } else {
        Provenance::Derived
    };
    let partitions = l2.partition_count();
    let Some(share) = total.map(|t| t / partitions).filter(|_| measured) else {
        return Some(Size::exact(Bytes(bytes), provenance));
    };
    // The sweep's sizes are whole 128-byte nodes: one node short of the share is the share.
    if bytes + 128 >= share {
        if bytes > share {
            note(
                topo,
                NoteSeverity::Info,
                format!(
                    "near hits of SM {}'s array fell to half only at {:.2} MiB, beyond an equal share of the L2 ({:.2} MiB in {partitions} partition(s)): the partition is reported at that share",
                    crate::measure::l2::SWEEP_SM,
                    mib(bytes),
                    mib(share)
                ),
            );
        }
        return Some(Size::exact(Bytes(share), provenance));
    }
    Some(Size::between(Bytes(bytes), Bytes(share), provenance))
}

/// Sets the L2's far side where it fits beside the near partition in the L2's total;
/// otherwise a warning with the numbers.
fn partitions_far_size_checked(
    topo: &mut Topology,
    far: Option<Size>,
    near_bytes: u64,
    total: Option<u64>,
) {
    let Some(far) = far else { return };
    let low = far.bound.lower().0;
    if total.is_some_and(|t| low.saturating_add(near_bytes) > t) {
        topo.add_note(Note {
            severity: NoteSeverity::Warning,
            element: Some(ElementKind::L2),
            quantity: Some(QuantityKind::Partitions),
            message: format!(
                "far side not reported: at least {low} B beside a near partition of {near_bytes} B exceed the L2's {} B",
                total.unwrap_or(0)
            ),
        });
        return;
    }
    topo.element_mut(ElementKind::L2).partitions_mut().far_size = Some(far);
}
