//! Watching a session (`MeasureOptions::watch`): a co-tenant on the simulated GPU that
//! moves the sentinels makes the benchmark before them run again; a brief one is cleared
//! by the repeat, one that stays leaves the benchmark listed as disturbed.

use pchase_runner::{
    measure::{sentinel, ElementKind, MeasureOptions, Measurements, Selection, Session},
    sim::{CoTenant, SimBackend, SimProfile},
};

fn backend(tenant: Option<CoTenant>) -> SimBackend {
    let mut profile = SimProfile::bundled("volta").unwrap();
    profile.co_tenant = tenant;
    SimBackend::new(profile).unwrap()
}

fn options() -> MeasureOptions {
    MeasureOptions {
        only: Selection::named(&["shared", "memory"]).unwrap(),
        watch: true,
        ..MeasureOptions::default()
    }
}

fn session(tenant: Option<CoTenant>) -> (Measurements, u64) {
    let mut backend = backend(tenant);
    let measured = Session::new(&mut backend, options()).run().unwrap();
    (measured, backend.launches())
}

fn slow_l2(start: u64, end: Option<u64>) -> CoTenant {
    CoTenant {
        pid: 1,
        name: "job".into(),
        visible: false,
        start_launch: start,
        end_launch: end,
        utilization_percent: 0,
        l1_stolen_bytes: 0,
        l2_stolen_bytes: 0,
        latency_factor: 1.5,
        sm_clock_factor: 1.0,
    }
}

#[test]
fn a_quiet_gpu_is_never_disturbed() {
    let (measured, _) = session(None);
    assert!(measured.disturbed.is_empty(), "{:?}", measured.disturbed);
    assert!(measured
        .element(ElementKind::DeviceMemory)
        .unwrap()
        .latency
        .is_some());
}

#[test]
fn a_co_tenant_that_stays_leaves_every_later_benchmark_disturbed() {
    let (_, launches) = session(None);
    // Half-way: after the baseline (which a co-tenant there from the start would be
    // part of: the busy check before measuring is for that), before the memory latency.
    let (measured, _) = session(Some(slow_l2(launches / 2, None)));
    assert!(!measured.disturbed.is_empty());
    assert!(measured.disturbed.iter().all(|d| !d.cleared_by_repeat));
    assert!(
        measured
            .disturbed
            .iter()
            .any(|d| d.benchmark.contains("memory latency") && d.findings[0].contains("L2 hit")),
        "{:?}",
        measured.disturbed
    );
}

#[test]
fn a_brief_co_tenant_is_cleared_by_repeating_the_benchmark() {
    // One launch long, at every launch of a quiet run in turn: where it meets a sentinel
    // the benchmark before it runs again, and the repeat (after it left) is clean.
    let (_, launches) = session(None);
    let mut cleared = 0;
    for start in 0..launches {
        let (measured, _) = session(Some(slow_l2(start, Some(start + 1))));
        for d in &measured.disturbed {
            assert!(d.cleared_by_repeat, "start {start}: {d:?}");
            cleared += 1;
        }
    }
    assert!(
        cleared > 0,
        "no window met a sentinel in {launches} launches"
    );
}

#[test]
fn a_session_given_its_baseline_reads_none_of_its_own_and_compares_against_it() {
    // A watching session reads its own baseline; given one it reads none, so a caller's
    // reading before the run plus the session cost what the session alone costs.
    let (_, alone) = session(None);
    let mut given = backend(None);
    let before = sentinel::read(&mut given);
    let measured = Session::new(&mut given, options())
        .with_baseline(before)
        .run()
        .unwrap();
    assert!(measured.disturbed.is_empty(), "{:?}", measured.disturbed);
    assert_eq!(given.launches(), alone);

    // The steps are compared against the baseline given: one far off makes every step
    // look disturbed, its repeat too.
    let mut off = backend(None);
    let mut wrong = sentinel::read(&mut off);
    wrong.l2_hit_cycles = wrong.l2_hit_cycles.map(|c| 2.0 * c);
    let measured = Session::new(&mut off, options())
        .with_baseline(wrong)
        .run()
        .unwrap();
    assert_eq!(measured.disturbed.len(), measured.timings.len());
    assert!(measured
        .disturbed
        .iter()
        .all(|d| !d.cleared_by_repeat && d.findings[0].contains("L2 hit")));
}

#[test]
fn a_settled_reading_is_a_reading_without_the_warm_up() {
    // On a GPU whose clock is up, both agree; the settled one spares the quick clock
    // reading that finds the clock at its peak (the simulated Volta runs at its peak).
    let mut warm = backend(None);
    let first = sentinel::read(&mut warm);
    let launches = warm.launches();
    let again = sentinel::read(&mut warm);
    let with_warm_up = warm.launches() - launches;
    let settled = sentinel::read_settled(&mut warm);
    let without = warm.launches() - launches - with_warm_up;
    assert!(sentinel::compare(&first, &again).is_empty());
    assert!(sentinel::compare(&first, &settled).is_empty());
    assert_eq!(with_warm_up, without + 1, "one clock measurement fewer");
    // The simulated H200 runs at 1755 of its 1980 MHz: below its peak, the quick reading is
    // followed by the long warm-up.
    let mut below = SimBackend::new(SimProfile::bundled("h200").unwrap()).unwrap();
    let launches = below.launches();
    let _ = sentinel::read(&mut below);
    let with_warm_up = below.launches() - launches;
    let _ = sentinel::read_settled(&mut below);
    let without = below.launches() - launches - with_warm_up;
    assert_eq!(
        with_warm_up,
        without + 2,
        "a quick clock reading and the warm-up"
    );
}
