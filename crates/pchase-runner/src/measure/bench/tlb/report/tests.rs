//! The TLB notes: untranslated L1 hits, the allocations compared, the span notes and
//! the rejected rises.
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
            backing_bytes: None,
        },
        finding: TlbFinding {
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
        reach_bytes: entries << 24,
        entry_bytes: Some(16 << 20),
        interleave: 1,
        order_check: None,
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
    // As on an H100: the same level in both, keyed by virtual address.
    let (severity, same) = said(&[plain.clone(), chunked.clone()]).unwrap();
    assert_eq!(severity, NoteSeverity::Info);
    assert!(same.contains("the same in one cuMemAlloc and in separately mapped chunks of 2.0 MiB (16 entries of 16.0 MiB)"), "{same}");
    // Different spans are no match.
    let mut other = chunked.clone();
    other.finding.levels[0].entry_bytes = Some(2 << 20);
    assert!(said(&[plain.clone(), other]).is_none());
    // The aliased region's further levels are named.
    let mut aliased = chunked.clone();
    aliased.region.allocation = WalkAllocation::Aliased;
    aliased.region.bytes = 496 << 30;
    aliased.region.chunk_bytes = Some(64 << 20);
    aliased.region.backing_bytes = Some(4 << 30);
    let mut second = level(2240);
    second.entry_bytes = Some(32 << 20);
    let mut third = level(4500);
    third.entry_bytes = Some(64 << 20);
    aliased.finding.levels.extend([second, third]);
    let (_, beyond) = said(&[plain.clone(), chunked.clone(), aliased]).unwrap();
    assert!(beyond.contains("the aliased region's walks over 496.0 GiB found 16 entries of 16.0 MiB, 2240 entries of 32.0 MiB, 4500 entries of 64.0 MiB (level 2 and 3 beyond the reach of walks in the memory)"), "{beyond}");
    // A plain level the chunks went past without seeing it.
    let mut none = chunked.clone();
    none.finding.levels.clear();
    let (_, only) = said(&[plain.clone(), none.clone()]).unwrap();
    assert!(
        only.contains(
            "does not show in separately mapped chunks of 2.0 MiB, whose walks went to 37871 nodes"
        ),
        "{only}"
    );
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
    chunked.finding.levels[0].order_check = Some(tlb::OrderCheck {
        stride: 2 << 20,
        group: 8,
        nodes: 136,
        sequential: 261.0,
        grouped: 271.0,
    });
    let n = span_notes(&chunked, None).remove(0);
    assert_eq!(n.severity, NoteSeverity::Info);
    assert!(
        n.message.contains("one level-1 entry maps 16.0 MiB"),
        "{}",
        n.message
    );
    assert!(
        n.message.contains("more than a page of at most 2.0 MiB"),
        "{}",
        n.message
    );
    assert!(n.message.contains("the same 136 lines 2.0 MiB apart read p5 261 cycles in address order and 271 when one line of each 16.0 MiB range was visited in turn (groups of 8)"), "{}", n.message);
    // Without a span: a warning; without an order test: said so.
    chunked.finding.levels[0].entry_bytes = None;
    chunked.finding.levels[0].order_check = None;
    let n = span_notes(&chunked, None).remove(0);
    assert_eq!(n.severity, NoteSeverity::Warning);
    assert!(
        n.message.contains("not confirmed by the order test"),
        "{}",
        n.message
    );
    // The aliased region determined it for a level of the same reach: an info note.
    let mut aliased = chunked.clone();
    aliased.region.allocation = WalkAllocation::Aliased;
    aliased.finding.levels[0].entry_bytes = Some(16 << 20);
    let n = span_notes(&chunked, Some(&aliased)).remove(0);
    assert_eq!(n.severity, NoteSeverity::Info);
    assert!(
        n.message
            .contains("the aliased region's walks determined it: 16 entries of 16.0 MiB"),
        "{}",
        n.message
    );
    // ... not for another reach.
    aliased.finding.levels[0].reach_bytes *= 2;
    let n = span_notes(&chunked, Some(&aliased)).remove(0);
    assert_eq!(n.severity, NoteSeverity::Warning);
    chunked.finding.levels.clear();
    assert!(span_notes(&chunked, None).is_empty());
}

/// An H100's chunked L2-path search: a rise at 2207 nodes of 32 MiB that
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
            backing_bytes: None,
        },
        finding: TlbFinding {
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
