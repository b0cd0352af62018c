//! The benchmark registry: every benchmark a session can run, each declared once, in its
//! own module, with everything the rest of the program derives from it.
//!
//! A benchmark declares its name (the command line's spelling), a one-line summary (the
//! `--help` text and the line `docs/cli.md` must carry), the element it measures, the
//! benchmarks it needs, the catalogue kernels it launches, how it runs, what it writes to
//! the topology, and how its result relates to a simulation profile's truth. The CLI's
//! `--only` list and help, the session's order, the progress names, the report and the
//! simulator checks all come from [`REGISTRY`]; nothing else names a benchmark.
//!
//! ```
//! use pchase_runner::measure::bench::{self, REGISTRY};
//! let names: Vec<&str> = REGISTRY.iter().map(|b| b.info().name).collect();
//! assert_eq!(names[0], "l1");
//! // Naming the constant L1.5 brings the constant L1 it needs.
//! let plan = bench::plan(&bench::Selection::named(&["constant-l15"]).unwrap());
//! let planned: Vec<&str> = plan.iter().map(|b| b.info().name).collect();
//! assert_eq!(planned, ["constant-l1", "constant-l15", "sharing", "copies"]);
//! ```

mod async_copy;
mod bandwidth;
mod banks;
mod dsmem;
mod element;
mod gpc;
mod host_link;
mod icache;
mod l2;
mod l2_address;
mod l2_ways;
mod memory;
mod mlp;
mod relations;
mod sets;
mod shared;
mod sm_cache;
mod tlb;

use std::{collections::BTreeSet, fmt};

use pchase_kernels::Kernel;
use topology::{ElementKind, Note, NoteSeverity, Topology};

use super::{MeasureOptions, Measurements, Session};
use crate::{device::DeviceInfo, error::RunnerError, sim::SimProfile};

pub use sm_cache::constant_l1_line;

/// What a benchmark declares about itself.
#[derive(Debug, Clone, Copy)]
pub struct Info {
    /// The name on the command line (`--only l1,texture`) and in progress and timings.
    pub name: &'static str,
    /// One line for `--help` and `docs/cli.md`.
    pub summary: &'static str,
    /// The element whose quantities it measures, if it measures one element.
    pub element: Option<ElementKind>,
    /// Benchmarks whose results it needs: naming it on the command line runs them too,
    /// and they run before it.
    pub needs: &'static [&'static str],
    /// Whether it joins a session by itself whenever one of the benchmarks it needs runs
    /// (the sharing and copies tests follow whichever caches were measured).
    pub automatic: bool,
    /// Whether it is too costly for the default run: it then runs with `--deep`
    /// ([`Selection::Deep`]) or when named, never in [`Selection::All`].
    pub deep: bool,
    /// The catalogue kernels its launches use (besides the clock calibration's).
    pub kernels: fn() -> Vec<&'static Kernel>,
}

/// One benchmark: declared facts, the measurement, its part of the topology and its check
/// against a simulated GPU's truth.
pub trait Benchmark: Sync {
    /// What it declares about itself.
    fn info(&self) -> &Info;

    /// Measures, recording results and failures in the session; a failure is recorded,
    /// never returned, so the benchmarks after it still run.
    fn run(&self, session: &mut Session<'_>);

    /// Writes what it measured into `topo` (values and notes). The default writes the
    /// benchmark's [`topology::Section`] from [`Measurements::sections`], or a note of why it
    /// has none: a benchmark that reports a section needs nothing more.
    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        let name = self.info().name;
        match measured.sections.get(name) {
            Some(Ok(section)) => {
                topo.sections.insert(name.to_owned(), section.clone());
            }
            Some(Err(why)) => topo.notes.push(Note {
                severity: NoteSeverity::NotMeasured,
                element: None,
                quantity: None,
                message: format!("{name}: {why}"),
            }),
            None => {}
        }
    }

    /// Whether `measured` agrees with `profile`'s truth for this benchmark, within the
    /// resolution the method promises; `Err` says what differs. Every registered benchmark
    /// answers on every bundled profile (a test runs them all).
    ///
    /// # Errors
    /// A sentence naming the quantity, the measured value and the truth.
    fn sim_check(&self, profile: &SimProfile, measured: &Measurements) -> Result<(), String>;

    /// The progress steps it is expected to report in a session running `plan` on
    /// `device` (an estimate for progress bars: a cache not found takes fewer).
    fn expected_steps(
        &self,
        device: &DeviceInfo,
        options: &MeasureOptions,
        plan: &[&'static dyn Benchmark],
    ) -> u64 {
        let _ = (device, options, plan);
        1
    }
}

/// The progress steps a session with `options` on `device` is expected to report: the
/// clock calibration and every planned benchmark's ([`Benchmark::expected_steps`]).
pub fn expected_steps(device: &DeviceInfo, options: &MeasureOptions) -> u64 {
    let plan = plan(&options.only);
    1 + plan
        .iter()
        .map(|b| b.expected_steps(device, options, &plan))
        .sum::<u64>()
}

impl fmt::Debug for dyn Benchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.info().name)
    }
}

/// Every benchmark, in the order a session runs them (each after what it needs).
pub static REGISTRY: &[&dyn Benchmark] = &[
    &sm_cache::L1,
    &sm_cache::TEXTURE,
    &sm_cache::READ_ONLY,
    &sm_cache::CONSTANT_L1,
    &sm_cache::CONSTANT_L15,
    &shared::SHARED,
    &banks::SHARED_BANKS,
    &l2::L2,
    &l2_address::L2_ADDRESS,
    &l2_ways::L2_WAYS,
    &memory::MEMORY,
    &tlb::TLB,
    &mlp::MLP,
    &icache::ICACHE,
    &sets::SETS,
    &relations::SHARING,
    &relations::COPIES,
    &bandwidth::BANDWIDTH_L1,
    &bandwidth::BANDWIDTH_SHARED,
    &bandwidth::BANDWIDTH_L2,
    &bandwidth::BANDWIDTH_MEMORY,
    &gpc::GPC_MAP,
    &gpc::GPC_CONTENTION,
    &dsmem::DSMEM,
    &async_copy::ASYNC_COPY,
    &host_link::HOST_LINK,
];

/// The registered benchmark called `name`.
pub fn find(name: &str) -> Option<&'static dyn Benchmark> {
    REGISTRY.iter().copied().find(|b| b.info().name == name)
}

/// The registered benchmark that measures `element`'s own quantities.
pub fn for_element(element: ElementKind) -> Option<&'static dyn Benchmark> {
    REGISTRY
        .iter()
        .copied()
        .find(|b| b.info().element == Some(element))
}

/// Every registered name, comma-separated (for messages and help).
pub fn names() -> String {
    REGISTRY
        .iter()
        .map(|b| b.info().name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which benchmarks a session runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Selection {
    /// Every registered benchmark of the default run (not the deep ones).
    #[default]
    All,
    /// Every registered benchmark, the deep ones too (`--deep`).
    Deep,
    /// These (validated registry names), with what they need.
    Named(BTreeSet<&'static str>),
}

impl Selection {
    /// The selection of `names`.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] naming an unknown benchmark and listing the known.
    pub fn named<S: AsRef<str>>(names: &[S]) -> Result<Selection, RunnerError> {
        let mut set = BTreeSet::new();
        for name in names {
            let name = name.as_ref().trim();
            let bench = find(name).ok_or_else(|| {
                RunnerError::InvalidRequest(format!(
                    "unknown benchmark `{name}`; expected one of {}",
                    self::names()
                ))
            })?;
            set.insert(bench.info().name);
        }
        Ok(Selection::Named(set))
    }

    /// Benchmarks the plan adds to the named ones because they are needed, with the one
    /// that needs each (for a message).
    pub fn added(&self) -> Vec<(&'static str, &'static str)> {
        let Selection::Named(named) = self else {
            return Vec::new();
        };
        plan(self)
            .iter()
            .filter(|b| !named.contains(b.info().name) && !b.info().automatic)
            .filter_map(|b| {
                let by = REGISTRY.iter().find(|n| {
                    named.contains(n.info().name) && n.info().needs.contains(&b.info().name)
                })?;
                Some((b.info().name, by.info().name))
            })
            .collect()
    }
}

/// The benchmarks `selection` runs, in registry order: the named ones, what they need
/// (transitively), and the automatic ones whose needs include one of those.
pub fn plan(selection: &Selection) -> Vec<&'static dyn Benchmark> {
    let mut chosen: BTreeSet<&'static str> = match selection {
        Selection::All => REGISTRY
            .iter()
            .filter(|b| !b.info().deep)
            .map(|b| b.info().name)
            .collect(),
        Selection::Deep => REGISTRY.iter().map(|b| b.info().name).collect(),
        Selection::Named(named) => named.clone(),
    };
    // Needs, to a fixed point (the registry is small).
    loop {
        let before = chosen.len();
        for b in REGISTRY {
            if chosen.contains(b.info().name) {
                chosen.extend(b.info().needs.iter().copied());
            }
        }
        if chosen.len() == before {
            break;
        }
    }
    let base = chosen.clone();
    for b in REGISTRY {
        if b.info().automatic && b.info().needs.iter().any(|n| base.contains(n)) {
            chosen.insert(b.info().name);
        }
    }
    REGISTRY
        .iter()
        .copied()
        .filter(|b| chosen.contains(b.info().name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_needs_come_first() {
        let mut seen = BTreeSet::new();
        for b in REGISTRY {
            let info = b.info();
            for need in info.needs {
                assert!(
                    seen.contains(need),
                    "{} needs {need}, which is not registered before it",
                    info.name
                );
            }
            assert!(seen.insert(info.name), "{} registered twice", info.name);
            assert!(!info.summary.is_empty(), "{} has no summary", info.name);
        }
    }

    #[test]
    fn elements_have_one_benchmark_each() {
        let mut seen = BTreeSet::new();
        for b in REGISTRY {
            if let Some(e) = b.info().element {
                assert!(seen.insert(e), "{e} measured by two benchmarks");
                assert_eq!(for_element(e).map(|f| f.info().name), Some(b.info().name));
            }
        }
    }

    #[test]
    fn plans_follow_needs_and_automatic_members() {
        let names = |s: &Selection| plan(s).iter().map(|b| b.info().name).collect::<Vec<_>>();
        let deep = REGISTRY.iter().filter(|b| b.info().deep).count();
        assert!(deep > 0, "no deep benchmark to test");
        assert_eq!(plan(&Selection::All).len(), REGISTRY.len() - deep);
        assert_eq!(plan(&Selection::Deep).len(), REGISTRY.len());
        assert!(plan(&Selection::All).iter().all(|b| !b.info().deep));
        assert_eq!(names(&Selection::named(&["tlb"]).unwrap()), ["tlb"]);
        let l1 = Selection::named(&["l1"]).unwrap();
        assert_eq!(names(&l1), ["l1", "sharing", "copies"]);
        assert!(l1.added().is_empty());
        let l2 = Selection::named(&["l2", "memory"]).unwrap();
        assert_eq!(names(&l2), ["l2", "memory"]);
        let l15 = Selection::named(&["constant-l15"]).unwrap();
        assert_eq!(l15.added(), [("constant-l1", "constant-l15")]);
        let sharing = Selection::named(&["sharing"]).unwrap();
        assert_eq!(
            names(&sharing),
            [
                "l1",
                "texture",
                "readonly",
                "constant-l1",
                "sharing",
                "copies"
            ]
        );
    }

    #[test]
    fn unknown_names_are_refused_with_the_list() {
        let err = Selection::named(&["l3"]).unwrap_err().to_string();
        assert!(
            err.contains("`l3`") && err.contains("constant-l15"),
            "{err}"
        );
    }

    #[test]
    fn every_benchmark_has_its_line() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/benchmarks.md");
        let text = std::fs::read_to_string(path).expect("docs/benchmarks.md");
        let rows: BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
            .collect();
        let registered: BTreeSet<&str> = REGISTRY.iter().map(|b| b.info().name).collect();
        assert_eq!(
            rows, registered,
            "docs/benchmarks.md rows against the registry"
        );
    }
}
