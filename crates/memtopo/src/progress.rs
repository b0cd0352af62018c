//! What memtopo tells a person or a program on standard error while it runs: the
//! progress of a measurement (a bar on a terminal, or JSON Lines with `--progress json`),
//! and its messages (`memtopo: error: …`), which become JSON events too in that mode, so
//! that every line on standard error is one JSON object (schema: `docs/cli.md`).
//!
//! The number of steps is the registry's estimate, made before the first benchmark from
//! the benchmarks the run selects and the device ([`estimate_steps`]); a run that takes more
//! steps raises it as it goes. The time left is linear in the steps.
//!
//! A node run measures each GPU on a thread of its own ([`set_device`]): every event of that
//! thread (progress, messages, log records) carries the GPU's `device_index`, and its
//! messages and log lines start with `GPU N: `, so that the lines of GPUs measured at once
//! can be told apart. GPUs measured at once share one bar ([`NodeBar`]), a single line as
//! a single GPU's bar is, which every message and the tables printed meanwhile
//! suspend ([`outside_bar`]) instead of breaking it.

use std::{
    cell::Cell,
    fmt,
    io::Write,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, OnceLock, PoisonError,
    },
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressStyle};
use pchase_runner::{measure::MeasureOptions, DeviceInfo};
use serde_json::{json, Value};

/// How progress is shown while measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on a terminal; nothing when stderr is not a terminal.
    Auto,
    /// JSON Lines on stderr: progress, messages and logs, and a final summary.
    Json,
    /// Nothing.
    None,
}

static JSON: AtomicBool = AtomicBool::new(false);
static START: OnceLock<Instant> = OnceLock::new();
/// The bar of GPUs measured at once, while it is shown.
static NODE_BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

thread_local! {
    /// The GPU of a node run that this thread measures.
    static DEVICE: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Marks this thread as measuring GPU `index` of a node run (`None`: no GPU in
/// particular): its events carry `device_index`, its messages and log lines start with
/// `GPU N: `.
pub fn set_device(index: Option<u32>) {
    DEVICE.with(|d| d.set(index));
}

/// The GPU this thread measures, if it measures one of a node.
fn device() -> Option<u32> {
    DEVICE.with(Cell::get)
}

/// Runs `f` (which prints) with the node's bar taken off the terminal, so that the bar
/// and the printed lines do not overwrite each other; without a bar, just runs it.
pub fn outside_bar<R>(f: impl FnOnce() -> R) -> R {
    let bar = NODE_BAR
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    match bar {
        Some(bar) => bar.suspend(f),
        None => f(),
    }
}

/// Starts the clock of the events' `t` and chooses the form of every message.
pub fn init(json: bool) {
    JSON.store(json, Ordering::Relaxed);
    START.get_or_init(Instant::now);
}

/// Whether messages are JSON events.
pub fn json_mode() -> bool {
    JSON.load(Ordering::Relaxed)
}

fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e3).round() / 1e3
}

/// Writes one event, `{"event": kind, "t": seconds since start, ...fields}`, as a line on
/// standard error.
pub fn event(kind: &str, fields: Value) {
    let mut object = serde_json::Map::new();
    object.insert("event".into(), kind.into());
    object.insert(
        "t".into(),
        seconds(START.get_or_init(Instant::now).elapsed()).into(),
    );
    if let Some(index) = device() {
        object.insert("device_index".into(), index.into());
    }
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    let mut line = Value::Object(object).to_string();
    line.push('\n');
    // Standard error closed: nothing left to tell.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// How much a message matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The run (or part of it) failed.
    Error,
    /// A result to distrust.
    Warning,
    /// A finding of `--strict`'s self-check.
    SelfCheck,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::SelfCheck => "self-check",
        })
    }
}

/// Prints a message on standard error: `memtopo: LEVEL: TEXT`, or a `message` event; on
/// the thread of a node's GPU, `memtopo: LEVEL: GPU N: TEXT`.
pub fn say(level: Level, text: impl fmt::Display) {
    match device() {
        Some(index) if !json_mode() => say_named(level, format!("GPU {index}: {text}")),
        _ => say_named(level, text),
    }
}

/// [`say`] for a text that names its GPU itself: no `GPU N: ` before it (the event still
/// carries the thread's `device_index`).
pub fn say_named(level: Level, text: impl fmt::Display) {
    if json_mode() {
        event(
            "message",
            json!({"level": level.to_string(), "message": text.to_string()}),
        );
    } else {
        outside_bar(|| eprintln!("memtopo: {level}: {text}"));
    }
}

/// The logger: env_logger's lines, or `log` events in JSON mode.
pub fn init_logger(default_level: &str) {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level));
    builder.format_timestamp(None);
    if json_mode() {
        builder.format(|buf, record| {
            let mut line = json!({
                "event": "log",
                "t": seconds(START.get_or_init(Instant::now).elapsed()),
                "level": record.level().as_str().to_ascii_lowercase(),
                "target": record.target(),
                "message": record.args().to_string(),
            });
            if let Some(index) = device() {
                line["device_index"] = index.into();
            }
            writeln!(buf, "{line}")
        });
    } else {
        builder.format(|buf, record| {
            // env_logger's own layout, `[LEVEL target] message`, with the GPU of a node run.
            use env_logger::fmt::style::{AnsiColor, Style};
            let level = buf.default_level_style(record.level());
            let subtle = if level == Style::new() {
                Style::new()
            } else {
                AnsiColor::BrightBlack.on_default()
            };
            let gpu = device().map(|i| format!("GPU {i}: ")).unwrap_or_default();
            writeln!(
                buf,
                "{subtle}[{subtle:#}{level}{:<5}{level:#} {}{subtle}]{subtle:#} {gpu}{}",
                record.level(),
                record.target(),
                record.args()
            )
        });
    }
    builder.init();
}

/// The steps a run of `options` on `device` is expected to take, from the registry
/// ([`pchase_runner::measure::bench::expected_steps`]).
pub fn estimate_steps(device: &DeviceInfo, options: &MeasureOptions) -> u64 {
    pchase_runner::measure::bench::expected_steps(device, options)
}

enum Shown {
    Bar(ProgressBar),
    /// The slot of one GPU in the bar of GPUs measured at once.
    Node(Arc<NodeBar>, usize),
    Json,
    Nothing,
}

/// The progress of one GPU measured at once with others.
#[derive(Debug, Clone)]
struct GpuSlot {
    index: u32,
    step: u64,
    steps: u64,
    current: Option<String>,
    done: bool,
}

/// A bar of `len` steps in memtopo's style, its spinner ticking on its own.
fn ticking_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed}] {pos}/{len} {wide_msg} ~{eta} left")
            .expect("static template")
            .tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ "),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// One bar for the GPUs of a node measured at once: the steps of all of them, and the
/// benchmark each runs (`0: l2 size · 1: l1 size …`).
pub struct NodeBar {
    bar: ProgressBar,
    gpus: Mutex<Vec<GpuSlot>>,
}

impl NodeBar {
    /// The bar of the GPUs `indices`, shown on standard error while it is a terminal.
    fn new(indices: &[u32]) -> Arc<NodeBar> {
        let bar = ticking_bar(0);
        *NODE_BAR.lock().unwrap_or_else(PoisonError::into_inner) = Some(bar.clone());
        Arc::new(NodeBar {
            bar,
            gpus: Mutex::new(
                indices
                    .iter()
                    .map(|&index| GpuSlot {
                        index,
                        step: 0,
                        steps: 0,
                        current: None,
                        done: false,
                    })
                    .collect(),
            ),
        })
    }

    /// Changes the slot of GPU `slot`, then the bar.
    fn update(&self, slot: usize, change: impl FnOnce(&mut GpuSlot)) {
        let mut gpus = self.gpus.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(gpu) = gpus.get_mut(slot) {
            change(gpu);
        }
        let done = |g: &GpuSlot| {
            if g.done {
                g.steps
            } else {
                g.step.saturating_sub(1)
            }
        };
        self.bar.set_length(gpus.iter().map(|g| g.steps).sum());
        self.bar.set_position(gpus.iter().map(done).sum());
        let running: Vec<String> = gpus
            .iter()
            .filter(|g| !g.done)
            .filter_map(|g| Some(format!("{}: {}", g.index, g.current.as_deref()?)))
            .collect();
        self.bar.set_message(running.join(" · "));
    }

    /// Clears the bar: every GPU is done.
    pub fn finish(&self) {
        *NODE_BAR.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.bar.finish_and_clear();
    }
}

/// The progress of one measurement.
pub struct Reporter {
    shown: Shown,
    started: Instant,
    step: u64,
    steps: u64,
    current: Option<(String, Instant)>,
    /// The benchmarks that failed (`element: reason`), for the summary.
    pub failed: Vec<String>,
}

impl Reporter {
    /// Progress in `mode`; `quiet` hides the bar (not the JSON events).
    pub fn new(mode: ProgressMode, quiet: bool) -> Self {
        let shown = match mode {
            ProgressMode::Json => Shown::Json,
            ProgressMode::None => Shown::Nothing,
            ProgressMode::Auto if quiet => Shown::Nothing,
            // indicatif draws nothing when stderr is not a terminal.
            ProgressMode::Auto => Shown::Bar(ProgressBar::hidden()),
        };
        Reporter {
            shown,
            started: Instant::now(),
            step: 0,
            steps: 0,
            current: None,
            failed: Vec::new(),
        }
    }

    /// The progress of one GPU of a node run, shown as this reporter shows progress: a
    /// slot of `bar` where the GPUs are measured at once (`slot`: its position there).
    pub fn for_gpu(&self, bar: Option<&Arc<NodeBar>>, slot: usize) -> Reporter {
        let shown = match (&self.shown, bar) {
            (Shown::Json, _) => Shown::Json,
            (Shown::Nothing, _) => Shown::Nothing,
            (Shown::Bar(_) | Shown::Node(..), Some(bar)) => Shown::Node(Arc::clone(bar), slot),
            (Shown::Bar(_) | Shown::Node(..), None) => Shown::Bar(ProgressBar::hidden()),
        };
        Reporter {
            shown,
            started: Instant::now(),
            step: 0,
            steps: 0,
            current: None,
            failed: Vec::new(),
        }
    }

    /// One bar for the GPUs `indices` measured at once, where progress is a bar.
    pub fn node_bar(&self, indices: &[u32]) -> Option<Arc<NodeBar>> {
        matches!(self.shown, Shown::Bar(_)).then(|| NodeBar::new(indices))
    }

    /// Counts the benchmarks of a GPU's reporter (from [`Reporter::for_gpu`]) in this
    /// run's summary.
    pub fn absorb(&mut self, gpu: &Reporter) {
        self.step += gpu.step;
    }

    /// The measurement begins on `device`.
    pub fn begin(&mut self, device: &DeviceInfo, options: &MeasureOptions) {
        self.started = Instant::now();
        self.steps = estimate_steps(device, options);
        let steps = self.steps;
        match &mut self.shown {
            Shown::Node(bar, slot) => bar.update(*slot, |g| g.steps = steps),
            Shown::Bar(bar) => {
                *bar = ticking_bar(self.steps);
            }
            Shown::Json => event(
                "measure_started",
                json!({"device": device.name, "steps": self.steps}),
            ),
            Shown::Nothing => {}
        }
    }

    /// Seconds left, linear in the steps, once one step is done.
    fn eta(&self) -> Option<f64> {
        let done = self.step.saturating_sub(1);
        (done > 0).then(|| {
            let per_step = self.started.elapsed().as_secs_f64() / done as f64;
            seconds(Duration::from_secs_f64(
                per_step * (self.steps - done) as f64,
            ))
        })
    }

    /// The benchmark in progress ended.
    fn finish_current(&mut self) {
        if let (Some((name, since)), Shown::Json) = (self.current.take(), &self.shown) {
            event(
                "benchmark_finished",
                json!({
                    "benchmark": name,
                    "step": self.step,
                    "steps": self.steps,
                    "wall_s": seconds(since.elapsed()),
                }),
            );
        }
    }

    /// The benchmark `name` starts.
    pub fn benchmark(&mut self, name: &str) {
        self.finish_current();
        self.step += 1;
        self.steps = self.steps.max(self.step);
        self.current = Some((name.to_owned(), Instant::now()));
        match &self.shown {
            Shown::Node(bar, slot) => {
                let (step, steps) = (self.step, self.steps);
                bar.update(*slot, |g| {
                    g.step = step;
                    g.steps = steps;
                    g.current = Some(name.to_owned());
                });
            }
            Shown::Bar(bar) => {
                bar.set_length(self.steps);
                bar.set_position(self.step - 1);
                bar.set_message(name.to_owned());
            }
            Shown::Json => event(
                "benchmark_started",
                json!({
                    "benchmark": name,
                    "step": self.step,
                    "steps": self.steps,
                    "elapsed_s": seconds(self.started.elapsed()),
                    "eta_s": self.eta(),
                }),
            ),
            Shown::Nothing => {}
        }
    }

    /// The measurement ended (the bar is cleared).
    pub fn end(&mut self) {
        self.finish_current();
        match &self.shown {
            Shown::Node(bar, slot) => {
                let steps = self.step;
                bar.update(*slot, |g| {
                    g.steps = steps;
                    g.done = true;
                });
            }
            Shown::Bar(bar) => bar.finish_and_clear(),
            Shown::Json => event(
                "measure_finished",
                json!({"steps": self.step, "elapsed_s": seconds(self.started.elapsed())}),
            ),
            Shown::Nothing => {}
        }
    }

    /// The last event of a run: its exit code and, if it stopped on one, the error.
    pub fn summary(&self, exit_code: u8, error: Option<&str>) {
        if let Shown::Json = self.shown {
            event(
                "summary",
                json!({
                    "exit_code": exit_code,
                    "error": error,
                    "benchmarks": self.step,
                    "failed": self.failed,
                }),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pchase_runner::sim::{SimBackend, SimProfile};
    use pchase_runner::Backend;

    #[test]
    fn the_estimate_counts_every_benchmark_of_a_full_simulated_run() {
        // The Volta profile finds every element (the constant L1.5 as a bound): the
        // estimate is exact there.
        let mut backend = SimBackend::new(SimProfile::bundled("volta").unwrap()).unwrap();
        let options = MeasureOptions::default();
        let estimate = estimate_steps(backend.device(), &options);
        let mut names = Vec::new();
        pchase_runner::measure::Session::new(&mut backend, options)
            .with_progress(|name| names.push(name.to_owned()))
            .run()
            .unwrap();
        assert_eq!(estimate, names.len() as u64, "{names:#?}");
    }

    #[test]
    fn one_element_is_few_steps() {
        let backend = SimBackend::new(SimProfile::bundled("volta").unwrap()).unwrap();
        let options = MeasureOptions {
            only: pchase_runner::measure::Selection::named(&["shared"]).unwrap(),
            ..MeasureOptions::default()
        };
        assert_eq!(estimate_steps(backend.device(), &options), 2);
    }
}
