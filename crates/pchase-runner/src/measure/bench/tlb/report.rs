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
        (WalkAllocation::Aliased, Some(chunk)) => format!(
            "{} of addresses over {} of chunks of {} mapped over and over",
            human(region.bytes),
            human(region.backing_bytes.unwrap_or(0)),
            human(chunk)
        ),
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
        let aliased = search_of(searches, search.path, WalkAllocation::Aliased);
        topo.notes.extend(span_notes(search, aliased));
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

/// Each level's entry span (measured, or why not) and the order test that confirmed it. A
/// span this allocation's walks could not determine is a warning, unless the aliased
/// region's (`aliased`, the same path) determined it for a level of the same reach
/// (within 2 %): then an info note that names it.
fn span_notes(search: &TlbSearch, aliased: Option<&TlbSearch>) -> Vec<Note> {
    let head = walked(search);
    search
        .finding
        .levels
        .iter()
        .enumerate()
        .map(|(i, level)| {
            let k = i + 1;
            let confirmed = match &level.order_check {
                Some(check) => format!("; confirmed as translation: {}", order_words(check)),
                None => {
                    "; not confirmed by the order test (its walks did not fit the limits)".into()
                }
            };
            match level.entry_bytes {
                Some(span) => {
                    let pages = match search.region.chunk_bytes {
                        Some(chunk) if span > chunk.min(2 << 20) => format!(
                            "; more than a page of at most {}: an entry maps an aligned {} range of virtual addresses whatever its pages",
                            human(chunk.min(2 << 20)),
                            human(span)
                        ),
                        _ => String::new(),
                    };
                    let dealt = match (level.interleave, level.entries) {
                        (k, Some(entries)) if k > 1 => format!(
                            "; its {entries} entries are dealt by address to {k} groups of {}: walks {} apart fill one group and overflow at {} nodes, and the walk of {k} times as many nodes {} apart in address order is as slow as the same lines grouped by {}, which entries of {} would not be",
                            entries / k,
                            human(span * k),
                            entries / k + 1,
                            human(span),
                            human(span * 2),
                            human(span * k)
                        ),
                        _ => String::new(),
                    };
                    let how = if dealt.is_empty() {
                        format!("the smallest stride whose walks overflow level {k} at the same number of nodes")
                    } else {
                        "the interleave test".to_owned()
                    };
                    note(
                        NoteSeverity::Info,
                        format!(
                            "{head}: one level-{k} entry maps {} ({how}){pages}{dealt}; miss +{:.0} cycles (p5){confirmed}",
                            human(span),
                            level.miss_cycles
                        ),
                    )
                }
                None => {
                    let there = aliased
                        .filter(|a| a.region.allocation != search.region.allocation)
                        .and_then(|a| a.finding.levels.get(i))
                        .filter(|l| l.reach_bytes.abs_diff(level.reach_bytes) <= level.reach_bytes / 50);
                    match there.and_then(|l| Some((l.entries?, l.entry_bytes?))) {
                        Some((entries, span)) => note(
                            NoteSeverity::Info,
                            format!(
                                "{head}: level {k} (reach {}) overflowed only at the largest stride whose walk reached it, so its span is not determined here; the aliased region's walks determined it: {entries} entries of {}{confirmed}",
                                human(level.reach_bytes),
                                human(span)
                            ),
                        ),
                        None => note(
                            NoteSeverity::Warning,
                            format!(
                                "{head}: the span of a level-{k} entry is not determined: at least the largest stride that moved its overflow, at most {} (the largest stride tried); its reach is the walks' bytes{confirmed}",
                                human(tlb::STRIDES[tlb::STRIDES.len() - 1])
                            ),
                        ),
                    }
                }
            }
        })
        .collect()
}

/// The levels of a search as (entries, span, reach) triples.
fn shape(search: &TlbSearch) -> Vec<(Option<u64>, Option<u64>, u64)> {
    search
        .finding
        .levels
        .iter()
        .map(|l| (l.entries, l.entry_bytes, l.reach_bytes))
        .collect()
}

/// How the allocations' levels on `path` compare. Where one cuMemAlloc and separately
/// mapped chunks show the same levels (entries and spans): they are keyed by virtual
/// address and the walks cannot tell the driver's page size (as on an H100). A
/// level in one allocation only, where the other's walks went past its overflow, is a
/// difference worth a note (e.g. large pages that chunks cannot form). The aliased region
/// goes further than either: its levels beyond theirs are named.
fn allocations_note(searches: &[TlbSearch], path: LoadPath) -> Option<Note> {
    let of = |allocation| search_of(searches, path, allocation);
    let (plain, chunked) = (of(WalkAllocation::Plain)?, of(WalkAllocation::Chunked)?);
    let chunk = chunked.region.chunk_bytes.map(human).unwrap_or_default();
    let (a, b) = (shape(plain), shape(chunked));
    let words = |levels: &[(Option<u64>, Option<u64>, u64)]| {
        levels
            .iter()
            .map(|&(e, s, reach)| match (e, s) {
                (Some(e), Some(s)) => format!("{e} entries of {}", human(s)),
                _ => format!("reach about {}, its span not determined", human(reach)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut message = if !a.is_empty() && a == b {
        format!(
            "TLB on the {path} path: the levels are the same in one cuMemAlloc and in separately mapped chunks of {chunk} ({}): they are keyed by virtual address, so these walks cannot tell the page size the driver uses for cuMemAlloc",
            words(&a)
        )
    } else if a.len() > b.len()
        && chunked
            .finding
            .bound_pages
            .is_some_and(|n| a[b.len()].0.is_some_and(|e| n > e))
    {
        format!(
            "TLB on the {path} path: level {} of one cuMemAlloc ({}) does not show in separately mapped chunks of {chunk}, whose walks went to {} nodes: it needs memory the chunks do not give (e.g. pages larger than a chunk)",
            b.len() + 1,
            words(&a[b.len()..b.len() + 1]),
            chunked.finding.bound_pages.unwrap_or(0)
        )
    } else if b.len() > a.len()
        && plain
            .finding
            .bound_pages
            .is_some_and(|n| b[a.len()].0.is_some_and(|e| n > e))
    {
        format!(
            "TLB on the {path} path: level {} of separately mapped chunks of {chunk} ({}) does not show in one cuMemAlloc, whose walks went to {} nodes: the plain allocation's larger pages need fewer entries",
            a.len() + 1,
            words(&b[a.len()..a.len() + 1]),
            plain.finding.bound_pages.unwrap_or(0)
        )
    } else {
        String::new()
    };
    if let Some(aliased) = of(WalkAllocation::Aliased) {
        let c = shape(aliased);
        let known = a.len().max(b.len());
        if !c.is_empty() {
            message = if message.is_empty() {
                format!("TLB on the {path} path: ")
            } else {
                format!("{message}; ")
            };
            message.push_str(&format!(
                "the aliased region's walks over {} found {}",
                human(aliased.region.bytes),
                words(&c)
            ));
            if c.len() > known {
                message.push_str(&format!(
                    " (level {} beyond the reach of walks in the memory)",
                    (known + 1..=c.len())
                        .map(|k| k.to_string())
                        .collect::<Vec<_>>()
                        .join(" and ")
                ));
            }
        }
    }
    (!message.is_empty()).then(|| note(NoteSeverity::Info, message))
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
mod tests;
