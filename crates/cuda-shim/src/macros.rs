//! The macros that turn the generated lists in `entry_points.rs` into code: the table of
//! the driver's function pointers, the exported forwarders, and the error-code mapping.

/// From the signatures of the driver's entry points (enum-typed arguments already written
/// as their integer representation), defines:
/// - `Entries`, one `Option<unsafe extern "C" fn(..) -> c_int>` per entry point, resolved
///   from the loaded library; the result is the driver's code as a plain integer;
/// - `NAMES`, every entry point's name;
/// - for each entry point under `forwarded`, the `#[no_mangle]` function that `cust_raw`'s
///   declaration links to, forwarding through `crate::forward` (those under `own` are
///   written by hand in `lib.rs`).
macro_rules! driver_api {
    (
        forwarded { $( fn $name:ident ( $( $arg:ident : $ty:ty ),* $(,)? ); )* }
        own { $( fn $own:ident ( $( $own_arg:ident : $own_ty:ty ),* $(,)? ); )* }
    ) => {
        /// The driver's entry points; `None` where the loaded library lacks one.
        #[allow(non_snake_case, clippy::type_complexity)]
        pub(crate) struct Entries {
            $( pub(crate) $name: Option<unsafe extern "C" fn($($ty),*) -> ::std::ffi::c_int>, )*
            $( pub(crate) $own: Option<unsafe extern "C" fn($($own_ty),*) -> ::std::ffi::c_int>, )*
        }

        impl Entries {
            /// Looks every entry point up in `library`.
            pub(crate) fn resolve(library: &::libloading::Library) -> Entries {
                // SAFETY: each pointer type is the one cust_raw's bindings declare for that
                // symbol, with enum types written as their integer representation, which the
                // C ABI passes identically.
                unsafe {
                    Entries {
                        $( $name: $crate::symbol(library, concat!(stringify!($name), "\0").as_bytes()), )*
                        $( $own: $crate::symbol(library, concat!(stringify!($own), "\0").as_bytes()), )*
                    }
                }
            }

            /// The entry points the library lacks.
            pub(crate) fn missing(&self) -> Vec<&'static str> {
                let mut missing = Vec::new();
                $( if self.$name.is_none() { missing.push(stringify!($name)); } )*
                $( if self.$own.is_none() { missing.push(stringify!($own)); } )*
                missing
            }
        }

        /// Every entry point's name.
        pub(crate) const NAMES: &[&str] = &[ $( stringify!($name), )* $( stringify!($own), )* ];

        /// The same entry points returning the driver's code untouched, as a plain integer,
        /// under the symbol `cuda_shim_raw_<name>`: for callers that declare the driver's
        /// functions with integer results themselves (see [`crate::RAW_PREFIX`]).
        pub mod raw {
            #[allow(unused_imports, clippy::wildcard_imports)]
            use super::*;
            $(
                #[doc = concat!("`", stringify!($name), "` with the driver's code untouched.")]
                ///
                /// # Safety
                /// The driver's contract for this function.
                #[export_name = concat!("cuda_shim_raw_", stringify!($name))]
                #[allow(non_snake_case, clippy::too_many_arguments)]
                pub unsafe extern "C" fn $name($($arg: $ty),*) -> ::std::ffi::c_int {
                    $crate::forward_raw(stringify!($name), |entries| {
                        // SAFETY: the caller's contract is the driver's; the arguments pass unchanged.
                        entries.$name.map(|f| unsafe { f($($arg),*) })
                    })
                }
            )*
            $(
                #[doc = concat!("`", stringify!($own), "` with the driver's code untouched.")]
                ///
                /// # Safety
                /// The driver's contract for this function.
                #[export_name = concat!("cuda_shim_raw_", stringify!($own))]
                #[allow(non_snake_case)]
                pub unsafe extern "C" fn $own($($own_arg: $own_ty),*) -> ::std::ffi::c_int {
                    $crate::forward_raw(stringify!($own), |entries| {
                        // SAFETY: the caller's contract is the driver's; the arguments pass unchanged.
                        entries.$own.map(|f| unsafe { f($($own_arg),*) })
                    })
                }
            )*
        }

        $(
            #[doc = concat!("Forwards `", stringify!($name), "` to the loaded driver (see the crate's documentation).")]
            ///
            /// # Safety
            /// The driver's contract for this function.
            #[no_mangle]
            #[allow(non_snake_case, clippy::too_many_arguments)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> ::cust_raw::CUresult {
                $crate::forward(stringify!($name), |entries| {
                    // SAFETY: the caller's contract is the driver's; the arguments pass unchanged.
                    entries.$name.map(|f| unsafe { f($($arg),*) })
                })
            }
        )*
    };
}

/// From the variants of `cust_raw`'s `CUresult` (with their codes) and the variants that
/// `cust` converts to a `CudaError` of their own, defines `from_raw`, `error_name` and
/// `known_to_cust`.
macro_rules! error_codes {
    (
        listed { $( $variant:ident = $code:literal ),* $(,)? }
        known_to_cust { $( $known:ident ),* $(,)? }
    ) => {
        /// The `CUresult` variant for a raw code, `None` if the bindings list none.
        pub(crate) fn from_raw(raw: ::std::ffi::c_int) -> Option<::cust_raw::CUresult> {
            match raw {
                $( $code => Some(::cust_raw::CUresult::$variant), )*
                _ => None,
            }
        }

        /// The name of a raw code the bindings list, as a C string.
        pub(crate) fn error_name(raw: ::std::ffi::c_int) -> Option<&'static ::std::ffi::CStr> {
            match raw {
                $( $code => ::std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($variant), "\0").as_bytes()).ok(), )*
                _ => None,
            }
        }

        /// Whether `cust` turns the code into a `CudaError` of its own (not `UnknownError`).
        pub(crate) fn known_to_cust(code: ::cust_raw::CUresult) -> bool {
            matches!(code, $( ::cust_raw::CUresult::$known )|*)
        }
    };
}
