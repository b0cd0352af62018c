//! A stand-in for `libcuda.so.1` that the tests build with rustc and load through
//! `MEMTOPO_LIBCUDA`: a handful of entry points answering fixed codes, among them codes
//! that cust_raw's `CUresult` does not list.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::os::raw::{c_char, c_int, c_uint};

/// `CUDA_ERROR_DEVICE_UNAVAILABLE`: newer than the bindings' enum.
const DEVICE_UNAVAILABLE: c_int = 46;
/// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`: in the enum, but cust has no `CudaError` for it.
const UNSUPPORTED_PTX_VERSION: c_int = 222;

#[no_mangle]
pub extern "C" fn cuInit(_flags: c_uint) -> c_int {
    DEVICE_UNAVAILABLE
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> c_int {
    unsafe { *version = 12040 };
    0
}

#[no_mangle]
pub extern "C" fn cuDeviceGetCount(_count: *mut c_int) -> c_int {
    UNSUPPORTED_PTX_VERSION
}

#[no_mangle]
pub extern "C" fn cuDeviceGet(_device: *mut c_int, _ordinal: c_int) -> c_int {
    100 // CUDA_ERROR_NO_DEVICE: known to the enum and to cust.
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(code: c_int, name: *mut *const c_char) -> c_int {
    let text: &'static [u8] = match code {
        DEVICE_UNAVAILABLE => b"CUDA_ERROR_DEVICE_UNAVAILABLE\0",
        UNSUPPORTED_PTX_VERSION => b"CUDA_ERROR_UNSUPPORTED_PTX_VERSION\0",
        999 => b"CUDA_ERROR_UNKNOWN\0",
        _ => return 1,
    };
    unsafe { *name = text.as_ptr().cast() };
    0
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(code: c_int, text: *mut *const c_char) -> c_int {
    let s: &'static [u8] = match code {
        999 => b"unknown error (fake driver)\0",
        _ => return 1,
    };
    unsafe { *text = s.as_ptr().cast() };
    0
}
