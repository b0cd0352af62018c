//! Which code a module is loaded from: its embedded cubin when the device's compute
//! capability is exactly one memtopo ships machine code for (`pchase_kernels::cubin`), so
//! that the driver compiles nothing; else its PTX, JIT-compiled by the driver. A cubin the
//! driver refuses (an old driver that cannot read the newer toolkit's image, say) falls back
//! to the PTX, once per module, logged at debug level. `MEMTOPO_JIT=1` takes the PTX path for
//! every module, so that a GPU run can compare the two.
//!
//! ```
//! use pchase_runner::cuda::{CodePreference, JIT_ENV};
//! use std::ffi::OsStr;
//!
//! assert_eq!(JIT_ENV, "MEMTOPO_JIT");
//! assert_eq!(CodePreference::parse(None)?, CodePreference::Cubin);
//! assert_eq!(CodePreference::parse(Some(OsStr::new("0")))?, CodePreference::Cubin);
//! assert_eq!(CodePreference::parse(Some(OsStr::new("1")))?, CodePreference::Ptx);
//! assert!(CodePreference::parse(Some(OsStr::new("yes"))).is_err());
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

use std::{ffi::OsStr, fmt, time::Instant};

use pchase_kernels::{cubin::Cubin, ComputeCapability, Module};

use super::driver::LoadedModule;
use crate::error::RunnerError;

/// The environment variable that makes every module JIT-compile its PTX (`1`).
pub const JIT_ENV: &str = "MEMTOPO_JIT";

/// Which code the backend prefers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CodePreference {
    /// The embedded cubin where the device's capability has one, else the PTX.
    #[default]
    Cubin,
    /// The PTX for every module (`MEMTOPO_JIT=1`).
    Ptx,
}

impl CodePreference {
    /// The preference `MEMTOPO_JIT` asks for.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] for a value other than `0`, `1` or empty.
    pub fn from_env() -> Result<Self, RunnerError> {
        Self::parse(std::env::var_os(JIT_ENV).as_deref())
    }

    /// The preference of a value of `MEMTOPO_JIT` (`None`: unset).
    ///
    /// # Errors
    /// As [`CodePreference::from_env`].
    pub fn parse(value: Option<&OsStr>) -> Result<Self, RunnerError> {
        match value.map(|v| v.to_str()) {
            None | Some(Some("" | "0")) => Ok(CodePreference::Cubin),
            Some(Some("1")) => Ok(CodePreference::Ptx),
            Some(other) => Err(RunnerError::InvalidRequest(format!(
                "{JIT_ENV} must be 1 (JIT-compile every module's PTX) or 0 (load the embedded \
                 cubins where the GPU has them), not {:?}",
                other.unwrap_or("<not UTF-8>")
            ))),
        }
    }
}

/// What a module was loaded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleCode {
    /// The embedded cubin of this compute capability: nothing compiled.
    Cubin(ComputeCapability),
    /// The PTX, JIT-compiled by the driver.
    Ptx(PtxReason),
}

/// Why a module was JIT-compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtxReason {
    /// `MEMTOPO_JIT=1`.
    Forced,
    /// memtopo ships no cubin of the module for the device's compute capability.
    NoCubin,
    /// The driver refused the cubin (or it was damaged).
    Refused,
}

impl fmt::Display for ModuleCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModuleCode::Cubin(cc) => write!(f, "its {} cubin", cc.sm_name()),
            ModuleCode::Ptx(PtxReason::Forced) => write!(f, "its PTX ({JIT_ENV}=1)"),
            ModuleCode::Ptx(PtxReason::NoCubin) => write!(f, "its PTX (no cubin for the GPU)"),
            ModuleCode::Ptx(PtxReason::Refused) => write!(f, "its PTX (the cubin was refused)"),
        }
    }
}

/// The backend's loader: the device's capability, the preference, the cubins the driver
/// refused, and what each module was loaded from.
#[derive(Debug)]
pub(super) struct Loader {
    device: ComputeCapability,
    preference: CodePreference,
    /// Modules whose cubin the driver refused: they are not tried again.
    refused: Vec<&'static str>,
    /// Every load, in order: module name and code.
    loaded: Vec<(&'static str, ModuleCode)>,
}

impl Loader {
    pub(super) fn new(device: ComputeCapability, preference: CodePreference) -> Self {
        Loader {
            device,
            preference,
            refused: Vec::new(),
            loaded: Vec::new(),
        }
    }

    /// The cubin to try for `module` (its lookup being `cubin`), or why the PTX is loaded.
    pub(super) fn choose(
        &self,
        module: &'static str,
        cubin: impl FnOnce(ComputeCapability) -> Option<&'static Cubin>,
    ) -> Result<&'static Cubin, PtxReason> {
        if self.preference == CodePreference::Ptx {
            return Err(PtxReason::Forced);
        }
        if self.refused.contains(&module) {
            return Err(PtxReason::Refused);
        }
        cubin(self.device).ok_or(PtxReason::NoCubin)
    }

    /// Loads `module` (`label` names it in the log: the module, or one kernel of it) from
    /// its cubin when [`Loader::choose`] gives one and the driver takes it, else by `jit`
    /// from its PTX. `load_cubin` and `jit` are the driver calls (a test passes its own).
    ///
    /// # Errors
    /// The PTX path's error; a refused cubin is logged and falls back.
    pub(super) fn load<M>(
        &mut self,
        module: &'static str,
        label: &str,
        cubin: impl FnOnce(ComputeCapability) -> Option<&'static Cubin>,
        load_cubin: impl FnOnce(&'static [u8]) -> Result<M, RunnerError>,
        jit: impl FnOnce() -> Result<M, RunnerError>,
    ) -> Result<(M, ModuleCode), RunnerError> {
        let reason = match self.choose(module, cubin) {
            Ok(cubin) => {
                let started = Instant::now();
                let sm = cubin.capability().sm_name();
                let attempt = match cubin.image() {
                    Ok(image) => load_cubin(image)
                        .map(|loaded| (loaded, image.len()))
                        .map_err(|e| format!("the driver refused its {sm} cubin ({e})")),
                    Err(e) => {
                        log::warn!("module {label}: {e}");
                        Err(format!("its {sm} cubin is damaged"))
                    }
                };
                match attempt {
                    Ok((loaded, bytes)) => {
                        let code = ModuleCode::Cubin(cubin.capability());
                        log::debug!(
                            "module {label}: loaded {code} ({} KiB, ptxas {}) in {:.1} ms",
                            bytes >> 10,
                            pchase_kernels::cubin::PTXAS_RELEASE,
                            started.elapsed().as_secs_f64() * 1e3
                        );
                        self.loaded.push((module, code));
                        return Ok((loaded, code));
                    }
                    Err(why) => {
                        log::debug!("module {label}: {why}; JIT-compiling its PTX instead");
                    }
                }
                self.refused.push(module);
                PtxReason::Refused
            }
            Err(reason) => reason,
        };
        let code = ModuleCode::Ptx(reason);
        let started = Instant::now();
        let loaded = jit()?;
        log::debug!(
            "module {label}: JIT-compiled {code} in {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
        self.loaded.push((module, code));
        Ok((loaded, code))
    }

    /// Loads a whole catalogue module: [`Loader::load`] through the driver.
    ///
    /// # Errors
    /// As [`Loader::load`].
    pub(super) fn load_module(
        &mut self,
        module: &'static Module,
    ) -> Result<LoadedModule, RunnerError> {
        let name = module.name();
        self.load(
            name,
            name,
            |cc| module.cubin(cc),
            |image| LoadedModule::load_cubin(name, image),
            || LoadedModule::load(name, module.ptx()),
        )
        .map(|(loaded, _)| loaded)
    }

    /// Every load so far, in order: module name and what it was loaded from.
    pub(super) fn loaded(&self) -> &[(&'static str, ModuleCode)] {
        &self.loaded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pchase_kernels::catalogue;

    fn pchase_cubin(cc: ComputeCapability) -> Option<&'static Cubin> {
        catalogue::pchase_module().cubin(cc)
    }

    fn refuse(_: &'static [u8]) -> Result<&'static str, RunnerError> {
        Err(RunnerError::Cuda {
            call: "cuModuleLoadDataEx",
            message: "CUDA_ERROR_NO_BINARY_FOR_GPU (209)".into(),
        })
    }

    #[test]
    fn a_listed_capability_loads_its_cubin_and_compiles_nothing() {
        let mut loader = Loader::new(ComputeCapability::SM_90, CodePreference::Cubin);
        let (loaded, code) = loader
            .load(
                "pchase",
                "pchase",
                pchase_cubin,
                |image| {
                    assert!(image.starts_with(b"\x7fELF"));
                    Ok("cubin")
                },
                || panic!("no JIT for a listed capability"),
            )
            .expect("load");
        assert_eq!(
            (loaded, code),
            ("cubin", ModuleCode::Cubin(ComputeCapability::SM_90))
        );
        assert_eq!(loader.loaded(), [("pchase", code)]);
    }

    #[test]
    fn an_unknown_capability_takes_the_ptx_path() {
        for cc in [
            ComputeCapability::new(5, 3),
            ComputeCapability::new(9, 1),
            ComputeCapability::new(13, 0),
        ] {
            let mut loader = Loader::new(cc, CodePreference::Cubin);
            let (loaded, code) = loader
                .load(
                    "pchase",
                    "pchase",
                    pchase_cubin,
                    |_| panic!("no cubin for {cc}"),
                    || Ok("ptx"),
                )
                .expect("load");
            assert_eq!((loaded, code), ("ptx", ModuleCode::Ptx(PtxReason::NoCubin)));
        }
    }

    #[test]
    fn memtopo_jit_forces_the_ptx_path() {
        let mut loader = Loader::new(ComputeCapability::SM_90, CodePreference::Ptx);
        let (_, code) = loader
            .load(
                "pchase",
                "pchase",
                pchase_cubin,
                |_| panic!("forced JIT"),
                || Ok(()),
            )
            .expect("load");
        assert_eq!(code, ModuleCode::Ptx(PtxReason::Forced));
        assert_eq!(code.to_string(), "its PTX (MEMTOPO_JIT=1)");
    }

    #[test]
    fn a_refused_cubin_falls_back_to_the_ptx_and_is_not_tried_again() {
        let mut loader = Loader::new(ComputeCapability::SM_90, CodePreference::Cubin);
        let (loaded, code) = loader
            .load("pchase", "pchase", pchase_cubin, refuse, || Ok("ptx"))
            .expect("fallback");
        assert_eq!((loaded, code), ("ptx", ModuleCode::Ptx(PtxReason::Refused)));
        assert_eq!(
            loader
                .choose("pchase", pchase_cubin)
                .map(|c| c.capability()),
            Err(PtxReason::Refused)
        );
        // Another module still gets its cubin.
        assert!(loader
            .choose("hopper", |cc| catalogue::hopper_module().cubin(cc))
            .is_ok());
    }

    #[test]
    fn a_failing_ptx_path_is_the_error() {
        let mut loader = Loader::new(ComputeCapability::SM_90, CodePreference::Cubin);
        let err = loader
            .load("pchase", "pchase", pchase_cubin, refuse, || {
                Err::<&str, _>(RunnerError::ModuleLoad {
                    module: "pchase",
                    reason: "CUDA_ERROR_INVALID_PTX (218)".into(),
                    log: String::new(),
                })
            })
            .expect_err("both failed");
        assert!(err.to_string().contains("CUDA_ERROR_INVALID_PTX"), "{err}");
        assert!(loader.loaded().is_empty());
    }
}
