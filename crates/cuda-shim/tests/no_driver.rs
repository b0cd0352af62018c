//! The shim with no driver to load: every entry point answers CUDA_ERROR_NOT_INITIALIZED,
//! and the error's text says why, so cust reports "no CUDA driver" instead of the program
//! failing to start.

mod support;

use std::{ffi::CStr, sync::OnceLock};

use cust_raw::CUresult;

const MISSING: &str = "/nonexistent/memtopo-test/libcuda.so.1";

fn setup() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        support::record_log();
        std::env::set_var(cuda_shim::LIBRARY_ENV, MISSING);
    });
}

#[test]
fn load_names_the_library_and_the_variable() {
    setup();
    let err = cuda_shim::load().unwrap_err();
    assert_eq!(err.path, MISSING);
    let text = err.to_string();
    assert!(
        text.contains(MISSING) && text.contains(cuda_shim::LIBRARY_ENV),
        "{text}"
    );
    assert!(cuda_shim::missing_entry_points().is_empty());
}

#[test]
fn cust_init_fails_with_a_readable_no_driver_error() {
    setup();
    let err = cust::init(cust::CudaFlags::empty()).unwrap_err();
    assert_eq!(err, cust::error::CudaError::NotInitialized);
    let text = err.to_string();
    assert!(
        text.contains("no CUDA driver") && text.contains(MISSING),
        "{text}"
    );
}

#[test]
fn every_entry_point_answers_not_initialized() {
    setup();
    let mut count = 7;
    // SAFETY: count is a valid out-parameter.
    let code = unsafe { cust_raw::cuDeviceGetCount(&mut count) };
    assert_eq!((code, count), (CUresult::CUDA_ERROR_NOT_INITIALIZED, 7));
    // SAFETY: no arguments.
    assert_eq!(
        unsafe { cust_raw::cuCtxSynchronize() },
        CUresult::CUDA_ERROR_NOT_INITIALIZED
    );
}

#[test]
fn error_names_come_from_the_bindings_without_a_driver() {
    setup();
    let mut name = std::ptr::null();
    // SAFETY: name is a valid out-parameter.
    let code = unsafe { cust_raw::cuGetErrorName(CUresult::CUDA_ERROR_NO_DEVICE, &mut name) };
    assert_eq!(code, CUresult::CUDA_SUCCESS);
    // SAFETY: on success the pointer is a NUL-terminated static string.
    assert_eq!(unsafe { CStr::from_ptr(name) }, c"CUDA_ERROR_NO_DEVICE");
    // A null out-parameter is refused, not written.
    // SAFETY: null is allowed and checked.
    let refused =
        unsafe { cust_raw::cuGetErrorString(CUresult::CUDA_ERROR_NO_DEVICE, std::ptr::null_mut()) };
    assert_eq!(refused, CUresult::CUDA_ERROR_INVALID_VALUE);
}
