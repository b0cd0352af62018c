//! The search against modelled walks: LRU levels over pages, and L2 effects that are not
//! translation.

use super::*;

/// A modelled walk: LRU levels of `entries` with `miss` cycles, pages of `page` bytes.
fn model(
    page: u64,
    levels: &[(u64, f64)],
) -> impl FnMut(u64, u64) -> Result<Vec<f64>, RunnerError> {
    let levels = levels.to_vec();
    move |n, stride| {
        let s = step_bytes(stride);
        let pages = if s >= page { n } else { (n - 1) * s / page + 1 };
        let latency = 100.0
            + levels
                .iter()
                .filter(|(entries, _)| pages > *entries)
                .map(|(_, miss)| miss)
                .sum::<f64>();
        // A few slow loads above the level, as real samples have.
        Ok((0..64)
            .map(|i| latency + if i % 16 == 0 { 50.0 } else { 0.0 })
            .collect())
    }
}

const ROOMY: TlbLimits = TlbLimits {
    max_bytes: 16 << 30,
    max_nodes: 1 << 20,
    page_at_most: None,
};

#[test]
fn two_levels_and_the_page_size_are_recovered() {
    let f = search(ROOMY, model(2 << 20, &[(16, 30.0), (2048, 200.0)])).unwrap();
    assert_eq!(f.page_bytes, Some(2 << 20));
    let entries: Vec<Option<u64>> = f.levels.iter().map(|l| l.entries).collect();
    assert_eq!(entries, [Some(16), Some(2048)]);
    assert_eq!(f.levels[1].reach_bytes, 4 << 30);
    assert_eq!(f.levels[0].miss_cycles, 30.0);
    assert_eq!(f.levels[1].miss_cycles, 200.0);
    let miss = f.levels[1].miss.unwrap();
    assert_eq!((miss.p50.get(), miss.samples), (200.0, 64));
    assert!(f.bound_pages.is_some_and(|p| p > 2048));
}

#[test]
fn a_level_beyond_the_memory_is_a_bound() {
    let small = TlbLimits {
        max_bytes: 1 << 30,
        max_nodes: 1 << 20,
        page_at_most: None,
    };
    let f = search(small, model(64 << 10, &[(32, 30.0), (100_000, 200.0)])).unwrap();
    assert_eq!(f.page_bytes, Some(64 << 10));
    assert_eq!(f.levels.len(), 1);
    assert_eq!(f.levels[0].entries, Some(32));
    assert_eq!(f.bound_pages, Some((1 << 30) / step_bytes(64 << 10)));
}

#[test]
fn no_level_at_all_is_a_bound_and_a_page_above_the_strides_is_unknown() {
    let f = search(ROOMY, model(2 << 20, &[])).unwrap();
    assert!(f.levels.is_empty() && f.page_bytes.is_none());
    assert!(f.bound_pages.is_some());
    // 1 GiB pages: eight of them are 256 walks of 32 MiB; the reach is estimated
    // from above by at most a stride per page.
    let f = search(ROOMY, model(1 << 30, &[(8, 30.0)])).unwrap();
    assert_eq!(f.page_bytes, None);
    assert_eq!(f.levels[0].entries, None);
    let reach = f.levels[0].reach_bytes;
    assert!(
        (8 << 30..(8 << 30) + 8 * (32 << 20)).contains(&reach),
        "{reach}"
    );
}

#[test]
fn pages_of_512_mib_over_all_of_memory_are_recovered() {
    // An H100-like plain allocation: 74 GiB of 512 MiB pages, two levels within it.
    let memory = TlbLimits {
        max_bytes: 74 << 30,
        max_nodes: 102_400,
        page_at_most: None,
    };
    let f = search(memory, model(512 << 20, &[(16, 40.0), (64, 150.0)])).unwrap();
    assert_eq!(f.page_bytes, Some(512 << 20));
    let entries: Vec<Option<u64>> = f.levels.iter().map(|l| l.entries).collect();
    assert_eq!(entries, [Some(16), Some(64)]);
    assert_eq!(f.levels[1].reach_bytes, 32 << 30);
    // A stride whose largest walk does not rise costs two walks: the search stays short.
    assert!(f.probes < 60, "{} walks", f.probes);
}

#[test]
fn limits_too_small_are_an_error() {
    let tiny = TlbLimits {
        max_bytes: 128 << 10,
        max_nodes: 4,
        page_at_most: None,
    };
    assert!(search(tiny, model(2 << 20, &[])).is_err());
    let one_node = TlbLimits {
        max_bytes: 16 << 30,
        max_nodes: 1,
        page_at_most: None,
    };
    assert!(search(one_node, model(2 << 20, &[])).is_err());
}

/// `walk` with an L2 data effect: walks of at least `from` nodes at one of `strides` pay
/// `extra` cycles (an H100's near-partition copies lost to conflicts at 32 MiB: its far
/// hit), whatever the pages.
fn with_l2_effect(
    mut walk: impl FnMut(u64, u64) -> Result<Vec<f64>, RunnerError>,
    strides: &'static [u64],
    from: u64,
    extra: f64,
) -> impl FnMut(u64, u64) -> Result<Vec<f64>, RunnerError> {
    move |n, stride| {
        let samples = walk(n, stride)?;
        let hit = strides.contains(&stride) && n >= from;
        Ok(samples
            .into_iter()
            .map(|v| if hit { v + extra } else { v })
            .collect())
    }
}

/// The H100's walked region and node limit on the L2 path, plain or in 2 MiB chunks.
fn h100(page_at_most: Option<u64>) -> TlbLimits {
    TlbLimits {
        max_bytes: 74 << 30,
        max_nodes: 102_400,
        page_at_most,
    }
}

#[test]
fn a_rise_at_one_stride_only_is_no_level_in_either_allocation() {
    for page_at_most in [Some(2 << 20), None] {
        let walk = with_l2_effect(model(2 << 20, &[]), &[32 << 20], 2207, 150.0);
        let f = search(h100(page_at_most), walk).unwrap();
        assert!(f.levels.is_empty(), "{page_at_most:?}: {:?}", f.levels);
        assert_eq!(f.page_bytes, None);
        assert_eq!(f.rejected.len(), 1, "{:?}", f.rejected);
        let r = &f.rejected[0];
        assert_eq!((r.stride, r.nodes), (32 << 20, 2207));
        assert_eq!(r.retried_stride, Some(16 << 20));
        assert_eq!((r.before_cycles, r.after_cycles), (100.0, 250.0));
        // The bound: per stride the largest walk without a rise, 1 GiB down; 32 MiB's
        // stops one node short of the rise, 16 MiB's covers all of the region.
        let at = |stride: u64| f.flat.iter().find(|w| w.stride == stride).map(|w| w.nodes);
        assert_eq!(at(1 << 30), Some((74 << 30) / step_bytes(1 << 30)));
        assert_eq!(at(32 << 20), Some(2206));
        assert_eq!(at(16 << 20), Some((74 << 30) / step_bytes(16 << 20)));
        assert!(f.flat.windows(2).all(|w| w[0].stride > w[1].stride));
        assert!(f.bound_pages.is_some_and(|p| p >= 2290));
    }
}

#[test]
fn a_level_behind_an_l2_effect_is_still_recovered_exactly() {
    for page_at_most in [Some(2 << 20), None] {
        let walk = with_l2_effect(model(2 << 20, &[(3000, 200.0)]), &[32 << 20], 2207, 150.0);
        let f = search(h100(page_at_most), walk).unwrap();
        assert_eq!(f.rejected.len(), 1, "{page_at_most:?}");
        assert_eq!(f.page_bytes, Some(2 << 20), "{page_at_most:?}");
        let entries: Vec<Option<u64>> = f.levels.iter().map(|l| l.entries).collect();
        assert_eq!(entries, [Some(3000)], "{page_at_most:?}");
        assert_eq!(f.levels[0].miss_cycles, 200.0);
    }
}

#[test]
fn in_chunks_a_rise_whose_page_would_exceed_the_chunk_is_no_level() {
    // The effect at 32 and 16 MiB: the page search "finds" 16 MiB pages, which 2 MiB
    // chunks cannot have; 8 MiB, with each node in its own chunk, stays flat.
    let effect: &[u64] = &[16 << 20, 32 << 20];
    let f = search(
        h100(Some(2 << 20)),
        with_l2_effect(model(2 << 20, &[]), effect, 2207, 150.0),
    )
    .unwrap();
    assert!(f.levels.is_empty() && f.page_bytes.is_none(), "{f:?}");
    assert_eq!(f.rejected[0].retried_stride, Some(8 << 20));
    // The same walks in a plain allocation: 16 MiB pages cannot be told from the effect.
    let f = search(
        h100(None),
        with_l2_effect(model(2 << 20, &[]), effect, 2207, 150.0),
    )
    .unwrap();
    assert_eq!(f.page_bytes, Some(16 << 20));
}

#[test]
fn an_unrepeated_rise_at_the_largest_stride_the_region_allows_is_still_a_level() {
    // 1.5 GiB: 1 GiB walks do not fit two nodes, 512 MiB ones do. A level of one 512 MiB
    // page overflows at two nodes of 512 MiB and at no smaller stride's two nodes: found at
    // the largest stride tried, it is a level with the page not determined.
    let small = TlbLimits {
        max_bytes: 3 << 29,
        max_nodes: 1 << 20,
        page_at_most: None,
    };
    let f = search(small, model(512 << 20, &[(1, 30.0)])).unwrap();
    assert!(f.rejected.is_empty(), "{:?}", f.rejected);
    assert_eq!((f.page_bytes, f.levels.len()), (None, 1));
    assert_eq!(f.levels[0].reach_bytes, step_bytes(512 << 20));
    assert_eq!(f.levels[0].miss_cycles, 30.0);
}
