//! Names and short explanations of every `CUresult` up to CUDA 13, so that a driver
//! error is always reported by name, even where the driver (or the link stand-in) has no
//! text for it, and a code newer than this table still gets a clear line.
//!
//! cust 0.3.2's bindings declare `CUresult` as a Rust enum that ends at
//! `CUDA_ERROR_EXTERNAL_DEVICE` (911); a newer code such as
//! `CUDA_ERROR_DEVICE_UNAVAILABLE` (46) returned through that type would be an invalid
//! discriminant, which is undefined behaviour before any conversion runs. This crate
//! therefore receives every result as an integer ([`super::ffi`]) and names it here:
//! [`describe`] asks the driver first and falls back on this table.

use std::os::raw::c_char;

use super::ffi::{cuGetErrorName, cuGetErrorString, CuResult, SUCCESS};

/// `(code, name, explanation)` of every `CUresult` in cuda.h up to CUDA 13.
const TABLE: &[(CuResult, &str, &str)] = &[
    (0, "CUDA_SUCCESS", "no error"),
    (1, "CUDA_ERROR_INVALID_VALUE", "a parameter is out of range"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY", "the device has not enough free memory"),
    (3, "CUDA_ERROR_NOT_INITIALIZED", "the driver was not initialised"),
    (4, "CUDA_ERROR_DEINITIALIZED", "the driver is shutting down"),
    (5, "CUDA_ERROR_PROFILER_DISABLED", "the profiler is disabled"),
    (6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "the profiler was not initialised"),
    (7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "the profiler already runs"),
    (8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "the profiler already stopped"),
    (34, "CUDA_ERROR_STUB_LIBRARY", "the loaded libcuda is a stub, not the driver"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "the device is unavailable: busy (exclusive-process compute mode held by another process) or prohibited"),
    (100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device"),
    (101, "CUDA_ERROR_INVALID_DEVICE", "not a valid device ordinal or the device cannot do this"),
    (102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "the device lacks a licence for this"),
    (200, "CUDA_ERROR_INVALID_IMAGE", "the kernel image is invalid"),
    (201, "CUDA_ERROR_INVALID_CONTEXT", "no valid context is current"),
    (202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "the context is already current"),
    (205, "CUDA_ERROR_MAP_FAILED", "a map operation failed"),
    (206, "CUDA_ERROR_UNMAP_FAILED", "an unmap operation failed"),
    (207, "CUDA_ERROR_ARRAY_IS_MAPPED", "the array is mapped"),
    (208, "CUDA_ERROR_ALREADY_MAPPED", "the resource is already mapped"),
    (209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image fits this device"),
    (210, "CUDA_ERROR_ALREADY_ACQUIRED", "the resource was already acquired"),
    (211, "CUDA_ERROR_NOT_MAPPED", "the resource is not mapped"),
    (212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "the resource is not mapped as an array"),
    (213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "the resource is not mapped as a pointer"),
    (214, "CUDA_ERROR_ECC_UNCORRECTABLE", "an uncorrectable ECC error was detected"),
    (215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "the limit is not supported by the device"),
    (216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "the context is bound to another thread"),
    (217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these devices"),
    (218, "CUDA_ERROR_INVALID_PTX", "the PTX failed to JIT-compile"),
    (219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "the graphics context is invalid"),
    (220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "an uncorrectable NVLink error was detected"),
    (221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "the PTX JIT compiler library is missing"),
    (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the PTX is newer than this driver's JIT"),
    (223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation is disabled"),
    (224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "the execution affinity is not supported"),
    (225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "device-side synchronisation is not supported"),
    (226, "CUDA_ERROR_CONTAINED", "an exception was contained on the device; the context must be recreated"),
    (300, "CUDA_ERROR_INVALID_SOURCE", "the kernel source is invalid"),
    (301, "CUDA_ERROR_FILE_NOT_FOUND", "a file was not found"),
    (302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "a shared-object symbol was not found"),
    (303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "a shared object failed to initialise"),
    (304, "CUDA_ERROR_OPERATING_SYSTEM", "an operating-system call failed"),
    (400, "CUDA_ERROR_INVALID_HANDLE", "a handle is invalid"),
    (401, "CUDA_ERROR_ILLEGAL_STATE", "the resource is in a state that forbids this"),
    (402, "CUDA_ERROR_LOSSY_QUERY", "the query would lose information"),
    (500, "CUDA_ERROR_NOT_FOUND", "a named symbol was not found"),
    (600, "CUDA_ERROR_NOT_READY", "the asynchronous work has not completed"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS", "a kernel accessed an illegal address; the context is unusable"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "the launch needs more resources than the device has"),
    (702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the kernel ran past the watchdog's limit"),
    (703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "incompatible texturing mode"),
    (704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"),
    (705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access is not enabled"),
    (708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "the primary context is already active"),
    (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "the context was destroyed"),
    (710, "CUDA_ERROR_ASSERT", "a device-side assertion failed"),
    (711, "CUDA_ERROR_TOO_MANY_PEERS", "too many peer devices"),
    (712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "host memory is already registered"),
    (713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "host memory is not registered"),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "a kernel overflowed its hardware stack"),
    (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "a kernel executed an illegal instruction"),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS", "a kernel loaded or stored at a misaligned address"),
    (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "a kernel used an address outside its space"),
    (718, "CUDA_ERROR_INVALID_PC", "a kernel's program counter became invalid"),
    (719, "CUDA_ERROR_LAUNCH_FAILED", "a kernel failed; the context is unusable"),
    (720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks for a cooperative launch"),
    (721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "a kernel exited without freeing its tensor memory"),
    (800, "CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted"),
    (801, "CUDA_ERROR_NOT_SUPPORTED", "the operation is not supported on this system or device"),
    (802, "CUDA_ERROR_SYSTEM_NOT_READY", "the system is not ready (e.g. the fabric manager is not running)"),
    (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "the CUDA user-mode library and the kernel driver versions differ"),
    (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward-compatibility is not supported on this device"),
    (805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "cannot connect to the MPS server"),
    (806, "CUDA_ERROR_MPS_RPC_FAILURE", "a call to the MPS server failed"),
    (807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "the MPS server is not ready"),
    (808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "the MPS server has its maximum of clients"),
    (809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "the MPS server has its maximum of connections"),
    (810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "the MPS client was terminated by the server"),
    (811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "CUDA dynamic parallelism is not supported here"),
    (812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "CUDA dynamic parallelism versions do not match"),
    (900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "not allowed while a stream is captured"),
    (901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "the stream capture was invalidated"),
    (902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "two captures would merge"),
    (903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "the capture was not started in this stream"),
    (904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "a forked capture was not joined"),
    (905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "a dependency would cross the capture boundary"),
    (906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "a captured stream would synchronise implicitly"),
    (907, "CUDA_ERROR_CAPTURED_EVENT", "not allowed on an event recorded in a capture"),
    (908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "the capture belongs to another thread"),
    (909, "CUDA_ERROR_TIMEOUT", "the wait timed out"),
    (910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update broke a constraint"),
    (911, "CUDA_ERROR_EXTERNAL_DEVICE", "an external device's async error occurred"),
    (912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "the thread-block cluster size is invalid"),
    (913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "the function is not loaded"),
    (914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "the resource type is invalid"),
    (915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "the resource configuration is invalid"),
    (916, "CUDA_ERROR_KEY_ROTATION", "an error occurred during key rotation"),
    (999, "CUDA_ERROR_UNKNOWN", "an unknown internal error"),
];

/// Every code of the table, in order (for tests that walk all of them).
pub fn known_codes() -> impl Iterator<Item = CuResult> {
    TABLE.iter().map(|(code, _, _)| *code)
}

/// The `CUDA_ERROR_*` name of `code`, if the table has it.
pub fn name(code: CuResult) -> Option<&'static str> {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, name, _)| *name)
}

/// One clear line for `code`: the name and explanation, the driver's where it has them
/// (`driver_name`, `driver_text`), else this table's, and for an unknown code its number
/// with the hint that a newer driver defines it.
pub fn message(code: CuResult, driver_name: Option<String>, driver_text: Option<String>) -> String {
    let entry = TABLE.iter().find(|(c, _, _)| *c == code);
    let name = driver_name.or_else(|| entry.map(|(_, n, _)| (*n).to_string()));
    let text = driver_text.or_else(|| entry.map(|(_, _, t)| (*t).to_string()));
    match (name, text) {
        (Some(name), Some(text)) => format!("{name} ({code}): {text}"),
        (Some(name), None) => format!("{name} ({code})"),
        (None, Some(text)) => format!("CUDA error {code}: {text}"),
        (None, None) => format!(
            "CUDA error {code}, unknown to memtopo (a code newer than CUDA 13; see the driver's cuda.h)"
        ),
    }
}

/// The driver's name and description of an error code; for a code the driver does not
/// describe (an older driver, or the link stand-in), the name from
/// [`name`], and for a code nobody here knows, its number with a hint.
pub fn describe(code: CuResult) -> String {
    let mut name: *const c_char = std::ptr::null();
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: both calls only write a pointer to a static string into the out-parameter.
    let (name_ok, text_ok) = unsafe {
        (
            cuGetErrorName(code, &mut name) == SUCCESS && !name.is_null(),
            cuGetErrorString(code, &mut text) == SUCCESS && !text.is_null(),
        )
    };
    // SAFETY: the driver returns NUL-terminated static strings on success.
    let read = |p: *const c_char| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy();
    message(
        code,
        name_ok.then(|| read(name).into_owned()),
        text_ok.then(|| read(text).into_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_sorted() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0));
        let mut names: Vec<&str> = TABLE.iter().map(|t| t.1).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
    }

    #[test]
    fn codes_agree_with_cust_raw_where_it_has_them() {
        use cust::sys::cudaError_enum as E;
        for (code, variant) in [
            (E::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"),
            (E::CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"),
            (E::CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"),
            (
                E::CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
                "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
            ),
            (E::CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE"),
            (E::CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"),
            (
                E::CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED,
                "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
            ),
            (E::CUDA_ERROR_EXTERNAL_DEVICE, "CUDA_ERROR_EXTERNAL_DEVICE"),
            (E::CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"),
        ] {
            assert_eq!(name(code as CuResult), Some(variant));
            assert_eq!(format!("{code:?}"), variant);
        }
    }

    #[test]
    fn every_code_gets_a_line_with_its_number() {
        for code in (0..=1200).chain([u32::MAX, 0x7fff_ffff]) {
            let line = message(code, None, None);
            assert!(line.contains(&code.to_string()), "{line}");
            assert!(!line.contains('\n'), "{line}");
        }
        assert!(message(46, None, None).starts_with("CUDA_ERROR_DEVICE_UNAVAILABLE (46): "));
        assert!(message(4242, None, None).contains("unknown to memtopo"));
        assert_eq!(
            message(1, Some("X".into()), Some("driver text".into())),
            "X (1): driver text"
        );
    }
}
