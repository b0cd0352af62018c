//! What the default run's benchmarks launch, and that launching less decides the same: the
//! L2 sweep leaves out sizes of memory loads only, the SM caches' size search chases the
//! range's large arrays only where the small ones show no change, the fetch-granularity
//! chase runs cold, an eviction test stops after two clear launches, and a bandwidth level
//! warms up only where its data needs it and times fewer final launches.

use std::time::Duration;

use pchase_runner::{
    bandwidth::{BandwidthLevel, BandwidthRequest, RegionLayout},
    measure::{
        bandwidth::{FINALISTS, FINAL_REPETITIONS, MEMORY_TUNING_REPETITIONS, PER_BLOCK_FINALISTS},
        bench,
        hierarchy::{self, chain},
        l2::{
            identify::identify, main_level, near_half, sweep, L2Findings, L2Level, LevelKind,
            SweepPoint,
        },
        search::find_size,
        ElementKind, MeasureOptions, Measurements, SearchRange, Selection, Session,
    },
    sim::{Replacement, SimBackend, SimProfile},
    Backend, Carveout, LoadPath,
};

use crate::{
    doubles::Hooked,
    search::{exact, probe as l1_probe},
};

/// Runs the benchmarks `only` on `gpu`.
fn run(gpu: &mut Hooked, only: &[&str]) -> Measurements {
    let options = MeasureOptions {
        only: Selection::named(only).expect("registered"),
        ..MeasureOptions::default()
    };
    Session::new(gpu, options).run().expect("session runs")
}

/// The last sweep size where `kind`'s share is at least half its largest (the far edge's
/// rule), by bytes.
fn last_half(points: &[SweepPoint], levels: &[L2Level], kind: LevelKind) -> Option<u64> {
    let level = main_level(levels, kind)?;
    (0..points.len())
        .rev()
        .find(|&i| level.share_at(i) >= 0.5 * level.peak_share())
        .map(|i| points[i].bytes)
}

/// Measures the sweep sizes `found` left out on `gpu` and checks that they hold no near or
/// far hits: with them the hit levels have the same loads, and the near half and the far
/// edge are the same sizes. Shared with the GPU test (`gpu_budget.rs`).
pub(crate) fn left_out_sizes_decide_nothing<B: Backend + ?Sized>(
    gpu: &mut B,
    found: &L2Findings,
    overhead: f64,
    name: &str,
) {
    let l2 = gpu.device().l2_bytes;
    let sizes = sweep::sweep_sizes(l2);
    let (first, deferred) = sweep::split_sizes(&sizes, l2);
    let measured: Vec<u64> = found.points.iter().map(|p| p.bytes).collect();
    assert_eq!(
        measured, first,
        "{name}: the sweep measured the first sizes only"
    );
    let mut t = Duration::ZERO;
    let mut all = found.points.clone();
    all.extend(sweep::sweep(gpu, &deferred, overhead, &mut t).expect("sweep"));
    all.sort_by_key(|p| p.bytes);
    let everything = identify(&all);
    for kind in [LevelKind::NearHit, LevelKind::FarHit] {
        let Some(with) = everything.level(kind) else {
            assert!(found.level(kind).is_none(), "{name}: {kind:?}");
            continue;
        };
        let without = found.level(kind).expect("the level");
        assert!(
            with.shares
                .iter()
                .filter(|(bytes, _)| deferred.contains(bytes))
                .all(|&(_, share)| share == 0.0),
            "{name}: {kind:?} at a size left out: {:?}",
            with.shares
        );
        assert_eq!(with.distribution, without.distribution, "{name}: {kind:?}");
        assert_eq!(
            last_half(&all, &everything.levels, kind),
            last_half(&found.points, &found.levels, kind),
            "{name}: {kind:?}'s last size at half its share"
        );
    }
    let half = |points: &[SweepPoint], levels| near_half(points, levels).0.map(|i| points[i].bytes);
    assert_eq!(
        half(&all, &everything.levels),
        half(&found.points, &found.levels)
    );
}

#[test]
fn the_l2_sweep_leaves_out_sizes_of_memory_loads_that_decide_nothing() {
    for name in ["h100", "h200"] {
        let mut gpu = Hooked::bundled(name);
        let l2 = gpu.device().l2_bytes;
        let m = run(&mut gpu, &["l2"]);
        let found = m.l2.as_ref().expect("the L2 measured");
        let sizes = sweep::sweep_sizes(l2);
        let (_, deferred) = sweep::split_sizes(&sizes, l2);
        assert_eq!(deferred.len(), 3, "{name}: {sizes:?}");
        assert!(
            gpu.pinned_log
                .iter()
                .all(|(bytes, _)| !deferred.contains(bytes)),
            "{name}: no launch chased a size left out"
        );
        // The largest array's timed pass is whole: 32 warps, one node per 128 B.
        let largest = *sizes.last().expect("sizes");
        let per_warp = u32::try_from(largest / 128 / 32).expect("fits");
        assert!(gpu
            .pinned_log
            .iter()
            .any(|&(bytes, steps)| bytes == largest && steps == per_warp));
        let overhead = f64::from(m.clock_overhead.unwrap_or(0));
        left_out_sizes_decide_nothing(&mut gpu, found, overhead, name);
    }
}

#[test]
fn the_l2_sweep_measures_every_size_where_hits_reach_past_a_quarter_beyond_the_l2() {
    // An L2 of one partition that replaces at random keeps some of an array 1.25 times its
    // size: those hits are a level of the last size up to there, and the sweep goes on.
    let mut profile = SimProfile::bundled("volta").expect("bundled");
    profile.l2.replacement = Replacement::Random;
    let l2 = profile.device.l2_bytes;
    let mut gpu = Hooked::bundled("volta");
    gpu.sim = SimBackend::new(profile).expect("valid profile");
    let m = run(&mut gpu, &["l2"]);
    let found = m.l2.as_ref().expect("the L2 measured");
    let sizes = sweep::sweep_sizes(l2);
    let (first, _) = sweep::split_sizes(&sizes, l2);
    assert!(sweep::hits_at(&found.levels, first.len() - 2));
    let measured: Vec<u64> = found.points.iter().map(|p| p.bytes).collect();
    assert_eq!(measured, sizes, "every size of the grid, in order");
}

#[test]
fn the_size_search_chases_large_arrays_only_where_the_small_ones_show_no_change() {
    // The L1's range ends at 2 MiB; its 241 KiB show as a change by 256 KiB, an eighth of
    // that: no launch chases an array beyond it.
    let range = SearchRange {
        start: 256,
        max: 2 << 20,
    };
    let mut staged = Hooked::bundled("h200");
    let mut t = Duration::ZERO;
    let (finding, _) = find_size(&mut staged, &l1_probe(), range, 0.01, &mut t).expect("search");
    let size = exact(&finding);
    assert!(
        staged
            .chase_log
            .iter()
            .all(|&(bytes, _, _)| bytes <= range.max / 8),
        "{:?}",
        staged.chase_log
    );
    // A range whose eighth is below the cache: the second launch runs, and finds the same.
    let short = SearchRange {
        start: 256,
        max: 1 << 20,
    };
    let mut whole = Hooked::bundled("h200");
    let (finding, _) = find_size(&mut whole, &l1_probe(), short, 0.01, &mut t).expect("search");
    assert_eq!(exact(&finding), size);
    assert!(whole
        .chase_log
        .iter()
        .any(|&(bytes, _, _)| bytes == short.max));
}

#[test]
fn the_fetch_granularity_chase_runs_cold_and_finds_the_profiles_sectors() {
    let profile = SimProfile::bundled("h200").expect("bundled");
    let mut gpu = Hooked::bundled("h200");
    let m = run(&mut gpu, &["l1"]);
    let cold: Vec<_> = gpu
        .chase_log
        .iter()
        .filter(|&&(_, stride, _)| stride == 4)
        .collect();
    assert_eq!(cold.len(), 1, "{:?}", gpu.chase_log);
    assert_eq!(cold[0].2, 0, "no untimed loads");
    let l1 = bench::find("l1").expect("registered");
    l1.sim_check(&profile, &m)
        .expect("the L1 as the profile has it");
    assert!(m
        .element(ElementKind::L1Data)
        .and_then(|r| r.line.as_ref())
        .is_some());
}

#[test]
fn two_clear_launches_decide_an_eviction_test() {
    let profile = SimProfile::bundled("h200").expect("bundled");
    let shared = profile
        .shared_carveout_for(Carveout::Percent(0), 0)
        .expect("fits");
    let l1 = profile
        .caches_on_path(LoadPath::GlobalCa)
        .next()
        .expect("an L1")
        .effective_bytes_at(shared);
    let three_quarters = chain(l1 * 3 / 4, 32).expect("chain");
    let mut t = Duration::ZERO;
    // The L1 and the texture cache are one store: a texture chain of three quarters of it
    // evicts an L1 chain of as much, in both launches, far past the verdict's 25 %.
    let mut gpu = Hooked::bundled("h200");
    let test = hierarchy::evicts(
        &mut gpu,
        (LoadPath::GlobalCa, three_quarters),
        (LoadPath::Texture, three_quarters, 0),
        &mut t,
    )
    .expect("decided");
    assert!(test.evicted);
    assert_eq!(
        gpu.two_phase, 4,
        "two launches of the baseline and the probe each"
    );
    // The constant L1 is a cache of its own: nothing evicted, as clearly.
    let mut gpu = Hooked::bundled("h200");
    let test = hierarchy::evicts(
        &mut gpu,
        (LoadPath::GlobalCa, three_quarters),
        (LoadPath::Constant, chain(1536, 64).expect("chain"), 0),
        &mut t,
    )
    .expect("decided");
    assert!(!test.evicted);
    assert_eq!(gpu.two_phase, 4);
}

/// The requests of a level laid out as `layout`: the search's, then the finalists'.
fn requests(log: &[BandwidthRequest], layout: RegionLayout) -> Vec<BandwidthRequest> {
    log.iter().copied().filter(|r| r.layout == layout).collect()
}

#[test]
fn bandwidth_levels_warm_up_only_where_their_data_needs_it() {
    let mut gpu = Hooked::bundled("h200");
    let m = run(&mut gpu, &["bandwidth-l1", "bandwidth-memory"]);
    let profile = SimProfile::bundled("h200").expect("bundled");
    for benchmark in ["bandwidth-l1", "bandwidth-memory"] {
        bench::find(benchmark)
            .expect("registered")
            .sim_check(&profile, &m)
            .unwrap_or_else(|e| panic!("{benchmark}: {e}"));
    }
    let finding = |level| {
        m.bandwidth
            .iter()
            .find(|f| f.level == level)
            .unwrap_or_else(|| panic!("{level} measured"))
    };
    // The L1 read: the level's first request warms up, the others find the data in place;
    // one finalist, three long launches.
    let l1 = finding(BandwidthLevel::L1);
    let per_block = requests(&gpu.bandwidth_log, RegionLayout::PerBlock);
    assert_eq!(per_block.len(), l1.shapes_tried + PER_BLOCK_FINALISTS);
    assert!(per_block[0].warm_up && per_block[1..].iter().all(|r| !r.warm_up));
    assert_eq!(l1.repetitions, FINAL_REPETITIONS);
    assert_eq!(per_block.last().map(|r| r.repetitions), Some(3));
    // The memory read, write and copy: every request warms up (a write launch after an idle
    // gap would find the L2 clean of the dirty lines the one before left); two finalists
    // each, three where the third tied with the best in the search.
    let memory = requests(&gpu.bandwidth_log, RegionLayout::GridStride);
    assert!(memory.iter().all(|r| r.warm_up));
    let tried: usize = [
        BandwidthLevel::MemoryRead,
        BandwidthLevel::MemoryWrite,
        BandwidthLevel::MemoryCopy,
    ]
    .iter()
    .map(|&level| finding(level).shapes_tried)
    .sum();
    // The search times each shape twice, the finals three times.
    let searched = memory
        .iter()
        .filter(|r| r.repetitions == MEMORY_TUNING_REPETITIONS)
        .count();
    assert_eq!(searched, tried);
    let finals = memory.len() - tried;
    assert!(
        (3 * FINALISTS..=3 * (FINALISTS + 1)).contains(&finals),
        "{finals} final requests"
    );
}
