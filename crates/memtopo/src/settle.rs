//! The look at the GPU before measuring: a utilisation reading with no process may be the
//! tail of a run that just ended, so it is looked at again until it falls, for up to
//! [`SETTLE`]; a run may make its context meanwhile ([`observe_before_while`]).

use std::{thread, time::Duration};

use crate::conditions::{busy_reasons, Observation, StateSource};

/// How long a utilisation reading without any visible process may take to fall to zero
/// (NVML's sample period is 1/6 s to 1 s; a previous memtopo may just have exited).
const SETTLE: Duration = Duration::from_millis(2500);

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
    let from = *waited;
    let mut readings = Vec::new();
    while settling(&observation, &reasons) && *waited < budget {
        readings.push(observation.state.utilization_percent.unwrap_or(0));
        thread::sleep(LOOK_EVERY);
        *waited += LOOK_EVERY;
        observation = source.observe()?;
        reasons = busy_reasons(&observation);
    }
    if !readings.is_empty() {
        // How long a predecessor's utilisation lingers, for `-vv` (the wait is most of a
        // back-to-back run's time before its first benchmark).
        log::debug!(
            "busy check: looked again for {:.0} ms: utilisation {} %, then {}",
            (*waited - from).as_secs_f64() * 1e3,
            runs(&readings),
            if reasons.is_empty() {
                "idle".to_string()
            } else {
                reasons.join("; ")
            }
        );
    }
    Ok((observation, reasons))
}

/// `values` with repeats told by their count: `12 ×3, 8, 0`.
fn runs(values: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(&value) = values.get(i) {
        let count = values[i..].iter().take_while(|&&v| v == value).count();
        out.push(if count > 1 {
            format!("{value} ×{count}")
        } else {
            value.to_string()
        });
        i += count;
    }
    out.join(", ")
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

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex,
    };

    use topology::GpuState;

    use super::*;
    use crate::conditions::tests::{at, process};

    #[test]
    fn repeated_readings_are_counted() {
        assert_eq!(runs(&[12, 12, 12, 8, 0]), "12 ×3, 8, 0");
        assert_eq!(runs(&[]), "");
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
}
