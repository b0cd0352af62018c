//! memtopo's replacement for `find_cuda_helper` 0.2, applied to the whole workspace by
//! `[patch.crates-io]`.
//!
//! The build scripts of `cust` 0.3.2 and `cust_raw` 0.11.3 call only [`include_cuda`]. The
//! original looks for a CUDA toolkit, panics when it finds none, and tells cargo to link
//! `-lcuda`, so that every binary needs `libcuda.so.1` before `main` runs. This one tells
//! cargo nothing: the `cu*` symbols that `cust_raw` declares are defined by the `cuda-shim`
//! crate, which loads the driver when the first of them is called (`docs/building.md`).
//!
//! ```
//! // In a build script this prints only its rerun condition: no search, no `-lcuda`.
//! find_cuda_helper::include_cuda();
//! ```
#![deny(missing_docs)]

/// What `cust`'s and `cust_raw`'s build scripts call: links nothing and never fails.
pub fn include_cuda() {
    println!("cargo:rerun-if-changed=build.rs");
}
