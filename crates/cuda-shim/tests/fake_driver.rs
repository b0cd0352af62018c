//! The shim against a fake driver (`support/fake_driver.rs`): codes the bindings do not
//! list never reach cust as an invalid enum, and keep their number in the log.

mod support;

use std::{ffi::CStr, sync::OnceLock};

use cust_raw::CUresult;

/// Builds the fake driver and points the shim at it, once, before any entry point runs.
fn setup() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        support::record_log();
        let dir = std::env::temp_dir().join(format!("cuda-shim-fake-{}", std::process::id()));
        let lib = support::build_fake_driver(&dir);
        std::env::set_var(cuda_shim::LIBRARY_ENV, &lib);
        cuda_shim::load().expect("the fake driver loads");
    });
}

#[test]
fn a_code_the_enum_lacks_becomes_cuda_error_unknown_with_its_number_logged() {
    setup();
    // SAFETY: cuInit takes flags by value.
    let code = unsafe { cust_raw::cuInit(0) };
    assert_eq!(code, CUresult::CUDA_ERROR_UNKNOWN);
    let lines = support::logged("cuInit returned CUDA error 46");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("WARN") && l.contains("CUDA_ERROR_DEVICE_UNAVAILABLE")),
        "{lines:?}"
    );
    // Through cust: an error of its own, and a Display that asks the driver for the text.
    let err = cust::init(cust::CudaFlags::empty()).unwrap_err();
    assert_eq!(err, cust::error::CudaError::UnknownError);
    assert!(err.to_string().contains("fake driver"), "{err}");
}

#[test]
fn a_code_the_enum_lists_but_cust_lacks_passes_unchanged_and_is_logged() {
    setup();
    let mut count = 0;
    // SAFETY: count is a valid out-parameter.
    let code = unsafe { cust_raw::cuDeviceGetCount(&mut count) };
    assert_eq!(code, CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
    let lines = support::logged("cuDeviceGetCount returned CUDA error 222");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("CUDA_ERROR_UNSUPPORTED_PTX_VERSION")),
        "{lines:?}"
    );
}

#[test]
fn codes_cust_knows_and_out_values_pass_through_silently() {
    setup();
    let mut version = 0;
    // SAFETY: version is a valid out-parameter.
    let ok = unsafe { cust_raw::cuDriverGetVersion(&mut version) };
    assert_eq!((ok, version), (CUresult::CUDA_SUCCESS, 12040));
    let mut device = 0;
    // SAFETY: device is a valid out-parameter.
    let none = unsafe { cust_raw::cuDeviceGet(&mut device, 0) };
    assert_eq!(none, CUresult::CUDA_ERROR_NO_DEVICE);
    assert!(support::logged("cuDeviceGet ").is_empty());
    assert!(support::logged("cuDriverGetVersion").is_empty());
}

#[test]
fn an_entry_point_the_driver_lacks_is_not_found() {
    setup();
    // SAFETY: no arguments.
    let code = unsafe { cust_raw::cuCtxSynchronize() };
    assert_eq!(code, CUresult::CUDA_ERROR_NOT_FOUND);
    assert!(!support::logged("has no `cuCtxSynchronize`").is_empty());
    let missing = cuda_shim::missing_entry_points();
    assert!(missing.contains(&"cuCtxSynchronize"));
    assert!(!missing.contains(&"cuInit"));
    // The fake defines six of the entry points.
    assert_eq!(missing.len(), cuda_shim::entry_points().len() - 6);
}

#[test]
fn error_names_come_from_the_driver() {
    setup();
    let mut name = std::ptr::null();
    // SAFETY: name is a valid out-parameter.
    let code = unsafe { cust_raw::cuGetErrorName(CUresult::CUDA_ERROR_UNKNOWN, &mut name) };
    assert_eq!(code, CUresult::CUDA_SUCCESS);
    // SAFETY: on success the pointer is a NUL-terminated static string.
    assert_eq!(unsafe { CStr::from_ptr(name) }, c"CUDA_ERROR_UNKNOWN");
}
