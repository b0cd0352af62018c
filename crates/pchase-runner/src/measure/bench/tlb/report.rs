//! The TLB searches in the topology: the levels, and notes on what each allocation's walks
//! found or bound, the span one entry maps and the order test that confirmed it, how the
//! two allocations compare, and whether the L1 path's hits are translated.

use topology::{Note, NoteSeverity, Topology};

use crate::{
    backend::LoadPath,
    measure::tlb::{self, RejectedRise, TlbSearch},
    walk::WalkAllocation,
};

/// The levels of `search` into the topology.
pub(super) fn levels(topo: &mut Topology, search: &TlbSearch) {
    topo.tlb.extend(super::tlb_levels(search));
}

/// What the allocation's walks were: the words every note of it starts with.
fn walked(search: &TlbSearch) -> String {
    let region = &search.region;
    let how = match (region.allocation, region.chunk_bytes) {
        (WalkAllocation::Chunked, Some(chunk)) => {
            format!(
                "{} in separately mapped chunks of {}",
                human(region.bytes),
                human(chunk)
            )
        }
        _ => format!("one cuMemAlloc of {}", human(region.bytes)),
    };
    format!("TLB on the {} path, {how}", search.path)
}

/// A note of `message` with `severity`, for no element.
fn note(severity: NoteSeverity, message: String) -> Note {
    Note {
        severity,
        element: None,
        quantity: None,
        message,
    }
}

/// The note on a rise that was not a translation level: where it rose, where it did not
/// repeat, the walk over as many bytes at the next smaller stride where one stayed flat,
/// and the L2's far-hit median (`far_p50`, where the session measured it) to compare.
fn rejected_note(search: &TlbSearch, r: &RejectedRise, far_p50: Option<f64>) -> Note {
    let head = walked(search);
    let mut message = format!(
        "{head}: a rise at {} nodes of {} stride to p50 {:.0} cycles (p5 {:.0} -> {:.0})",
        r.nodes,
        human(r.stride),
        r.after_p50,
        r.before_cycles,
        r.after_cycles
    );
    match r.retried_stride {
        Some(retried) => message.push_str(&format!(
            " did not repeat at {} stride with the same nodes",
            human(retried)
        )),
        None => message.push_str(" repeated at no smaller stride"),
    }
    match &r.order {
        Some(check) => message.push_str(&format!(", and {}", order_words(check))),
        None => {
            message.push_str(", and the walks at larger strides over as many bytes did not rise")
        }
    }
    // The next smaller stride's largest flat walk, where it covered the rising walk's bytes
    // (as many pages of the rising stride: a page of exactly that stride is excluded too).
    let rising_bytes = r.nodes * tlb::step_bytes(r.stride);
    if let Some(w) = search
        .finding
        .flat
        .iter()
        .find(|w| w.stride == r.stride / 2 && w.bytes >= rising_bytes)
    {
        message.push_str(&format!(
            "; {} nodes of {} over {} did not rise either",
            w.nodes,
            human(w.stride),
            human(w.bytes)
        ));
    }
    message.push_str(": not translation");
    if let Some(far) = far_p50 {
        message.push_str(&format!(" (the L2's far-hit level is p50 {far:.0} cycles)"));
    }
    note(NoteSeverity::Info, message)
}

/// The honest bound where rises were rejected and no level found: the largest walk without
/// a rise at each stride.
fn flat_note(search: &TlbSearch) -> Option<Note> {
    let f = &search.finding;
    if !f.levels.is_empty() || f.rejected.is_empty() || f.flat.is_empty() {
        return None;
    }
    let walks: Vec<String> = f
        .flat
        .iter()
        .map(|w| format!("{} × {} ({})", w.nodes, human(w.stride), human(w.bytes)))
        .collect();
    let pages = match search.region.chunk_bytes {
        Some(chunk) => {
            let most = f
                .flat
                .iter()
                .filter(|w| w.stride >= chunk)
                .map(|w| w.nodes)
                .max()
                .unwrap_or(0);
            format!(
                "walks of up to {most} pages of at most {} (one chunk each)",
                human(chunk)
            )
        }
        None => {
            let bytes = f.flat.iter().map(|w| w.bytes).max().unwrap_or(0);
            format!("walks over up to {}", human(bytes))
        }
    };
    Some(note(
        NoteSeverity::Info,
        format!(
            "{}: no translation level in {pages}; the largest walk without a rise per stride: {}",
            walked(search),
            walks.join(", ")
        ),
    ))
}

/// The notes of every search: its rejected rises, its bound, its page size (measured or
/// not), and per allocation whether the L1 path's hits are translated. `far_p50`: the L2's
/// far-hit median, cycles, where the session measured it.
pub(super) fn notes(topo: &mut Topology, searches: &[TlbSearch], far_p50: Option<f64>) {
    for search in searches {
        let f = &search.finding;
        let head = walked(search);
        for r in &f.rejected {
            topo.notes.push(rejected_note(search, r, far_p50));
        }
        if let Some(n) = flat_note(search) {
            topo.notes.push(n);
        }
        if let Some(n) = span_note(search) {
            topo.notes.push(n);
        }
        if let (Some(pages), Some(bytes), true) = (
            f.bound_pages,
            f.bound_bytes,
            f.rejected.is_empty() || !f.levels.is_empty(),
        ) {
            let what = if f.levels.is_empty() {
                "no translation level overflowed".to_owned()
            } else {
                format!("no level after level {} overflowed", f.levels.len())
            };
            topo.notes.push(note(
                NoteSeverity::Info,
                format!(
                    "{head}: {what} in walks up to {pages} nodes over {}, the largest the region and the data limits allowed",
                    human(bytes)
                ),
            ));
        }
    }
    for path in [LoadPath::GlobalCg, LoadPath::GlobalCa] {
        if let Some(n) = allocations_note(searches, path) {
            topo.notes.push(n);
        }
    }
    for allocation in WalkAllocation::ALL {
        let of = |path| search_of(searches, path, allocation);
        let (Some(l2), Some(l1)) = (of(LoadPath::GlobalCg), of(LoadPath::GlobalCa)) else {
            continue;
        };
        let Some(first) = l2.finding.levels.first() else {
            continue;
        };
        let overflow = first.entries.map(|e| e + 1);
        if l1.finding.levels.is_empty()
            && overflow.is_some_and(|o| l1.finding.bound_pages.is_some_and(|b| b >= o))
        {
            topo.notes.push(note(
                NoteSeverity::Info,
                format!(
                    "TLB, {allocation} allocation: the L1 path's walks of up to {} nodes never rose, although the L2 path's level 1 overflows at {} pages: loads that hit the L1 are not translated (the L1 is virtually tagged); the L1 path can show a TLB only through L1 misses",
                    l1.finding.bound_pages.unwrap_or(0),
                    overflow.unwrap_or(0)
                ),
            ));
        }
    }
}

/// The search of `path` in `allocation`, where one ran.
fn search_of(
    searches: &[TlbSearch],
    path: LoadPath,
    allocation: WalkAllocation,
) -> Option<&TlbSearch> {
    searches
        .iter()
        .find(|s| s.path == path && s.region.allocation == allocation)
}

/// The order test in words: the same lines in two orders and their 5th percentiles.
fn order_words(check: &tlb::OrderCheck) -> String {
    let span = check.stride * check.group;
    format!(
        "the same {} lines {} apart read p5 {:.0} cycles in address order and {:.0} when one line of each {} range was visited in turn (groups of {})",
        check.nodes,
        human(check.stride),
        check.sequential,
        check.grouped,
        human(span),
        check.group
    )
}

/// Level 1's entry span (measured, or why not) and the order test that confirmed it.
fn span_note(search: &TlbSearch) -> Option<Note> {
    let f = &search.finding;
    f.levels.first()?;
    let head = walked(search);
    let confirmed = match &f.order_check {
        Some(check) => format!("; confirmed as translation: {}", order_words(check)),
        None => "; not confirmed by the order test (its walks did not fit the limits)".into(),
    };
    Some(match f.entry_bytes {
        Some(span) => {
            let pages = match search.region.chunk_bytes {
                Some(chunk) if span > chunk => format!(
                    "; more than one page of at most {}: an entry maps an aligned {} range of virtual addresses whatever its pages",
                    human(chunk),
                    human(span)
                ),
                _ => String::new(),
            };
            note(
                NoteSeverity::Info,
                format!(
                    "{head}: one level-1 entry maps {} (the smallest stride whose walks overflow level 1 at the same number of nodes){pages}{confirmed}",
                    human(span)
                ),
            )
        }
        None => note(
            NoteSeverity::Warning,
            format!(
                "{head}: the span of a level-1 entry is not determined: at least the largest stride that moved level 1's overflow, at most {} (the largest stride tried); reaches are the walks' bytes{confirmed}",
                human(tlb::STRIDES[tlb::STRIDES.len() - 1])
            ),
        ),
    })
}

/// How the two allocations' level 1 on `path` compare. The same entries and span in one
/// `cuMemAlloc` and in separately mapped chunks: the level is keyed by virtual address and
/// the walks cannot tell the driver's page size (the H100 of session 8: 16 entries of
/// 16 MiB in both, over 2 MiB chunks). A level in one allocation only, where the other's
/// walks went past its overflow, is a difference worth a note (e.g. large pages that
/// chunks cannot form).
fn allocations_note(searches: &[TlbSearch], path: LoadPath) -> Option<Note> {
    let of = |allocation| search_of(searches, path, allocation);
    let (plain, chunked) = (of(WalkAllocation::Plain)?, of(WalkAllocation::Chunked)?);
    let chunk = chunked.region.chunk_bytes.map(human).unwrap_or_default();
    let level = |s: &TlbSearch| s.finding.levels.first().and_then(|l| l.entries);
    match (level(plain), level(chunked)) {
        (Some(a), Some(b)) if a == b && plain.finding.entry_bytes == chunked.finding.entry_bytes => {
            let span = plain.finding.entry_bytes.map(human).unwrap_or_default();
            Some(note(
                NoteSeverity::Info,
                format!(
                    "TLB on the {path} path: level 1 is the same in one cuMemAlloc and in separately mapped chunks of {chunk} ({a} entries of {span}): it is keyed by virtual address, so these walks cannot tell the page size the driver uses for cuMemAlloc"
                ),
            ))
        }
        (Some(a), None) => chunked.finding.bound_pages.filter(|&b| b > a).map(|b| {
            note(
                NoteSeverity::Info,
                format!(
                    "TLB on the {path} path: level 1 of one cuMemAlloc ({a} entries) does not show in separately mapped chunks of {chunk}, whose walks went to {b} nodes: it needs memory the chunks do not give (e.g. pages larger than a chunk)"
                ),
            )
        }),
        (None, Some(b)) => plain.finding.bound_pages.filter(|&p| p > b).map(|p| {
            note(
                NoteSeverity::Info,
                format!(
                    "TLB on the {path} path: level 1 of separately mapped chunks of {chunk} ({b} entries) does not show in one cuMemAlloc, whose walks went to {p} nodes: the plain allocation's larger pages need fewer entries"
                ),
            )
        }),
        _ => None,
    }
}

/// Bytes in KiB, MiB or GiB.
pub(super) fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b => format!("{:.1} KiB", b as f64 / 1024.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::tlb;
    use crate::measure::tlb::{TlbFinding, TlbLevelFinding};
    use crate::walk::WalkRegion;

    fn search(path: LoadPath, levels: Vec<TlbLevelFinding>, bound: u64) -> TlbSearch {
        TlbSearch {
            path,
            region: WalkRegion {
                allocation: WalkAllocation::Plain,
                bytes: 74 << 30,
                chunk_bytes: None,
            },
            finding: TlbFinding {
                entry_bytes: (!levels.is_empty()).then_some(16 << 20),
                order_check: None,
                levels,
                bound_pages: Some(bound),
                bound_bytes: Some(bound << 29),
                rejected: Vec::new(),
                flat: Vec::new(),
                probes: 4,
            },
        }
    }

    fn level(entries: u64) -> TlbLevelFinding {
        TlbLevelFinding {
            entries: Some(entries),
            reach_bytes: entries << 29,
            miss_cycles: 40.0,
            before_cycles: 300.0,
            after_cycles: 340.0,
            miss: None,
        }
    }

    fn untranslated(searches: &[TlbSearch]) -> bool {
        let mut topo = Topology::new(topology::DeviceInfo::new(
            "GPU",
            topology::ComputeCapability::new(9, 0),
            132,
        ));
        notes(&mut topo, searches, None);
        topo.notes
            .iter()
            .any(|n| n.message.contains("hit the L1 are not translated"))
    }

    #[test]
    fn l1_hits_are_called_untranslated_only_where_the_l1_walks_went_past_the_l2_level() {
        let l2 = search(LoadPath::GlobalCg, vec![level(16)], 140);
        assert!(untranslated(&[
            l2.clone(),
            search(LoadPath::GlobalCa, vec![], 73)
        ]));
        // The L1 path's walks stopped before the L2 path's level overflowed: no claim.
        assert!(!untranslated(&[
            l2.clone(),
            search(LoadPath::GlobalCa, vec![], 12)
        ]));
        // The L1 path saw a level itself: no claim.
        assert!(!untranslated(&[
            l2,
            search(LoadPath::GlobalCa, vec![level(16)], 140)
        ]));
    }

    #[test]
    fn the_allocations_are_compared_where_both_walked_far_enough() {
        let plain = search(LoadPath::GlobalCg, vec![level(16)], 4735);
        let mut chunked = search(LoadPath::GlobalCg, vec![level(16)], 37871);
        chunked.region.allocation = WalkAllocation::Chunked;
        chunked.region.chunk_bytes = Some(2 << 20);
        let said = |searches: &[TlbSearch]| {
            allocations_note(searches, LoadPath::GlobalCg).map(|n| (n.severity, n.message))
        };
        // The H100 of session 8: the same level in both, keyed by virtual address.
        let (severity, same) = said(&[plain.clone(), chunked.clone()]).unwrap();
        assert_eq!(severity, NoteSeverity::Info);
        assert!(same.contains("the same in one cuMemAlloc and in separately mapped chunks of 2.0 MiB (16 entries of 16.0 MiB)"), "{same}");
        // Different spans are no match.
        let mut other = chunked.clone();
        other.finding.entry_bytes = Some(2 << 20);
        assert!(said(&[plain.clone(), other]).is_none());
        // A plain level the chunks went past without seeing it.
        let mut none = chunked.clone();
        none.finding.levels.clear();
        let (_, only) = said(&[plain.clone(), none.clone()]).unwrap();
        assert!(only.contains("does not show in separately mapped chunks of 2.0 MiB, whose walks went to 37871 nodes"), "{only}");
        // ... or stopped short of its overflow: nothing to say.
        none.finding.bound_pages = Some(16);
        assert!(said(&[plain.clone(), none]).is_none());
        assert!(said(&[plain]).is_none());
    }

    #[test]
    fn the_span_note_says_an_entry_maps_more_than_a_chunk_and_how_the_order_confirmed_it() {
        let mut chunked = search(LoadPath::GlobalCg, vec![level(16)], 37871);
        chunked.region.allocation = WalkAllocation::Chunked;
        chunked.region.chunk_bytes = Some(2 << 20);
        chunked.finding.order_check = Some(tlb::OrderCheck {
            stride: 2 << 20,
            group: 8,
            nodes: 136,
            sequential: 261.0,
            grouped: 271.0,
        });
        let n = span_note(&chunked).unwrap();
        assert_eq!(n.severity, NoteSeverity::Info);
        assert!(
            n.message.contains("one level-1 entry maps 16.0 MiB"),
            "{}",
            n.message
        );
        assert!(
            n.message.contains("more than one page of at most 2.0 MiB"),
            "{}",
            n.message
        );
        assert!(n.message.contains("the same 136 lines 2.0 MiB apart read p5 261 cycles in address order and 271 when one line of each 16.0 MiB range was visited in turn (groups of 8)"), "{}", n.message);
        // Without a span: a warning; without an order test: said so.
        chunked.finding.entry_bytes = None;
        chunked.finding.order_check = None;
        let n = span_note(&chunked).unwrap();
        assert_eq!(n.severity, NoteSeverity::Warning);
        assert!(
            n.message.contains("not confirmed by the order test"),
            "{}",
            n.message
        );
        chunked.finding.levels.clear();
        assert!(span_note(&chunked).is_none());
    }

    /// The H100's chunked L2-path search of session 7: a rise at 2207 nodes of 32 MiB that
    /// 16 MiB did not repeat, and the flat walks per stride.
    fn rejected_search(chunked: bool) -> TlbSearch {
        let flat = |stride: u64, nodes: u64| tlb::FlatWalk {
            stride,
            nodes,
            bytes: nodes * tlb::step_bytes(stride),
        };
        TlbSearch {
            path: LoadPath::GlobalCg,
            region: WalkRegion {
                allocation: if chunked {
                    WalkAllocation::Chunked
                } else {
                    WalkAllocation::Plain
                },
                bytes: 74 << 30,
                chunk_bytes: chunked.then_some(2 << 20),
            },
            finding: TlbFinding {
                entry_bytes: None,
                order_check: None,
                levels: vec![],
                bound_pages: Some(4734),
                bound_bytes: Some(4734 * tlb::step_bytes(16 << 20)),
                rejected: vec![RejectedRise {
                    stride: 32 << 20,
                    nodes: 2207,
                    before_cycles: 270.0,
                    after_cycles: 420.0,
                    after_p50: 450.0,
                    retried_stride: Some(16 << 20),
                    order: chunked.then_some(tlb::OrderCheck {
                        stride: 4 << 20,
                        group: 8,
                        nodes: 17656,
                        sequential: 272.0,
                        grouped: 273.0,
                    }),
                }],
                flat: vec![
                    flat(1 << 30, 73),
                    flat(32 << 20, 2206),
                    flat(16 << 20, 4734),
                    flat(1 << 20, 2290),
                ],
                probes: 40,
            },
        }
    }

    fn messages(searches: &[TlbSearch], far: Option<f64>) -> Vec<String> {
        let mut topo = Topology::new(topology::DeviceInfo::new(
            "GPU",
            topology::ComputeCapability::new(9, 0),
            132,
        ));
        notes(&mut topo, searches, far);
        assert!(topo.tlb.is_empty());
        topo.notes.into_iter().map(|n| n.message).collect()
    }

    #[test]
    fn a_rejected_rise_is_a_note_with_the_far_level_and_the_bound_per_stride() {
        let m = messages(&[rejected_search(true)], Some(458.0));
        let rise = m
            .iter()
            .find(|n| n.contains("a rise at 2207 nodes"))
            .unwrap();
        assert!(
            rise.contains("of 32.0 MiB stride to p50 450 cycles"),
            "{rise}"
        );
        assert!(rise.contains("did not repeat at 16.0 MiB stride with the same nodes, and the same 17656 lines 4.0 MiB apart read p5 272 cycles in address order and 273 when one line of each 32.0 MiB range was visited in turn"), "{rise}");
        assert!(rise.contains("4734 nodes of 16.0 MiB"), "{rise}");
        assert!(
            rise.contains("not translation (the L2's far-hit level is p50 458 cycles)"),
            "{rise}"
        );
        let bound = m
            .iter()
            .find(|n| n.contains("no translation level"))
            .unwrap();
        assert!(
            bound.contains("walks of up to 4734 pages of at most 2.0 MiB"),
            "{bound}"
        );
        assert!(bound.contains("73 × 1.0 GiB"), "{bound}");
        // No span note and no level-2 wording.
        assert!(
            !m.iter()
                .any(|n| n.contains("entry maps") || n.contains("level 1")),
            "{m:?}"
        );
        // Plain: the larger strides' walks are the evidence; without L2 results no far level.
        let m = messages(&[rejected_search(false)], None);
        let rise = m
            .iter()
            .find(|n| n.contains("a rise at 2207 nodes"))
            .unwrap();
        assert!(
            rise.contains("the walks at larger strides over as many bytes did not rise"),
            "{rise}"
        );
        assert!(rise.ends_with("not translation"), "{rise}");
        let bound = m
            .iter()
            .find(|n| n.contains("no translation level"))
            .unwrap();
        assert!(bound.contains("walks over up to 74.0 GiB"), "{bound}");
    }
}
