//! The CUDA driver, found at run time.
//!
//! `cust_raw` 0.11.3 (the bindings under `cust`) declares every driver entry point as an
//! `extern "C"` function of `libcuda.so.1`. Linked the usual way, a program that uses
//! `cust` cannot even start on a machine without the NVIDIA driver. This crate *defines*
//! those symbols instead: each `cu*` function here loads the driver library on first use
//! (`libcuda.so.1`, or the path in the environment variable [`LIBRARY_ENV`]), and forwards
//! the call to the function of the same name there. The workspace's
//! `find_cuda_helper` replacement stops `cust` and `cust_raw` from linking `-lcuda`, so
//! the linker resolves their calls to these definitions.
//!
//! * **No driver:** every entry point returns `CUDA_ERROR_NOT_INITIALIZED`, and
//!   `cuGetErrorString` describes that code as the reason the library could not be loaded;
//!   [`load`] returns the same [`LoadError`] for callers that want to say "no CUDA driver"
//!   before they call anything.
//! * **A driver without the symbol** (older than the bindings): that entry point returns
//!   `CUDA_ERROR_NOT_FOUND` and logs a warning.
//! * **Raw codes.** [`raw`] has every entry point again, returning the driver's code as a
//!   plain integer, exported as `cuda_shim_raw_<name>` ([`RAW_PREFIX`]).
//! * **Codes the bindings do not list.** `CUresult` is a Rust enum in `cust_raw`, so a code
//!   it has no variant for (a newer driver's, such as 46, `CUDA_ERROR_DEVICE_UNAVAILABLE`)
//!   would be undefined behaviour the moment it is returned. The forwarders receive the
//!   driver's code as a plain integer and pass such codes on as `CUDA_ERROR_UNKNOWN`,
//!   logging the original number and the driver's name for it. Codes the enum lists but
//!   `cust`'s `CudaError` does not (which `cust` reports as `UnknownError`) pass unchanged
//!   and are logged the same way. Enum-typed arguments are forwarded as integers too.
//!
//! The list of entry points is generated from `cust_raw`'s bindings by
//! `cargo xtask shim` (`src/entry_points.rs`; `cargo xtask shim --check` proves it current).
//!
//! ```
//! // Before the driver is needed, a program can ask whether it can be loaded at all.
//! match cuda_shim::load() {
//!     Ok(()) => println!("CUDA driver loaded"),
//!     Err(e) => println!("no CUDA driver: {e}"),
//! }
//! assert!(cuda_shim::entry_points().contains(&"cuInit"));
//! ```
#![deny(missing_docs)]

use std::{
    ffi::{c_char, c_int, CStr, CString},
    sync::OnceLock,
};

use cust_raw::CUresult;
use libloading::Library;
use thiserror::Error;

#[macro_use]
mod macros;
mod entry_points;

use entry_points::{error_name, from_raw, known_to_cust, Entries};

pub use entry_points::raw;

/// The environment variable that names the driver library to load instead of the default
/// (`libcuda.so.1`, found by the dynamic loader's usual search).
pub const LIBRARY_ENV: &str = "MEMTOPO_LIBCUDA";

/// The library loaded when [`LIBRARY_ENV`] is not set.
#[cfg(not(windows))]
pub const DEFAULT_LIBRARY: &str = "libcuda.so.1";
/// The library loaded when [`LIBRARY_ENV`] is not set.
#[cfg(windows)]
pub const DEFAULT_LIBRARY: &str = "nvcuda.dll";

/// Why the driver library could not be loaded.
#[derive(Debug, Clone, Error)]
#[error(
    "cannot load `{path}` (the NVIDIA driver's library; {LIBRARY_ENV} names another): {reason}"
)]
pub struct LoadError {
    /// The library asked for.
    pub path: String,
    /// The dynamic loader's message.
    pub reason: String,
}

/// The loaded driver: the library (kept for the life of the process) and its entry points.
struct Driver {
    entries: Entries,
    _library: Library,
}

static DRIVER: OnceLock<Result<Driver, LoadError>> = OnceLock::new();

/// The library to load: [`LIBRARY_ENV`] if set and not empty, else [`DEFAULT_LIBRARY`].
pub fn library_path() -> String {
    std::env::var(LIBRARY_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_LIBRARY.to_string())
}

fn driver() -> Result<&'static Driver, &'static LoadError> {
    DRIVER
        .get_or_init(|| {
            let path = library_path();
            // SAFETY: loading the NVIDIA driver library runs its initialisers, which have no
            // preconditions; the library is never unloaded (it lives in a static).
            let library = unsafe { Library::new(&path) }.map_err(|e| LoadError {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            log::debug!("loaded the CUDA driver from `{path}`");
            Ok(Driver {
                entries: Entries::resolve(&library),
                _library: library,
            })
        })
        .as_ref()
}

/// Loads the driver library if that has not been tried yet, and says whether it loaded.
/// Every entry point does this on first use; the load is tried once per process.
///
/// # Errors
/// [`LoadError`] when the library cannot be loaded (no NVIDIA driver installed, or a bad
/// [`LIBRARY_ENV`]).
pub fn load() -> Result<(), LoadError> {
    driver().map(|_| ()).map_err(Clone::clone)
}

/// The names of every entry point this crate defines, in the bindings' order.
pub fn entry_points() -> &'static [&'static str] {
    entry_points::NAMES
}

/// The entry points the loaded driver lacks (empty when it has them all, or when no driver
/// is loaded).
pub fn missing_entry_points() -> Vec<&'static str> {
    driver().map(|d| d.entries.missing()).unwrap_or_default()
}

/// Resolves one symbol of the driver, `None` if the library lacks it.
///
/// # Safety
/// `T` must be the `unsafe extern "C" fn` type of the symbol named `name`.
unsafe fn symbol<T: Copy>(library: &Library, name: &[u8]) -> Option<T> {
    // SAFETY: the caller guarantees the type; the library outlives the copied pointer
    // because it is kept in a static for the rest of the process.
    unsafe { library.get::<T>(name) }.ok().map(|s| *s)
}

/// Calls the driver's function through `call`, which returns `None` when the driver lacks
/// it; turns the driver's integer code into a `CUresult` that is always a valid variant.
fn forward(name: &'static str, call: impl FnOnce(&Entries) -> Option<c_int>) -> CUresult {
    match driver() {
        Err(_) => CUresult::CUDA_ERROR_NOT_INITIALIZED,
        Ok(d) => match call(&d.entries) {
            Some(raw) => sanitize(name, raw, &d.entries),
            None => {
                log::warn!(
                    "the loaded CUDA driver has no `{name}`: returning CUDA_ERROR_NOT_FOUND"
                );
                CUresult::CUDA_ERROR_NOT_FOUND
            }
        },
    }
}

/// The prefix of the symbols that return the driver's code untouched: `cuda_shim_raw_cuInit`
/// and so on. Code that declares driver functions with integer results (so that it can
/// tell apart codes newer than the bindings) links to these with `#[link_name]`; without a
/// driver they return `CUDA_ERROR_NOT_INITIALIZED` (3), for a symbol the driver lacks
/// `CUDA_ERROR_NOT_FOUND` (500).
pub const RAW_PREFIX: &str = "cuda_shim_raw_";

/// [`forward`] without the translation of the result.
fn forward_raw(name: &'static str, call: impl FnOnce(&Entries) -> Option<c_int>) -> c_int {
    match driver() {
        Err(_) => CUresult::CUDA_ERROR_NOT_INITIALIZED as c_int,
        Ok(d) => call(&d.entries).unwrap_or_else(|| {
            log::warn!("the loaded CUDA driver has no `{name}`: returning CUDA_ERROR_NOT_FOUND");
            CUresult::CUDA_ERROR_NOT_FOUND as c_int
        }),
    }
}

/// The driver's name for a raw code, for the log.
fn driver_name(raw: c_int, entries: &Entries) -> String {
    let mut name: *const c_char = std::ptr::null();
    let ok = entries.cuGetErrorName.is_some_and(|f| {
        // SAFETY: cuGetErrorName writes a pointer to a static string, or fails.
        unsafe { f(raw, &mut name) == 0 }
    });
    if ok && !name.is_null() {
        // SAFETY: on success the driver returns a NUL-terminated static string.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    } else {
        "a code this driver does not name".to_string()
    }
}

/// A `CUresult` for the driver's integer code: the code itself where `cust_raw`'s enum has
/// a variant for it, else `CUDA_ERROR_UNKNOWN`; codes that `cust` would report only as
/// `UnknownError` are logged with their number.
fn sanitize(name: &str, raw: c_int, entries: &Entries) -> CUresult {
    if raw == 0 {
        return CUresult::CUDA_SUCCESS;
    }
    match from_raw(raw) {
        Some(code) if known_to_cust(code) => code,
        Some(code) => {
            log::warn!(
                "{name} returned CUDA error {raw} ({}), which cust reports as an unknown error",
                driver_name(raw, entries)
            );
            code
        }
        None => {
            log::warn!(
                "{name} returned CUDA error {raw} ({}), which cust_raw's CUresult does not list: \
                 passed on as CUDA_ERROR_UNKNOWN (999)",
                driver_name(raw, entries)
            );
            CUresult::CUDA_ERROR_UNKNOWN
        }
    }
}

/// `cuGetErrorString`'s text for `CUDA_ERROR_NOT_INITIALIZED` when no driver loaded.
fn no_driver_text(error: &LoadError) -> &'static CStr {
    static TEXT: OnceLock<CString> = OnceLock::new();
    TEXT.get_or_init(|| {
        CString::new(format!("no CUDA driver: {error}").replace('\0', " "))
            .unwrap_or_else(|_| c"no CUDA driver".to_owned())
    })
}

/// Forwards `cuGetErrorString` to the driver; without one, describes
/// `CUDA_ERROR_NOT_INITIALIZED` as the reason the driver could not be loaded.
///
/// # Safety
/// `pStr` must be null or valid for a pointer write.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuGetErrorString(error: c_int, pStr: *mut *const c_char) -> CUresult {
    match driver() {
        Ok(d) => forward("cuGetErrorString", |_| {
            // SAFETY: the caller's contract is the driver's.
            d.entries
                .cuGetErrorString
                .map(|f| unsafe { f(error, pStr) })
        }),
        Err(_) if pStr.is_null() => CUresult::CUDA_ERROR_INVALID_VALUE,
        Err(load) => {
            let text = if error == CUresult::CUDA_ERROR_NOT_INITIALIZED as c_int {
                no_driver_text(load)
            } else {
                c"CUDA error (no CUDA driver is loaded to describe it)"
            };
            // SAFETY: the caller's contract: pStr is valid for a write.
            unsafe { *pStr = text.as_ptr() };
            CUresult::CUDA_SUCCESS
        }
    }
}

/// Forwards `cuGetErrorName` to the driver; without one, names the codes `cust_raw` lists.
///
/// # Safety
/// `pStr` must be null or valid for a pointer write.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn cuGetErrorName(error: c_int, pStr: *mut *const c_char) -> CUresult {
    match driver() {
        Ok(d) => forward("cuGetErrorName", |_| {
            // SAFETY: the caller's contract is the driver's.
            d.entries.cuGetErrorName.map(|f| unsafe { f(error, pStr) })
        }),
        Err(_) => match error_name(error) {
            Some(name) if !pStr.is_null() => {
                // SAFETY: the caller's contract: pStr is valid for a write.
                unsafe { *pStr = name.as_ptr() };
                CUresult::CUDA_SUCCESS
            }
            _ => CUresult::CUDA_ERROR_INVALID_VALUE,
        },
    }
}
