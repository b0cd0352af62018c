//! The conditions of a run: who and where, the GPU's state before and after, whether
//! other work shares the GPU (refused unless `--allow-busy`), and what changed while
//! measuring.

use std::{thread, time::Duration};

use topology::{GpuProcess, GpuState, RunRecord};

/// One look at the GPU.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Clocks, temperature, power, modes.
    pub state: GpuState,
    /// Processes using the GPU (never this one: it has no context yet before measuring).
    pub processes: Vec<GpuProcess>,
    /// The kernel driver's version.
    pub driver_version: Option<String>,
    /// Whether utilisation lags (NVML averages over its last sample period), so that a
    /// busy reading without any process is looked at again before it counts.
    pub settles: bool,
}

/// Something that can look at the GPU: NVML, or the simulated GPU's profile.
pub trait StateSource {
    /// The GPU now.
    fn observe(&mut self) -> Result<Observation, String>;

    /// Adds to `state` what is looked at only once before and once after a run, not at
    /// every look of the busy check: the device memory's temperature and remapped rows.
    fn add_memory_conditions(&mut self, _state: &mut GpuState) {}
}

/// How long a utilisation reading without any visible process may take to fall to zero
/// (NVML's sample period is 1/6 s to 1 s; a previous memtopo may just have exited).
const SETTLE: Duration = Duration::from_millis(2500);

/// Why the GPU counts as busy, from one observation (empty: it is not).
pub fn busy_reasons(observation: &Observation) -> Vec<String> {
    let own = std::process::id();
    let mut reasons: Vec<String> = observation
        .processes
        .iter()
        .filter(|p| p.pid != own)
        .map(|p| {
            let memory = p
                .used_memory_bytes
                .map(|b| format!(", {} MiB", b >> 20))
                .unwrap_or_default();
            format!("{p}{memory} uses the GPU")
        })
        .collect();
    let utilization = observation.state.utilization_percent.unwrap_or(0);
    if reasons.is_empty() && utilization > 0 {
        reasons.push(format!(
            "the GPU is {utilization} % utilised with no process visible (another container or VM?)"
        ));
    }
    if observation.state.compute_mode.as_deref() == Some("prohibited") {
        reasons.push("the GPU's compute mode is prohibited".to_string());
    }
    reasons
}

/// The time between two looks while a utilisation reading settles: short, so that the
/// wait ends soon after the reading falls (a run right after another otherwise waits out a
/// whole step for nothing).
const LOOK_EVERY: Duration = Duration::from_millis(25);

/// Whether `observation` is to be looked at again: busy with no process listed but this
/// one, where utilisation lags (it may be the tail of a run that just ended).
fn settling(observation: &Observation, reasons: &[String]) -> bool {
    let own = std::process::id();
    observation.settles && !reasons.is_empty() && observation.processes.iter().all(|p| p.pid == own)
}

/// Looks again every [`LOOK_EVERY`] while [`settling`], until `waited` reaches `budget`.
fn settle(
    source: &mut dyn StateSource,
    mut observation: Observation,
    waited: &mut Duration,
    budget: Duration,
) -> Result<(Observation, Vec<String>), String> {
    let mut reasons = busy_reasons(&observation);
    while settling(&observation, &reasons) && *waited < budget {
        thread::sleep(LOOK_EVERY);
        *waited += LOOK_EVERY;
        observation = source.observe()?;
        reasons = busy_reasons(&observation);
    }
    Ok((observation, reasons))
}

/// Observes the GPU before measuring; a utilisation reading with no process is looked at
/// again for up to [`SETTLE`], since it may be the tail of a run that just ended.
pub fn observe_before(source: &mut dyn StateSource) -> Result<(Observation, Vec<String>), String> {
    let first = source.observe()?;
    let mut waited = Duration::ZERO;
    let (mut observation, reasons) = settle(source, first, &mut waited, SETTLE)?;
    source.add_memory_conditions(&mut observation.state);
    Ok((observation, reasons))
}

/// What [`observe_before_while`] saw, and what `prepare` made while it waited.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub type Prepared<T> = (Result<(Observation, Vec<String>), String>, Option<T>);

/// [`observe_before`], with `prepare` (the CUDA context and its modules) run on this
/// thread while the looks that wait out a utilisation tail go on on another: a run right
/// after another makes its context during a wait it would otherwise sit out.
///
/// The first look is taken before `prepare` starts, so a GPU that is busy with processes,
/// or idle, is judged as by [`observe_before`], and nothing is prepared (`None`). Only a
/// utilisation tail starts `prepare`; the looks during it see this run's context too, and
/// they are trusted only to accept: a look without any other process and without
/// utilisation is one that a look without the context would also have found (a context
/// adds to the GPU's work, never takes from it), so it ends the wait with what `prepare`
/// made. A wait that ends otherwise (a process appeared, which may be this run's own
/// context: in a container NVML lists the host's pid; the utilisation did not fall in
/// time) drops what `prepare` made and goes on without it, looking again for the rest of
/// [`SETTLE`] (at least once): whatever refuses the GPU was seen without this run's
/// context, as by [`observe_before`].
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn observe_before_while<T>(
    source: &mut (dyn StateSource + Send),
    prepare: impl FnOnce() -> T,
) -> Prepared<T> {
    observe_before_within(source, SETTLE, prepare)
}

/// [`observe_before_while`], waiting `budget` at most.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn observe_before_within<T>(
    source: &mut (dyn StateSource + Send),
    budget: Duration,
    prepare: impl FnOnce() -> T,
) -> Prepared<T> {
    let first = match source.observe() {
        Ok(first) => first,
        Err(reason) => return (Err(reason), None),
    };
    let reasons = busy_reasons(&first);
    if !settling(&first, &reasons) {
        let mut observation = first;
        source.add_memory_conditions(&mut observation.state);
        return (Ok((observation, reasons)), None);
    }
    let mut waited = Duration::ZERO;
    let (settled, prepared) = thread::scope(|scope| {
        let looks = scope.spawn(|| settle(&mut *source, first, &mut waited, budget));
        let prepared = prepare();
        match looks.join() {
            Ok(settled) => (settled, prepared),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    match settled {
        Ok((mut observation, reasons)) if reasons.is_empty() => {
            source.add_memory_conditions(&mut observation.state);
            (Ok((observation, reasons)), Some(prepared))
        }
        // The state cannot be read: the run goes on unchecked, as it would have.
        Err(reason) => (Err(reason), Some(prepared)),
        Ok(_) => {
            log::debug!(
                "the GPU still looked busy after {:.0} ms with this run's context made \
                 meanwhile: the context goes, and the GPU is looked at again without it",
                waited.as_secs_f64() * 1e3
            );
            drop(prepared);
            let judged = source.observe().and_then(|again| {
                let (mut observation, reasons) = settle(source, again, &mut waited, budget)?;
                source.add_memory_conditions(&mut observation.state);
                Ok((observation, reasons))
            });
            (judged, None)
        }
    }
}

/// What changed between `before` and `after` that makes the values doubtful: new
/// processes, a clock that dropped, throttling that began.
pub fn disturbances(before: &Observation, after: &Observation) -> Vec<String> {
    let mut found = Vec::new();
    for p in &after.processes {
        if p.pid != std::process::id() && !before.processes.iter().any(|b| b.pid == p.pid) {
            found.push(format!("{p} appeared on the GPU while measuring"));
        }
    }
    let idle_after = after.state.throttle_reasons.iter().any(|r| r == "gpu_idle");
    if let (Some(a), Some(b)) = (before.state.sm_clock_mhz, after.state.sm_clock_mhz) {
        // At rest the clock is low and rises under load; only a drop below the
        // starting clock, beyond a few percent, is a disturbance, and not one that
        // NVML explains as the GPU idling again (memtopo has finished by then).
        if !idle_after && f64::from(b) < 0.95 * f64::from(a) {
            found.push(format!("the SM clock dropped from {a} MHz to {b} MHz"));
        }
    }
    const SLOWDOWNS: [&str; 5] = [
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ];
    for reason in &after.state.throttle_reasons {
        if SLOWDOWNS.contains(&reason.as_str()) && !before.state.throttle_reasons.contains(reason) {
            found.push(format!(
                "the clocks were throttled while measuring ({reason})"
            ));
        }
    }
    found
}

/// The run's identity: date, host, version, commit and command line.
pub fn base_record() -> RunRecord {
    let date = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok());
    RunRecord {
        date_utc: Some(date),
        host,
        tool_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        git_commit: Some(env!("MEMTOPO_GIT_COMMIT").to_string()),
        command_line: std::env::args().collect(),
        ..RunRecord::default()
    }
}

/// Adds what `observation` saw to `record` (the driver version, new processes other than
/// this one: a node run reads a GPU's state after its run with the context it keeps for
/// the links still open).
pub fn absorb(record: &mut RunRecord, observation: &Observation) {
    if record.driver_version.is_none() {
        record.driver_version = observation.driver_version.clone();
    }
    let own = std::process::id();
    for p in &observation.processes {
        if p.pid != own && !record.other_processes.iter().any(|q| q.pid == p.pid) {
            record.other_processes.push(p.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex,
    };

    use super::*;

    fn process(pid: u32) -> GpuProcess {
        GpuProcess {
            pid,
            name: Some("python3".into()),
            kind: "compute".into(),
            used_memory_bytes: Some(3 << 30),
        }
    }

    fn at(clock: u32) -> Observation {
        Observation {
            state: GpuState {
                sm_clock_mhz: Some(clock),
                ..GpuState::default()
            },
            ..Observation::default()
        }
    }

    #[test]
    fn other_processes_make_the_gpu_busy_and_are_named() {
        let mut o = at(1980);
        assert!(busy_reasons(&o).is_empty());
        o.processes.push(process(4711));
        let reasons = busy_reasons(&o);
        assert_eq!(
            reasons,
            ["pid 4711 (python3, compute), 3072 MiB uses the GPU"]
        );
        // This process itself never counts.
        o.processes = vec![process(std::process::id())];
        assert!(busy_reasons(&o).is_empty());
    }

    #[test]
    fn the_record_names_other_processes_once_and_never_this_one() {
        let mut record = RunRecord::default();
        let mut o = at(1980);
        // After a node run's GPU: its context, kept for the links, is this process.
        o.processes = vec![process(4711), process(std::process::id())];
        absorb(&mut record, &o);
        absorb(&mut record, &o);
        let pids: Vec<u32> = record.other_processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [4711]);
    }

    #[test]
    fn utilisation_without_a_process_is_busy() {
        let mut o = at(1980);
        o.state.utilization_percent = Some(87);
        assert!(busy_reasons(&o)[0].contains("87 % utilised"));
    }

    struct Fading(Vec<u32>);
    impl StateSource for Fading {
        fn observe(&mut self) -> Result<Observation, String> {
            let mut o = at(1980);
            o.settles = true;
            o.state.utilization_percent = Some(if self.0.is_empty() {
                0
            } else {
                self.0.remove(0)
            });
            Ok(o)
        }
    }

    #[test]
    fn the_tail_of_a_previous_run_is_waited_out() {
        let (o, reasons) = observe_before(&mut Fading(vec![40, 10])).unwrap();
        assert!(reasons.is_empty(), "{reasons:?}");
        assert_eq!(o.state.utilization_percent, Some(0));
    }

    /// Counts the looks and the memory readings.
    #[derive(Default)]
    struct Counting {
        fading: Vec<u32>,
        looks: u32,
        memory_reads: u32,
    }
    impl StateSource for Counting {
        fn observe(&mut self) -> Result<Observation, String> {
            self.looks += 1;
            let mut o = at(1980);
            o.settles = true;
            o.state.utilization_percent = Some(if self.fading.is_empty() {
                0
            } else {
                self.fading.remove(0)
            });
            Ok(o)
        }
        fn add_memory_conditions(&mut self, state: &mut GpuState) {
            self.memory_reads += 1;
            state.memory_temperature_c = Some(40 + self.memory_reads);
        }
    }

    #[test]
    fn the_memory_is_looked_at_once_after_the_busy_check_has_waited() {
        let mut source = Counting {
            fading: vec![40, 10],
            ..Counting::default()
        };
        let (o, _) = observe_before(&mut source).unwrap();
        assert_eq!(source.looks, 3, "two busy readings, then an idle one");
        assert_eq!(source.memory_reads, 1);
        assert_eq!(o.state.memory_temperature_c, Some(41));
    }

    /// A GPU seen through NVML while this run may be making its context: the tail of a
    /// previous run (a utilisation reading for its first `tail` looks), a process that
    /// appears at a given look, and this run's context, listed while it exists under this
    /// process's pid (`own`) or, as NVML does in a container, under another.
    struct Shared {
        tail: u32,
        arrives: Option<u32>,
        own: bool,
        looks: AtomicU32,
        /// Set when the context is being made: the looks after the first wait for it, so
        /// that the tests do not hang on how threads are scheduled.
        made: AtomicBool,
        context: AtomicBool,
        /// Whether the context existed at each look.
        seen: Mutex<Vec<bool>>,
    }

    impl Shared {
        fn new(tail: u32, arrives: Option<u32>, own: bool) -> Arc<Shared> {
            Arc::new(Shared {
                tail,
                arrives,
                own,
                looks: AtomicU32::new(0),
                made: AtomicBool::new(false),
                context: AtomicBool::new(false),
                seen: Mutex::new(Vec::new()),
            })
        }
        fn seen(&self) -> Vec<bool> {
            self.seen.lock().unwrap().clone()
        }
    }

    struct Looks(Arc<Shared>);
    impl StateSource for Looks {
        fn observe(&mut self) -> Result<Observation, String> {
            let gpu = &self.0;
            let look = gpu.looks.fetch_add(1, Ordering::SeqCst) + 1;
            while look > 1 && !gpu.made.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(1));
            }
            let mut o = at(1980);
            o.settles = true;
            o.state.utilization_percent = Some(if look <= gpu.tail { 30 } else { 0 });
            let context = gpu.context.load(Ordering::SeqCst);
            gpu.seen.lock().unwrap().push(context);
            if context {
                o.processes.push(process(if gpu.own {
                    std::process::id()
                } else {
                    4_000_000
                }));
            }
            if gpu.arrives.is_some_and(|at| look >= at) {
                o.processes.push(process(4711));
            }
            Ok(o)
        }
    }

    /// This run's context: listed while it lives.
    struct Context(Arc<Shared>);
    impl Drop for Context {
        fn drop(&mut self) {
            self.0.context.store(false, Ordering::SeqCst);
        }
    }

    /// Makes the context, which takes `ms`.
    fn make(gpu: &Arc<Shared>, ms: u64) -> impl FnOnce() -> Context {
        let gpu = Arc::clone(gpu);
        move || {
            gpu.context.store(true, Ordering::SeqCst);
            gpu.made.store(true, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(ms));
            Context(gpu)
        }
    }

    fn looks(gpu: &Arc<Shared>) -> Looks {
        Looks(Arc::clone(gpu))
    }

    #[test]
    fn an_idle_or_occupied_gpu_is_judged_before_anything_is_made() {
        for (tail, arrives, busy) in [(0, None, false), (0, Some(1), true), (5, Some(1), true)] {
            let gpu = Shared::new(tail, arrives, true);
            let (seen, made) = observe_before_while(&mut looks(&gpu), make(&gpu, 0));
            let (_, reasons) = seen.unwrap();
            assert!(made.is_none());
            assert_eq!(gpu.seen(), [false], "one look, without a context");
            assert_eq!(!reasons.is_empty(), busy, "{reasons:?}");
        }
    }

    #[test]
    fn a_tail_is_waited_out_while_the_context_is_made() {
        // The tail falls after four looks; the context, made meanwhile, is kept. NVML
        // lists it under this process's pid, which is never a co-tenant.
        let gpu = Shared::new(4, None, true);
        let (seen, made) = observe_before_while(&mut looks(&gpu), make(&gpu, 10));
        let (o, reasons) = seen.unwrap();
        assert!(reasons.is_empty(), "{reasons:?}");
        assert!(made.is_some());
        assert_eq!(o.processes.len(), 1);
        assert_eq!(o.processes[0].pid, std::process::id());
        assert_eq!(gpu.seen(), [false, true, true, true, true]);
    }

    #[test]
    fn a_process_seen_with_the_context_sends_the_check_back_without_it() {
        // NVML lists this run's context under a pid it cannot tell from another's: the
        // context goes, and the GPU is looked at again without it, which finds it idle.
        let gpu = Shared::new(2, None, false);
        let (seen, made) = observe_before_while(&mut looks(&gpu), make(&gpu, 60));
        let (o, reasons) = seen.unwrap();
        assert!(reasons.is_empty(), "{reasons:?}");
        assert!(o.processes.is_empty());
        assert!(made.is_none(), "dropped: the caller makes it again");
        assert_eq!(gpu.seen(), [false, true, false]);
    }

    #[test]
    fn a_co_tenant_arriving_during_the_wait_is_named_by_a_look_without_the_context() {
        let gpu = Shared::new(100, Some(3), true);
        let (seen, made) = observe_before_while(&mut looks(&gpu), make(&gpu, 10));
        let (_, reasons) = seen.unwrap();
        assert!(made.is_none());
        assert_eq!(gpu.seen(), [false, true, true, false]);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].starts_with("pid 4711 "), "{reasons:?}");
    }

    #[test]
    fn a_utilisation_that_does_not_fall_is_judged_without_the_context() {
        // Six looks in the budget of 150 ms with the context, then one without it, which
        // decides.
        let gpu = Shared::new(u32::MAX, None, true);
        let budget = Duration::from_millis(150);
        let (seen, made) = observe_before_within(&mut looks(&gpu), budget, make(&gpu, 0));
        let (_, reasons) = seen.unwrap();
        assert!(made.is_none());
        assert!(reasons[0].contains("30 % utilised"), "{reasons:?}");
        assert_eq!(
            gpu.seen(),
            [false, true, true, true, true, true, true, false]
        );
    }

    #[test]
    fn disturbances_are_new_processes_clock_drops_and_throttling() {
        let before = at(1980);
        assert!(disturbances(&before, &at(1975)).is_empty());
        assert!(
            disturbances(&at(345), &at(1980)).is_empty(),
            "a clock rising from rest"
        );
        let mut idle = at(345);
        idle.state.throttle_reasons = vec!["gpu_idle".into()];
        assert!(
            disturbances(&before, &idle).is_empty(),
            "idling after the run"
        );
        let mut after = at(1410);
        after.processes.push(process(99));
        after.state.throttle_reasons = vec!["hw_thermal_slowdown".into()];
        let found = disturbances(&before, &after);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].contains("pid 99"));
        assert!(found[1].contains("1980 MHz to 1410 MHz"));
        assert!(found[2].contains("hw_thermal_slowdown"));
    }
}
