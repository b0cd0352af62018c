//! A single-GPU run on a node of several GPUs starts the driver on its GPU alone.
//!
//! `cuInit` brings up every GPU the process may see: on nodes of four H100s the driver took
//! 0.8–0.9 s to start (persistence mode on), against 0.1 s on a machine of one, and 0.3 s
//! there when it sees one GPU. A run that measures one GPU needs one, so before the driver
//! starts memtopo names that GPU alone in `CUDA_VISIBLE_DEVICES`, by UUID, and measures
//! CUDA device 0.
//!
//! Which GPU is CUDA's device N without the variable is the driver's choice
//! (`CUDA_DEVICE_ORDER`, fastest first by default), and asking the driver would start it on
//! every GPU. NVML's index follows the PCI bus order, as `nvidia-smi -L` does, and CUDA's
//! fastest-first order is the PCI bus order among GPUs alike. So memtopo narrows only where
//! that holds: every GPU NVML lists is the same model, none in MIG mode, the user set
//! neither `CUDA_VISIBLE_DEVICES` nor a `CUDA_DEVICE_ORDER` other than `PCI_BUS_ID`, and
//! the index exists. Anywhere else the driver starts as before, on every GPU.
//! `MEMTOPO_ALL_GPUS=1` turns narrowing off. After the driver starts, the run checks that
//! device 0 is the UUID it named (`Narrowed::check`).
//!
//! The GPU narrowed to, or the only one NVML lists where nothing renumbers CUDA's devices,
//! is known by its UUID before the driver starts ([`foreknown`]): the run then starts the
//! driver beside its lock and busy check (`crate::startup`).

use std::sync::OnceLock;

pub use crate::nvml::Listed;

/// The GPU a single run narrowed the driver to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowed {
    /// The index the user asked for (NVML's and, here, CUDA's order).
    pub index: u32,
    /// That GPU's UUID, now CUDA's only device.
    pub uuid: String,
}

/// What [`narrow`] decided: the GPU the driver was narrowed to, or why not.
static DECISION: OnceLock<Result<Narrowed, String>> = OnceLock::new();

/// The GPU NVML named before the driver started, which CUDA's device will be ([`foreknow`]).
static FOREKNOWN: OnceLock<Option<Narrowed>> = OnceLock::new();

/// Whether to narrow to GPU `index`, from the environment and NVML's list; `Err` says why
/// not (logged once the logger runs).
pub fn decide(
    index: u32,
    visible: Option<&str>,
    order: Option<&str>,
    opt_out: Option<&str>,
    listed: &[Listed],
) -> Result<Narrowed, String> {
    if opt_out.is_some_and(|v| !v.is_empty() && v != "0") {
        return Err("MEMTOPO_ALL_GPUS is set".into());
    }
    if visible.is_some() {
        return Err("CUDA_VISIBLE_DEVICES is set".into());
    }
    if order.is_some_and(|o| o != "PCI_BUS_ID") {
        return Err("CUDA_DEVICE_ORDER is not PCI_BUS_ID".into());
    }
    if listed.len() < 2 {
        return Err(format!("NVML lists {} GPU(s)", listed.len()));
    }
    if listed.iter().any(|g| g.mig) {
        return Err("a GPU is in MIG mode".into());
    }
    if order.is_none() && listed.iter().any(|g| g.name != listed[0].name) {
        return Err("the GPUs are of different models (CUDA orders them fastest first)".into());
    }
    let gpu = listed
        .get(index as usize)
        .ok_or_else(|| format!("NVML lists {} GPU(s), not device {index}", listed.len()))?;
    Ok(Narrowed {
        index,
        uuid: gpu.uuid.clone(),
    })
}

/// The GPU whose UUID NVML gives before the driver starts and that CUDA's device for
/// `index` will be: the one [`decide`] narrowed to, or the only GPU NVML lists where
/// nothing renumbers CUDA's devices (`CUDA_VISIBLE_DEVICES` unset) and it is not in MIG mode
/// (where CUDA's devices are its instances). Elsewhere, and with `MEMTOPO_ALL_GPUS` set
/// (`opt_out`), `None`: the driver says, once it has started.
pub fn foreknow(
    index: u32,
    visible: Option<&str>,
    opt_out: Option<&str>,
    listed: &[Listed],
    decided: Option<&Narrowed>,
) -> Option<Narrowed> {
    if let Some(narrowed) = decided.filter(|n| n.index == index) {
        return Some(narrowed.clone());
    }
    if opt_out.is_some_and(|v| !v.is_empty() && v != "0") {
        return None;
    }
    match listed {
        [only] if index == 0 && visible.is_none() && !only.mig => Some(Narrowed {
            index,
            uuid: only.uuid.clone(),
        }),
        _ => None,
    }
}

/// Narrows the driver to GPU `index` where [`decide`] says so: sets `CUDA_VISIBLE_DEVICES`.
/// Call before the driver starts and before any other thread runs (it changes the
/// environment). Only the first call counts.
pub fn narrow(index: u32) {
    DECISION.get_or_init(|| {
        let env = |name: &str| std::env::var(name).ok();
        let visible = env("CUDA_VISIBLE_DEVICES");
        let listed = crate::nvml::list();
        let decided = listed.as_ref().map_err(Clone::clone).and_then(|listed| {
            decide(
                index,
                visible.as_deref(),
                env("CUDA_DEVICE_ORDER").as_deref(),
                env("MEMTOPO_ALL_GPUS").as_deref(),
                listed,
            )
        });
        let _ = FOREKNOWN.set(listed.ok().and_then(|listed| {
            foreknow(
                index,
                visible.as_deref(),
                env("MEMTOPO_ALL_GPUS").as_deref(),
                &listed,
                decided.as_ref().ok(),
            )
        }));
        if let Ok(narrowed) = &decided {
            // Before any thread exists and before the driver reads it.
            std::env::set_var("CUDA_VISIBLE_DEVICES", &narrowed.uuid);
        }
        decided
    });
}

/// The GPU NVML named before the driver started for the GPU the user numbered `index`
/// ([`foreknow`]), if it did.
pub fn foreknown(index: u32) -> Option<&'static Narrowed> {
    FOREKNOWN
        .get()
        .and_then(Option::as_ref)
        .filter(|n| n.index == index)
}

/// The narrowing in force, if any.
pub fn narrowed() -> Option<&'static Narrowed> {
    DECISION.get().and_then(|d| d.as_ref().ok())
}

/// Logs what [`narrow`] decided (at debug level: once the logger runs).
pub fn log_decision() {
    match DECISION.get() {
        Some(Ok(n)) => log::debug!("the driver starts on GPU {} alone ({})", n.index, n.uuid),
        Some(Err(reason)) => log::debug!("the driver starts on every GPU: {reason}"),
        None => {}
    }
}

/// The CUDA ordinal of the GPU the user numbered `index`: 0 when narrowed to it.
pub fn cuda_ordinal(index: u32) -> u32 {
    match narrowed() {
        Some(n) if n.index == index => 0,
        _ => index,
    }
}

impl Narrowed {
    /// Checks that the driver's device is the GPU NVML named before the driver started
    /// ([`foreknown`]): the narrowed GPU's message where the driver was narrowed to it.
    pub fn check_foreknown(&self, uuid: Option<&str>) -> Result<(), String> {
        if narrowed().is_some_and(|n| n == self) {
            return self.check(uuid);
        }
        if uuid.is_some_and(|u| u.eq_ignore_ascii_case(&self.uuid)) {
            Ok(())
        } else {
            Err(format!(
                "the driver's device {} is {}, not {}, the only GPU NVML lists; set \
                 MEMTOPO_ALL_GPUS=1 to start the driver before looking at the GPU",
                self.index,
                uuid.unwrap_or("a GPU without a UUID"),
                self.uuid
            ))
        }
    }

    /// Checks that the driver's device 0 is the GPU named; else the run must stop rather
    /// than measure another GPU than the one asked for.
    pub fn check(&self, uuid: Option<&str>) -> Result<(), String> {
        if uuid.is_some_and(|u| u.eq_ignore_ascii_case(&self.uuid)) {
            Ok(())
        } else {
            Err(format!(
                "the driver's only device is {}, not {} (GPU {} by NVML's order) that \
                 CUDA_VISIBLE_DEVICES named; set MEMTOPO_ALL_GPUS=1 to start the driver on \
                 every GPU",
                uuid.unwrap_or("a GPU without a UUID"),
                self.uuid,
                self.index
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(names: &[&str]) -> Vec<Listed> {
        names
            .iter()
            .enumerate()
            .map(|(i, name)| Listed {
                name: (*name).into(),
                uuid: format!("GPU-{i}"),
                mig: false,
            })
            .collect()
    }

    #[test]
    fn a_node_of_one_model_narrows_to_the_gpu_of_that_index() {
        let four = node(&["H100"; 4]);
        let narrowed = decide(2, None, None, None, &four).unwrap();
        assert_eq!(narrowed.uuid, "GPU-2");
        assert_eq!(narrowed.index, 2);
        assert!(decide(0, None, Some("PCI_BUS_ID"), Some("0"), &four).is_ok());
    }

    #[test]
    fn anything_that_could_reorder_the_gpus_keeps_the_driver_on_all() {
        let four = node(&["H100"; 4]);
        let why = |r: Result<Narrowed, String>| r.unwrap_err();
        assert!(why(decide(1, Some("3"), None, None, &four)).contains("CUDA_VISIBLE_DEVICES"));
        assert!(why(decide(1, None, Some("FASTEST_FIRST"), None, &four)).contains("ORDER"));
        assert!(why(decide(1, None, None, Some("1"), &four)).contains("MEMTOPO_ALL_GPUS"));
        assert!(why(decide(4, None, None, None, &four)).contains("not device 4"));
        assert!(why(decide(0, None, None, None, &node(&["H100"]))).contains("1 GPU"));
        let mixed = node(&["H100", "H200"]);
        assert!(why(decide(1, None, None, None, &mixed)).contains("different models"));
        // Ordered by PCI bus id, as NVML orders them: mixed models may narrow.
        assert_eq!(
            decide(1, None, Some("PCI_BUS_ID"), None, &mixed)
                .unwrap()
                .uuid,
            "GPU-1"
        );
        let mut mig = node(&["H100"; 2]);
        mig[1].mig = true;
        assert!(why(decide(0, None, None, None, &mig)).contains("MIG"));
    }

    #[test]
    fn the_gpu_is_named_before_the_driver_starts_only_where_nothing_renumbers_it() {
        let one = node(&["H200"]);
        let named = foreknow(0, None, None, &one, None).unwrap();
        assert_eq!(named.uuid, "GPU-0");
        assert_eq!(foreknow(1, None, None, &one, None), None, "no device 1");
        assert_eq!(foreknow(0, Some("0"), None, &one, None), None);
        assert_eq!(foreknow(0, None, Some("1"), &one, None), None);
        let mut mig = one.clone();
        mig[0].mig = true;
        assert_eq!(foreknow(0, None, None, &mig, None), None);
        // Several GPUs: only the one the driver was narrowed to.
        let four = node(&["H100"; 4]);
        assert_eq!(foreknow(2, None, None, &four, None), None);
        let narrowed = decide(2, None, None, None, &four).unwrap();
        let named = foreknow(2, None, None, &four, Some(&narrowed)).unwrap();
        assert_eq!(named, narrowed);
        assert_eq!(foreknow(1, None, None, &four, Some(&narrowed)), None);
    }

    #[test]
    fn the_driver_must_show_the_gpu_nvml_named() {
        let named = Narrowed {
            index: 0,
            uuid: "GPU-0".into(),
        };
        assert!(named.check_foreknown(Some("gpu-0")).is_ok());
        let err = named.check_foreknown(Some("GPU-7")).unwrap_err();
        assert!(err.contains("GPU-7") && err.contains("GPU-0"), "{err}");
        assert!(named.check_foreknown(None).is_err());
    }

    #[test]
    fn the_check_refuses_another_gpu_than_the_one_named() {
        let narrowed = Narrowed {
            index: 2,
            uuid: "GPU-2".into(),
        };
        assert!(narrowed.check(Some("GPU-2")).is_ok());
        let err = narrowed.check(Some("GPU-0")).unwrap_err();
        assert!(
            err.contains("GPU-0") && err.contains("MEMTOPO_ALL_GPUS"),
            "{err}"
        );
        assert!(narrowed.check(None).is_err());
    }
}
