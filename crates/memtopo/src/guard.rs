//! Before, around and after measuring: the per-GPU lock, the busy-GPU check, the
//! sentinels and the GPU's state after the run, all recorded in the [`RunRecord`].
//!
//! The order matters. The GPU is identified without a context (so this run is not yet one
//! of its processes), the lock is taken (so a second memtopo waits before it looks at the
//! GPU, instead of seeing the first as a co-tenant), then the GPU's state is read and a
//! busy GPU refused, and only then is the GPU measured. The context is created after the
//! first look, and while a utilisation tail is waited out it is created during the wait
//! ([`check_busy_while`]): the looks that see it may only accept the GPU; a refusal always
//! rests on a look without it. A GPU of a node run keeps its lock as long as its context,
//! which it hands over to the node's links (`crate::handover`).

use pchase_runner::{
    measure::{sentinel, MeasureOptions, Measurements, Session},
    sim::SimBackend,
    Backend,
};
use topology::{GpuProcess, GpuState, RunRecord};

use crate::{
    conditions::{self, Observation, StateSource},
    error::CliError,
    lock::{self, GpuLock, LockError},
    plan::GuardPolicy,
    progress::Reporter,
    settle,
};

/// Takes the lock of the GPU named `key` (its UUID), waiting the policy's time with a
/// message (`before_waiting` is called first, once); records how it went. A lock that
/// cannot be made is a warning, not an error.
pub fn lock_gpu(
    policy: &GuardPolicy,
    key: Option<&str>,
    record: &mut RunRecord,
    mut before_waiting: impl FnMut(),
) -> Result<Option<GpuLock>, CliError> {
    let Some(key) = key else {
        record.lock = Some("not taken: the GPU has no UUID or bus id".into());
        return Ok(None);
    };
    let dir = lock::lock_dir();
    let wait = policy.wait;
    match lock::acquire(&dir, key, wait, |holder| {
        before_waiting();
        log::warn!(
            "{key} is being measured by {holder}; waiting up to {} s (--wait)",
            wait.as_secs_f64()
        );
    }) {
        Ok(lock) => {
            record.lock = Some(format!("held ({})", lock.path().display()));
            Ok(Some(lock))
        }
        Err(LockError::Busy(holder)) => Err(CliError::Busy(format!(
            "{key} is being measured by {holder}; still busy after {} s (--wait SECONDS to wait longer)",
            wait.as_secs_f64()
        ))),
        Err(LockError::Unavailable(reason)) => {
            log::warn!("measuring without the per-GPU lock: {reason}");
            record.lock = Some(format!("not taken: {reason}"));
            Ok(None)
        }
    }
}

/// Reads the GPU's state before measuring and refuses a busy GPU unless the policy
/// allows it. `None` for the source: the state cannot be read (recorded, with a warning).
pub fn check_busy(
    policy: &GuardPolicy,
    source: Option<&mut dyn StateSource>,
    record: &mut RunRecord,
) -> Result<Option<Observation>, CliError> {
    let Some(source) = source else {
        return Ok(None);
    };
    judge(policy, settle::observe_before(source), record)
}

/// [`check_busy`], with `prepare` (the context and its modules) made while a utilisation
/// tail is waited out (`settle::observe_before_while`); returns what was prepared, or
/// `None` where nothing was (no tail to wait out, no state source, or a wait that ended
/// busy: then the GPU was judged again without it). A refused GPU drops what was prepared
/// and returns the same error as [`check_busy`].
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn check_busy_while<T>(
    policy: &GuardPolicy,
    source: Option<&mut (dyn StateSource + Send)>,
    record: &mut RunRecord,
    prepare: impl FnOnce() -> T,
) -> Result<(Option<Observation>, Option<T>), CliError> {
    let Some(source) = source else {
        return Ok((None, None));
    };
    let (seen, prepared) = settle::observe_before_while(source, prepare);
    if prepared.is_some() {
        log::debug!("the context was made while the busy check waited for the utilisation to fall");
    }
    let before = judge(policy, seen, record)?;
    Ok((before, prepared))
}

/// Records what the look before measuring saw and refuses a busy GPU unless the policy
/// allows it.
fn judge(
    policy: &GuardPolicy,
    seen: Result<(Observation, Vec<String>), String>,
    record: &mut RunRecord,
) -> Result<Option<Observation>, CliError> {
    let (observation, reasons) = match seen {
        Ok(seen) => seen,
        Err(reason) => {
            log::warn!("cannot read the GPU's state: {reason}; other work on it is not checked");
            record.state_unavailable = Some(reason);
            return Ok(None);
        }
    };
    conditions::absorb(record, &observation);
    record.before = Some(observation.state.clone());
    if !reasons.is_empty() {
        if !policy.allow_busy {
            return Err(CliError::Busy(format!(
                "other work is on the GPU: {}; measuring now would report disturbed numbers \
                 (--allow-busy measures anyway and marks the result)",
                reasons.join("; ")
            )));
        }
        for reason in reasons {
            log::warn!("measuring on a busy GPU (--allow-busy): {reason}");
            record.mark_busy(reason);
        }
    }
    Ok(Some(observation))
}

/// Reads the GPU's state after measuring; what changed since `before` is a disturbance.
pub fn after(
    source: Option<&mut dyn StateSource>,
    before: Option<&Observation>,
    record: &mut RunRecord,
) {
    let Some(source) = source else { return };
    match source.observe() {
        Ok(mut observation) => {
            source.add_memory_conditions(&mut observation.state);
            if let Some(before) = before {
                record
                    .disturbances
                    .extend(conditions::disturbances(before, &observation));
            }
            conditions::absorb(record, &observation);
            record.after = Some(observation.state);
        }
        Err(reason) => log::warn!("cannot read the GPU's state after measuring: {reason}"),
    }
}

/// Measures with the sentinels read before and after the run and after every benchmark
/// (a disturbed benchmark runs again once: `Measurements::disturbed`, marked by
/// [`mark_benchmarks`]), and every found size probed again; what the run-wide checks
/// find goes into `record.disturbances`. The reading before the run is also the
/// session's baseline.
pub fn watched<B: Backend>(
    backend: &mut B,
    mut options: MeasureOptions,
    progress: &mut Reporter,
    record: &mut RunRecord,
) -> Result<Measurements, CliError> {
    options.watch = true;
    let (stride, replicas) = (options.search_stride, options.replicas);
    let mut step = std::time::Instant::now();
    // The work outside the benchmarks' timings, by wall time at `-vv`.
    let mut took = |what: &str| {
        log::debug!("{what} took {:.1} ms", step.elapsed().as_secs_f64() * 1e3);
        step = std::time::Instant::now();
    };
    let before = sentinel::read(backend);
    took("the sentinels' first reading");
    log_reading("before the run", &before);
    progress.begin(backend.device(), &options);
    let result = Session::new(backend, options)
        .with_baseline(before)
        .with_progress(|what| progress.benchmark(what))
        .run();
    progress.end();
    let mut measured = result?;
    took("the benchmarks");
    // A size the second probe does not confirm, again when probed once more, is a
    // disturbed benchmark of its element: the element is marked and the run exits 9, as
    // for the L2's edges below.
    let mut unconfirmed = sentinel::confirm_sizes(backend, &measured, stride, replicas);
    if !unconfirmed.is_empty() {
        let first: Vec<_> = unconfirmed.iter().map(|(e, _)| *e).collect();
        unconfirmed = sentinel::confirm_sizes(backend, &measured, stride, replicas);
        unconfirmed.retain(|(e, _)| first.contains(e));
    }
    for (element, finding) in unconfirmed {
        let benchmark = format!("{} size confirmation", element.display_name());
        measured
            .disturbed
            .push(unconfirmed_size(element, benchmark, vec![finding]));
    }
    took("the SM caches' size confirmations");
    confirm_l2(backend, &mut measured);
    took("the L2's edge confirmations");
    // The confirmations kept the GPU busy up to here: no warm-up before this reading.
    let after = sentinel::read_settled(backend);
    took("the sentinels' last reading");
    log_reading("after the run", &after);
    record
        .disturbances
        .extend(sentinel::compare(&before, &after));
    Ok(measured)
}

/// Logs a sentinel reading at `-vv`.
fn log_reading(when: &str, reading: &sentinel::Reading) {
    let show = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    log::debug!(
        "sentinels {when}: SM clock {} MHz, L1 hit {} cycles, L2 hit {} cycles",
        show(reading.sm_clock_mhz),
        show(reading.l1_hit_cycles),
        show(reading.l2_hit_cycles)
    );
}

/// Probes the L2's near and far edges again (`measure::l2::confirm`); an edge that stays
/// unconfirmed after its repeat is a disturbed L2 benchmark: its element is marked and the
/// run exits 9, as for a benchmark the sentinels found disturbed.
fn confirm_l2<B: Backend>(backend: &mut B, measured: &mut Measurements) {
    let Some(l2) = measured.l2.as_ref() else {
        return;
    };
    let overhead = f64::from(measured.clock_overhead.unwrap_or(0));
    let findings = pchase_runner::measure::l2::confirm::confirm_l2(backend, l2, overhead);
    if !findings.is_empty() {
        measured.disturbed.push(unconfirmed_size(
            topology::ElementKind::L2,
            "l2 size confirmation".into(),
            findings,
        ));
    }
}

/// A size its second probe did not confirm, again on a repeat: a disturbance of its
/// element that no repeat cleared.
fn unconfirmed_size(
    element: topology::ElementKind,
    benchmark: String,
    findings: Vec<String>,
) -> pchase_runner::measure::Disturbance {
    pchase_runner::measure::Disturbance {
        element: Some(element),
        benchmark,
        findings,
        cleared_by_repeat: false,
    }
}

/// The simulated GPU seen as NVML would see it.
pub struct SimState<'a>(pub &'a SimBackend);

impl StateSource for SimState<'_> {
    fn observe(&mut self) -> Result<Observation, String> {
        let seen = self.0.observe();
        let links = self.0.profile().links;
        Ok(Observation {
            state: GpuState {
                sm_clock_mhz: Some(seen.sm_clock_mhz.round() as u32),
                max_sm_clock_mhz: Some(self.0.profile().clock.sm_mhz.round() as u32),
                utilization_percent: Some(seen.utilization_percent),
                compute_mode: Some("default".into()),
                pcie_generation: links.map(|l| l.pcie_generation),
                pcie_width: links.map(|l| l.pcie_width),
                pcie_max_generation: links.map(|l| l.pcie_max_generation),
                pcie_max_width: links.map(|l| l.pcie_max_width),
                ..GpuState::default()
            },
            processes: seen
                .processes
                .into_iter()
                .map(|(pid, name)| GpuProcess {
                    pid,
                    name: Some(name),
                    kind: "compute".into(),
                    used_memory_bytes: None,
                })
                .collect(),
            driver_version: None,
            settles: false,
        })
    }
}

/// Marks the benchmarks the sentinels found disturbed: one that stayed disturbed after its
/// repeat is a disturbance of the run and a warning on its element; one the repeat cleared is an info note.
pub fn mark_benchmarks(measured: &Measurements, topo: &mut topology::Topology) {
    let mut notes = Vec::new();
    let mut lines = Vec::new();
    for d in &measured.disturbed {
        let line = format!("{}: {}", d.benchmark, d.findings.join("; "));
        let element = d.element;
        let (severity, message) = if d.cleared_by_repeat {
            (
                topology::NoteSeverity::Info,
                format!("repeated after a disturbance, then clean: {line}"),
            )
        } else {
            let line = format!("{line} (still after a repeat)");
            lines.push(line.clone());
            (
                topology::NoteSeverity::Warning,
                format!("disturbed: {line}"),
            )
        };
        notes.push(topology::Note {
            severity,
            element,
            quantity: None,
            message,
        });
    }
    topo.notes.extend(notes);
    if let Some(record) = topo.run.as_mut() {
        record.disturbances.extend(lines);
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            atomic::{AtomicBool, Ordering},
            Arc,
        },
        time::Duration,
    };

    use super::*;

    /// The tail of a previous run at the first look; from the second on, another process.
    #[derive(Default)]
    struct Occupied {
        looks: u32,
    }

    impl StateSource for Occupied {
        fn observe(&mut self) -> Result<Observation, String> {
            self.looks += 1;
            let state = GpuState {
                utilization_percent: Some(if self.looks == 1 { 30 } else { 0 }),
                ..GpuState::default()
            };
            let processes = (self.looks > 1)
                .then(|| GpuProcess {
                    pid: 4711,
                    name: Some("python3".into()),
                    kind: "compute".into(),
                    used_memory_bytes: None,
                })
                .into_iter()
                .collect();
            Ok(Observation {
                state,
                processes,
                driver_version: None,
                settles: true,
            })
        }
    }

    /// What the busy check prepares; says when it is dropped.
    struct Made(Arc<AtomicBool>);
    impl Drop for Made {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_gpu_refused_after_the_context_was_made_drops_it_and_says_why() {
        let dropped = Arc::new(AtomicBool::new(false));
        let policy = GuardPolicy {
            allow_busy: false,
            wait: Duration::ZERO,
        };
        let mut record = RunRecord::default();
        let made = || Made(Arc::clone(&dropped));
        let refused = check_busy_while(&policy, Some(&mut Occupied::default()), &mut record, made);
        match refused {
            Err(CliError::Busy(why)) => assert!(why.contains("pid 4711"), "{why}"),
            other => panic!("not refused: {:?}", other.map(|(before, _)| before)),
        }
        assert!(dropped.load(Ordering::SeqCst));
        // With --allow-busy the run measures, marked busy, and makes its context anew.
        let allow = GuardPolicy {
            allow_busy: true,
            ..policy
        };
        let mut record = RunRecord::default();
        let made = || Made(Arc::new(AtomicBool::new(false)));
        let (before, prepared) =
            check_busy_while(&allow, Some(&mut Occupied::default()), &mut record, made).unwrap();
        assert!(before.is_some() && prepared.is_none());
        assert!(record.busy);
        assert_eq!(record.other_processes.len(), 1);
    }
}
