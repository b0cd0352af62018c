//! Relations between the SM caches: which pairs are one physical cache (a fill through
//! one path evicted by a fill through the other), and how many copies each SM has.

use pchase_kernels::{catalogue, Kernel};
use topology::{Count, ElementKind, Provenance, Topology};

use super::{Benchmark, Info};
use crate::{
    backend::LoadPath,
    device::DeviceInfo,
    measure::{hierarchy, MeasureOptions, Measurements, Session, SizeFinding, COPY_WARPS},
    sim::SimProfile,
};

/// The SM caches the relations are tested between, by benchmark name.
const CACHES: &[&str] = &["l1", "texture", "readonly", "constant-l1"];

/// A relation test over the measured SM caches.
pub(crate) struct Relation {
    info: Info,
    sharing: bool,
}

fn two_phase_kernels() -> Vec<&'static Kernel> {
    let paths = [
        LoadPath::GlobalCa,
        LoadPath::Texture,
        LoadPath::GlobalNc,
        LoadPath::Constant,
    ];
    paths
        .iter()
        .flat_map(|&a| paths.iter().map(move |&b| (a, b)))
        .filter_map(|(a, b)| catalogue::two_phase(a, b).ok())
        .collect()
}

/// Which measured SM caches are one physical cache.
pub(crate) static SHARING: Relation = Relation {
    info: Info {
        name: "sharing",
        summary: "which measured SM caches are one physical cache (runs with any of l1, texture, readonly, constant-l1)",
        element: None,
        needs: CACHES,
        automatic: true,
        deep: false,
        kernels: two_phase_kernels,
    },
    sharing: true,
};

/// Copies of each measured SM cache per SM.
pub(crate) static COPIES: Relation = Relation {
    info: Info {
        name: "copies",
        summary: "copies of each measured SM cache per SM (runs with any of l1, texture, readonly, constant-l1)",
        element: None,
        needs: CACHES,
        automatic: true,
        deep: false,
        kernels: two_phase_kernels,
    },
    sharing: false,
};

/// A measured cache: benchmark name, element, path, exact size and fetch unit (the
/// probes' node spacing).
type Cache = (&'static str, ElementKind, LoadPath, u64, u32);

/// The caches of [`CACHES`] measured exactly, in registry order.
fn measured_caches(s: &Session<'_>) -> Vec<Cache> {
    CACHES
        .iter()
        .filter_map(|name| {
            let bench = super::find(name)?.info();
            let element = bench.element?;
            let result = s.results.element(element)?;
            let path = result.path?;
            let unit = result
                .line
                .as_ref()
                .and_then(|l| u32::try_from(l.bytes).ok())
                .unwrap_or(32);
            s.exact_size(element)
                .map(|bytes| (bench.name, element, path, bytes, unit))
        })
        .collect()
}

impl Relation {
    fn sharing(s: &mut Session<'_>, caches: &[Cache]) {
        for (i, &(a, ea, path_a, size_a, unit_a)) in caches.iter().enumerate() {
            for &(b, eb, path_b, size_b, unit_b) in &caches[i + 1..] {
                let step = format!("sharing {a}/{b}");
                match s.timed(&step, |s, gpu| {
                    hierarchy::evicts(
                        s.backend,
                        (path_a, hierarchy::chain(size_a * 3 / 4, unit_a)?),
                        (path_b, hierarchy::chain(size_b * 3 / 4, unit_b)?, 0),
                        gpu,
                    )
                }) {
                    Ok(test) => s.results.sharing.push((ea, eb, test)),
                    Err(e) => s.fail(ea, format!("{step}: {e}")),
                }
            }
        }
    }

    fn copies(s: &mut Session<'_>, caches: &[Cache]) {
        for &(name, element, path, size, unit) in caches {
            let step = format!("{name} copies per SM");
            match s.timed(&step, |s, gpu| {
                hierarchy::copies_per_sm(s.backend, path, size, unit, COPY_WARPS, gpu)
            }) {
                Ok(copies) => s.results.copies.push((element, copies)),
                Err(e) => s.fail(element, format!("{step}: {e}")),
            }
        }
    }
}

/// The path of the first cache a profile puts on `element`'s path.
fn first_cache(profile: &SimProfile, m: &Measurements, element: ElementKind) -> Option<String> {
    let path = m.element(element)?.path?;
    profile.caches_on_path(path).next().map(|c| c.name.clone())
}

impl Benchmark for Relation {
    fn info(&self) -> &Info {
        &self.info
    }

    /// A pair test per pair of planned caches, or one count per cache.
    fn expected_steps(
        &self,
        _: &DeviceInfo,
        _: &MeasureOptions,
        plan: &[&'static dyn Benchmark],
    ) -> u64 {
        let n = plan
            .iter()
            .filter(|b| CACHES.contains(&b.info().name))
            .count() as u64;
        if self.sharing {
            n * n.saturating_sub(1) / 2
        } else {
            n
        }
    }

    fn run(&self, s: &mut Session<'_>) {
        let caches = measured_caches(s);
        if self.sharing {
            Self::sharing(s, &caches);
        } else {
            Self::copies(s, &caches);
        }
    }

    fn report(&self, measured: &Measurements, topo: &mut Topology) {
        if self.sharing {
            for (a, b, test) in &measured.sharing {
                if test.evicted {
                    topo.share_physical_cache([*a, *b], Provenance::Benchmark);
                }
            }
            return;
        }
        for (element, copies) in &measured.copies {
            match copies {
                Some(n) => {
                    topo.element_mut(*element)
                        .set_count_per_sm(Count::new(*n, Provenance::Benchmark));
                }
                None => topo.warn(
                    Some(*element),
                    format!(
                        "copies per SM: no warp up to {} shares thread 0's copy; at least {} copies",
                        COPY_WARPS - 1,
                        COPY_WARPS
                    ),
                ),
            }
        }
    }

    /// Two measured SM caches share exactly when the profile lists both paths on one
    /// cache, and each cache's copies per SM are the profile's.
    fn sim_check(&self, profile: &SimProfile, m: &Measurements) -> Result<(), String> {
        let measured = CACHES
            .iter()
            .filter_map(|n| super::find(n)?.info().element)
            .filter(|e| {
                m.element(*e)
                    .and_then(|r| r.sizes.first())
                    .is_some_and(|s| matches!(s.finding, SizeFinding::Exact { .. }))
            })
            .count();
        if self.sharing {
            if measured >= 2 && m.sharing.is_empty() {
                return Err("no sharing tested".into());
            }
            for (a, b, test) in &m.sharing {
                let truth = first_cache(profile, m, *a) == first_cache(profile, m, *b);
                if test.evicted != truth {
                    return Err(format!("sharing {a}/{b}: {test:?}, truth {truth}"));
                }
            }
            return Ok(());
        }
        if measured >= 1 && m.copies.is_empty() {
            return Err("no copies counted".into());
        }
        for (element, copies) in &m.copies {
            let path = m.element(*element).and_then(|r| r.path);
            let cache = path
                .and_then(|p| profile.caches_on_path(p).next())
                .ok_or_else(|| format!("{element}: counted, but no cache on its path"))?;
            let truth = cache.copies_per_sm;
            let expected = (truth < COPY_WARPS).then_some(truth);
            if *copies != expected {
                return Err(format!(
                    "copies of {element}: {copies:?}, truth {expected:?}"
                ));
            }
        }
        Ok(())
    }
}
