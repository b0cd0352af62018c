//! The TLB searches in the topology: the levels, and notes on what each allocation's walks
//! found or bound, the page size measured, and whether the L1 path's hits are translated.

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
    match (r.retried_stride, search.region.chunk_bytes) {
        (Some(retried), Some(chunk)) if retried >= chunk => message.push_str(&format!(
            " did not repeat at {} stride with the same nodes (each in its own page of at most {})",
            human(retried),
            human(chunk)
        )),
        (Some(retried), _) => message.push_str(&format!(
            " did not repeat at {} stride with the same nodes, and the walks at larger strides over as many bytes did not rise",
            human(retried)
        )),
        (None, _) => message.push_str(" repeated at no smaller stride"),
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
        match f.page_bytes {
            Some(page) => topo.notes.push(note(
                NoteSeverity::Info,
                format!("{head}: page size {} (the smallest stride whose walks overflow level 1 at the same number of nodes)", human(page)),
            )),
            None if !f.levels.is_empty() => topo.notes.push(note(
                NoteSeverity::Warning,
                format!(
                    "{head}: page size not determined: at least the largest stride that moved level 1's overflow, at most {} (the largest stride tried); reaches are the walks' bytes",
                    human(tlb::STRIDES[tlb::STRIDES.len() - 1])
                ),
            )),
            None => {}
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
    if let Some(n) = unconfirmed_note(searches) {
        topo.notes.push(n);
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

/// The second method's word on the plain allocation's first L2-path level: in separately
/// mapped chunks every node of a walk at a stride of at least the chunk has a page of its
/// own, so a TLB of `E` entries overflows there at `E + 1` nodes as well (sooner, if the
/// plain pages were larger). Where the chunked walks went past that without a level, the
/// plain level is not confirmed (a warning): its rise may be the L2's (the H100 GPU-bd689f88
/// of session 7: "16 entries of 16 MiB, +30 cycles" in one `cuMemAlloc`, nothing in 37871
/// chunks of 2 MiB).
fn unconfirmed_note(searches: &[TlbSearch]) -> Option<Note> {
    let of = |allocation| search_of(searches, LoadPath::GlobalCg, allocation);
    let (plain, chunked) = (of(WalkAllocation::Plain)?, of(WalkAllocation::Chunked)?);
    let first = plain.finding.levels.first()?;
    let entries = first.entries?;
    let walked = chunked.finding.bound_pages?;
    if !chunked.finding.levels.is_empty() || walked <= entries {
        return None;
    }
    Some(note(
        NoteSeverity::Warning,
        format!(
            "TLB on the global_cg path: level 1 of the plain allocation ({entries} entries) is not confirmed: in separately mapped chunks, where every node has its own page, walks of up to {walked} pages never rose, and a TLB of {entries} entries would overflow there too; the rise may be the L2's, not translation"
        ),
    ))
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
                page_bytes: (!levels.is_empty()).then_some(512 << 20),
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
    fn a_plain_level_the_chunks_do_not_show_is_unconfirmed() {
        let plain = search(LoadPath::GlobalCg, vec![level(16)], 4735);
        let mut chunked = search(LoadPath::GlobalCg, vec![], 37871);
        chunked.region.allocation = WalkAllocation::Chunked;
        chunked.region.chunk_bytes = Some(2 << 20);
        let warned = |searches: &[TlbSearch]| unconfirmed_note(searches).is_some();
        assert!(warned(&[plain.clone(), chunked.clone()]));
        // The chunks show a level too, or their walks stopped short: no warning.
        let mut seen = chunked.clone();
        seen.finding.levels = vec![level(16)];
        assert!(!warned(&[plain.clone(), seen]));
        let mut short = chunked;
        short.finding.bound_pages = Some(16);
        assert!(!warned(&[plain.clone(), short]));
        assert!(!warned(&[plain]));
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
                page_bytes: None,
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
        assert!(rise.contains("did not repeat at 16.0 MiB stride with the same nodes (each in its own page of at most 2.0 MiB)"), "{rise}");
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
        // No page-size warning and no level-2 wording.
        assert!(
            !m.iter()
                .any(|n| n.contains("page size") || n.contains("level 1")),
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
